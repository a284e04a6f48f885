//! What peers say to each other once authenticated: one [`PeerRequest`] per frame,
//! answered by one [`PeerResponse`].

use openraft::error::{
    ChangeMembershipError, ClientWriteError, Fatal, InstallSnapshotError, RaftError,
};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::replication::{Node, NodeId, Request, Response, TypeConfig};

/// A request from one node to another.
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
}

impl PeerRequest {
    /// The variant's name, for errors.
    pub(super) fn kind(&self) -> &'static str {
        match self {
            PeerRequest::AppendEntries(_) => "AppendEntries",
            PeerRequest::Vote(_) => "Vote",
            PeerRequest::InstallSnapshot(_) => "InstallSnapshot",
            PeerRequest::Forward(_) => "Forward",
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
        }
    }
}

/// Why a forwarded write was not applied by the node it was sent to.
#[derive(Debug, Error, Serialize, Deserialize)]
pub enum ForwardError {
    /// The node is not the leader; the leader it knows of, if any, should be asked.
    #[error("not the leader; the leader is {leader_id:?}")]
    NotLeader {
        /// The leader's id, if known.
        leader_id: Option<NodeId>,
        /// The leader's addresses, if known.
        leader_node: Option<Node>,
    },
    /// A membership change refused the write.
    #[error(transparent)]
    Membership(ChangeMembershipError<NodeId>),
    /// The node's Raft stopped or failed.
    #[error(transparent)]
    Fatal(Fatal<NodeId>),
}

impl From<RaftError<NodeId, ClientWriteError<NodeId, Node>>> for ForwardError {
    fn from(error: RaftError<NodeId, ClientWriteError<NodeId, Node>>) -> ForwardError {
        match error {
            RaftError::APIError(ClientWriteError::ForwardToLeader(to)) => ForwardError::NotLeader {
                leader_id: to.leader_id,
                leader_node: to.leader_node,
            },
            RaftError::APIError(ClientWriteError::ChangeMembershipError(error)) => {
                ForwardError::Membership(error)
            }
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
