//! Errors of a running group and of the admin client.

use std::time::Duration;

use openraft::error::Fatal;
use thiserror::Error;

use crate::replication::NodeId;
use crate::replication::network::{ForwardError, PeerError};

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
