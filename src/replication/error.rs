//! Errors of the replication storage seams.
//!
//! Every [`Error`] here is a failure of the node's own disk or files, never a business
//! outcome (refusals travel inside the outputs of applied entries). openraft receives it as a
//! storage error and stops the node rather than let its replica diverge.

use std::io;
use std::path::PathBuf;

use openraft::{AnyError, ErrorSubject, ErrorVerb, StorageIOError};
use thiserror::Error;

use super::types::{NodeId, RaftStorageError, SnapshotMeta};
use crate::storage::StorageError;

/// Why a log, state machine or snapshot operation failed.
#[derive(Debug, Error)]
pub enum Error {
    /// The store or the log file failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// A value could not be put into postcard form.
    #[error("cannot encode {what}: {source}")]
    Encode {
        /// What was being encoded.
        what: &'static str,
        /// Why postcard refused.
        source: postcard::Error,
    },
    /// Stored or received bytes are not a valid postcard value.
    #[error("{what} is corrupt: {source}")]
    Decode {
        /// What was being decoded.
        what: &'static str,
        /// Why postcard refused.
        source: postcard::Error,
    },
    /// A postcard value was followed by bytes that belong to nothing.
    #[error("{count} unexpected trailing bytes after {what}")]
    TrailingBytes {
        /// What had been decoded.
        what: &'static str,
        /// How many bytes were left.
        count: usize,
    },
    /// A log entry is stored under an index that is not its own.
    #[error("log entry stored at index {stored} says it is entry {found}")]
    MisplacedEntry {
        /// The index it is stored under.
        stored: u64,
        /// The index it carries.
        found: u64,
    },
    /// Snapshot data in a layout this build does not read.
    #[error("snapshot format {found} is not supported (this hdl reads format {expected})")]
    SnapshotFormat {
        /// The format byte found.
        found: u8,
        /// The format this build reads and writes.
        expected: u8,
    },
    /// Snapshot data describes another snapshot than the one being installed.
    #[error("snapshot data is {found} but was sent as {expected}")]
    SnapshotMismatch {
        /// What the data says it is.
        found: Box<SnapshotMeta>,
        /// What it was installed as.
        expected: Box<SnapshotMeta>,
    },
    /// Snapshot data of a kind that cannot serve where openraft passed it (never
    /// expected: openraft sends only what this member built).
    #[error("snapshot data is {found}, which cannot be {wanted}")]
    SnapshotKind {
        /// What the data is.
        found: &'static str,
        /// What was to be done with it.
        wanted: &'static str,
    },
    /// Reading or writing the snapshot file failed.
    #[error("snapshot file {path}: {source}")]
    SnapshotFile {
        /// The file.
        path: PathBuf,
        /// What the file system said.
        source: io::Error,
    },
    /// Reading or writing snapshot data (a snapshot being received or sent) failed.
    #[error("snapshot data: {0}")]
    SnapshotData(io::Error),
    /// Snapshot data ends before its last record.
    #[error("snapshot data is truncated")]
    SnapshotTruncated,
    /// A snapshot record claims more bytes than any record may have.
    #[error("snapshot record of {length} bytes is longer than the limit")]
    SnapshotRecordTooLong {
        /// The length it claims.
        length: u32,
    },
    /// The state machine stopped before applying entries the log was asked to purge.
    #[error(
        "the state machine stopped before applying log index {index}, which the log was to purge"
    )]
    PurgeUnapplied {
        /// The last index of the purge.
        index: u64,
    },
    /// An fsync of the Raft log failed; the group stops.
    #[error("syncing the Raft log to disk failed")]
    LogSync,
    /// Making the applied state durable failed; the group stops.
    #[error("syncing the applied state to disk failed: {0}")]
    Sync(String),
    /// Committing the applies held together failed; the group stops.
    #[error("committing the applies held together failed: {0}")]
    HeldCommit(String),
    /// The group stopped while a snapshot was being built or installed, which was
    /// given up (an install leaves the store as it was).
    #[error("the group stopped while a snapshot was built or installed")]
    Stopped,
    /// The blocking task doing the disk work panicked or was cancelled.
    #[error("storage task did not finish: {0}")]
    Task(#[from] tokio::task::JoinError),
}

impl Error {
    /// This error as openraft's storage error about `subject`, which stops the node.
    pub(super) fn into_raft(
        self,
        subject: ErrorSubject<NodeId>,
        verb: ErrorVerb,
    ) -> RaftStorageError {
        StorageIOError::new(subject, verb, AnyError::new(&self)).into()
    }
}
