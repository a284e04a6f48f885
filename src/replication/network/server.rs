//! The peer server: answers the typed requests of the peer link by calling into the
//! local [`openraft::Raft`]. The link ([`super::serve`]) authenticates connections and
//! carries the bytes; this is its [`Dispatch`].

use std::future::Future;
use std::io;
use std::sync::Arc;

use openraft::Raft;
use tokio::net::TcpListener;
use tracing::{debug, warn};

use super::auth::ClusterSecret;
use super::frame;
use super::listener::{self, Dispatch, DispatchFuture};
use super::message::{ForwardError, PeerRequest, PeerResponse, fatal};
use crate::replication::admin;
use crate::replication::{Node, NodeId, TypeConfig};

/// Serves Raft RPCs, forwarded writes, read indexes and admin calls to the other
/// nodes of a replica set and to the `hdl cluster` command.
pub struct PeerServer {
    raft: Raft<TypeConfig>,
    me: Node,
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
        let server = Arc::new(PeerServer { raft, me });
        listener::serve(listener, secret, server, shutdown).await
    }

    async fn carry_out(&self, request: PeerRequest) -> PeerResponse {
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

impl Dispatch for PeerServer {
    /// Decodes one [`PeerRequest`] and encodes its [`PeerResponse`]; an undecodable
    /// request gets an empty answer, which the caller cannot decode either.
    fn dispatch(&self, from: NodeId, request: Vec<u8>) -> DispatchFuture<'_> {
        Box::pin(async move {
            let request: PeerRequest = match frame::decode(&request) {
                Ok(request) => request,
                Err(error) => {
                    debug!(from, %error, "undecodable peer request");
                    return Vec::new();
                }
            };
            let response = self.carry_out(request).await;
            postcard::to_stdvec(&response).unwrap_or_else(|error| {
                warn!(from, %error, "cannot encode a peer response");
                Vec::new()
            })
        })
    }
}
