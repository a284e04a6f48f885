//! The peer server: authenticates each connection, then answers its requests by
//! calling into the local [`openraft::Raft`].

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use openraft::Raft;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tracing::debug;

use super::auth::{self, ClusterSecret};
use super::frame::MAX_FRAME_LEN;
use super::listener::{HANDSHAKE_TIMEOUT, MAX_CONNECTIONS};
use super::message::{ForwardError, PeerRequest, PeerResponse, fatal};
use super::stream::{PeerError, PeerStream};
use crate::replication::admin;
use crate::replication::{Node, TypeConfig};

/// Serves Raft RPCs, forwarded writes, read indexes and admin calls to the other
/// nodes of a replica set and to the `hdl cluster` command.
pub struct PeerServer {
    raft: Raft<TypeConfig>,
    me: Node,
    secret: ClusterSecret,
}

impl PeerServer {
    /// Accepts peers on `listener` and answers them with `raft`, the Raft of the node
    /// whose addresses are `me`, until `shutdown` resolves, then closes every
    /// connection. Only connections that prove they know `secret` are served. Fails
    /// only if accepting fails for good.
    pub async fn serve(
        listener: TcpListener,
        raft: Raft<TypeConfig>,
        me: Node,
        secret: ClusterSecret,
        shutdown: impl Future<Output = ()>,
    ) -> io::Result<()> {
        let server = Arc::new(PeerServer { raft, me, secret });
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
                        connections.spawn(Arc::clone(&server).connection(stream, peer));
                    }
                }
            }
        }
    }

    async fn connection(self: Arc<Self>, stream: TcpStream, peer: SocketAddr) {
        if let Err(error) = self.answer(stream).await {
            debug!(%peer, %error, "peer connection ended");
        }
    }

    async fn answer(&self, stream: TcpStream) -> Result<(), PeerError> {
        let mut stream = PeerStream::new(stream)?;
        tokio::time::timeout(HANDSHAKE_TIMEOUT, auth::accept(&mut stream, &self.secret))
            .await
            .map_err(|_| PeerError::Timeout(HANDSHAKE_TIMEOUT))??;
        while let Some(request) = stream.recv(MAX_FRAME_LEN).await? {
            let response = self.dispatch(request).await;
            stream.send(&response, MAX_FRAME_LEN).await?;
        }
        Ok(())
    }

    async fn dispatch(&self, request: PeerRequest) -> PeerResponse {
        match request {
            PeerRequest::AppendEntries(rpc) => {
                PeerResponse::AppendEntries(self.raft.append_entries(rpc).await.map_err(fatal))
            }
            PeerRequest::Vote(rpc) => PeerResponse::Vote(self.raft.vote(rpc).await.map_err(fatal)),
            PeerRequest::InstallSnapshot(rpc) => {
                PeerResponse::InstallSnapshot(self.raft.install_snapshot(rpc).await)
            }
            PeerRequest::Forward(request) => PeerResponse::Forward(
                self.raft
                    .client_write(request)
                    .await
                    .map(|written| written.data)
                    .map_err(ForwardError::from),
            ),
            PeerRequest::ReadIndex => PeerResponse::ReadIndex(
                self.raft
                    .get_read_log_id()
                    .await
                    .map(|(read, _applied)| read.map(|log_id| log_id.index))
                    .map_err(ForwardError::from),
            ),
            PeerRequest::Admin(request) => {
                PeerResponse::Admin(admin::carry_out(&self.raft, &self.me, request).await)
            }
        }
    }
}

/// Accept errors that concern one connection, not the listener.
fn is_transient(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
    )
}
