//! A slot's handles found by scanning every handle (the caller tells which slot a key
//! is in): pages of a slot's records and the removal of a slot's handles.

use redb::ReadableTable;

use super::batch::WriteBatch;
use super::error::StorageError;
use super::read::{ReadSnapshot, decode_handle};
use super::slots::Slot;
use super::tables::HANDLES;
use crate::names::Handle;

/// A handle record as stored: (folded key, record bytes).
pub type StoredRecord = (String, Vec<u8>);

impl ReadSnapshot {
    /// Up to `limit` records of `slot`, after the folded key `after`, in key order;
    /// `slot_of` gives a key's slot.
    pub fn slot_page(
        &self,
        slot: Slot,
        slot_of: &dyn Fn(&str) -> Slot,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<StoredRecord>, StorageError> {
        let table = self.txn().open_table(HANDLES)?;
        let range = match after {
            Some(after) => table
                .range::<&str>((std::ops::Bound::Excluded(after), std::ops::Bound::Unbounded))?,
            None => table.range::<&str>(..)?,
        };
        let mut page = Vec::new();
        for entry in range {
            let (key, bytes) = entry?;
            if slot_of(key.value()) == slot {
                page.push((key.value().to_owned(), bytes.value().to_vec()));
                if page.len() >= limit {
                    break;
                }
            }
        }
        Ok(page)
    }
}

impl WriteBatch {
    /// Deletes every handle of `slot` (`slot_of` gives a key's slot); how many.
    pub fn delete_slot(
        &mut self,
        slot: Slot,
        slot_of: &dyn Fn(&str) -> Slot,
    ) -> Result<u64, StorageError> {
        let keys: Vec<String> = {
            let table = self.txn().open_table(HANDLES)?;
            let mut keys = Vec::new();
            for entry in table.iter()? {
                let (key, bytes) = entry?;
                if slot_of(key.value()) == slot {
                    let record = decode_handle(key.value(), bytes.value())?;
                    keys.push(record.display);
                }
            }
            keys
        };
        let mut deleted = 0;
        for display in keys {
            let Ok(handle) = Handle::parse(&display) else {
                continue;
            };
            self.delete(&handle)?;
            deleted += 1;
        }
        Ok(deleted)
    }
}
