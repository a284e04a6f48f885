//! The server side of the peer link: accepts peers, authenticates them, and answers
//! their calls concurrently through a [`Dispatch`].
//!
//! Owns [`serve`] and the [`Dispatch`] seam: the link carries opaque bytes, and the
//! dispatcher (the registry of the process's Raft groups) makes an answer of each
//! request. Invariants: nothing but the handshake is read from a connection before
//! the peer proved the cluster secret, and the handshake must end within
//! [`HANDSHAKE_TIMEOUT`]; at most [`MAX_CONNECTIONS`] connections are served at once;
//! per connection at most [`MAX_IN_FLIGHT`] calls are dispatched at once and the
//! connection is not read further while they are (backpressure through TCP, never an
//! unbounded queue); a frame that does not open drops the connection before anything
//! in it is dispatched; on shutdown the listener is closed and every connection with
//! it, calls in flight included.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;
use tracing::{debug, warn};

use super::auth::{self, ClusterSecret};
use super::frame::MAX_FRAME_LEN;
use super::seal::Kind;
use super::stream::{Outgoing, PeerError, PeerStream, SealedReader};
use crate::replication::NodeId;

/// How long a new connection has to authenticate.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// The most peer connections served at once; more are closed on accept. A cluster
/// has a handful of members, each with one connection to each other, so this only
/// bounds what strangers can hold open.
pub const MAX_CONNECTIONS: usize = 256;

/// The most calls of one connection dispatched at once.
pub const MAX_IN_FLIGHT: usize = 256;

/// The answer a [`Dispatch`] is working on.
pub type DispatchFuture<'a> = Pin<Box<dyn Future<Output = Vec<u8>> + Send + 'a>>;

/// Makes answers of requests: what the peer link serves.
pub trait Dispatch: Send + Sync {
    /// The answer to `request`, sent by the authenticated peer that gave the node id
    /// `from` in its handshake (0 for a client that is not a member).
    fn dispatch(&self, from: NodeId, request: Vec<u8>) -> DispatchFuture<'_>;
}

/// Accepts peers on `listener` and answers their calls with `dispatch` until
/// `shutdown` resolves; then stops accepting and closes every connection before it
/// returns. Only connections that prove they know `secret` are served. Fails only if
/// accepting fails for good.
pub async fn serve(
    listener: TcpListener,
    secret: ClusterSecret,
    dispatch: Arc<dyn Dispatch>,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
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
                if connections.len() < MAX_CONNECTIONS {
                    let connection = connection(stream, peer, secret.clone(), Arc::clone(&dispatch));
                    connections.spawn(connection);
                }
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

async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    secret: ClusterSecret,
    dispatch: Arc<dyn Dispatch>,
) {
    match answer(stream, &secret, dispatch).await {
        PeerError::Closed => debug!(%peer, "peer connection closed"),
        error if error.is_forgery() => warn!(%peer, %error, "peer connection dropped"),
        error => debug!(%peer, %error, "peer connection dropped"),
    }
}

/// Serves one connection; why it ended.
async fn answer(
    stream: TcpStream,
    secret: &ClusterSecret,
    dispatch: Arc<dyn Dispatch>,
) -> PeerError {
    let mut stream = match PeerStream::new(stream) {
        Ok(stream) => stream,
        Err(error) => return error,
    };
    let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, auth::accept(&mut stream, secret));
    let (from, keys) = match handshake.await {
        Ok(Ok(accepted)) => accepted,
        Ok(Err(error)) => return error,
        Err(_elapsed) => return PeerError::Timeout(HANDSHAKE_TIMEOUT),
    };
    let (reader, writer) = stream.into_sealed(keys);
    // Room for every call in flight to queue its answer, and a pong.
    let (queue, outgoing) = mpsc::channel(MAX_IN_FLIGHT + 1);
    tokio::select! {
        error = read_calls(reader, from, dispatch, queue) => error,
        error = writer.run(outgoing) => error,
    }
}

/// Reads calls and dispatches each in its own task, at most [`MAX_IN_FLIGHT`] at once;
/// answers pings. The calls in flight are aborted when this returns.
async fn read_calls(
    mut reader: SealedReader,
    from: NodeId,
    dispatch: Arc<dyn Dispatch>,
    queue: mpsc::Sender<Outgoing>,
) -> PeerError {
    let slots = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
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
                    };
                    let _closed = queue.send(answer).await;
                    drop(slot);
                });
            }
            Kind::Ping => {
                drop(slot);
                let pong = Outgoing {
                    kind: Kind::Pong,
                    call: frame.call,
                    body: Vec::new(),
                };
                if queue.send(pong).await.is_err() {
                    return PeerError::Closed;
                }
            }
            kind @ (Kind::Answer | Kind::Pong) => return PeerError::Unexpected(kind),
        }
    }
}
