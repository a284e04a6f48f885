//! Converting the log an earlier release kept in redb (`raft-log.redb`, log format
//! version 2) into segments, once, when the log opens.
//!
//! The conversion writes a whole new log in `raft-log.upgrading/`, syncs it, renames
//! it to `raft-log/`, then removes the redb file. A crash at any point leaves either
//! the redb file alone (a half-written `raft-log.upgrading/` is removed and the
//! conversion starts over) or both, the new log whole (the redb file is removed).
//! Owns the earlier file's table definitions; nothing else reads them.

use std::fs;
use std::path::Path;

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};

use super::{EntryLog, LOG_DIR, LOG_FORMAT_VERSION};
use crate::storage::tables::{FORMAT_VERSION_KEY, META};
use crate::storage::{StorageError, sync_dir};

/// The file an earlier release kept the log in, inside a group's data directory.
pub const EARLIER_LOG_FILE: &str = "raft-log.redb";

/// The directory a conversion writes the new log in before it is whole.
const UPGRADING_DIR: &str = "raft-log.upgrading";

/// The last log format version kept in redb; earlier ones are refused.
const EARLIER_FORMAT_VERSION: u64 = 2;

/// Entries by log index.
pub(super) const RAFT_LOG: TableDefinition<u64, &[u8]> = TableDefinition::new("raft_log");
/// Positions by name.
pub(super) const RAFT_META: TableDefinition<&str, &[u8]> = TableDefinition::new("raft_meta");
const VOTE_KEY: &str = "vote";
const COMMITTED_KEY: &str = "committed";
const LAST_PURGED_KEY: &str = "last_purged";

/// Octets of entries written to the new log at a time (one fsync each).
const BATCH_OCTETS: usize = 8 << 20;

/// Converts the earlier log in `data_dir`, if there is one, into [`LOG_DIR`].
pub fn upgrade(data_dir: &Path) -> Result<(), StorageError> {
    let earlier = data_dir.join(EARLIER_LOG_FILE);
    if !earlier.exists() {
        return Ok(());
    }
    let upgrading = data_dir.join(UPGRADING_DIR);
    if !data_dir.join(LOG_DIR).exists() {
        if upgrading.exists() {
            fs::remove_dir_all(&upgrading).map_err(StorageError::file(&upgrading))?;
        }
        let entries = convert(&earlier, &upgrading)?;
        fs::rename(&upgrading, data_dir.join(LOG_DIR)).map_err(StorageError::file(&upgrading))?;
        sync_dir(data_dir).map_err(StorageError::file(data_dir))?;
        tracing::info!(entries, from = %earlier.display(), "converted the log to log format version {LOG_FORMAT_VERSION}");
    }
    fs::remove_file(&earlier).map_err(StorageError::file(&earlier))?;
    sync_dir(data_dir).map_err(StorageError::file(data_dir))
}

/// Writes the log of the redb file `earlier` as a new log in `dir`; the entries it
/// held.
fn convert(earlier: &Path, dir: &Path) -> Result<u64, StorageError> {
    let db = Database::open(earlier)?;
    let txn = db.begin_read()?;
    let found = txn
        .open_table(META)?
        .get(FORMAT_VERSION_KEY)?
        .map(|v| v.value());
    if found != Some(EARLIER_FORMAT_VERSION) {
        return Err(StorageError::FormatVersion {
            found: found.unwrap_or(0),
            expected: LOG_FORMAT_VERSION,
        });
    }
    let meta = txn.open_table(RAFT_META)?;
    let position = |key: &str| -> Result<Option<Vec<u8>>, StorageError> {
        Ok(meta.get(key)?.map(|bytes| bytes.value().to_vec()))
    };
    let log = EntryLog::open(dir)?;
    if let Some(vote) = position(VOTE_KEY)? {
        log.save_vote(&vote)?;
    }
    let entries = txn.open_table(RAFT_LOG)?;
    let first = entries.first()?.map(|(index, _)| index.value());
    if let Some(purged) = position(LAST_PURGED_KEY)? {
        // The purged index itself is not stored beside its description; the first
        // entry kept says where the purge stopped, and with no entry kept the
        // openraft position is all the log needs.
        let upto = first.map_or(0, |first| first.saturating_sub(1));
        log.purge_upto(upto, &purged)?;
    }
    let mut committed = position(COMMITTED_KEY)?;
    let mut batch: Vec<(u64, Vec<u8>)> = Vec::new();
    let (mut octets, mut count) = (0_usize, 0_u64);
    for entry in entries.iter()? {
        let (index, bytes) = entry?;
        octets += bytes.value().len();
        batch.push((index.value(), bytes.value().to_vec()));
        count += 1;
        if octets >= BATCH_OCTETS {
            log.append(batch.drain(..), committed.take().as_deref())?;
            octets = 0;
        }
    }
    log.append(batch, committed.as_deref())?;
    Ok(count)
}
