//! The server side of the peer link: accepts peers, authenticates them, and answers
//! their calls concurrently through a [`Dispatch`].
//!
//! Owns [`serve`] and the [`Dispatch`] seam: the link carries opaque bytes, and the
//! dispatcher (the registry of the process's Raft groups) makes an answer of each
//! request. Invariants: nothing but the handshake is read from a connection before
//! the peer proved the cluster secret, and the handshake must end within
//! [`PeerLimits::handshake_timeout`]; connections in the handshake are bounded in all
//! and per source address by the book of [`super::strangers`], where a newcomer takes
//! the place of an older stranger rather than being refused (so strangers at other
//! addresses can never keep a member, or `hdl cluster`, out); at most
//! [`PeerLimits::peers`] authenticated connections are served at once, in room of
//! their own; per connection at most [`MAX_IN_FLIGHT`] calls, of at most
//! [`super::stream::MAX_HELD_OCTETS`] of bodies, are dispatched at once and the connection is not read
//! further while they are (backpressure through TCP, never an unbounded queue); a frame that does not open drops the connection before anything
//! in it is dispatched; on shutdown the listener is closed and every connection with
//! it, calls in flight included.

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};
use tokio::task::JoinSet;
use tracing::{debug, warn};

use super::auth::{self, ClusterSecret};
use super::frame::MAX_FRAME_LEN;
use super::seal::{Kind, SessionKeys};
use super::strangers::{StrangerId, Strangers};
use super::stream::{OctetBudget, Outgoing, PeerError, PeerStream, SealedReader};
use crate::replication::NodeId;

/// How long a new connection has to authenticate, by default. A member does it in
/// one round trip.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(2);

/// The most connections in the handshake at once, by default.
pub const MAX_STRANGERS: usize = 64;

/// The most connections in the handshake at once from one source address, by default.
pub const STRANGERS_PER_SOURCE: usize = 8;

/// The most authenticated connections served at once, by default; more are closed
/// once authenticated. A cluster has a handful of members, each with one connection
/// to each other, and `hdl cluster` one per command.
pub const MAX_PEERS: usize = 256;

/// The most calls of one connection dispatched at once.
pub const MAX_IN_FLIGHT: usize = 256;

/// What bounds the connections of the peer port; [`Default`] gives the constants above.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerLimits {
    /// How long a new connection has to authenticate.
    pub handshake_timeout: Duration,
    /// Connections in the handshake at once.
    pub strangers: usize,
    /// Connections in the handshake at once from one source address.
    pub strangers_per_source: usize,
    /// Authenticated connections served at once.
    pub peers: usize,
}

impl Default for PeerLimits {
    fn default() -> PeerLimits {
        PeerLimits {
            handshake_timeout: HANDSHAKE_TIMEOUT,
            strangers: MAX_STRANGERS,
            strangers_per_source: STRANGERS_PER_SOURCE,
            peers: MAX_PEERS,
        }
    }
}

/// The answer a [`Dispatch`] is working on.
pub type DispatchFuture<'a> = Pin<Box<dyn Future<Output = Vec<u8>> + Send + 'a>>;

/// Makes answers of requests: what the peer link serves.
pub trait Dispatch: Send + Sync {
    /// The answer to `request`, sent by the authenticated peer that gave the node id
    /// `from` in its handshake (0 for a client that is not a member).
    fn dispatch(&self, from: NodeId, request: Vec<u8>) -> DispatchFuture<'_>;
}

/// The book of connections in the handshake: each keeps the sender whose drop closes
/// it when a newcomer takes its place.
type Book = Arc<Mutex<Strangers<oneshot::Sender<()>>>>;

/// A connection's place in the book, left when dropped.
struct Stranger {
    book: Book,
    source: IpAddr,
    id: StrangerId,
}

impl Drop for Stranger {
    fn drop(&mut self) {
        let left = lock(&self.book).leave(self.source, self.id);
        drop(left);
    }
}

fn lock(book: &Book) -> std::sync::MutexGuard<'_, Strangers<oneshot::Sender<()>>> {
    book.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What every connection of one listener shares.
struct Shared {
    secret: ClusterSecret,
    dispatch: Arc<dyn Dispatch>,
    handshake_timeout: Duration,
    book: Book,
    peers: Arc<Semaphore>,
}

/// Accepts peers on `listener` and answers their calls with `dispatch` until
/// `shutdown` resolves; then stops accepting and closes every connection before it
/// returns. Only connections that prove they know `secret` are served, within
/// `limits`. Fails only if accepting fails for good.
pub async fn serve(
    listener: TcpListener,
    secret: ClusterSecret,
    dispatch: Arc<dyn Dispatch>,
    limits: PeerLimits,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let shared = Arc::new(Shared {
        secret,
        dispatch,
        handshake_timeout: limits.handshake_timeout,
        book: Arc::new(Mutex::new(Strangers::new(
            limits.strangers,
            limits.strangers_per_source,
        ))),
        peers: Arc::new(Semaphore::new(limits.peers)),
    });
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    let result = loop {
        tokio::select! {
            () = &mut shutdown => break Ok(()),
            Some(_) = connections.join_next() => {}
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(error) if is_transient(&error) => continue,
                    Err(error) => break Err(error),
                };
                let (stranger, evicted) = enter(&shared.book, peer.ip());
                connections.spawn(connection(stream, peer, Arc::clone(&shared), stranger, evicted));
            }
        }
    };
    drop(listener);
    connections.shutdown().await;
    result
}

/// Accept errors that concern one connection, not the listener.
fn is_transient(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
    )
}

/// Enters a new connection from `source` in the book (closing the stranger whose
/// place it takes, if any); its place, and what resolves when its own place is taken.
fn enter(book: &Book, source: IpAddr) -> (Stranger, oneshot::Receiver<()>) {
    let (close, closed) = oneshot::channel();
    let (id, evicted) = lock(book).enter(source, close);
    // Dropping the evicted stranger's sender closes its connection.
    drop(evicted);
    let stranger = Stranger {
        book: Arc::clone(book),
        source,
        id,
    };
    (stranger, closed)
}

async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
    stranger: Stranger,
    evicted: oneshot::Receiver<()>,
) {
    match answer(stream, &shared, stranger, evicted).await {
        PeerError::Closed => debug!(%peer, "peer connection closed"),
        error if error.is_forgery() => warn!(%peer, %error, "peer connection dropped"),
        error => debug!(%peer, %error, "peer connection dropped"),
    }
}

/// Serves one connection, a stranger until it authenticates; why it ended.
async fn answer(
    stream: TcpStream,
    shared: &Shared,
    stranger: Stranger,
    evicted: oneshot::Receiver<()>,
) -> PeerError {
    let mut stream = match PeerStream::new(stream) {
        Ok(stream) => stream,
        Err(error) => return error,
    };
    let (from, keys, _room) = match authenticate(&mut stream, shared, evicted).await {
        Ok(authenticated) => authenticated,
        Err(error) => return error,
    };
    drop(stranger);
    let dispatch = Arc::clone(&shared.dispatch);
    let (reader, writer) = stream.into_sealed(keys);
    // Room for every call in flight to queue its answer, and a pong.
    let (queue, outgoing) = mpsc::channel(MAX_IN_FLIGHT + 1);
    tokio::select! {
        error = read_calls(reader, from, dispatch, queue) => error,
        error = writer.run(outgoing) => error,
    }
}

/// The handshake, within the deadline and unless a newcomer takes the connection's
/// place first; the peer's id, the connection's keys and its room among the peers.
async fn authenticate(
    stream: &mut PeerStream,
    shared: &Shared,
    evicted: oneshot::Receiver<()>,
) -> Result<(NodeId, SessionKeys, OwnedSemaphorePermit), PeerError> {
    let timeout = shared.handshake_timeout;
    let handshake = tokio::time::timeout(timeout, auth::accept(stream, &shared.secret));
    let (from, keys) = tokio::select! {
        accepted = handshake => accepted.map_err(|_elapsed| PeerError::Timeout(timeout))??,
        _ = evicted => return Err(PeerError::Evicted),
    };
    let room = Arc::clone(&shared.peers).try_acquire_owned();
    let room = room.map_err(|_full| PeerError::TooManyPeers)?;
    Ok((from, keys, room))
}

/// Reads calls and dispatches each in its own task, at most [`MAX_IN_FLIGHT`] at once
/// and [`super::stream::MAX_HELD_OCTETS`] of their bodies; answers pings. The calls in flight are
/// aborted when this returns.
async fn read_calls(
    mut reader: SealedReader,
    from: NodeId,
    dispatch: Arc<dyn Dispatch>,
    queue: mpsc::Sender<Outgoing>,
) -> PeerError {
    let slots = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let budget = OctetBudget::new();
    let mut calls = JoinSet::new();
    loop {
        while calls.try_join_next().is_some() {}
        // Wait for a free slot before reading on: a full connection is not read.
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            return PeerError::Closed;
        };
        let frame = match reader.next(|| {}).await {
            Ok(Some(frame)) => frame,
            Ok(None) => return PeerError::Closed,
            Err(error) => return error,
        };
        match frame.kind {
            Kind::Call => {
                // Held until the answer is queued; a full budget is not read further.
                let Some(held) = budget.hold(frame.body.len()).await else {
                    return PeerError::Closed;
                };
                let dispatch = Arc::clone(&dispatch);
                let queue = queue.clone();
                calls.spawn(async move {
                    let body = dispatch.dispatch(from, frame.body).await;
                    if body.len() > MAX_FRAME_LEN {
                        warn!(
                            len = body.len(),
                            "peer answer over the frame limit not sent"
                        );
                        return;
                    }
                    let answer = Outgoing {
                        kind: Kind::Answer,
                        call: frame.call,
                        body,
                        held: None,
                    };
                    let _closed = queue.send(answer).await;
                    drop((slot, held));
                });
            }
            Kind::Ping => {
                drop(slot);
                let pong = Outgoing {
                    kind: Kind::Pong,
                    call: frame.call,
                    body: Vec::new(),
                    held: None,
                };
                if queue.send(pong).await.is_err() {
                    return PeerError::Closed;
                }
            }
            kind @ (Kind::Answer | Kind::Pong) => return PeerError::Unexpected(kind),
        }
    }
}
