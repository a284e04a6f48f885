//! A peer connection as a stream of frames, and the errors of talking to a peer.
//!
//! [`PeerStream`] carries the plain frames of the handshake; once it is over,
//! [`PeerStream::into_sealed`] splits the connection into a [`SealedReader`] (buffered,
//! opening each frame before anything in it is used) and a [`SealedWriter`] (sealing
//! queued frames into one buffer, written with one call per batch).

use std::io;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use thiserror::Error;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

use super::frame::{self, FrameError, HEADER_LEN};
use super::seal::{self, Frame, Kind, Opener, SEALED_HEADER_LEN, Sealer, SessionKeys};
use crate::replication::GroupId;

/// Bytes the sealed reader buffers: many small frames per read call.
const READ_BUFFER: usize = 64 << 10;

/// Bytes of frames the sealed writer gathers into one write when more are queued.
const WRITE_BATCH: usize = 64 << 10;

/// The write buffer is cut back to this after carrying a larger frame.
const WRITE_BUFFER_KEPT: usize = 1 << 20;

/// The most octets of frame bodies one side of a connection holds at once: the calls a
/// link has queued for its socket, or the calls a listener has read and not answered
/// yet. Counts of calls alone let a stalled peer pin that many frames of up to
/// [`frame::MAX_FRAME_LEN`] each (a leader once held 3.5 GiB of snapshot chunks queued
/// for a learner busy installing); this bounds their octets whatever their sizes.
pub const MAX_HELD_OCTETS: usize = 32 << 20;

/// The octets of frame bodies one side of a connection holds, at most
/// [`MAX_HELD_OCTETS`]; a body larger than that takes the whole budget.
#[derive(Debug, Clone)]
pub(super) struct OctetBudget(Arc<Semaphore>);

impl OctetBudget {
    pub(super) fn new() -> OctetBudget {
        OctetBudget(Arc::new(Semaphore::new(MAX_HELD_OCTETS)))
    }

    /// Waits until a body of `len` octets fits, and holds its place until the permit
    /// is dropped. `None` never happens: the budget is never closed.
    pub(super) async fn hold(&self, len: usize) -> Option<OwnedSemaphorePermit> {
        let octets = u32::try_from(len.min(MAX_HELD_OCTETS)).unwrap_or(u32::MAX);
        Arc::clone(&self.0).acquire_many_owned(octets).await.ok()
    }
}

/// Why talking to a peer failed.
#[derive(Debug, Error)]
pub enum PeerError {
    /// The socket failed or the peer closed it.
    #[error("peer connection: {0}")]
    Io(#[from] io::Error),
    /// The peer sent something that is not a valid frame.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// The operating system gave no randomness for a nonce.
    #[error("no randomness for a nonce: {0}")]
    Random(getrandom::Error),
    /// The peer did not prove that it knows the cluster secret.
    #[error("peer failed authentication with the cluster secret")]
    Unauthenticated,
    /// The peer did not answer in time.
    #[error("peer did not answer within {0:?}")]
    Timeout(Duration),
    /// The connection was closed before it authenticated, to make room for a newer one.
    #[error("closed in the handshake to make room for a newer connection")]
    Evicted,
    /// The peer authenticated when the port already served its most peer connections.
    #[error("the peer port serves its most authenticated connections already")]
    TooManyPeers,
    /// The peer is not a member of the group asked (or takes no node calls).
    #[error("the peer is not a member of {}", match .0 { Some(group) => group.to_string(), None => "any group taking node calls".to_owned() })]
    NoSuchGroup(Option<GroupId>),
    /// The peer could not read the request.
    #[error("the peer could not read the request: {0}")]
    Malformed(String),
    /// The peer closed the connection.
    #[error("the peer closed the connection")]
    Closed,
    /// The peer sent an authenticated frame of a kind it must not send.
    #[error("the peer sent a {0:?} frame, which it must not send")]
    Unexpected(Kind),
    /// The link the call was on failed; every call pending on it failed with it.
    #[error("peer link failed: {0}")]
    LinkFailed(Arc<PeerError>),
    /// The peer answered with a response of another kind than the request.
    #[error("peer answered a {request} request with a {response} response")]
    Mismatch {
        /// The kind of request sent.
        request: &'static str,
        /// The kind of response received.
        response: &'static str,
    },
}

impl PeerError {
    /// Whether the peer sent an authenticated connection something it could not
    /// have sent honestly: a frame that does not open, or one of the wrong kind. Worth
    /// a warning, where a closed or broken connection is not.
    pub fn is_forgery(&self) -> bool {
        matches!(
            self,
            PeerError::Frame(FrameError::BadTag) | PeerError::Unexpected(_)
        )
    }
}

/// A TCP connection to a peer carrying frames.
#[derive(Debug)]
pub(super) struct PeerStream {
    stream: TcpStream,
}

impl PeerStream {
    /// Frames over `stream`, which is set to send small frames without delay.
    pub(super) fn new(stream: TcpStream) -> Result<PeerStream, PeerError> {
        stream.set_nodelay(true)?;
        Ok(PeerStream { stream })
    }

    /// Sends `value` as one frame whose body may not pass `max` bytes.
    pub(super) async fn send<T: Serialize>(
        &mut self,
        value: &T,
        max: usize,
    ) -> Result<(), PeerError> {
        let frame = frame::encode(value, max)?;
        self.stream.write_all(&frame).await?;
        Ok(())
    }

    /// Receives one frame whose body may not pass `max` bytes; `None` when the peer
    /// closed the connection between frames.
    pub(super) async fn recv<T: DeserializeOwned>(
        &mut self,
        max: usize,
    ) -> Result<Option<T>, PeerError> {
        let mut header = [0; HEADER_LEN];
        match self.stream.read_exact(&mut header).await {
            Ok(_) => {}
            Err(error) if error.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(error) => return Err(error.into()),
        }
        let mut body = vec![0; frame::body_len(header, max)?];
        self.stream.read_exact(&mut body).await?;
        Ok(Some(frame::decode(&body)?))
    }

    /// Receives one frame, treating a closed connection as an error.
    pub(super) async fn expect<T: DeserializeOwned>(&mut self, max: usize) -> Result<T, PeerError> {
        self.recv(max)
            .await?
            .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof).into())
    }

    /// The socket, for tests that speak sealed frames by hand.
    #[cfg(test)]
    pub(super) fn into_inner(self) -> TcpStream {
        self.stream
    }

    /// The two halves of the connection after the handshake, with its keys.
    pub(super) fn into_sealed(self, keys: SessionKeys) -> (SealedReader, SealedWriter) {
        let (read, write) = self.stream.into_split();
        let reader = SealedReader {
            reader: BufReader::with_capacity(READ_BUFFER, read),
            opener: keys.opener,
        };
        let writer = SealedWriter {
            writer: write,
            sealer: keys.sealer,
            buffer: Vec::with_capacity(WRITE_BATCH),
        };
        (reader, writer)
    }
}

/// The receiving half of an authenticated connection.
#[derive(Debug)]
pub(super) struct SealedReader {
    reader: BufReader<OwnedReadHalf>,
    opener: Opener,
}

impl SealedReader {
    /// The next frame, opened; `started` runs once its header is in, before its body
    /// (a long frame shows the peer is alive before it is whole). `None` when the
    /// peer closed the connection between frames.
    pub(super) async fn next(
        &mut self,
        started: impl FnOnce(),
    ) -> Result<Option<Frame>, PeerError> {
        let mut header = [0; SEALED_HEADER_LEN];
        match self.reader.read_exact(&mut header).await {
            Ok(_) => {}
            Err(error) if error.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(error) => return Err(error.into()),
        }
        started();
        let mut rest = vec![0; seal::rest_len(&header)?];
        self.reader.read_exact(&mut rest).await?;
        Ok(Some(self.opener.open(&header, rest)?))
    }
}

/// A frame waiting to be sealed and sent.
#[derive(Debug)]
pub(super) struct Outgoing {
    /// What it is.
    pub(super) kind: Kind,
    /// The call it belongs to.
    pub(super) call: u64,
    /// Its body.
    pub(super) body: Vec<u8>,
    /// Its place in its sender's [`OctetBudget`], if it takes one: given back once the
    /// frame is sealed.
    pub(super) held: Option<OwnedSemaphorePermit>,
}

/// The sending half of an authenticated connection.
#[derive(Debug)]
pub(super) struct SealedWriter {
    writer: OwnedWriteHalf,
    sealer: Sealer,
    buffer: Vec<u8>,
}

impl SealedWriter {
    /// Seals and sends what comes out of `queue`, gathering what is already queued
    /// (up to a batch) into one write, until the socket fails (the error) or every
    /// sender is gone ([`PeerError::Closed`]).
    pub(super) async fn run(mut self, mut queue: mpsc::Receiver<Outgoing>) -> PeerError {
        while let Some(first) = queue.recv().await {
            let mut next = Some(first);
            while let Some(frame) = next.take() {
                if let Err(error) =
                    self.sealer
                        .seal(frame.kind, frame.call, &frame.body, &mut self.buffer)
                {
                    return error.into();
                }
                // Sealed: its octets are in the buffer now, no longer in the queue.
                drop(frame.held);
                if self.buffer.len() < WRITE_BATCH {
                    next = queue.try_recv().ok();
                }
            }
            if let Err(error) = self.writer.write_all(&self.buffer).await {
                return error.into();
            }
            self.buffer.clear();
            self.buffer.shrink_to(WRITE_BUFFER_KEPT);
        }
        PeerError::Closed
    }
}
