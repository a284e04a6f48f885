//! The results of recently applied client requests, so that a request proposed twice
//! (a forwarded write retried after its connection broke, although the first proposal
//! got into the log) changes the store once and answers the same both times.
//!
//! Owns the `recent_requests` and `recent_by_entry` tables (see [`super::tables`]).
//! Results are opaque bytes of the replication layer; the store only keeps them,
//! recalls them by request id and forgets the oldest by log index, all inside the
//! caller's [`WriteBatch`], so they commit with the writes they account for. One log
//! entry applies many requests (group commit), so `recent_by_entry` lists every
//! request under its (log index, request id), and forgetting an index forgets all of
//! them. [`upgrade_entry_list`] replaces the `recent_by_index` table of earlier
//! releases (one request per index: the others of an entry were never forgotten) on
//! open.

use redb::{ReadableTable, TableHandle, WriteTransaction};

use super::batch::WriteBatch;
use super::error::StorageError;
use super::open_batch::OpenBatch;
use super::read::ReadSnapshot;
use super::tables::{RECENT_BY_ENTRY, RECENT_BY_INDEX_BEFORE_ENTRIES, RECENT_REQUESTS};
use crate::values::DecodeError;

/// Octets of the log index at the head of a `recent_requests` value.
const INDEX_LEN: usize = 8;

impl OpenBatch<'_> {
    /// The result recorded for request `request`, if it was applied and not yet
    /// forgotten.
    pub fn recall_result(&mut self, request: u64) -> Result<Option<Vec<u8>>, StorageError> {
        recall_in(self.recent_requests()?, request)
    }

    /// Records that request `request` was applied at log `index` with `result`.
    pub fn remember_result(
        &mut self,
        request: u64,
        index: u64,
        result: &[u8],
    ) -> Result<(), StorageError> {
        let mut value = index.to_be_bytes().to_vec();
        value.extend_from_slice(result);
        let (by_entry, requests) = self.recent_tables()?;
        requests.insert(request, value.as_slice())?;
        by_entry.insert((index, request), ())?;
        Ok(())
    }

    /// Forgets every request applied before log `index`.
    pub fn forget_results_before(&mut self, index: u64) -> Result<(), StorageError> {
        let (by_entry, requests) = self.recent_tables()?;
        let old = by_entry.extract_from_if(..(index, 0), |_, _| true)?;
        for entry in old {
            let (key, _) = entry?;
            let (_index, request) = key.value();
            requests.remove(request)?;
        }
        Ok(())
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

/// Opens the `recent_by_entry` table; in a file of an earlier release, which has a
/// `recent_by_index` table instead, builds it from `recent_requests` (each value
/// starts with its log index, so every request remembered is listed, also those
/// `recent_by_index` had lost) and deletes the old table, in `txn`.
pub(super) fn upgrade_entry_list(txn: &WriteTransaction) -> Result<(), StorageError> {
    let earlier = txn
        .list_tables()?
        .any(|table| table.name() == RECENT_BY_INDEX_BEFORE_ENTRIES.name());
    if !earlier {
        txn.open_table(RECENT_BY_ENTRY)?;
        return Ok(());
    }
    txn.delete_table(RECENT_BY_ENTRY)?;
    let mut by_entry = txn.open_table(RECENT_BY_ENTRY)?;
    let requests = txn.open_table(RECENT_REQUESTS)?;
    for entry in requests.iter()? {
        let (request, value) = entry?;
        let (request, value) = (request.value(), value.value());
        let (index, _result) = split_value(value).ok_or_else(|| corrupt_request(request, value))?;
        by_entry.insert((index, request), ())?;
    }
    txn.delete_table(RECENT_BY_INDEX_BEFORE_ENTRIES)?;
    Ok(())
}

impl ReadSnapshot {
    /// The result recorded for request `request`, as [`WriteBatch::recall_result`]
    /// finds it, in this snapshot.
    pub fn recall_result(&self, request: u64) -> Result<Option<Vec<u8>>, StorageError> {
        recall_in(&self.txn().open_table(RECENT_REQUESTS)?, request)
    }
}

/// The result recorded in `table` (a `recent_requests` table) for `request`.
fn recall_in(
    table: &impl ReadableTable<u64, &'static [u8]>,
    request: u64,
) -> Result<Option<Vec<u8>>, StorageError> {
    let found = table.get(request)?;
    Ok(found.and_then(|value| value.value().get(INDEX_LEN..).map(<[u8]>::to_vec)))
}

/// Splits a `recent_requests` value into its log index and result.
pub(super) fn split_value(value: &[u8]) -> Option<(u64, &[u8])> {
    let (index, result) = value.split_first_chunk::<INDEX_LEN>()?;
    Some((u64::from_be_bytes(*index), result))
}

/// The error for a `recent_requests` value too short to hold its log index.
pub(super) fn corrupt_request(request: u64, value: &[u8]) -> StorageError {
    StorageError::Corrupt {
        key: format!("recent request {request}"),
        source: DecodeError::Truncated {
            field: "log index",
            offset: 0,
            needed: INDEX_LEN.saturating_sub(value.len()),
        },
    }
}

#[cfg(test)]
mod tests {
    use redb::{Database, ReadableDatabase, TableHandle};

    use super::super::Store;
    use super::super::tables::{
        FORMAT_VERSION, FORMAT_VERSION_KEY, META, RECENT_BY_INDEX_BEFORE_ENTRIES, RECENT_REQUESTS,
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

    /// Writes a store as earlier releases did: `recent_by_index` keeps the last
    /// request of each index, so requests 7 and 3 (index 10) are listed nowhere.
    fn write_earlier_layout(path: &std::path::Path) {
        let db = Database::create(path).unwrap();
        let txn = db.begin_write().unwrap();
        txn.open_table(META)
            .unwrap()
            .insert(FORMAT_VERSION_KEY, FORMAT_VERSION)
            .unwrap();
        {
            let mut requests = txn.open_table(RECENT_REQUESTS).unwrap();
            let mut by_index = txn.open_table(RECENT_BY_INDEX_BEFORE_ENTRIES).unwrap();
            for (request, index) in [(7u64, 10u64), (3, 10), (9, 10), (4, 11)] {
                let mut value = index.to_be_bytes().to_vec();
                value.extend_from_slice(b"done");
                requests.insert(request, value.as_slice()).unwrap();
                by_index.insert(index, request).unwrap();
            }
        }
        txn.commit().unwrap();
    }

    #[test]
    fn the_earlier_layout_is_upgraded_on_open_and_its_leaked_results_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.redb");
        write_earlier_layout(&path);
        {
            let store = Store::open(&path).unwrap();
            let read = store.read().unwrap();
            for request in [7, 3, 9, 4] {
                assert!(read.recall_result(request).unwrap().is_some(), "{request}");
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
            assert!(names.contains(&"recent_by_entry".to_owned()), "{names:?}");
            assert!(!names.contains(&"recent_by_index".to_owned()), "{names:?}");
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
