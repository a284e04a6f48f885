//! The Handle protocol over TCP (digest §1.4): one envelope-framed message after
//! another on a connection; continuous (CN) answers for list-handles.
//!
//! A connection is served until the answer to a request without the KC flag (keep
//! connection) has been sent and nothing more is buffered, the peer closes it, it
//! sends a message longer than 256 KiB (answered, then closed: the rest of the stream
//! cannot be framed), or it misses a deadline: each message must arrive whole within
//! the configured timeout of the connection's start or of the previous answer (so a
//! peer trickling octets is closed as surely as an idle one), and each answer must be
//! taken within it too. The
//! buffer grows as octets arrive, never to a length only announced. One source
//! address holds at most [`TcpLimits::per_source`] connections; more are closed at
//! once. The reference server closes after one request whatever the flags, and its
//! clients (J9) read the answer and then wait for the server to close: closing
//! first, rather than reading once more to see the client's end, saves that read and
//! leaves the connection's teardown (the client's socket freed, the server's turned to
//! TIME_WAIT) to the client's side, which on loopback is most of a connection's cost.
//! A client that reuses connections sets KC; a request whose header cannot be read in
//! the clear (sealed in a session) or cannot be read at all keeps the connection as
//! before, and so does a challenge (this crate's client answers it on the same
//! connection).
//!
//! On shutdown ([`super::drain`]) the listener takes the connections the kernel has
//! already queued and is closed; each connection answers the request it is reading or
//! answering (a new connection, its first request: clients send it right after
//! connecting) and whole requests already received, then is closed. All of it ends by
//! the drain's deadline.

use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::codec::{
    Body, ENVELOPE_LEN, Frame, Header, Message, MessageFlags, OpFlags, Response, next_frame,
};
use crate::service::Caller;

use super::drain::{self, Draining};
use super::responder::{ListReply, Reply, Responder};
use super::source_share::{Share, SourceShares};

/// At most this many connections are served at once; more wait to be accepted.
const MAX_CONNECTIONS: u32 = 4096;

/// The most octets a connection's buffer grows by in one read.
const READ_CHUNK: usize = 16 * 1024;

/// The fewest octets a read asks for (a connection's buffer starts with this much
/// room): an envelope and the message it announces usually arrive together, and
/// asking for the envelope's 20 octets alone took a second read for the rest. What
/// is read beyond the message stays buffered as the start of the next one.
const READ_AT_LEAST: usize = 1024;

/// Whether accepted connections inherit TCP_NODELAY from their listener (Linux's do;
/// other systems are not relied on).
const NODELAY_INHERITED: bool = cfg!(target_os = "linux");

/// What bounds a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpLimits {
    /// The time a message has to arrive whole, and an answer to be taken.
    pub timeout: Duration,
    /// Connections one source address may hold open.
    pub per_source: u32,
}

/// Accepts connections until the drain begins, then drains them by its deadline.
pub async fn serve(
    listener: TcpListener,
    responder: Responder,
    limits: TcpLimits,
    draining: Draining,
) {
    if let Err(error) = set_nodelay_inherited(&listener) {
        warn!(%error, "cannot set TCP_NODELAY on the listener");
    }
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS as usize));
    let sources = SourceShares::new(limits.per_source);
    let serve = |(stream, peer): (TcpStream, SocketAddr), permit| {
        let Some(source) = sources.take(peer.ip()) else {
            debug!(%peer, "TCP connection refused: its source holds too many");
            return;
        };
        let work = connection(
            stream,
            peer,
            responder.clone(),
            limits.timeout,
            draining.clone(),
        );
        tokio::spawn(served(draining.clone().bound(work), peer, (permit, source)));
    };
    // One wait for the drain for the loop's life, not one set up at every accept.
    let mut started = pin!(draining.started());
    let deadline = loop {
        let (accepted, permit) = tokio::select! {
            biased;
            deadline = &mut started => break deadline,
            slot = accept(&listener, &slots) => match slot {
                Some(accepted) => accepted,
                None => break Instant::now(),
            },
        };
        match accepted {
            Ok(accepted) => serve(accepted, permit),
            Err(error) => {
                warn!(%error, "accepting a TCP connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    match queued(&listener) {
        Ok(queued) => {
            for _ in 0..MAX_CONNECTIONS {
                let Some(accepted) = take_queued(&queued) else {
                    break;
                };
                let Ok(permit) = Arc::clone(&slots).try_acquire_owned() else {
                    break;
                };
                serve(accepted, permit);
            }
        }
        Err(error) => warn!(%error, "cannot take the queued TCP connections"),
    }
    drop(listener);
    let left = drain::settled(&slots, MAX_CONNECTIONS, deadline).await;
    if left > 0 {
        info!(
            left,
            "TCP drain deadline passed; closing the connections left"
        );
    }
}

/// A free connection slot, then the next connection (`None` if the slots were
/// closed, which they never are).
async fn accept(
    listener: &TcpListener,
    slots: &Arc<Semaphore>,
) -> Option<(
    std::io::Result<(TcpStream, SocketAddr)>,
    OwnedSemaphorePermit,
)> {
    let permit = Arc::clone(slots).acquire_owned().await.ok()?;
    Some((listener.accept().await, permit))
}

/// Sets TCP_NODELAY on `listener`, so that on Linux every connection it accepts has
/// it from the start (answers go out whole in one write each; a pipelined answer must
/// not wait for the previous one's acknowledgement): one system call in all rather
/// than one a connection. Elsewhere each connection sets it ([`NODELAY_INHERITED`]).
pub(super) fn set_nodelay_inherited(listener: &TcpListener) -> std::io::Result<()> {
    let again = std::net::TcpStream::from(listener.as_fd().try_clone_to_owned()?);
    TcpSocket::from_std_stream(again).set_nodelay(true)
}

/// The listener again, to take the connections the kernel has queued without waiting
/// (a plain non-blocking accept: tokio's would wait for the reactor to report them).
fn queued(listener: &TcpListener) -> std::io::Result<std::net::TcpListener> {
    Ok(std::net::TcpListener::from(
        listener.as_fd().try_clone_to_owned()?,
    ))
}

/// The next connection `queued` holds, if any.
fn take_queued(queued: &std::net::TcpListener) -> Option<(TcpStream, SocketAddr)> {
    let (stream, peer) = queued.accept().ok()?;
    stream.set_nonblocking(true).ok()?;
    Some((TcpStream::from_std(stream).ok()?, peer))
}

/// Awaits a connection's end, logs how it ended and frees its slots.
async fn served(
    work: impl Future<Output = Option<std::io::Result<()>>>,
    peer: SocketAddr,
    permit: (OwnedSemaphorePermit, Share),
) {
    match work.await {
        Some(Ok(())) => {}
        Some(Err(error)) => debug!(%peer, %error, "TCP connection ended"),
        None => debug!(%peer, "TCP connection closed at the drain deadline"),
    }
    drop(permit);
}

pub(super) async fn connection(
    mut stream: TcpStream,
    peer: SocketAddr,
    responder: Responder,
    timeout: Duration,
    draining: Draining,
) -> std::io::Result<()> {
    if !NODELAY_INHERITED {
        stream.set_nodelay(true)?;
    }
    let caller = Caller::anonymous(peer.ip());
    let mut buffer = Vec::with_capacity(READ_AT_LEAST);
    let mut reading = Reading {
        deadline: Instant::now() + timeout,
        answered: false,
    };
    loop {
        let frame = match reading.frame(&mut stream, &mut buffer, &draining).await? {
            Some(frame) => frame,
            None => return Ok(()),
        };
        match frame {
            Ok(len) => {
                let asked_to_keep = asks_to_keep(&buffer[..len]);
                // Boxed: the answer's future would make the connection's, moved
                // into its task at every accept, several times larger.
                let reply = Box::pin(responder.respond(caller.clone(), &buffer[..len])).await;
                let keep = asked_to_keep || is_challenge(&reply);
                write_reply(&mut stream, reply, timeout).await?;
                buffer.drain(..len);
                if !keep && buffer.is_empty() {
                    return Ok(());
                }
                reading.answered = true;
                reading.deadline = Instant::now() + timeout;
            }
            Err(envelope_bytes) => {
                let reply = Box::pin(responder.respond(caller.clone(), &envelope_bytes)).await;
                write_reply(&mut stream, reply, timeout).await?;
                return stream.shutdown().await;
            }
        }
    }
}

/// Whether the client asked to keep the connection after the answer to `message`: KC
/// set, or a header that cannot be read in the clear (encrypted in a session, or not
/// decodable), for which the connection is kept as the client may still use it.
fn asks_to_keep(message: &[u8]) -> bool {
    match Header::peek(message) {
        Ok((envelope, header)) => {
            envelope.flags.contains(MessageFlags::EC) || header.flags.contains(OpFlags::KC)
        }
        Err(_) => true,
    }
}

/// Whether `reply` is a challenge (digest §8.1): its answer may come on the same
/// connection, as this crate's client sends it.
fn is_challenge(reply: &Reply) -> bool {
    matches!(
        reply,
        Reply::One(Message {
            body: Body::Response {
                response: Response::Challenge { .. },
                ..
            },
            ..
        })
    )
}

/// How a connection reads its next request.
struct Reading {
    /// When the next message must be whole.
    deadline: Instant,
    /// Whether a request has been answered on the connection: once one has, the
    /// connection is idle between requests whenever nothing is buffered.
    answered: bool,
}

impl Reading {
    /// Reads until `buffer` starts with a whole message: `Ok(len)` of it,
    /// `Err(envelope)` when the message is too long to take (its envelope, to answer
    /// it), `None` when the peer closed, went idle between messages, or was idle
    /// between messages when the drain began (then only octets already received are
    /// still read).
    async fn frame(
        &self,
        stream: &mut TcpStream,
        buffer: &mut Vec<u8>,
        draining: &Draining,
    ) -> std::io::Result<Option<Result<usize, Vec<u8>>>> {
        loop {
            let needed = match next_frame(buffer) {
                Frame::Ready { len } => return Ok(Some(Ok(len))),
                Frame::TooLarge { .. } => return Ok(Some(Err(buffer[..ENVELOPE_LEN].to_vec()))),
                Frame::Incomplete { needed } => needed,
            };
            let start = buffer.len();
            buffer.resize(start + needed.clamp(READ_AT_LEAST, READ_CHUNK), 0);
            let idle = start == 0 && self.answered;
            let read = if idle && draining.has_started() {
                received_already(stream, &mut buffer[start..])
            } else if idle {
                tokio::select! {
                    biased;
                    read = self.read(stream, &mut buffer[start..]) => read,
                    _ = draining.started() => {
                        buffer.truncate(start);
                        continue;
                    }
                }
            } else {
                self.read(stream, &mut buffer[start..]).await
            };
            let count = read?;
            buffer.truncate(start + count);
            if count == 0 {
                return Ok(None);
            }
        }
    }

    /// Reads what comes before the message's deadline; 0 octets when none came.
    async fn read(&self, stream: &mut TcpStream, into: &mut [u8]) -> std::io::Result<usize> {
        tokio::time::timeout_at(self.deadline, stream.read(into))
            .await
            .unwrap_or(Ok(0))
    }
}

/// Reads what has already arrived on `stream`, without waiting: 0 octets when nothing
/// has (a plain non-blocking read, as tokio's would wait for the reactor to report it).
fn received_already(stream: &TcpStream, into: &mut [u8]) -> std::io::Result<usize> {
    let mut again = std::net::TcpStream::from(stream.as_fd().try_clone_to_owned()?);
    match std::io::Read::read(&mut again, into) {
        Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => Ok(0),
        other => other,
    }
}

/// Writes `reply`; a peer that does not take it within `timeout` is an error. The
/// reply is taken apart before the future starts, so that the connection's future
/// holds its octets only (a listing's pages, rare, are written by a boxed future).
fn write_reply(
    stream: &mut TcpStream,
    reply: Reply,
    timeout: Duration,
) -> impl Future<Output = std::io::Result<()>> + '_ {
    let deadline = Instant::now() + timeout;
    let (octets, pages) = match reply {
        Reply::One(message) => (message.encode(), None),
        Reply::Sealed(sealed) => (sealed.encode(), None),
        Reply::List(pages) => (Vec::new(), Some(Box::new(pages))),
        Reply::Nothing => (Vec::new(), None),
    };
    async move {
        let written = match pages {
            Some(pages) => {
                tokio::time::timeout_at(deadline, Box::pin(write_pages(stream, *pages))).await
            }
            None => tokio::time::timeout_at(deadline, stream.write_all(&octets)).await,
        };
        written.unwrap_or_else(|_| {
            Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the peer did not take the answer in time",
            ))
        })
    }
}

async fn write_pages(stream: &mut TcpStream, mut pages: ListReply) -> std::io::Result<()> {
    while let Some(message) = pages.next_page().await {
        stream.write_all(&message.encode()).await?;
    }
    Ok(())
}
