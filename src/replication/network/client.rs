//! The calling side of one group: openraft's network factory and connections, and the
//! calls only a leader answers (forwarded writes, read indexes, admin calls), all over
//! the node's shared [`Links`].

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use openraft::error::{
    Fatal, InstallSnapshotError, NetworkError, PayloadTooLarge, RPCError, RaftError, RemoteError,
    ReplicationClosed, StreamingError, Unreachable,
};
use openraft::network::{Backoff, RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::{OptionalSend, Vote};

use super::frame::FrameError;
use super::link::Links;
use super::message::{
    self, Destination, ForwardError, GroupAnswer, GroupCall, Reply, TakeOverRefused,
};
use super::send_budget::{SendBudget, first_within};
use super::stream::PeerError;
use crate::replication::admin::{AdminAnswer, AdminRequest};
use crate::replication::contact::Standing;
use crate::replication::log_sync::LogSync;
use crate::replication::machine::Machine;
use crate::replication::types::{LogId, Snapshot};
use crate::replication::{GroupConfig, GroupId, Node, NodeId, Request};

/// How long a leader waits before it tries a member it could not reach again:
/// openraft's default, 500 ms, kept a member that had just restarted out of the
/// quorum for up to that long, and a rolling restart stopping the next member
/// meanwhile stalled every write.
const UNREACHABLE_RETRY: Duration = Duration::from_millis(100);

/// The error of one RPC as openraft takes it.
type RpcError<E = openraft::error::Infallible> = RPCError<NodeId, Node, RaftError<NodeId, E>>;

/// What the peer's Raft answered to one RPC.
type RemoteAnswer<T, E> = Result<T, RaftError<NodeId, E>>;

/// Takes an RPC's answer out of the expected variant, or names the variant that came.
type Pick<M, T, E> = fn(GroupAnswer<M>) -> Result<RemoteAnswer<T, E>, &'static str>;

/// Connects one group of this node to the same group on other nodes.
pub struct GroupNetwork<M> {
    links: Links,
    group: GroupId,
    /// What of this node's log of the group is on disk: the committed position sent
    /// to followers never goes past it (see [`LogSync`]).
    log: Arc<LogSync>,
    machine: PhantomData<fn() -> M>,
}

impl<M> Clone for GroupNetwork<M> {
    fn clone(&self) -> Self {
        GroupNetwork {
            links: self.links.clone(),
            group: self.group,
            log: Arc::clone(&self.log),
            machine: PhantomData,
        }
    }
}

impl<M> fmt::Debug for GroupNetwork<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GroupNetwork")
            .field("group", &self.group)
            .finish_non_exhaustive()
    }
}

impl<M: Machine> GroupNetwork<M> {
    /// The network of `group` over `links`, for a node whose log of the group is
    /// durable as `log` says.
    pub fn new(links: Links, group: GroupId, log: Arc<LogSync>) -> GroupNetwork<M> {
        GroupNetwork {
            links,
            group,
            log,
            machine: PhantomData,
        }
    }

    /// A connection to `target` at `node`.
    pub fn connection(&self, target: NodeId, node: &Node) -> GroupConnection<M> {
        GroupConnection {
            network: self.clone(),
            target,
            node: node.clone(),
            budget: SendBudget::default(),
        }
    }
}

impl<M: Machine> RaftNetworkFactory<GroupConfig<M>> for GroupNetwork<M> {
    type Network = GroupConnection<M>;

    async fn new_client(&mut self, target: NodeId, node: &Node) -> GroupConnection<M> {
        self.connection(target, node)
    }
}

/// One group's calls to one peer, over the shared link to that peer.
pub struct GroupConnection<M> {
    network: GroupNetwork<M>,
    target: NodeId,
    node: Node,
    /// How many octets of entries the next AppendEntries carries.
    budget: SendBudget,
}

impl<M> fmt::Debug for GroupConnection<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GroupConnection")
            .field("group", &self.network.group)
            .field("target", &self.target)
            .field("node", &self.node)
            .finish()
    }
}

/// How a request failed, deciding how openraft sees it.
enum Failure {
    /// The peer could not be reached or did not answer in time.
    Unreachable(PeerError),
    /// The peer answered something unusable.
    Network(PeerError),
    /// The request is larger than a peer frame and was not sent.
    TooLarge(PeerError),
}

impl Failure {
    /// The failure of a call carrying `entries` log entries, as openraft takes it: a
    /// request too large for a frame is sent again with half the entries.
    fn into_rpc<E: StdError>(self, entries: usize) -> RPCError<NodeId, Node, E> {
        match self {
            Failure::Unreachable(error) => RPCError::Unreachable(Unreachable::new(&error)),
            Failure::TooLarge(_) if entries > 1 => {
                let fewer = u64::try_from(entries / 2).unwrap_or(1);
                RPCError::PayloadTooLarge(PayloadTooLarge::new_entries_hint(fewer))
            }
            Failure::Network(error) | Failure::TooLarge(error) => {
                RPCError::Network(NetworkError::new(&error))
            }
        }
    }

    fn into_peer_error(self) -> PeerError {
        match self {
            Failure::Unreachable(error) | Failure::Network(error) | Failure::TooLarge(error) => {
                error
            }
        }
    }
}

impl<M: Machine> GroupConnection<M> {
    /// Asks the peer, as the leader, to propose `request`, waiting at most `timeout`.
    /// The outer error is the transport's; the inner one is the peer's answer.
    pub async fn forward(
        &self,
        request: Request<M::Command>,
        timeout: Duration,
    ) -> Result<Result<M::Output, ForwardError>, PeerError> {
        match self.call(&GroupCall::Forward(request), timeout).await {
            Ok(GroupAnswer::Forward(answer)) => Ok(answer),
            Ok(other) => Err(mismatch("Forward", &other)),
            Err(failure) => Err(failure.into_peer_error()),
        }
    }

    /// Asks the peer, as the leader, for the log index a linearizable read must wait
    /// for (`None` when its log is empty).
    pub async fn read_index(
        &self,
        timeout: Duration,
    ) -> Result<Result<Option<u64>, ForwardError>, PeerError> {
        match self.call(&GroupCall::ReadIndex, timeout).await {
            Ok(GroupAnswer::ReadIndex(answer)) => Ok(answer),
            Ok(other) => Err(mismatch("ReadIndex", &other)),
            Err(failure) => Err(failure.into_peer_error()),
        }
    }

    /// Asks the peer whether it still hears a leader and how far its log reaches.
    pub async fn canvass(&self, timeout: Duration) -> Result<Standing, PeerError> {
        match self.call(&GroupCall::Canvass, timeout).await {
            Ok(GroupAnswer::Canvass(standing)) => Ok(standing),
            Ok(other) => Err(mismatch("Canvass", &other)),
            Err(failure) => Err(failure.into_peer_error()),
        }
    }

    /// Asks the peer, which follows this node, to stand for election now: this node
    /// leads, is stopping, and its log ends at `last_log`. The outer error is the
    /// transport's; the inner one is the peer's refusal.
    pub async fn take_over(
        &self,
        last_log: Option<LogId>,
        timeout: Duration,
    ) -> Result<Result<(), TakeOverRefused>, PeerError> {
        match self.call(&GroupCall::TakeOver { last_log }, timeout).await {
            Ok(GroupAnswer::TakeOver(answer)) => Ok(answer),
            Ok(other) => Err(mismatch("TakeOver", &other)),
            Err(failure) => Err(failure.into_peer_error()),
        }
    }

    /// Sends `call` to this group on the peer and reads its answer within `timeout`.
    async fn call(
        &self,
        call: &GroupCall<M>,
        timeout: Duration,
    ) -> Result<GroupAnswer<M>, Failure> {
        let destination = Destination::Group(self.network.group);
        let links = &self.network.links;
        let body = exchange(links, self.node.peer, &destination, call, timeout).await?;
        super::frame::decode(&body).map_err(|error| Failure::Network(error.into()))
    }

    /// One Raft RPC: `pick` takes the answer out of the expected variant, or names the
    /// variant that came instead.
    pub(super) async fn rpc<T, E: StdError>(
        &self,
        call: GroupCall<M>,
        option: &RPCOption,
        pick: Pick<M, T, E>,
    ) -> Result<T, RpcError<E>> {
        let kind = call.kind();
        let entries = call.entries();
        let answer = self
            .call(&call, option.hard_ttl())
            .await
            .map_err(|failure| failure.into_rpc(entries))?;
        match pick(answer) {
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
                Err(Failure::Network(error).into_rpc(entries))
            }
        }
    }
}

/// Sends `body` to `destination` on the peer at `peer` and returns the body of its
/// answer, within `timeout`.
async fn exchange<B: serde::Serialize>(
    links: &Links,
    peer: std::net::SocketAddr,
    destination: &Destination,
    body: &B,
    timeout: Duration,
) -> Result<Vec<u8>, Failure> {
    let request =
        message::encode(destination, body).map_err(|error| Failure::Network(error.into()))?;
    let mut answer = links
        .call(peer, request, timeout)
        .await
        .map_err(|error| match error {
            PeerError::Frame(FrameError::TooLarge { .. }) => Failure::TooLarge(error),
            error => Failure::Unreachable(error),
        })?;
    let (reply, body) =
        message::split_head::<Reply>(&answer).map_err(|error| Failure::Network(error.into()))?;
    let head = answer.len() - body.len();
    match reply {
        Reply::Answered => Ok(answer.split_off(head)),
        Reply::NoSuchGroup(group) => Err(Failure::Network(PeerError::NoSuchGroup(group))),
        Reply::Malformed(reason) => Err(Failure::Network(PeerError::Malformed(reason))),
    }
}

/// Sends a membership or status call to the member of `group` at `peer` over `links`,
/// waiting at most `timeout`. The outer error is the transport's; the inner one is the
/// peer's answer.
pub async fn admin_call(
    links: &Links,
    peer: std::net::SocketAddr,
    group: GroupId,
    request: &AdminRequest,
    timeout: Duration,
) -> Result<Result<AdminAnswer, ForwardError>, PeerError> {
    let destination = Destination::Admin(group);
    let body = exchange(links, peer, &destination, request, timeout)
        .await
        .map_err(Failure::into_peer_error)?;
    Ok(super::frame::decode(&body)?)
}

/// Sends a node call (its body as the node layer encodes it) to the node at `peer`
/// over `links` and returns its answer's body, waiting at most `timeout`.
pub async fn node_call(
    links: &Links,
    peer: std::net::SocketAddr,
    body: &[u8],
    timeout: Duration,
) -> Result<Vec<u8>, PeerError> {
    let mut request = postcard::to_stdvec(&Destination::Node)
        .map_err(|error| PeerError::Frame(FrameError::Encode(error)))?;
    request.extend_from_slice(body);
    let mut answer = links.call(peer, request, timeout).await?;
    let (reply, rest) = message::split_head::<Reply>(&answer)?;
    let head = answer.len() - rest.len();
    match reply {
        Reply::Answered => Ok(answer.split_off(head)),
        Reply::NoSuchGroup(group) => Err(PeerError::NoSuchGroup(group)),
        Reply::Malformed(reason) => Err(PeerError::Malformed(reason)),
    }
}

fn mismatch<M: Machine>(request: &'static str, answer: &GroupAnswer<M>) -> PeerError {
    PeerError::Mismatch {
        request,
        response: answer.kind(),
    }
}

/// `rpc` with the committed position it tells lowered to `durable`, the highest
/// index on this node's disk: to the last of its entries (or the entry they follow)
/// within it, or to none when they all lie beyond it (a follower keeps what it knew).
fn committed_within<M: Machine>(
    mut rpc: AppendEntriesRequest<GroupConfig<M>>,
    durable: Option<u64>,
) -> AppendEntriesRequest<GroupConfig<M>> {
    let Some(committed) = rpc.leader_commit else {
        return rpc;
    };
    if durable >= Some(committed.index) {
        return rpc;
    }
    let within = |id: &LogId| durable >= Some(id.index);
    let sent = rpc
        .prev_log_id
        .iter()
        .chain(rpc.entries.iter().map(|entry| &entry.log_id));
    rpc.leader_commit = sent
        .filter(|id| within(id))
        .max_by_key(|id| id.index)
        .copied();
    rpc
}

fn raft_error(fatal: Fatal<NodeId>) -> RaftError<NodeId> {
    RaftError::Fatal(fatal)
}

impl<M: Machine> RaftNetwork<GroupConfig<M>> for GroupConnection<M> {
    fn backoff(&self) -> Backoff {
        Backoff::new(std::iter::repeat(UNREACHABLE_RETRY))
    }

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<GroupConfig<M>>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RpcError> {
        let (rpc, cut) = first_within(rpc, self.budget.octets());
        let rpc = committed_within(rpc, self.network.log.durable());
        // A heartbeat carries nothing and says nothing of how much fits.
        let call = (!rpc.entries.is_empty()).then(|| self.budget.start());
        let started = Instant::now();
        let answer = self
            .rpc(
                GroupCall::AppendEntries(rpc),
                &option,
                |answer| match answer {
                    GroupAnswer::AppendEntries(answer) => Ok(answer.map_err(raft_error)),
                    other => Err(other.kind()),
                },
            )
            .await;
        if let Some(call) = call {
            call.ended(
                started.elapsed(),
                option.hard_ttl(),
                answer.is_ok() && cut.is_some(),
            );
        }
        Ok(match (answer?, cut) {
            (AppendEntriesResponse::Success, Some(last)) => {
                AppendEntriesResponse::PartialSuccess(Some(last))
            }
            (answer, _) => answer,
        })
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<GroupConfig<M>>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RpcError<InstallSnapshotError>> {
        self.rpc(
            GroupCall::InstallSnapshot(rpc),
            &option,
            |answer| match answer {
                GroupAnswer::InstallSnapshot(answer) => Ok(answer),
                other => Err(other.kind()),
            },
        )
        .await
    }

    /// Sends the snapshot in chunks, as [`super::snapshot_send`] says, rather than
    /// openraft's way.
    async fn full_snapshot(
        &mut self,
        vote: Vote<NodeId>,
        snapshot: Snapshot<M>,
        cancel: impl Future<Output = ReplicationClosed> + OptionalSend + 'static,
        _option: RPCOption,
    ) -> Result<SnapshotResponse<NodeId>, StreamingError<GroupConfig<M>, Fatal<NodeId>>> {
        super::snapshot_send::send_snapshot(self, vote, snapshot, cancel).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RpcError> {
        self.rpc(GroupCall::Vote(rpc), &option, |answer| match answer {
            GroupAnswer::Vote(answer) => Ok(answer.map_err(raft_error)),
            other => Err(other.kind()),
        })
        .await
    }
}

#[cfg(test)]
mod committed_tests {
    use openraft::testing::log_id;
    use openraft::{EntryPayload, Vote};

    use super::*;
    use crate::replication::HandleSet;
    use crate::replication::types::Entry;

    fn append(
        prev: u64,
        last: u64,
        committed: u64,
    ) -> AppendEntriesRequest<GroupConfig<HandleSet>> {
        let entries = (prev + 1..=last)
            .map(|index| Entry {
                log_id: log_id(2, 1, index),
                payload: EntryPayload::Blank,
            })
            .collect();
        AppendEntriesRequest {
            vote: Vote::new_committed(2, 1),
            prev_log_id: Some(log_id(2, 1, prev)),
            entries,
            leader_commit: Some(log_id(2, 1, committed)),
        }
    }

    fn committed(rpc: AppendEntriesRequest<GroupConfig<HandleSet>>) -> Option<u64> {
        rpc.leader_commit.map(|id| id.index)
    }

    #[test]
    fn the_committed_position_sent_never_passes_the_leaders_disk() {
        assert_eq!(
            committed(committed_within(append(4, 8, 6), Some(7))),
            Some(6)
        );
        assert_eq!(
            committed(committed_within(append(4, 8, 8), Some(6))),
            Some(6)
        );
        assert_eq!(
            committed(committed_within(append(4, 8, 8), Some(4))),
            Some(4)
        );
        assert_eq!(committed(committed_within(append(4, 8, 8), Some(2))), None);
        assert_eq!(committed(committed_within(append(4, 8, 8), None)), None);
        // A heartbeat: no entries, the committed position at most the one they follow.
        assert_eq!(committed(committed_within(append(8, 8, 8), Some(7))), None);
        assert_eq!(
            committed(committed_within(append(8, 8, 8), Some(9))),
            Some(8)
        );
    }
}
