//! Errors of a running group and of the admin client.

use std::time::Duration;

use openraft::error::Fatal;
use thiserror::Error;

use crate::replication::NodeId;
use crate::replication::network::{ForwardError, PeerError, TakeOverRefused};

/// Why a group could not start, write, read or carry out an admin call.
#[derive(Debug, Error)]
pub enum GroupError {
    /// The log or the state machine could not be opened or read.
    #[error("the group's storage failed: {0}")]
    Storage(#[from] crate::replication::Error),
    /// The Raft timing settings are inconsistent.
    #[error("invalid Raft settings: {0}")]
    Settings(#[from] openraft::ConfigError),
    /// This node's Raft has stopped (after a storage failure or at shutdown).
    #[error("the group has stopped on this node: {0}")]
    Stopped(Fatal<NodeId>),
    /// The leader (or the node asked) refused the request.
    #[error("refused: {0}")]
    Refused(ForwardError),
    /// No leader could be reached within the time allowed.
    #[error("no primary answered within {waited:?}{}", last_error(.last))]
    NoLeader {
        /// How long the node tried.
        waited: Duration,
        /// The last thing that went wrong, if anything was tried.
        last: Option<Box<GroupError>>,
    },
    /// Talking to a peer failed.
    #[error(transparent)]
    Peer(#[from] PeerError),
    /// The local store did not apply the entries a read must see in time.
    #[error("the local member did not apply log index {index} within {waited:?}")]
    Behind {
        /// The log index the read waits for.
        index: u64,
        /// How long it waited.
        waited: Duration,
    },
    /// A snapshot of the applied state, or the purge of the log behind it, did not
    /// happen in time.
    #[error(
        "this member did not snapshot its store and purge its log to index {index} within {waited:?}"
    )]
    NotCompacted {
        /// The applied log index the snapshot was to cover.
        index: u64,
        /// How long it waited for each.
        waited: Duration,
    },
    /// A peer answered with something other than what was asked.
    #[error("unexpected answer from a peer: {0}")]
    UnexpectedAnswer(&'static str),
    /// The Raft task could not be joined at shutdown.
    #[error("the Raft task failed at shutdown: {0}")]
    Join(#[from] tokio::task::JoinError),
}

fn last_error(last: &Option<Box<GroupError>>) -> String {
    match last {
        Some(error) => format!(" (last error: {error})"),
        None => String::new(),
    }
}

/// Why a leader stopping did not hand its leadership over ([`Group::hand_off`](super::Group::hand_off)).
#[derive(Debug, Error)]
pub enum HandOffError {
    /// The entries being committed were not applied in time.
    #[error("the entries in flight were not applied within {0:?}")]
    Busy(Duration),
    /// No other voter's log reached the leader's last entry in time (or there is none).
    #[error("no other voter caught up with the log within {0:?}")]
    NoneCaughtUp(Duration),
    /// The leader was elected too recently: the others could not vote before the
    /// deadline.
    #[error("this node was elected less than its lease ({0:?}) before the deadline")]
    LeaseOutlasts(Duration),
    /// The voter asked to take over refused.
    #[error("node {to} refused to take over: {refused}")]
    Refused {
        /// The voter.
        to: NodeId,
        /// Why.
        refused: TakeOverRefused,
    },
    /// The voter asked to take over could not be reached.
    #[error("node {to} could not be asked to take over: {error}")]
    Unreachable {
        /// The voter.
        to: NodeId,
        /// What the link said.
        error: PeerError,
    },
    /// The voter stood but no new leader was heard of in time.
    #[error("node {to} stood, but no new primary was heard of within {waited:?}")]
    NotElected {
        /// The voter.
        to: NodeId,
        /// The hand-off's whole allowance.
        waited: Duration,
    },
    /// This node's Raft has stopped.
    #[error("the group has stopped on this node: {0}")]
    Stopped(Fatal<NodeId>),
}
