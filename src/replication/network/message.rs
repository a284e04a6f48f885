//! What peers say to each other once authenticated: one [`PeerRequest`] per frame,
//! answered by one [`PeerResponse`].

use openraft::error::{
    ChangeMembershipError, CheckIsLeaderError, ClientWriteError, Fatal, InitializeError,
    InstallSnapshotError, QuorumNotEnough, RaftError,
};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::replication::admin::{AdminAnswer, AdminRequest};
use crate::replication::{Node, NodeId, Request, Response, TypeConfig};

/// A request from one node (or the `hdl cluster` command) to another.
#[derive(Debug, Serialize, Deserialize)]
pub enum PeerRequest {
    /// Raft log replication and heartbeats.
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    /// A Raft election vote.
    Vote(VoteRequest<NodeId>),
    /// One chunk of a Raft snapshot.
    InstallSnapshot(InstallSnapshotRequest<TypeConfig>),
    /// A client write for the receiver to propose, as the leader.
    Forward(Request),
    /// The log index a linearizable read must wait for, asked of the leader.
    ReadIndex,
    /// A membership or status call of the `hdl cluster` command.
    Admin(AdminRequest),
}

/// The answer to a [`PeerRequest`] of the same variant.
///
/// Raft errors travel as [`Fatal`]: the other case of openraft's `RaftError` for these
/// RPCs is uninhabited.
#[derive(Debug, Serialize, Deserialize)]
pub enum PeerResponse {
    /// The answer to [`PeerRequest::AppendEntries`].
    AppendEntries(Result<AppendEntriesResponse<NodeId>, Fatal<NodeId>>),
    /// The answer to [`PeerRequest::Vote`].
    Vote(Result<VoteResponse<NodeId>, Fatal<NodeId>>),
    /// The answer to [`PeerRequest::InstallSnapshot`].
    InstallSnapshot(
        Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>,
    ),
    /// The answer to [`PeerRequest::Forward`].
    Forward(Result<Response, ForwardError>),
    /// The answer to [`PeerRequest::ReadIndex`]: the leader's read index (`None` when
    /// its log is empty).
    ReadIndex(Result<Option<u64>, ForwardError>),
    /// The answer to [`PeerRequest::Admin`].
    Admin(Result<AdminAnswer, ForwardError>),
}

impl PeerRequest {
    /// The variant's name, for errors.
    pub(super) fn kind(&self) -> &'static str {
        match self {
            PeerRequest::AppendEntries(_) => "AppendEntries",
            PeerRequest::Vote(_) => "Vote",
            PeerRequest::InstallSnapshot(_) => "InstallSnapshot",
            PeerRequest::Forward(_) => "Forward",
            PeerRequest::ReadIndex => "ReadIndex",
            PeerRequest::Admin(_) => "Admin",
        }
    }
}

impl PeerResponse {
    /// The variant's name, for errors.
    pub(super) fn kind(&self) -> &'static str {
        match self {
            PeerResponse::AppendEntries(_) => "AppendEntries",
            PeerResponse::Vote(_) => "Vote",
            PeerResponse::InstallSnapshot(_) => "InstallSnapshot",
            PeerResponse::Forward(_) => "Forward",
            PeerResponse::ReadIndex(_) => "ReadIndex",
            PeerResponse::Admin(_) => "Admin",
        }
    }
}

/// Why a request that only the leader can carry out (a forwarded write, a read index,
/// a membership change) was not carried out by the node it was sent to.
#[derive(Debug, Clone, Error, Serialize, Deserialize)]
pub enum ForwardError {
    /// The node is not the leader; the leader it knows of, if any, should be asked.
    #[error("not the leader; the leader is {leader_id:?}")]
    NotLeader {
        /// The leader's id, if known.
        leader_id: Option<NodeId>,
        /// The leader's addresses, if known.
        leader_node: Option<Node>,
    },
    /// The leader could not confirm its leadership with a quorum.
    #[error(transparent)]
    QuorumNotEnough(QuorumNotEnough<NodeId>),
    /// A membership change refused the request.
    #[error(transparent)]
    Membership(ChangeMembershipError<NodeId>),
    /// The replica set could not be initialised (it already is, or the node is not a
    /// member of the set it was asked to form).
    #[error(transparent)]
    Initialize(InitializeError<NodeId, Node>),
    /// The node's Raft stopped or failed.
    #[error(transparent)]
    Fatal(Fatal<NodeId>),
}

impl ForwardError {
    fn not_leader(to: openraft::error::ForwardToLeader<NodeId, Node>) -> ForwardError {
        ForwardError::NotLeader {
            leader_id: to.leader_id,
            leader_node: to.leader_node,
        }
    }
}

impl From<RaftError<NodeId, ClientWriteError<NodeId, Node>>> for ForwardError {
    fn from(error: RaftError<NodeId, ClientWriteError<NodeId, Node>>) -> ForwardError {
        match error {
            RaftError::APIError(ClientWriteError::ForwardToLeader(to)) => {
                ForwardError::not_leader(to)
            }
            RaftError::APIError(ClientWriteError::ChangeMembershipError(error)) => {
                ForwardError::Membership(error)
            }
            RaftError::Fatal(fatal) => ForwardError::Fatal(fatal),
        }
    }
}

impl From<RaftError<NodeId, CheckIsLeaderError<NodeId, Node>>> for ForwardError {
    fn from(error: RaftError<NodeId, CheckIsLeaderError<NodeId, Node>>) -> ForwardError {
        match error {
            RaftError::APIError(CheckIsLeaderError::ForwardToLeader(to)) => {
                ForwardError::not_leader(to)
            }
            RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(error)) => {
                ForwardError::QuorumNotEnough(error)
            }
            RaftError::Fatal(fatal) => ForwardError::Fatal(fatal),
        }
    }
}

impl From<RaftError<NodeId, InitializeError<NodeId, Node>>> for ForwardError {
    fn from(error: RaftError<NodeId, InitializeError<NodeId, Node>>) -> ForwardError {
        match error {
            RaftError::APIError(error) => ForwardError::Initialize(error),
            RaftError::Fatal(fatal) => ForwardError::Fatal(fatal),
        }
    }
}

/// The fatal error inside a `RaftError` whose API error cannot happen.
pub(super) fn fatal(error: RaftError<NodeId>) -> Fatal<NodeId> {
    match error {
        RaftError::APIError(never) => match never {},
        RaftError::Fatal(fatal) => fatal,
    }
}
