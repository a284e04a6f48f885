//! The replicated log on disk: opaque entries by `u64` index, and a few opaque records
//! beside them (the vote, the committed and the last purged log positions).
//!
//! The log is a redb file of its own (`raft-log.redb`), not tables in the handle store.
//! redb runs one write transaction at a time per file, and a replica appends to its log
//! (leader and followers) while it applies older entries to its handles: in one file the
//! two fsync streams would queue behind each other. Nothing needs them to commit
//! together: the applied state that must be atomic with the handle writes lives in the
//! handle store ([`super::WriteBatch::set_applied_state`]), and the replication layer
//! reconciles a log that is behind or ahead of the applied state on start.
//!
//! Every write is one transaction. Appends, truncation, purge and the vote are durable
//! (fsync) when the call returns; the committed position has no transaction of its
//! own: it rides along with an append (losing the newest one in a crash only means
//! entries are applied again from the log).

use std::ops::RangeBounds;
use std::path::Path;

use redb::{Database, ReadableDatabase, ReadableTable, WriteTransaction};

use super::error::StorageError;
use super::{check_format_version, tables};

/// One log entry as stored: its index and its opaque bytes.
pub type LogRecord = (u64, Vec<u8>);

/// The replicated log of one node, in its own redb file.
#[derive(Debug)]
pub struct EntryLog {
    db: Database,
}

impl EntryLog {
    /// Opens the log at `path` with the default log cache
    /// ([`EntryLog::open_with_cache`]).
    pub fn open(path: &Path) -> Result<EntryLog, StorageError> {
        EntryLog::open_with_cache(path, super::CacheSizes::default().log)
    }

    /// Opens the log at `path`, creating it when it does not exist, with a page cache
    /// of `cache` octets, and checks the log format version recorded in it.
    pub fn open_with_cache(path: &Path, cache: usize) -> Result<EntryLog, StorageError> {
        let db = redb::Builder::new().set_cache_size(cache).create(path)?;
        let txn = db.begin_write()?;
        check_format_version(&txn, tables::LOG_FORMAT_VERSION)?;
        txn.open_table(tables::RAFT_LOG)?;
        txn.open_table(tables::RAFT_META)?;
        txn.commit()?;
        Ok(EntryLog { db })
    }

    /// Writes `entries` (index, bytes) in one transaction, replacing any entry with the
    /// same index, and returns once they are durable: many entries share one fsync.
    /// `committed`, when given, is recorded as the committed position in the same
    /// transaction.
    pub fn append<B: AsRef<[u8]>>(
        &self,
        entries: impl IntoIterator<Item = (u64, B)>,
        committed: Option<&[u8]>,
    ) -> Result<(), StorageError> {
        let txn = self.db.begin_write()?;
        {
            let mut log = txn.open_table(tables::RAFT_LOG)?;
            for (index, bytes) in entries {
                log.insert(index, bytes.as_ref())?;
            }
        }
        if let Some(committed) = committed {
            txn.open_table(tables::RAFT_META)?
                .insert(tables::COMMITTED_KEY, committed)?;
        }
        txn.commit()?;
        Ok(())
    }

    /// The entries whose indexes fall in `range`, in index order.
    pub fn read_range(&self, range: impl RangeBounds<u64>) -> Result<Vec<LogRecord>, StorageError> {
        self.read_range_within(range, usize::MAX)
    }

    /// The first entries whose indexes fall in `range`, in index order, as many as fit
    /// in `octets` of entry bytes; the first is read whatever its size, so a range that
    /// holds entries never reads as empty.
    pub fn read_range_within(
        &self,
        range: impl RangeBounds<u64>,
        octets: usize,
    ) -> Result<Vec<LogRecord>, StorageError> {
        let txn = self.db.begin_read()?;
        let log = txn.open_table(tables::RAFT_LOG)?;
        let mut records = Vec::new();
        let mut read = 0usize;
        for entry in log.range(range)? {
            let (index, bytes) = entry?;
            let bytes = bytes.value();
            read = read.saturating_add(bytes.len());
            if read > octets && !records.is_empty() {
                break;
            }
            records.push((index.value(), bytes.to_vec()));
        }
        Ok(records)
    }

    /// The entry with the highest index, if the log holds any.
    pub fn last(&self) -> Result<Option<LogRecord>, StorageError> {
        let txn = self.db.begin_read()?;
        let log = txn.open_table(tables::RAFT_LOG)?;
        let last = log.last()?;
        Ok(last.map(|(index, bytes)| (index.value(), bytes.value().to_vec())))
    }

    /// Deletes every entry from `index` on, durably.
    pub fn truncate_from(&self, index: u64) -> Result<(), StorageError> {
        let txn = self.db.begin_write()?;
        txn.open_table(tables::RAFT_LOG)?
            .retain_in(index.., |_, _| false)?;
        txn.commit()?;
        Ok(())
    }

    /// Deletes every entry up to and including `index` and records `last_purged` (the
    /// caller's description of that position) in the same durable transaction.
    pub fn purge_upto(&self, index: u64, last_purged: &[u8]) -> Result<(), StorageError> {
        let txn = self.db.begin_write()?;
        txn.open_table(tables::RAFT_LOG)?
            .retain_in(..=index, |_, _| false)?;
        txn.open_table(tables::RAFT_META)?
            .insert(tables::LAST_PURGED_KEY, last_purged)?;
        txn.commit()?;
        Ok(())
    }

    /// What the last [`EntryLog::purge_upto`] recorded.
    pub fn last_purged(&self) -> Result<Option<Vec<u8>>, StorageError> {
        self.meta(tables::LAST_PURGED_KEY)
    }

    /// Records the vote; it is durable when this returns.
    pub fn save_vote(&self, vote: &[u8]) -> Result<(), StorageError> {
        let txn = self.db.begin_write()?;
        put_meta(txn, tables::VOTE_KEY, vote)
    }

    /// The last vote saved.
    pub fn vote(&self) -> Result<Option<Vec<u8>>, StorageError> {
        self.meta(tables::VOTE_KEY)
    }

    /// The last committed position saved.
    pub fn committed(&self) -> Result<Option<Vec<u8>>, StorageError> {
        self.meta(tables::COMMITTED_KEY)
    }

    fn meta(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        let txn = self.db.begin_read()?;
        let meta = txn.open_table(tables::RAFT_META)?;
        let found = meta.get(key)?;
        Ok(found.map(|bytes| bytes.value().to_vec()))
    }
}

fn put_meta(txn: WriteTransaction, key: &str, bytes: &[u8]) -> Result<(), StorageError> {
    txn.open_table(tables::RAFT_META)?.insert(key, bytes)?;
    txn.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(dir: &tempfile::TempDir) -> EntryLog {
        EntryLog::open(&dir.path().join("raft-log.redb")).unwrap()
    }

    fn indexes(records: &[LogRecord]) -> Vec<u64> {
        records.iter().map(|(index, _)| *index).collect()
    }

    #[test]
    fn appends_read_back_in_order_and_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let log = open(&dir);
        log.append(
            (1..=5_u64).map(|i| (i, vec![u8::try_from(i).unwrap(); 3])),
            None,
        )
        .unwrap();
        log.append([(6_u64, b"six".as_slice())], None).unwrap();
        log.save_vote(b"vote").unwrap();
        drop(log);

        let log = open(&dir);
        assert_eq!(indexes(&log.read_range(2..5).unwrap()), vec![2, 3, 4]);
        assert_eq!(log.read_range(3..=3).unwrap(), vec![(3, vec![3; 3])]);
        assert_eq!(log.last().unwrap(), Some((6, b"six".to_vec())));
        assert_eq!(log.vote().unwrap(), Some(b"vote".to_vec()));
    }

    #[test]
    fn a_read_within_octets_stops_before_the_entry_that_overflows_but_reads_one() {
        let dir = tempfile::tempdir().unwrap();
        let log = open(&dir);
        log.append((1..=5_u64).map(|i| (i, vec![0_u8; 10])), None)
            .unwrap();
        assert_eq!(indexes(&log.read_range_within(.., 25).unwrap()), vec![1, 2]);
        assert_eq!(
            indexes(&log.read_range_within(2.., 30).unwrap()),
            vec![2, 3, 4]
        );
        assert_eq!(indexes(&log.read_range_within(4.., 3).unwrap()), vec![4]);
        assert!(log.read_range_within(6.., 3).unwrap().is_empty());
    }

    #[test]
    fn truncate_and_purge_remove_exactly_their_side() {
        let dir = tempfile::tempdir().unwrap();
        let log = open(&dir);
        log.append((0..10_u64).map(|i| (i, [0_u8])), None).unwrap();
        log.truncate_from(7).unwrap();
        log.purge_upto(2, b"purged at 2").unwrap();
        assert_eq!(indexes(&log.read_range(..).unwrap()), vec![3, 4, 5, 6]);
        assert_eq!(log.last_purged().unwrap(), Some(b"purged at 2".to_vec()));

        log.purge_upto(20, b"purged at 20").unwrap();
        assert_eq!(log.last().unwrap(), None);
    }

    #[test]
    fn committed_is_kept_with_the_append_that_carries_it() {
        let dir = tempfile::tempdir().unwrap();
        let log = open(&dir);
        assert_eq!(log.committed().unwrap(), None);
        log.append([(1_u64, b"one".as_slice())], Some(b"c1"))
            .unwrap();
        log.append([(2_u64, b"two".as_slice())], None).unwrap();
        drop(log);
        assert_eq!(open(&dir).committed().unwrap(), Some(b"c1".to_vec()));
    }

    #[test]
    fn another_log_format_version_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("raft-log.redb");
        drop(EntryLog::open(&path).unwrap());
        let db = Database::create(&path).unwrap();
        let txn = db.begin_write().unwrap();
        txn.open_table(tables::META)
            .unwrap()
            .insert(tables::FORMAT_VERSION_KEY, 99)
            .unwrap();
        txn.commit().unwrap();
        drop(db);
        assert!(matches!(
            EntryLog::open(&path),
            Err(StorageError::FormatVersion { found: 99, .. })
        ));
    }
}
