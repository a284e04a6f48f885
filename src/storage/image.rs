//! Whole-store images and the replicated applied state: what snapshots are made of.
//!
//! An image is every handle, prefix and document record as stored bytes, taken from one
//! [`ReadSnapshot`]; importing one replaces both tables inside one [`WriteBatch`], so a
//! reader sees the old store or the new one, never a mix. The applied state is opaque
//! bytes owned by the replication layer, written in the same batch as the handle writes
//! (or the import) it accounts for.

use redb::{ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};

use super::batch::WriteBatch;
use super::error::StorageError;
use super::read::{ReadSnapshot, decode_handle, decode_prefix};
use super::recent::split_value;
use super::slot_index::rebuild_index;
use super::slots::{Slice, Slot, SlotState};
use super::tables;
use crate::names::{Handle, fold_key};
use crate::values::DecodeError;

/// Every handle, prefix and document record of a store, as stored bytes, in key order,
/// and the results of the recently applied requests.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreImage {
    /// (folded handle, handle record bytes).
    pub handles: Vec<(String, Vec<u8>)>,
    /// (folded naming authority, prefix record bytes).
    pub prefixes: Vec<(String, Vec<u8>)>,
    /// The results of recently applied requests, by request id.
    pub recent: Vec<RecentResult>,
    /// (document name, document bytes).
    pub documents: Vec<(String, Vec<u8>)>,
    /// The ring's slot count, once the store is sliced.
    pub slot_count: Option<u32>,
    /// The slots held, with their states.
    pub slot_states: Vec<(Slot, SlotState)>,
}

/// The recorded result of one recently applied request
/// ([`WriteBatch::remember_result`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecentResult {
    /// The request's id.
    pub request: u64,
    /// The log index that applied it.
    pub index: u64,
    /// Its result, opaque to the store.
    pub result: Vec<u8>,
}

type RecordTable = TableDefinition<'static, &'static str, &'static [u8]>;

impl ReadSnapshot {
    /// Every handle, prefix and document record of this snapshot.
    pub fn export(&self) -> Result<StoreImage, StorageError> {
        Ok(StoreImage {
            handles: self.export_table(tables::HANDLES)?,
            prefixes: self.export_table(tables::PREFIXES)?,
            recent: self.export_recent()?,
            documents: self.export_table(tables::DOCUMENTS)?,
            slot_count: match self.slice()? {
                Slice::Whole => None,
                Slice::Ring(count) => Some(count),
            },
            slot_states: self.slot_states()?,
        })
    }

    fn export_recent(&self) -> Result<Vec<RecentResult>, StorageError> {
        let table = self.txn().open_table(tables::RECENT_REQUESTS)?;
        let mut recent = Vec::new();
        for entry in table.iter()? {
            let (request, value) = entry?;
            let request = request.value();
            let value = value.value();
            let (index, result) =
                split_value(value).ok_or_else(|| corrupt_request(request, value))?;
            recent.push(RecentResult {
                request,
                index,
                result: result.to_vec(),
            });
        }
        Ok(recent)
    }

    fn export_table(&self, table: RecordTable) -> Result<Vec<(String, Vec<u8>)>, StorageError> {
        let table = self.txn().open_table(table)?;
        let mut records = Vec::new();
        for entry in table.iter()? {
            let (key, bytes) = entry?;
            records.push((key.value().to_owned(), bytes.value().to_vec()));
        }
        Ok(records)
    }

    /// The applied state last written with [`WriteBatch::set_applied_state`], as of
    /// this snapshot.
    pub fn applied_state(&self) -> Result<Option<Vec<u8>>, StorageError> {
        let meta = self.txn().open_table(tables::SM_META)?;
        let found = meta.get(tables::APPLIED_STATE_KEY)?;
        Ok(found.map(|bytes| bytes.value().to_vec()))
    }
}

impl WriteBatch {
    /// Records the replication layer's applied state; it commits with the batch.
    pub fn set_applied_state(&mut self, state: &[u8]) -> Result<(), StorageError> {
        self.txn()
            .open_table(tables::SM_META)?
            .insert(tables::APPLIED_STATE_KEY, state)?;
        Ok(())
    }

    /// Replaces every handle, prefix and document with those of `image`. Each record is checked
    /// (it decodes, and its key is its own folded name) before the tables are touched;
    /// a bad record fails the import with the store unchanged.
    pub fn import(&mut self, image: &StoreImage) -> Result<(), StorageError> {
        for (key, bytes) in &image.handles {
            let record = decode_handle(key, bytes)?;
            let owner = Handle::parse(&record.display).map(|h| h.key() == key.as_str());
            if !matches!(owner, Ok(true)) {
                return Err(misplaced(key));
            }
        }
        for (key, bytes) in &image.prefixes {
            if fold_key(&decode_prefix(key, bytes)?.display) != *key {
                return Err(misplaced(key));
            }
        }
        self.replace_table(tables::HANDLES, &image.handles)?;
        self.replace_table(tables::PREFIXES, &image.prefixes)?;
        self.replace_table(tables::DOCUMENTS, &image.documents)?;
        self.replace_slots(image)?;
        rebuild_index(self.txn(), image.slot_count)?;
        self.replace_recent(&image.recent)
    }

    fn replace_slots(&mut self, image: &StoreImage) -> Result<(), StorageError> {
        match image.slot_count {
            Some(count) => self.make_slice(count, &[])?,
            None => {
                self.txn()
                    .open_table(tables::META)?
                    .remove(tables::SLOT_COUNT_KEY)?;
                self.txn().delete_table(tables::SLOT_STATES)?;
                self.txn().open_table(tables::SLOT_STATES)?;
            }
        }
        for (slot, state) in &image.slot_states {
            self.set_slot_state(*slot, Some(*state))?;
        }
        Ok(())
    }

    fn replace_recent(&mut self, recent: &[RecentResult]) -> Result<(), StorageError> {
        self.txn().delete_table(tables::RECENT_REQUESTS)?;
        self.txn().delete_table(tables::RECENT_BY_INDEX)?;
        // Opening makes them again, empty, even when there is nothing to remember.
        self.txn().open_table(tables::RECENT_REQUESTS)?;
        self.txn().open_table(tables::RECENT_BY_INDEX)?;
        for entry in recent {
            self.remember_result(entry.request, entry.index, &entry.result)?;
        }
        Ok(())
    }

    fn replace_table(
        &mut self,
        definition: RecordTable,
        records: &[(String, Vec<u8>)],
    ) -> Result<(), StorageError> {
        self.txn().delete_table(definition)?;
        let mut table = self.txn().open_table(definition)?;
        for (key, bytes) in records {
            table.insert(key.as_str(), bytes.as_slice())?;
        }
        Ok(())
    }
}

fn corrupt_request(request: u64, value: &[u8]) -> StorageError {
    StorageError::Corrupt {
        key: format!("recent request {request}"),
        source: DecodeError::Truncated {
            field: "log index",
            offset: 0,
            needed: 8usize.saturating_sub(value.len()),
        },
    }
}

fn misplaced(key: &str) -> StorageError {
    StorageError::MisplacedRecord {
        key: key.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{ExistingHandle, Store};
    use super::*;
    use crate::values::HandleValue;

    fn store(dir: &tempfile::TempDir, name: &str) -> Store {
        Store::open(&dir.path().join(name)).unwrap()
    }

    fn seed(store: &Store, handles: &[&str]) {
        let mut batch = store.write().unwrap();
        for text in handles {
            let values = vec![HandleValue::new(1, "URL", format!("https://x/{text}"))];
            let handle = Handle::parse(text).unwrap();
            batch
                .create(&handle, values, ExistingHandle::Refuse)
                .unwrap();
        }
        batch.home_prefix("Cnri.Test").unwrap();
        batch.set_applied_state(b"applied 3").unwrap();
        batch.commit().unwrap();
    }

    #[test]
    fn an_exported_image_imports_to_the_same_store() {
        let dir = tempfile::tempdir().unwrap();
        let source = store(&dir, "a.redb");
        seed(&source, &["10.1/a", "10.1/B", "cnri.test/日本"]);
        let target = store(&dir, "b.redb");
        seed(&target, &["10.1/old", "20.2/old"]);

        let image = source.read().unwrap().export().unwrap();
        assert_eq!(image.handles.len(), 3);
        let mut batch = target.write().unwrap();
        batch.import(&image).unwrap();
        batch.set_applied_state(b"applied 9").unwrap();
        batch.commit().unwrap();

        let read = target.read().unwrap();
        assert_eq!(read.export().unwrap(), image);
        assert_eq!(read.list_prefixes().unwrap().len(), 2);
        assert_eq!(read.applied_state().unwrap(), Some(b"applied 9".to_vec()));
    }

    #[test]
    fn a_misplaced_or_corrupt_record_fails_the_import() {
        let dir = tempfile::tempdir().unwrap();
        let target = store(&dir, "t.redb");
        seed(&target, &["10.1/kept"]);
        let before = target.read().unwrap().export().unwrap();

        let mut moved = before.clone();
        moved.handles[0].0 = "10.1/ELSEWHERE".into();
        let mut corrupt = before.clone();
        corrupt.prefixes[0].1.truncate(3);
        for image in [moved, corrupt] {
            let mut batch = target.write().unwrap();
            assert!(batch.import(&image).is_err());
            batch.commit().unwrap();
        }
        assert_eq!(target.read().unwrap().export().unwrap(), before);
    }

    #[test]
    fn the_applied_state_commits_with_its_batch_only() {
        let dir = tempfile::tempdir().unwrap();
        let target = store(&dir, "t.redb");
        assert_eq!(target.read().unwrap().applied_state().unwrap(), None);
        let mut batch = target.write().unwrap();
        batch.set_applied_state(b"never").unwrap();
        batch.abort().unwrap();
        assert_eq!(target.read().unwrap().applied_state().unwrap(), None);
    }
}
