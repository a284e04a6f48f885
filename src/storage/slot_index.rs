//! The slot index of a sliced store: `(slot, folded key)` for every handle it holds, so
//! a slot's handles are one range scan, however large the store.
//!
//! Owns the `slot_index` table. Every write of a handle in a sliced store goes through
//! `index_handle` / `unindex_handle` (from [`OpenBatch::create`] and
//! [`OpenBatch::delete`]); [`WriteBatch::make_slice`] and an image import build it for
//! every handle the store holds. A store that is [`Slice::Whole`] has an empty index.
//! Invariant: in a sliced store of `count` slots, the index holds exactly
//! `(slot_of(key, count), key)` for each key of the `handles` table.

use std::ops::Bound;

use redb::{ReadableTable, WriteTransaction};

use super::batch::WriteBatch;
use super::error::StorageError;
use super::open_batch::OpenBatch;
use super::read::{ReadSnapshot, decode_handle, spelled_handle, stored_key};
use super::slots::{Slice, Slot, slot_of};
use super::tables::{HANDLES, SLOT_INDEX};
use crate::names::Handle;

/// A handle record as stored: (folded key, record bytes).
pub type StoredRecord = (String, Vec<u8>);

/// How many handles a slot deletion reads from the index at a time.
const DELETE_PAGE: usize = 1024;

impl OpenBatch<'_> {
    /// Records `key` in the index when the store is sliced.
    pub(super) fn index_handle(&mut self, key: &str) -> Result<(), StorageError> {
        if let Slice::Ring(count) = self.slice()? {
            let slot = slot_of(key, count);
            self.slot_index()?.insert((slot.0, key.as_bytes()), ())?;
        }
        Ok(())
    }

    /// Forgets `key` in the index when the store is sliced.
    pub(super) fn unindex_handle(&mut self, key: &str) -> Result<(), StorageError> {
        if let Slice::Ring(count) = self.slice()? {
            let slot = slot_of(key, count);
            self.slot_index()?.remove((slot.0, key.as_bytes()))?;
        }
        Ok(())
    }
}

/// Empties the index and, for a ring of `slot_count`, indexes every handle held.
pub(super) fn rebuild_index(
    txn: &WriteTransaction,
    slot_count: Option<u32>,
) -> Result<(), StorageError> {
    txn.delete_table(SLOT_INDEX)?;
    let mut index = txn.open_table(SLOT_INDEX)?;
    if let Some(count) = slot_count {
        let handles = txn.open_table(HANDLES)?;
        for entry in handles.iter()? {
            let (key, _) = entry?;
            let key = key.value();
            index.insert((slot_of(stored_key(key)?, count).0, key), ())?;
        }
    }
    Ok(())
}

/// The lower bound of a slot's keys after `after`.
fn lower(slot: Slot, after: Option<&str>) -> Bound<(u32, &[u8])> {
    match after {
        Some(after) => Bound::Excluded((slot.0, after.as_bytes())),
        None => Bound::Included((slot.0, b"")),
    }
}

impl ReadSnapshot {
    /// Up to `limit` records of `slot`, after the folded key `after`, in key order
    /// (none in a store that is not sliced). Reads the page only, not the store.
    pub fn slot_page(
        &self,
        slot: Slot,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<StoredRecord>, StorageError> {
        let index = self.txn().open_table(SLOT_INDEX)?;
        let handles = self.txn().open_table(HANDLES)?;
        let mut page = Vec::new();
        for entry in index.range::<(u32, &[u8])>((lower(slot, after), Bound::Unbounded))? {
            if page.len() >= limit {
                break;
            }
            let (key, _) = entry?;
            let (found, key) = key.value();
            if found != slot.0 {
                break;
            }
            let key = stored_key(key)?;
            let Some(bytes) = handles.get(key.as_bytes())? else {
                return Err(StorageError::Unindexed {
                    key: key.to_owned(),
                });
            };
            page.push((key.to_owned(), spelled_handle(key, bytes.value())?));
        }
        Ok(page)
    }
}

impl WriteBatch {
    /// Deletes every handle of `slot`; how many. Reads the slot's handles only.
    pub fn delete_slot(&self, slot: Slot) -> Result<u64, StorageError> {
        self.changes_everything();
        let mut deleted = 0;
        loop {
            let displays = self.slot_displays(slot, DELETE_PAGE)?;
            if displays.is_empty() {
                return Ok(deleted);
            }
            let mut open = self.open();
            for (key, display) in displays {
                match Handle::parse(&display) {
                    Ok(handle) if handle.key() == key => open.delete(&handle)?,
                    _ => return Err(StorageError::MisplacedRecord { key }),
                }
                // Whatever the index said, the entry goes, so the loop always ends.
                open.slot_index()?.remove((slot.0, key.as_bytes()))?;
                deleted += 1;
            }
        }
    }

    /// The folded keys and display spellings of the first `limit` handles of `slot`.
    fn slot_displays(
        &self,
        slot: Slot,
        limit: usize,
    ) -> Result<Vec<(String, String)>, StorageError> {
        let index = self.txn().open_table(SLOT_INDEX)?;
        let handles = self.txn().open_table(HANDLES)?;
        let mut found = Vec::new();
        let range = index.range::<(u32, &[u8])>((lower(slot, None), Bound::Unbounded))?;
        for entry in range.take(limit) {
            let (key, _) = entry?;
            let (in_slot, key) = key.value();
            if in_slot != slot.0 {
                break;
            }
            let key = stored_key(key)?;
            let Some(bytes) = handles.get(key.as_bytes())? else {
                return Err(StorageError::Unindexed {
                    key: key.to_owned(),
                });
            };
            found.push((key.to_owned(), decode_handle(key, bytes.value())?.display));
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{ExistingHandle, Store};
    use super::*;
    use crate::values::HandleValue;

    const SLOTS: u32 = 8;

    fn create(batch: &mut WriteBatch, name: &str) {
        let values = vec![HandleValue::new(1, "URL", format!("https://x/{name}"))];
        let handle = Handle::parse(name).unwrap();
        batch
            .create(&handle, values, ExistingHandle::Refuse)
            .unwrap();
    }

    /// Every key of `slot`, paging two at a time.
    fn keys_of(store: &Store, slot: Slot) -> Vec<String> {
        let read = store.read().unwrap();
        let mut keys = Vec::new();
        loop {
            let page = read
                .slot_page(slot, keys.last().map(String::as_str), 2)
                .unwrap();
            if page.is_empty() {
                return keys;
            }
            keys.extend(page.into_iter().map(|(key, _)| key));
        }
    }

    #[test]
    fn the_index_follows_slicing_creates_and_deletes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.redb")).unwrap();
        let names: Vec<String> = (0..40).map(|n| format!("10.1/h{n}")).collect();
        let mut batch = store.write().unwrap();
        for name in &names[..20] {
            create(&mut batch, name);
        }
        batch.commit().unwrap();
        assert!(
            keys_of(&store, Slot(0)).is_empty(),
            "a whole store has no index"
        );

        let mut batch = store.write().unwrap();
        batch.make_slice(SLOTS, &[Slot(0)]).unwrap();
        for name in &names[20..] {
            create(&mut batch, name);
        }
        batch.delete(&Handle::parse(&names[0]).unwrap()).unwrap();
        batch.commit().unwrap();

        let mut all = Vec::new();
        for slot in (0..SLOTS).map(Slot) {
            let keys = keys_of(&store, slot);
            assert!(keys.iter().all(|key| slot_of(key, SLOTS) == slot));
            assert!(keys.is_sorted());
            all.extend(keys);
        }
        all.sort();
        let mut expected: Vec<String> = names[1..].iter().map(|n| n.to_uppercase()).collect();
        expected.sort();
        assert_eq!(all, expected);

        let slot = slot_of(&names[5].to_uppercase(), SLOTS);
        let in_slot = keys_of(&store, slot).len() as u64;
        let batch = store.write().unwrap();
        assert_eq!(batch.delete_slot(slot).unwrap(), in_slot);
        batch.commit().unwrap();
        let read = store.read().unwrap();
        assert!(read.slot_page(slot, None, 10).unwrap().is_empty());
        assert!(!read.contains(&Handle::parse(&names[5]).unwrap()).unwrap());
        let prefix = read.prefix("10.1").unwrap().unwrap();
        assert_eq!(prefix.handle_count, 39 - in_slot);
    }
}
