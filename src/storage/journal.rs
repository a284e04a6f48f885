//! The journal of a slot being exported: the handles changed since its export began,
//! in the order their changes were applied, so the set it moves to can catch up.
//!
//! Owns the `slot_journal` table: `(slot u32, sequence u64) → folded handle key`. The
//! replicated state machine appends to it while a slot is exporting and clears it when
//! the move ends; it travels in snapshots like every replicated table.

use redb::ReadableTable;

use super::batch::WriteBatch;
use super::error::StorageError;
use super::read::{ReadSnapshot, spelled_handle, stored_key};
use super::slots::Slot;
use super::tables::{HANDLES, SLOT_JOURNAL};

/// One journal entry: the sequence number of a change and the handle it changed.
pub type JournalEntry = (u64, String);

/// A journal entry with the changed handle's current record bytes: `None` when the
/// handle is gone.
pub type JournalRecord = (u64, String, Option<Vec<u8>>);

impl WriteBatch {
    /// Records that the handle with folded key `key`, of `slot`, changed.
    pub fn journal_change(&self, slot: Slot, key: &str) -> Result<(), StorageError> {
        let mut table = self.txn().open_table(SLOT_JOURNAL)?;
        let last = table
            .range((slot.0, 0)..=(slot.0, u64::MAX))?
            .next_back()
            .transpose()?
            .map(|(key, _)| key.value().1);
        let next = last.map_or(0, |last| last.saturating_add(1));
        table.insert((slot.0, next), key.as_bytes())?;
        Ok(())
    }

    /// Forgets the journal of `slot`.
    pub fn clear_journal(&self, slot: Slot) -> Result<(), StorageError> {
        let mut table = self.txn().open_table(SLOT_JOURNAL)?;
        let removed = table.extract_from_if((slot.0, 0)..=(slot.0, u64::MAX), |_, _| true)?;
        for entry in removed {
            entry?;
        }
        Ok(())
    }
}

impl ReadSnapshot {
    /// Up to `limit` journal entries of `slot` after sequence number `after` (from the
    /// first when `None`), in order.
    pub fn journal_page(
        &self,
        slot: Slot,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<JournalEntry>, StorageError> {
        let table = self.txn().open_table(SLOT_JOURNAL)?;
        let start = match after {
            Some(after) if after == u64::MAX => return Ok(Vec::new()),
            Some(after) => after + 1,
            None => 0,
        };
        let mut entries = Vec::new();
        for entry in table
            .range((slot.0, start)..=(slot.0, u64::MAX))?
            .take(limit)
        {
            let (key, handle) = entry?;
            entries.push((key.value().1, stored_key(handle.value())?.to_owned()));
        }
        Ok(entries)
    }

    /// [`ReadSnapshot::journal_page`] with each changed handle's current record, read
    /// in the same snapshot: what the set a slot moves to replays.
    pub fn journal_records(
        &self,
        slot: Slot,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<JournalRecord>, StorageError> {
        let handles = self.txn().open_table(HANDLES)?;
        let mut records = Vec::new();
        for (sequence, key) in self.journal_page(slot, after, limit)? {
            let record = handles
                .get(key.as_bytes())?
                .map(|bytes| spelled_handle(&key, bytes.value()))
                .transpose()?;
            records.push((sequence, key, record));
        }
        Ok(records)
    }
}

#[cfg(test)]
mod tests {
    use super::super::Store;
    use super::*;

    #[test]
    fn a_slot_journal_keeps_order_pages_and_clears_alone() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.redb")).unwrap();
        let batch = store.write().unwrap();
        for key in ["A/1", "A/2", "A/1"] {
            batch.journal_change(Slot(3), key).unwrap();
        }
        batch.journal_change(Slot(4), "B/1").unwrap();
        batch.commit().unwrap();
        let read = store.read().unwrap();
        let all = read.journal_page(Slot(3), None, 10).unwrap();
        assert_eq!(
            all,
            [
                (0, "A/1".to_owned()),
                (1, "A/2".to_owned()),
                (2, "A/1".to_owned())
            ]
        );
        assert_eq!(
            read.journal_page(Slot(3), Some(0), 1).unwrap(),
            [(1, "A/2".to_owned())]
        );
        assert!(read.journal_page(Slot(3), Some(2), 10).unwrap().is_empty());
        drop(read);
        let batch = store.write().unwrap();
        batch.clear_journal(Slot(3)).unwrap();
        batch.commit().unwrap();
        let read = store.read().unwrap();
        assert!(read.journal_page(Slot(3), None, 10).unwrap().is_empty());
        assert_eq!(read.journal_page(Slot(4), None, 10).unwrap().len(), 1);
    }
}
