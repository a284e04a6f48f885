//! Opaque request/answer bytes between authenticated peers: [`Links`] on the calling
//! side, [`serve`] and its [`Dispatch`] on the answering side.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tracing::debug;

use super::auth::{self, ClusterSecret};
use super::frame::MAX_FRAME_LEN;
use super::stream::{PeerError, PeerStream};
use crate::replication::NodeId;

/// How long a new connection has to authenticate.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// The most peer connections served at once; more are closed on accept.
pub const MAX_CONNECTIONS: usize = 256;

/// The most idle connections kept for one peer.
const MAX_IDLE_PER_PEER: usize = 64;

/// What answers the requests of authenticated peers.
pub trait Dispatch: Send + Sync + 'static {
    /// The answer to `request` from the peer that authenticated as `from`.
    fn dispatch(&self, from: NodeId, request: Vec<u8>) -> Pin<Box<dyn Future<Output = Vec<u8>> + Send + '_>>;
}

/// Connections to peers, authenticated as node `id`; clones share them.
#[derive(Debug, Clone)]
pub struct Links {
    id: NodeId,
    secret: ClusterSecret,
    idle: Arc<Mutex<HashMap<SocketAddr, Vec<PeerStream>>>>,
}

impl Links {
    /// Links of node `id`, authenticating with `secret`.
    pub fn new(id: NodeId, secret: ClusterSecret) -> Links {
        Links {
            id,
            secret,
            idle: Arc::default(),
        }
    }

    /// Sends `request` to the peer at `address` and returns its answer, within `timeout`.
    pub async fn call(
        &self,
        address: SocketAddr,
        request: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, PeerError> {
        match tokio::time::timeout(timeout, self.exchange(address, request)).await {
            Ok(answer) => answer,
            Err(_elapsed) => Err(PeerError::Timeout(timeout)),
        }
    }

    async fn exchange(&self, address: SocketAddr, request: Vec<u8>) -> Result<Vec<u8>, PeerError> {
        let idle = self.take_idle(address);
        let mut stream = match idle {
            Some(stream) => stream,
            None => self.connect(address).await?,
        };
        stream.send(&request, MAX_FRAME_LEN).await?;
        let answer: Vec<u8> = stream.expect(MAX_FRAME_LEN).await?;
        self.give_back(address, stream);
        Ok(answer)
    }

    fn take_idle(&self, address: SocketAddr) -> Option<PeerStream> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        idle.get_mut(&address).and_then(Vec::pop)
    }

    fn give_back(&self, address: SocketAddr, stream: PeerStream) {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        let streams = idle.entry(address).or_default();
        if streams.len() < MAX_IDLE_PER_PEER {
            streams.push(stream);
        }
    }

    async fn connect(&self, address: SocketAddr) -> Result<PeerStream, PeerError> {
        let mut stream = PeerStream::new(TcpStream::connect(address).await?)?;
        auth::connect(&mut stream, &self.secret, self.id).await?;
        Ok(stream)
    }
}

/// Accepts peers on `listener` and answers their requests with `dispatch` until
/// `shutdown` resolves. Only connections that prove they know `secret` are served.
pub async fn serve(
    listener: TcpListener,
    secret: ClusterSecret,
    dispatch: Arc<dyn Dispatch>,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => return Ok(()),
            Some(_) = connections.join_next() => {}
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(error) if is_transient(&error) => continue,
                    Err(error) => return Err(error),
                };
                if connections.len() < MAX_CONNECTIONS {
                    let (secret, dispatch) = (secret.clone(), Arc::clone(&dispatch));
                    connections.spawn(async move {
                        if let Err(error) = answer(stream, &secret, dispatch.as_ref()).await {
                            debug!(%peer, %error, "peer connection ended");
                        }
                    });
                }
            }
        }
    }
}

async fn answer(
    stream: TcpStream,
    secret: &ClusterSecret,
    dispatch: &dyn Dispatch,
) -> Result<(), PeerError> {
    let mut stream = PeerStream::new(stream)?;
    let from = tokio::time::timeout(HANDSHAKE_TIMEOUT, auth::accept(&mut stream, secret))
        .await
        .map_err(|_| PeerError::Timeout(HANDSHAKE_TIMEOUT))??;
    while let Some(request) = stream.recv::<Vec<u8>>(MAX_FRAME_LEN).await? {
        let answer = dispatch.dispatch(from, request).await;
        stream.send(&answer, MAX_FRAME_LEN).await?;
    }
    Ok(())
}

/// Accept errors that concern one connection, not the listener.
fn is_transient(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
    )
}
