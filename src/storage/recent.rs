//! The results of recently applied client requests, so that a request proposed twice
//! (a forwarded write retried after its connection broke, although the first proposal
//! got into the log) changes the store once and answers the same both times.
//!
//! Owns the `recent_results` table (see [`super::tables`]) and [`RecentIndex`].
//! Results are opaque bytes of the replication layer; the store only keeps them,
//! recalls them by request id and forgets the oldest by log index, all inside the
//! caller's [`WriteBatch`], so they commit with the writes they account for.
//!
//! The table is keyed by (log index, request id), so the results a batch remembers
//! go to the table's end, one leaf after another, and forgetting the oldest is a range
//! at its start. Request ids are digests: keyed by them, as earlier releases did, every
//! result took a leaf of its own (a page copied, checksummed and written for each
//! write applied, on every member, costlier the larger the table). Recalling by id
//! needs the log index that holds it: [`RecentIndex`] keeps that, for every row, in
//! memory. It is read from the table when the store opens, and changed only by a
//! commit, with the changes the batch made ([`RecentChanges`]), once the commit has
//! succeeded and in the order the commits ran; so the state machine, which applies
//! one batch after another, finds in it what the committed table holds, and every
//! replica, which holds the same table, decides alike. A batch sees its own changes
//! over it.
//! [`upgrade_results`] moves the tables of earlier releases into `recent_results` on
//! open.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use redb::{ReadableTable, ReadableTableMetadata, TableHandle, WriteTransaction};

use super::batch::WriteBatch;
use super::error::StorageError;
use super::open_batch::OpenBatch;
use super::read::ReadSnapshot;
use super::tables::{
    RECENT_BY_ENTRY_BEFORE_RESULTS, RECENT_BY_INDEX_BEFORE_ENTRIES, RECENT_REQUESTS_BEFORE_RESULTS,
    RECENT_RESULTS,
};
use crate::values::DecodeError;

/// Octets of the log index at the head of a `recent_requests` value (earlier releases).
const INDEX_LEN: usize = 8;

/// The log index under which each remembered request's result is, as committed: the
/// keys of the `recent_results` table, by request id.
#[derive(Default)]
pub(super) struct RecentIndex {
    indexes: Mutex<HashMap<u64, u64>>,
    /// Held by a batch from its commit until the index says what it changed, so the
    /// changes of commits reach the index in the order the commits ran.
    in_order: Mutex<()>,
}

impl std::fmt::Debug for RecentIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecentIndex")
            .field("requests", &self.indexes().len())
            .finish()
    }
}

impl RecentIndex {
    fn indexes(&self) -> MutexGuard<'_, HashMap<u64, u64>> {
        self.indexes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Replaces what the index holds by the keys of the `recent_results` table of
    /// `txn` (when the store opens).
    pub(super) fn load(&self, txn: &WriteTransaction) -> Result<(), StorageError> {
        let table = txn.open_table(RECENT_RESULTS)?;
        let mut indexes = HashMap::with_capacity(usize::try_from(table.len()?).unwrap_or(0));
        for entry in table.iter()? {
            let (index, request) = entry?.0.value();
            indexes.insert(request, index);
        }
        *self.indexes() = indexes;
        Ok(())
    }

    /// The log index holding `request`'s result, as committed.
    fn index_of(&self, request: u64) -> Option<u64> {
        self.indexes().get(&request).copied()
    }

    /// Runs `commit` and, when it succeeds, makes the index say what `changes` made
    /// of the table. A reader does not wait for the commit: one that reads the index
    /// just before it takes the changes may miss a result the committed table holds,
    /// and answer that the request was not applied, as a read a moment earlier would
    /// have (the state machine, which applies one batch after another, finds it). It
    /// never finds the index naming a row of an uncommitted batch.
    pub(super) fn around<T, E>(
        &self,
        changes: RecentChanges,
        commit: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E> {
        let _in_order = self.in_order.lock().unwrap_or_else(PoisonError::into_inner);
        let committed = commit()?;
        let mut indexes = self.indexes();
        if changes.cleared {
            indexes.clear();
        }
        for (request, index) in changes.requests {
            match index {
                Some(index) => indexes.insert(request, index),
                None => indexes.remove(&request),
            };
        }
        Ok(committed)
    }
}

/// What a batch changed in the `recent_results` table, by request id: where a
/// request's result now is (`None`: forgotten), and whether the batch emptied the
/// table first.
#[derive(Debug, Default)]
pub(super) struct RecentChanges {
    cleared: bool,
    requests: HashMap<u64, Option<u64>>,
}

impl RecentChanges {
    /// The log index holding `request`'s result as the batch sees it: its own change,
    /// else the committed one (`committed`) unless it emptied the table.
    fn index_of(&self, request: u64, committed: &RecentIndex) -> Option<u64> {
        match self.requests.get(&request) {
            Some(index) => *index,
            None if self.cleared => None,
            None => committed.index_of(request),
        }
    }

    /// Notes that the batch emptied the table.
    pub(super) fn clear(&mut self) {
        self.cleared = true;
        self.requests.clear();
    }
}

impl OpenBatch<'_> {
    /// The result recorded for request `request`, if it was applied and not yet
    /// forgotten.
    pub fn recall_result(&mut self, request: u64) -> Result<Option<Vec<u8>>, StorageError> {
        let Some(index) = self.index_of(request) else {
            return Ok(None);
        };
        let found = self.recent_results()?.get((index, request))?;
        let result = found.ok_or_else(|| missing_result(request, index))?;
        Ok(Some(result.value().to_vec()))
    }

    /// Records that request `request` was applied at log `index` with `result` (in
    /// place of what was recorded for it before).
    pub fn remember_result(
        &mut self,
        request: u64,
        index: u64,
        result: &[u8],
    ) -> Result<(), StorageError> {
        let batch = self.write_batch();
        let earlier = self.index_of(request);
        let table = self.recent_results()?;
        if let Some(earlier) = earlier.filter(|&earlier| earlier != index) {
            table.remove((earlier, request))?;
        }
        table.insert((index, request), result)?;
        batch.recent_changes().requests.insert(request, Some(index));
        Ok(())
    }

    /// Forgets every request applied before log `index`.
    pub fn forget_results_before(&mut self, index: u64) -> Result<(), StorageError> {
        let batch = self.write_batch();
        let old = self
            .recent_results()?
            .extract_from_if(..(index, 0), |_, _| true)?;
        let mut changes = batch.recent_changes();
        for entry in old {
            let (_index, request) = entry?.0.value();
            changes.requests.insert(request, None);
        }
        Ok(())
    }

    fn index_of(&self, request: u64) -> Option<u64> {
        let batch = self.write_batch();
        batch
            .recent_changes()
            .index_of(request, batch.recent_index())
    }
}

impl WriteBatch {
    /// [`OpenBatch::recall_result`].
    pub fn recall_result(&self, request: u64) -> Result<Option<Vec<u8>>, StorageError> {
        self.open().recall_result(request)
    }

    /// [`OpenBatch::remember_result`].
    pub fn remember_result(
        &mut self,
        request: u64,
        index: u64,
        result: &[u8],
    ) -> Result<(), StorageError> {
        self.open().remember_result(request, index, result)
    }

    /// [`OpenBatch::forget_results_before`].
    pub fn forget_results_before(&mut self, index: u64) -> Result<(), StorageError> {
        self.open().forget_results_before(index)
    }
}

/// Makes the `recent_results` table in `txn`; in a file of an earlier release, which
/// keeps results by request id in `recent_requests` (each value starts with its log
/// index), moves every one of them into it (also those its lists had lost) and
/// deletes the earlier tables.
pub(super) fn upgrade_results(txn: &WriteTransaction) -> Result<(), StorageError> {
    let mut results = txn.open_table(RECENT_RESULTS)?;
    let names: Vec<String> = txn
        .list_tables()?
        .map(|table| table.name().to_owned())
        .collect();
    let earlier = |table: &str| names.iter().any(|name| name == table);
    if earlier(RECENT_REQUESTS_BEFORE_RESULTS.name()) {
        let requests = txn.open_table(RECENT_REQUESTS_BEFORE_RESULTS)?;
        for entry in requests.iter()? {
            let (request, value) = entry?;
            let (request, value) = (request.value(), value.value());
            let (index, result) =
                split_value(value).ok_or_else(|| corrupt_request(request, value))?;
            results.insert((index, request), result)?;
        }
        drop(requests);
        txn.delete_table(RECENT_REQUESTS_BEFORE_RESULTS)?;
    }
    if earlier(RECENT_BY_ENTRY_BEFORE_RESULTS.name()) {
        txn.delete_table(RECENT_BY_ENTRY_BEFORE_RESULTS)?;
    }
    if earlier(RECENT_BY_INDEX_BEFORE_ENTRIES.name()) {
        txn.delete_table(RECENT_BY_INDEX_BEFORE_ENTRIES)?;
    }
    Ok(())
}

impl ReadSnapshot {
    /// The result recorded for request `request`, as [`WriteBatch::recall_result`]
    /// finds it, in this snapshot. Which log index holds it is asked of the store's
    /// [`RecentIndex`] as committed now: a request remembered after this snapshot was
    /// taken is not in it, and one forgotten since is no longer found.
    pub fn recall_result(&self, request: u64) -> Result<Option<Vec<u8>>, StorageError> {
        let Some(index) = self.recent_index().index_of(request) else {
            return Ok(None);
        };
        let table = self.txn().open_table(RECENT_RESULTS)?;
        Ok(table
            .get((index, request))?
            .map(|found| found.value().to_vec()))
    }
}

/// Splits a `recent_requests` value of an earlier release into its log index and
/// result.
fn split_value(value: &[u8]) -> Option<(u64, &[u8])> {
    let (index, result) = value.split_first_chunk::<INDEX_LEN>()?;
    Some((u64::from_be_bytes(*index), result))
}

/// The error for a `recent_requests` value too short to hold its log index.
fn corrupt_request(request: u64, value: &[u8]) -> StorageError {
    StorageError::Corrupt {
        key: format!("recent request {request}"),
        source: DecodeError::Truncated {
            field: "log index",
            offset: 0,
            needed: INDEX_LEN.saturating_sub(value.len()),
        },
    }
}

/// The error for a request the index places at log `index` whose row is not in the
/// table.
fn missing_result(request: u64, index: u64) -> StorageError {
    StorageError::Unindexed {
        key: format!("recent result ({index}, {request})"),
    }
}

#[cfg(test)]
mod tests {
    use redb::{Database, ReadableDatabase, TableHandle};

    use super::super::Store;
    use super::super::tables::{
        FORMAT_VERSION, FORMAT_VERSION_KEY, META, RECENT_BY_ENTRY_BEFORE_RESULTS,
        RECENT_BY_INDEX_BEFORE_ENTRIES, RECENT_REQUESTS_BEFORE_RESULTS,
    };

    #[test]
    fn every_request_of_an_entry_is_forgotten_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.redb")).unwrap();
        let mut batch = store.write().unwrap();
        for request in [7, 3, 9] {
            batch.remember_result(request, 10, b"done").unwrap();
        }
        batch.remember_result(4, 11, b"later").unwrap();
        batch.forget_results_before(10).unwrap();
        for request in [7, 3, 9, 4] {
            assert!(batch.recall_result(request).unwrap().is_some(), "{request}");
        }
        batch.forget_results_before(11).unwrap();
        for request in [7, 3, 9] {
            assert_eq!(batch.recall_result(request).unwrap(), None, "{request}");
        }
        assert_eq!(batch.recall_result(4).unwrap(), Some(b"later".to_vec()));
    }

    /// Writes a store as earlier releases did: results by request id, listed by
    /// (index, request) in `recent_by_entry`, or, before that, by index in
    /// `recent_by_index`, which keeps the last request of each index, so requests 7 and
    /// 3 (index 10) are listed nowhere.
    fn write_earlier_layout(path: &std::path::Path, by_entry: bool) {
        let db = Database::create(path).unwrap();
        let txn = db.begin_write().unwrap();
        txn.open_table(META)
            .unwrap()
            .insert(FORMAT_VERSION_KEY, FORMAT_VERSION)
            .unwrap();
        {
            let mut requests = txn.open_table(RECENT_REQUESTS_BEFORE_RESULTS).unwrap();
            let mut by_entry_table = txn.open_table(RECENT_BY_ENTRY_BEFORE_RESULTS).unwrap();
            let mut by_index = txn.open_table(RECENT_BY_INDEX_BEFORE_ENTRIES).unwrap();
            for (request, index) in [(7u64, 10u64), (3, 10), (9, 10), (4, 11)] {
                let mut value = index.to_be_bytes().to_vec();
                value.extend_from_slice(b"done");
                requests.insert(request, value.as_slice()).unwrap();
                if by_entry {
                    by_entry_table.insert((index, request), ()).unwrap();
                } else {
                    by_index.insert(index, request).unwrap();
                }
            }
        }
        txn.commit().unwrap();
    }

    #[test]
    fn the_earlier_layouts_are_upgraded_on_open_and_their_leaked_results_forgotten() {
        for by_entry in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("s.redb");
            write_earlier_layout(&path, by_entry);
            {
                let store = Store::open(&path).unwrap();
                let read = store.read().unwrap();
                for request in [7, 3, 9, 4] {
                    assert_eq!(
                        read.recall_result(request).unwrap(),
                        Some(b"done".to_vec()),
                        "{request}"
                    );
                }
            }
            {
                let db = Database::open(&path).unwrap();
                let names: Vec<String> = db
                    .begin_read()
                    .unwrap()
                    .list_tables()
                    .unwrap()
                    .map(|table| table.name().to_owned())
                    .collect();
                assert!(names.contains(&"recent_results".to_owned()), "{names:?}");
                for earlier in ["recent_requests", "recent_by_entry", "recent_by_index"] {
                    assert!(!names.contains(&earlier.to_owned()), "{names:?}");
                }
            }
            let store = Store::open(&path).unwrap();
            let mut batch = store.write().unwrap();
            batch.forget_results_before(11).unwrap();
            for request in [7, 3, 9] {
                assert_eq!(batch.recall_result(request).unwrap(), None, "{request}");
            }
            assert!(batch.recall_result(4).unwrap().is_some());
            batch.commit().unwrap();
        }
    }

    /// A new store in `dir` that has committed request 7's `result` at log index 10.
    fn store_remembering_seven(dir: &std::path::Path, result: &[u8]) -> Store {
        let store = Store::open(&dir.join("s.redb")).unwrap();
        let mut batch = store.write().unwrap();
        batch.remember_result(7, 10, result).unwrap();
        batch.commit().unwrap();
        store
    }

    #[test]
    fn what_a_batch_remembers_or_forgets_counts_only_once_it_commits() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_remembering_seven(dir.path(), b"seven");
        let mut dropped = store.write().unwrap();
        dropped.remember_result(8, 11, b"eight").unwrap();
        dropped.forget_results_before(11).unwrap();
        assert_eq!(dropped.recall_result(7).unwrap(), None);
        assert_eq!(dropped.recall_result(8).unwrap(), Some(b"eight".to_vec()));
        drop(dropped);
        let read = store.read().unwrap();
        assert_eq!(read.recall_result(7).unwrap(), Some(b"seven".to_vec()));
        assert_eq!(read.recall_result(8).unwrap(), None);
        let mut aborted = store.write().unwrap();
        aborted.forget_results_before(11).unwrap();
        aborted.abort().unwrap();
        let batch = store.write().unwrap();
        assert_eq!(batch.recall_result(7).unwrap(), Some(b"seven".to_vec()));
    }

    #[test]
    fn a_request_remembered_again_is_recalled_from_its_last_entry_only() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_remembering_seven(dir.path(), b"first");
        let mut batch = store.write().unwrap();
        batch.remember_result(7, 12, b"again").unwrap();
        batch.forget_results_before(11).unwrap();
        assert_eq!(batch.recall_result(7).unwrap(), Some(b"again".to_vec()));
        batch.commit().unwrap();
        let mut image = Vec::new();
        store
            .read()
            .unwrap()
            .export(|record| {
                image.push(record);
                Ok::<_, super::StorageError>(())
            })
            .unwrap();
        let recent: Vec<_> = image
            .into_iter()
            .filter_map(|record| match record {
                super::super::ImageRecord::Recent(recent) => Some((recent.index, recent.request)),
                _ => None,
            })
            .collect();
        assert_eq!(recent, [(12, 7)]);
    }

    #[test]
    fn results_are_recalled_until_forgotten_and_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.redb");
        {
            let store = Store::open(&path).unwrap();
            let mut batch = store.write().unwrap();
            batch.remember_result(7, 10, b"seven").unwrap();
            batch.remember_result(8, 11, b"eight").unwrap();
            assert_eq!(batch.recall_result(7).unwrap(), Some(b"seven".to_vec()));
            assert_eq!(batch.recall_result(9).unwrap(), None);
            batch.commit().unwrap();
        }
        let store = Store::open(&path).unwrap();
        let mut batch = store.write().unwrap();
        assert_eq!(batch.recall_result(8).unwrap(), Some(b"eight".to_vec()));
        batch.forget_results_before(11).unwrap();
        assert_eq!(batch.recall_result(7).unwrap(), None);
        assert_eq!(batch.recall_result(8).unwrap(), Some(b"eight".to_vec()));
        batch.commit().unwrap();
        let read = store.read().unwrap();
        assert_eq!(read.recall_result(8).unwrap(), Some(b"eight".to_vec()));
        assert_eq!(read.recall_result(7).unwrap(), None);
    }
}
