//! Errors of the storage layer.
//!
//! [`Refusal`] is a business outcome (the handle exists, a value is missing): it is
//! deterministic, changes nothing, and a replicated state machine records it as the
//! command's result. Every other [`StorageError`] means the disk or the file is not
//! what it must be; a replica that meets one stops rather than diverge.

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::slots::Slot;
use crate::values::{DecodeError, ValueIndex};

/// Why an operation was refused without changing anything.
#[derive(Debug, Clone, PartialEq, Eq, Error, Serialize, Deserialize)]
pub enum Refusal {
    /// Create of a handle that exists.
    #[error("handle already exists")]
    HandleExists,
    /// Any operation on a handle that does not exist.
    #[error("handle not found")]
    HandleNotFound,
    /// Add of a value whose index is taken.
    #[error("a value with index {0} already exists")]
    ValueExists(ValueIndex),
    /// Modify or remove of a value that does not exist.
    #[error("no value with index {0}")]
    ValueNotFound(ValueIndex),
    /// One request names the same index twice.
    #[error("index {0} appears more than once in the request")]
    DuplicateIndex(ValueIndex),
    /// Value indexes must be positive.
    #[error("value index 0 is not allowed; indexes must be positive")]
    ZeroIndex,
    /// An add, modify or remove that names no value.
    #[error("the request names no value")]
    NoValues,
    /// The handle's slot is not one this replica set takes writes for now: another set
    /// owns it, or it is changing hands.
    #[error("{0} is not taken here now")]
    NotHere(Slot),
    /// A record the write's authorisation read changed before the write was applied
    /// (see [`crate::replication::guard`]); the permissions must be checked again.
    #[error("the permissions this write was checked against changed before it applied")]
    AuthorityChanged,
    /// The handle's values would take more octets (RFC 3652 value list encoding) than
    /// the limit: the store's own, [`crate::codec::MAX_VALUE_LIST_LEN`] (an answer
    /// carrying them must fit one message), or a lower one the service is configured
    /// with.
    #[error("the handle's values would take {octets} octets; at most {limit} are allowed")]
    TooLarge {
        /// What the values would take.
        octets: u64,
        /// The limit.
        limit: u64,
    },
}

/// Why the store could not do what was asked.
#[derive(Debug, Error)]
pub enum StorageError {
    /// The operation was refused; nothing changed.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// The database file was written by another format version of hdl.
    #[error(
        "store format version {found} is not supported (this hdl reads version {expected}); \
         use the hdl release that wrote it to export the data"
    )]
    FormatVersion {
        /// Version recorded in the file.
        found: u64,
        /// Version this build reads and writes.
        expected: u64,
    },
    /// A stored record could not be decoded.
    #[error("stored record for {key:?} is corrupt: {source}")]
    Corrupt {
        /// The key of the record.
        key: String,
        /// What was wrong with it.
        source: DecodeError,
    },
    /// A stored document could not be read by the state it belongs to.
    #[error("stored document {name:?} is corrupt: {reason}")]
    CorruptDocument {
        /// The document's name.
        name: String,
        /// What was wrong with it.
        reason: String,
    },
    /// An imported record sits under a key that is not its own.
    #[error("imported record {key:?} does not belong under that key")]
    MisplacedRecord {
        /// The key it came with.
        key: String,
    },
    /// The slot index, the value index or the index of remembered results names a
    /// record the store does not hold.
    #[error("an index names {key:?}, which the store does not hold")]
    Unindexed {
        /// The folded key the index names.
        key: String,
    },
    /// A log segment is damaged before its end (or is not a segment at all): the
    /// disk lost or changed octets that were durable.
    #[error(
        "log segment {} is damaged at octet {offset}: {reason}; the node cannot trust its log: \
         restore it from a backup or add it to its replica set again as a new member",
        path.display()
    )]
    LogDamaged {
        /// The segment file.
        path: PathBuf,
        /// Where its whole records end.
        offset: u64,
        /// What is wrong after them.
        reason: &'static str,
    },
    /// An entry too large to be a log record.
    #[error("log entry {index} would take {octets} octets, more than a log record may hold")]
    LogEntryTooLarge {
        /// The entry's index.
        index: u64,
        /// What its record would take.
        octets: usize,
    },
    /// The log's index names an entry it cannot find (a defect, not a disk fault).
    #[error("log entry {index} is listed but its segment is gone")]
    LogMissingEntry {
        /// The entry's index.
        index: u64,
    },
    /// A store holds a table this build does not know (a later release wrote it), so a
    /// copy of the store would leave it behind.
    #[error("the store holds a table this hdl does not know: {name}")]
    UnknownTable {
        /// The table's name.
        name: String,
    },
    /// A file of the store or the log (or its directory) could not be made, read,
    /// written, renamed or synced.
    #[error("{path}: {source}")]
    File {
        /// The path.
        path: PathBuf,
        /// What the file system said.
        source: io::Error,
    },
    /// redb reported an error (I/O, a full disk, a damaged file).
    #[error("storage backend: {0}")]
    Backend(#[from] redb::Error),
}

impl StorageError {
    /// The error for `path`, made from what the file system said.
    pub(super) fn file(path: &Path) -> impl FnOnce(io::Error) -> StorageError + '_ {
        move |source| StorageError::File {
            path: path.to_owned(),
            source,
        }
    }
}

/// Converts each redb error type into [`StorageError::Backend`].
macro_rules! from_redb {
    ($($error:ty),*) => {$(
        impl From<$error> for StorageError {
            fn from(error: $error) -> Self {
                StorageError::Backend(error.into())
            }
        }
    )*};
}

from_redb!(
    redb::DatabaseError,
    redb::TransactionError,
    redb::TableError,
    redb::CommitError,
    redb::SetDurabilityError,
    redb::CompactionError,
    redb::StorageError
);
