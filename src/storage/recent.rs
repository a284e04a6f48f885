//! The results of recently applied client requests, so that a request proposed twice
//! (a forwarded write retried after its connection broke, although the first proposal
//! got into the log) changes the store once and answers the same both times.
//!
//! Owns the `recent_requests` and `recent_by_index` tables (see [`super::tables`]).
//! Results are opaque bytes of the replication layer; the store only keeps them,
//! recalls them by request id and forgets the oldest by log index, all inside the
//! caller's [`WriteBatch`], so they commit with the writes they account for.

use redb::ReadableTable;

use super::batch::WriteBatch;
use super::error::StorageError;
use super::read::ReadSnapshot;
use super::tables::{RECENT_BY_INDEX, RECENT_REQUESTS};

/// Octets of the log index at the head of a `recent_requests` value.
const INDEX_LEN: usize = 8;

impl WriteBatch {
    /// The result recorded for request `request`, if it was applied and not yet
    /// forgotten.
    pub fn recall_result(&self, request: u64) -> Result<Option<Vec<u8>>, StorageError> {
        recall_in(&self.txn().open_table(RECENT_REQUESTS)?, request)
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
        self.txn()
            .open_table(RECENT_REQUESTS)?
            .insert(request, value.as_slice())?;
        self.txn()
            .open_table(RECENT_BY_INDEX)?
            .insert(index, request)?;
        Ok(())
    }

    /// Forgets every request applied before log `index`.
    pub fn forget_results_before(&mut self, index: u64) -> Result<(), StorageError> {
        let mut by_index = self.txn().open_table(RECENT_BY_INDEX)?;
        let mut requests = self.txn().open_table(RECENT_REQUESTS)?;
        let old = by_index.extract_from_if(..index, |_, _| true)?;
        for entry in old {
            let (_index, request) = entry?;
            requests.remove(request.value())?;
        }
        Ok(())
    }
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

#[cfg(test)]
mod tests {
    use super::super::Store;

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
