//! A peer connection as a stream of frames, and the errors of talking to a peer.

use std::io;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use thiserror::Error;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::frame::{self, FrameError, HEADER_LEN};
use crate::replication::GroupId;

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
    /// The peer is not a member of the group asked (or takes no node calls).
    #[error("the peer is not a member of {}", match .0 { Some(group) => group.to_string(), None => "any group taking node calls".to_owned() })]
    NoSuchGroup(Option<GroupId>),
    /// The peer could not read the request.
    #[error("the peer could not read the request: {0}")]
    Malformed(String),
    /// The peer answered with a response of another kind than the request.
    #[error("peer answered a {request} request with a {response} response")]
    Mismatch {
        /// The kind of request sent.
        request: &'static str,
        /// The kind of response received.
        response: &'static str,
    },
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
}
