//! What peers say to each other once authenticated. A request frame is a
//! [`Destination`] followed by its body (a [`GroupCall`] for a group, an admin request
//! for a group's member, opaque bytes for the node); its answer is a [`Reply`] followed by the answer ([`GroupAnswer`]).
//! Groups of different machines share one connection, so the destination is read
//! before the body, whose type depends on it.

use openraft::error::{
    ChangeMembershipError, CheckIsLeaderError, ClientWriteError, Fatal, InitializeError,
    InstallSnapshotError, QuorumNotEnough, RaftError,
};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::frame::FrameError;

use crate::replication::contact::Standing;
use crate::replication::machine::Machine;
use crate::replication::types::LogId;
use crate::replication::{GroupConfig, GroupId, Node, NodeId, Request};

/// Whom a request frame is for: the head of every request, before its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Destination {
    /// One Raft group of the receiving node; the body is a [`GroupCall`] of it.
    Group(GroupId),
    /// The receiving node's member of a group, for the `hdl cluster` command; the body
    /// is an [`AdminRequest`](crate::replication::admin::AdminRequest), answered with `Result<AdminAnswer, ForwardError>`.
    Admin(GroupId),
    /// The receiving node itself; the body is whatever its node calls are.
    Node,
}

/// The head of every answer frame, before its body: whether the destination answered.
/// A reply names no group type, so the admin client reads it for any group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reply {
    /// The body is the destination's answer.
    Answered,
    /// The receiving node is not a member of this group (or takes no node calls).
    NoSuchGroup(Option<GroupId>),
    /// The request could not be read.
    Malformed(String),
}

/// A request to one group of another node (or from the `hdl cluster` command).
#[derive(Debug, Serialize, Deserialize)]
#[serde(bound = "")]
pub enum GroupCall<M: Machine> {
    /// Raft log replication and heartbeats.
    AppendEntries(AppendEntriesRequest<GroupConfig<M>>),
    /// A Raft election vote.
    Vote(VoteRequest<NodeId>),
    /// One chunk of a Raft snapshot.
    InstallSnapshot(InstallSnapshotRequest<GroupConfig<M>>),
    /// A client write for the receiver to propose, as the leader.
    Forward(Request<M::Command>),
    /// The log index a linearizable read must wait for, asked of the leader.
    ReadIndex,
    /// Whether the receiver still hears a leader, and how far its log reaches: asked
    /// by a member that no longer hears one before it stands for election.
    Canvass,
    /// Sent by the leader, which is stopping, to the member it hands its leadership
    /// to: stand for election now. `last_log` is the leader's last log id, which the
    /// member must hold already (the leader has stopped proposing).
    TakeOver {
        /// The id of the last entry in the leader's log.
        last_log: Option<LogId>,
    },
}

/// The answer to a [`GroupCall`] of the same variant.
///
/// Raft errors travel as [`Fatal`]: the other case of openraft's `RaftError` for these
/// RPCs is uninhabited.
#[derive(Debug, Serialize, Deserialize)]
#[serde(bound = "")]
pub enum GroupAnswer<M: Machine> {
    /// The answer to [`GroupCall::AppendEntries`].
    AppendEntries(Result<AppendEntriesResponse<NodeId>, Fatal<NodeId>>),
    /// The answer to [`GroupCall::Vote`].
    Vote(Result<VoteResponse<NodeId>, Fatal<NodeId>>),
    /// The answer to [`GroupCall::InstallSnapshot`].
    InstallSnapshot(
        Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>,
    ),
    /// The answer to [`GroupCall::Forward`].
    Forward(Result<M::Output, ForwardError>),
    /// The answer to [`GroupCall::ReadIndex`]: the leader's read index (`None` when
    /// its log is empty).
    ReadIndex(Result<Option<u64>, ForwardError>),
    /// The answer to [`GroupCall::Canvass`].
    Canvass(Standing),
    /// The answer to [`GroupCall::TakeOver`]: the member stood, or why it did not.
    TakeOver(Result<(), TakeOverRefused>),
}

impl<M: Machine> GroupCall<M> {
    /// The variant's name, for errors.
    pub(super) fn kind(&self) -> &'static str {
        match self {
            GroupCall::AppendEntries(_) => "AppendEntries",
            GroupCall::Vote(_) => "Vote",
            GroupCall::InstallSnapshot(_) => "InstallSnapshot",
            GroupCall::Forward(_) => "Forward",
            GroupCall::ReadIndex => "ReadIndex",
            GroupCall::Canvass => "Canvass",
            GroupCall::TakeOver { .. } => "TakeOver",
        }
    }

    /// How many log entries the call carries.
    pub(super) fn entries(&self) -> usize {
        match self {
            GroupCall::AppendEntries(append) => append.entries.len(),
            _ => 0,
        }
    }
}

impl<M: Machine> GroupAnswer<M> {
    /// The variant's name, for errors.
    pub(super) fn kind(&self) -> &'static str {
        match self {
            GroupAnswer::AppendEntries(_) => "AppendEntries",
            GroupAnswer::Vote(_) => "Vote",
            GroupAnswer::InstallSnapshot(_) => "InstallSnapshot",
            GroupAnswer::Forward(_) => "Forward",
            GroupAnswer::ReadIndex(_) => "ReadIndex",
            GroupAnswer::Canvass(_) => "Canvass",
            GroupAnswer::TakeOver(_) => "TakeOver",
        }
    }
}

/// `head` followed by `body`, as one frame body.
pub(super) fn encode<H: Serialize, B: Serialize>(
    head: &H,
    body: &B,
) -> Result<Vec<u8>, FrameError> {
    let bytes = postcard::to_stdvec(head).map_err(FrameError::Encode)?;
    postcard::to_extend(body, bytes).map_err(FrameError::Encode)
}

/// The head of `bytes` and the body after it.
pub(super) fn split_head<H: DeserializeOwned>(bytes: &[u8]) -> Result<(H, &[u8]), FrameError> {
    postcard::take_from_bytes(bytes).map_err(FrameError::Decode)
}

/// Why a member did not stand for election when asked to take over.
#[derive(Debug, Clone, PartialEq, Eq, Error, Serialize, Deserialize)]
pub enum TakeOverRefused {
    /// The asker is not the leader this member follows: only its leader may ask.
    #[error("node {asker} asked, but this member follows {leader:?}")]
    NotMyLeader {
        /// The node that asked.
        asker: NodeId,
        /// The leader this member knows of.
        leader: Option<NodeId>,
    },
    /// This member's log does not reach the leader's last entry yet.
    #[error("this member's log ends at {mine:?}, before the leader's last entry {leaders:?}")]
    Behind {
        /// The id of its last log entry.
        mine: Option<LogId>,
        /// The leader's.
        leaders: Option<LogId>,
    },
    /// This member's Raft has stopped, or its log could not be read.
    #[error("this member cannot stand: {0}")]
    Unable(String),
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
    /// The entry carrying the request was applied without an output for each of its
    /// requests (a defect: the state machine answers every request).
    #[error("an entry of {requests} requests was applied with {outputs} outputs")]
    Unanswered {
        /// Requests in the entry.
        requests: usize,
        /// Outputs its application gave.
        outputs: usize,
    },
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
