//! The client side: openraft's network factory, and the typed calls of a node to
//! another, each sent as one postcard [`PeerRequest`] over the node's [`Links`].

use std::error::Error as StdError;
use std::time::Duration;

use super::auth::ClusterSecret;
use super::frame::{self, FrameError};
use super::link::Links;
use super::message::{ForwardError, PeerRequest, PeerResponse};
use super::stream::PeerError;
use crate::replication::admin::{AdminAnswer, AdminRequest};
use crate::replication::{Node, NodeId, Request, Response, TypeConfig};
use openraft::error::{
    Fatal, InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};

/// The error of one RPC as openraft takes it.
type RpcError<E = openraft::error::Infallible> = RPCError<NodeId, Node, RaftError<NodeId, E>>;

/// What the peer's Raft answered to one RPC.
type RemoteAnswer<T, E> = Result<T, RaftError<NodeId, E>>;

/// Connects this node to the other members of its replica set; clones share its
/// links (one connection per peer).
#[derive(Debug, Clone)]
pub struct Network {
    links: Links,
}

impl Network {
    /// The network of node `id`, authenticating with `secret`.
    pub fn new(id: NodeId, secret: ClusterSecret) -> Network {
        Network {
            links: Links::new(id, secret),
        }
    }
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = NetworkConnection;

    async fn new_client(&mut self, target: NodeId, node: &Node) -> NetworkConnection {
        self.connection(target, node)
    }
}

impl Network {
    /// A connection to `target` at `node`: a handle on the link to its address,
    /// which connects on first use.
    pub fn connection(&self, target: NodeId, node: &Node) -> NetworkConnection {
        NetworkConnection {
            links: self.links.clone(),
            target,
            node: node.clone(),
        }
    }
}

/// Typed calls to one peer over the shared link to its address.
#[derive(Debug)]
pub struct NetworkConnection {
    links: Links,
    target: NodeId,
    node: Node,
}

/// How a request failed, deciding how openraft sees it.
enum Failure {
    /// The peer could not be reached or did not answer in time.
    Unreachable(PeerError),
    /// The connection failed after it was established, or the answer made no sense.
    Network(PeerError),
}

impl Failure {
    fn of(error: PeerError) -> Failure {
        match error {
            PeerError::LinkFailed(_) | PeerError::Frame(_) => Failure::Network(error),
            _ => Failure::Unreachable(error),
        }
    }

    fn into_rpc<E: StdError>(self) -> RPCError<NodeId, Node, E> {
        match self {
            Failure::Unreachable(error) => RPCError::Unreachable(Unreachable::new(&error)),
            Failure::Network(error) => RPCError::Network(NetworkError::new(&error)),
        }
    }

    fn into_peer_error(self) -> PeerError {
        match self {
            Failure::Unreachable(error) | Failure::Network(error) => error,
        }
    }
}

impl NetworkConnection {
    /// The addresses of the peer this connection goes to.
    pub fn node(&self) -> &Node {
        &self.node
    }

    /// Asks the peer, as the leader, to propose `request`, waiting at most `timeout`.
    /// The outer error is the transport's; the inner one is the peer's answer.
    pub async fn forward(
        &mut self,
        request: Request,
        timeout: Duration,
    ) -> Result<Result<Response, ForwardError>, PeerError> {
        let sent = PeerRequest::Forward(request);
        match self
            .call(sent, timeout)
            .await
            .map_err(Failure::into_peer_error)?
        {
            PeerResponse::Forward(answer) => Ok(answer),
            other => Err(mismatch("Forward", &other)),
        }
    }

    /// Asks the peer, as the leader, for the log index a linearizable read must wait
    /// for (`None` when its log is empty).
    pub async fn read_index(
        &mut self,
        timeout: Duration,
    ) -> Result<Result<Option<u64>, ForwardError>, PeerError> {
        let sent = PeerRequest::ReadIndex;
        match self
            .call(sent, timeout)
            .await
            .map_err(Failure::into_peer_error)?
        {
            PeerResponse::ReadIndex(answer) => Ok(answer),
            other => Err(mismatch("ReadIndex", &other)),
        }
    }

    /// Sends the peer a membership or status call, waiting at most `timeout`.
    pub async fn admin(
        &mut self,
        request: AdminRequest,
        timeout: Duration,
    ) -> Result<Result<AdminAnswer, ForwardError>, PeerError> {
        let sent = PeerRequest::Admin(request);
        match self
            .call(sent, timeout)
            .await
            .map_err(Failure::into_peer_error)?
        {
            PeerResponse::Admin(answer) => Ok(answer),
            other => Err(mismatch("Admin", &other)),
        }
    }

    /// Sends `request` and waits for its response within `timeout`.
    async fn call(
        &mut self,
        request: PeerRequest,
        timeout: Duration,
    ) -> Result<PeerResponse, Failure> {
        let body = postcard::to_stdvec(&request)
            .map_err(|error| Failure::Network(FrameError::Encode(error).into()))?;
        let answer = self
            .links
            .call(self.node.peer, body, timeout)
            .await
            .map_err(Failure::of)?;
        frame::decode(&answer).map_err(|error| Failure::Network(error.into()))
    }

    /// One Raft RPC: `pick` takes the answer out of the expected response variant, or
    /// names the variant that came instead.
    async fn rpc<T, E: StdError>(
        &mut self,
        request: PeerRequest,
        option: &RPCOption,
        pick: fn(PeerResponse) -> Result<RemoteAnswer<T, E>, &'static str>,
    ) -> Result<T, RpcError<E>> {
        let kind = request.kind();
        let response = self
            .call(request, option.hard_ttl())
            .await
            .map_err(Failure::into_rpc)?;
        match pick(response) {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(remote)) => Err(RPCError::RemoteError(RemoteError::new_with_node(
                self.target,
                self.node.clone(),
                remote,
            ))),
            Err(response) => {
                let error = PeerError::Mismatch {
                    request: kind,
                    response,
                };
                Err(Failure::Network(error).into_rpc())
            }
        }
    }
}

fn mismatch(request: &'static str, response: &PeerResponse) -> PeerError {
    PeerError::Mismatch {
        request,
        response: response.kind(),
    }
}

fn raft_error(fatal: Fatal<NodeId>) -> RaftError<NodeId> {
    RaftError::Fatal(fatal)
}

impl RaftNetwork<TypeConfig> for NetworkConnection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RpcError> {
        self.rpc(
            PeerRequest::AppendEntries(rpc),
            &option,
            |response| match response {
                PeerResponse::AppendEntries(answer) => Ok(answer.map_err(raft_error)),
                other => Err(other.kind()),
            },
        )
        .await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RpcError<InstallSnapshotError>> {
        self.rpc(
            PeerRequest::InstallSnapshot(rpc),
            &option,
            |response| match response {
                PeerResponse::InstallSnapshot(answer) => Ok(answer),
                other => Err(other.kind()),
            },
        )
        .await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RpcError> {
        self.rpc(PeerRequest::Vote(rpc), &option, |response| match response {
            PeerResponse::Vote(answer) => Ok(answer.map_err(raft_error)),
            other => Err(other.kind()),
        })
        .await
    }
}
