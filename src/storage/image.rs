//! Store images and the replicated applied state: what snapshots are made of.
//!
//! An image is the sequence of [`ImageRecord`]s of every replicated table, streamed out
//! of one [`ReadSnapshot`] by [`ReadSnapshot::export`] (a redb read transaction: memory
//! bounded by one record, whatever the store's size) and streamed into one
//! [`WriteBatch`] by [`ImageImport::put`] and [`ImageImport::finish`] after
//! [`WriteBatch::import`] emptied the tables, so a reader sees the old store or the new
//! one, never a mix, and a failed import (a bad record, a crash) leaves the store as it
//! was once the batch is dropped.
//!
//! Speed: handle records are checked as they come and written in runs of at most
//! `IMPORT_RUN_OCTETS`, each table opened once a run and each written in its own key
//! order (the handles, then their slot index entries, then their value index
//! entries), so that consecutive inserts land on the same B-tree pages and fill them,
//! where inserting each handle's three entries as it comes touched a page of each
//! table per handle and left the indexes' pages half full. Memory stays bounded by a
//! run, however large the image.
//!
//! Order: the ring's slot count (when sliced) comes first, so the slot index is built
//! as the handles arrive (the index itself is not in the image: it is derived from the
//! handles and the slot count; the value index likewise, from the handles and this
//! store's indexed types); then slot states, handles, prefixes, documents, recent
//! results and the journals of exporting slots. The serde shape of [`ImageRecord`] is
//! part of the snapshot format (the replication layer writes it with postcard):
//! variants are only ever appended. The applied state is opaque bytes owned by the
//! replication layer, written in the same batch as the handle writes (or the import)
//! it accounts for.

use std::sync::Arc;

use redb::{ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};

use super::batch::WriteBatch;
use super::error::StorageError;
use super::read::{
    ReadSnapshot, cased_handle, decode_handle, decode_prefix, spelled_handle, stored_key,
};
use super::slot_index::rebuild_index;
use super::slots::{Slice, Slot, SlotState, slot_of};
use super::tables;
use super::value_index::{IndexChanges, IndexedTypes};
use crate::names::{Handle, fold_key};

/// One record of a store image, as stored bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ImageRecord {
    /// The ring's slot count: the store is sliced. First when present.
    SlotCount(u32),
    /// A slot the store holds, with its state.
    SlotState(Slot, SlotState),
    /// A handle: folded key, record bytes.
    Handle(String, #[serde(with = "octets")] Vec<u8>),
    /// A prefix: folded naming authority, record bytes.
    Prefix(String, #[serde(with = "octets")] Vec<u8>),
    /// A document: name, bytes.
    Document(String, #[serde(with = "octets")] Vec<u8>),
    /// The result of a recently applied request.
    Recent(RecentResult),
    /// A journal entry of an exporting slot: slot, sequence, folded key.
    Journal(Slot, u64, String),
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
    #[serde(with = "octets")]
    pub result: Vec<u8>,
}

/// The octets of a record as serde bytes. postcard writes bytes as it writes a
/// sequence of `u8` (a varint length, then the octets), so the snapshot format is the
/// same as with a plain `Vec<u8>`; but bytes are read in one copy, where a sequence is
/// read through a visitor call per octet (a tenth of a snapshot install's time).
mod octets {
    use serde::de::{SeqAccess, Visitor};
    use serde::{Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(bytes: &[u8], out: S) -> Result<S::Ok, S::Error> {
        out.serialize_bytes(bytes)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(input: D) -> Result<Vec<u8>, D::Error> {
        input.deserialize_byte_buf(Octets)
    }

    struct Octets;

    impl<'de> Visitor<'de> for Octets {
        type Value = Vec<u8>;

        fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
            formatter.write_str("octets")
        }

        fn visit_bytes<E>(self, bytes: &[u8]) -> Result<Vec<u8>, E> {
            Ok(bytes.to_vec())
        }

        fn visit_byte_buf<E>(self, bytes: Vec<u8>) -> Result<Vec<u8>, E> {
            Ok(bytes)
        }

        /// A format without bytes (JSON) writes them as a sequence of numbers.
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
            let mut bytes = Vec::new();
            while let Some(octet) = seq.next_element()? {
                bytes.push(octet);
            }
            Ok(bytes)
        }
    }
}

type RecordTable = TableDefinition<'static, &'static [u8], &'static [u8]>;

impl ReadSnapshot {
    /// Streams every record of this snapshot to `sink`, in image order.
    pub fn export<E: From<StorageError>>(
        &self,
        mut sink: impl FnMut(ImageRecord) -> Result<(), E>,
    ) -> Result<(), E> {
        if let Slice::Ring(count) = self.slice()? {
            sink(ImageRecord::SlotCount(count))?;
        }
        for (slot, state) in self.slot_states()? {
            sink(ImageRecord::SlotState(slot, state))?;
        }
        self.export_table(tables::HANDLES, &mut sink, |key, bytes| {
            let spelled = spelled_handle(&key, bytes)?;
            Ok(ImageRecord::Handle(key, spelled))
        })?;
        self.export_table(tables::PREFIXES, &mut sink, |key, bytes| {
            Ok(ImageRecord::Prefix(key, bytes.to_vec()))
        })?;
        self.export_table(tables::DOCUMENTS, &mut sink, |key, bytes| {
            Ok(ImageRecord::Document(key, bytes.to_vec()))
        })?;
        let recent = self
            .txn()
            .open_table(tables::RECENT_RESULTS)
            .map_err(StorageError::from)?;
        for entry in recent.iter().map_err(StorageError::from)? {
            let (key, result) = entry.map_err(StorageError::from)?;
            let (index, request) = key.value();
            sink(ImageRecord::Recent(RecentResult {
                request,
                index,
                result: result.value().to_vec(),
            }))?;
        }
        let journal = self
            .txn()
            .open_table(tables::SLOT_JOURNAL)
            .map_err(StorageError::from)?;
        for entry in journal.iter().map_err(StorageError::from)? {
            let (key, handle) = entry.map_err(StorageError::from)?;
            let (slot, sequence) = key.value();
            let handle = stored_key(handle.value())?.to_owned();
            sink(ImageRecord::Journal(Slot(slot), sequence, handle))?;
        }
        Ok(())
    }

    fn export_table<E: From<StorageError>>(
        &self,
        table: RecordTable,
        sink: &mut impl FnMut(ImageRecord) -> Result<(), E>,
        record: fn(String, &[u8]) -> Result<ImageRecord, StorageError>,
    ) -> Result<(), E> {
        let table = self.txn().open_table(table).map_err(StorageError::from)?;
        for entry in table.iter().map_err(StorageError::from)? {
            let (key, bytes) = entry.map_err(StorageError::from)?;
            let key = stored_key(key.value())?.to_owned();
            sink(record(key, bytes.value())?)?;
        }
        Ok(())
    }

    /// Every record of this snapshot, in memory (tests compare stores with it).
    #[cfg(test)]
    pub(crate) fn image(&self) -> Vec<ImageRecord> {
        let mut records = Vec::new();
        self.export(|record| {
            records.push(record);
            Ok::<(), StorageError>(())
        })
        .unwrap();
        records
    }

    /// The applied state last written with [`WriteBatch::set_applied_state`], as of
    /// this snapshot.
    pub fn applied_state(&self) -> Result<Option<Vec<u8>>, StorageError> {
        let meta = self.txn().open_table(tables::SM_META)?;
        let found = meta.get(tables::APPLIED_STATE_KEY)?;
        Ok(found.map(|bytes| bytes.value().to_vec()))
    }
}

/// How many octets of handle records (keys and record bytes) an import holds before it
/// writes them: a run of about 20,000 handles of a few hundred octets.
const IMPORT_RUN_OCTETS: usize = 8 << 20;

/// An image being imported into a [`WriteBatch`], record by record; nothing of it is
/// complete until [`ImageImport::finish`].
#[derive(Debug)]
pub struct ImageImport<'a> {
    batch: &'a mut WriteBatch,
    slot_count: Option<u32>,
    first: bool,
    types: Arc<IndexedTypes>,
    run: HandleRun,
}

/// Handle records checked and not yet written, and their value index entries.
#[derive(Debug, Default)]
struct HandleRun {
    /// (folded key, record bytes), in the order they came.
    records: Vec<(String, Vec<u8>)>,
    values: IndexChanges,
    octets: usize,
}

impl WriteBatch {
    /// Records the replication layer's applied state; it commits with the batch.
    pub fn set_applied_state(&mut self, state: &[u8]) -> Result<(), StorageError> {
        self.txn()
            .open_table(tables::SM_META)?
            .insert(tables::APPLIED_STATE_KEY, state)?;
        Ok(())
    }

    /// Empties every replicated table (handles, prefixes, documents, slots, indexes,
    /// journals, recent results), to import an image into them with
    /// [`ImageImport::put`]. On an error the caller drops the batch: the store is
    /// left as it was.
    pub fn import(&mut self) -> Result<ImageImport<'_>, StorageError> {
        self.changes_everything();
        for table in [tables::HANDLES, tables::PREFIXES, tables::DOCUMENTS] {
            self.txn().delete_table(table)?;
            // Opening makes it again, empty, even when nothing is imported into it.
            self.txn().open_table(table)?;
        }
        self.txn().delete_table(tables::RECENT_RESULTS)?;
        self.txn().open_table(tables::RECENT_RESULTS)?;
        self.recent_changes().clear();
        self.txn().delete_table(tables::SLOT_STATES)?;
        self.txn().open_table(tables::SLOT_STATES)?;
        self.txn().delete_table(tables::SLOT_JOURNAL)?;
        self.txn().open_table(tables::SLOT_JOURNAL)?;
        self.txn()
            .open_table(tables::META)?
            .remove(tables::SLOT_COUNT_KEY)?;
        rebuild_index(self.txn(), None)?;
        self.clear_value_index()?;
        let types = self.indexed_types();
        Ok(ImageImport {
            batch: self,
            slot_count: None,
            first: true,
            types,
            run: HandleRun::default(),
        })
    }
}

impl ImageImport<'_> {
    /// Writes one record of the image (a handle record may wait for the next run). Each
    /// is checked first: a handle or prefix record must decode and sit under its own
    /// folded name, and the slot count may only come first.
    pub fn put(&mut self, record: ImageRecord) -> Result<(), StorageError> {
        let first = std::mem::replace(&mut self.first, false);
        let txn = self.batch.txn();
        match record {
            ImageRecord::SlotCount(count) if first => {
                txn.open_table(tables::META)?
                    .insert(tables::SLOT_COUNT_KEY, u64::from(count))?;
                self.slot_count = Some(count);
            }
            ImageRecord::SlotCount(_) => {
                return Err(StorageError::MisplacedRecord {
                    key: tables::SLOT_COUNT_KEY.to_owned(),
                });
            }
            ImageRecord::SlotState(slot, state) => {
                self.batch.set_slot_state(slot, Some(state))?;
            }
            ImageRecord::Handle(key, bytes) => {
                let record = decode_handle(&key, &bytes)?;
                let owner = Handle::parse(&record.display).map(|h| h.key() == key.as_str());
                if !matches!(owner, Ok(true)) {
                    return Err(misplaced(&key));
                }
                let run = &mut self.run;
                run.values
                    .gather(&self.types, &key, None, Some(&record.values));
                let bytes = cased_handle(&key, &bytes)?;
                run.octets += 2 * key.len() + bytes.len();
                run.records.push((key, bytes));
                if run.octets >= IMPORT_RUN_OCTETS {
                    self.write_run()?;
                }
            }
            ImageRecord::Prefix(key, bytes) => {
                if fold_key(&decode_prefix(&key, &bytes)?.display) != key {
                    return Err(misplaced(&key));
                }
                txn.open_table(tables::PREFIXES)?
                    .insert(key.as_bytes(), bytes.as_slice())?;
            }
            ImageRecord::Document(name, bytes) => {
                txn.open_table(tables::DOCUMENTS)?
                    .insert(name.as_bytes(), bytes.as_slice())?;
            }
            ImageRecord::Recent(recent) => {
                self.batch
                    .remember_result(recent.request, recent.index, &recent.result)?;
            }
            ImageRecord::Journal(slot, sequence, key) => {
                txn.open_table(tables::SLOT_JOURNAL)?
                    .insert((slot.0, sequence), key.as_bytes())?;
            }
        }
        Ok(())
    }

    /// Writes the handle records still held; the import is then complete in its batch.
    pub fn finish(mut self) -> Result<(), StorageError> {
        self.write_run()
    }

    /// Writes the run of handle records held, each table in its key order: the
    /// handles (two records of one key in the order they came), their slot index
    /// entries, their value index entries.
    fn write_run(&mut self) -> Result<(), StorageError> {
        let HandleRun {
            mut records,
            values,
            ..
        } = std::mem::take(&mut self.run);
        records.sort_by(|a, b| a.0.cmp(&b.0));
        let txn = self.batch.txn();
        let mut handles = txn.open_table(tables::HANDLES)?;
        for (key, bytes) in &records {
            handles.insert(key.as_bytes(), bytes.as_slice())?;
        }
        drop(handles);
        if let Some(count) = self.slot_count {
            let mut slotted: Vec<(u32, &[u8])> = records
                .iter()
                .map(|(key, _)| (slot_of(key, count).0, key.as_bytes()))
                .collect();
            slotted.sort_unstable();
            let mut index = txn.open_table(tables::SLOT_INDEX)?;
            for entry in slotted {
                index.insert(entry, ())?;
            }
        }
        self.batch.value_index()?.write(values)
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

    fn import(store: &Store, image: Vec<ImageRecord>) -> Result<(), StorageError> {
        let mut batch = store.write().unwrap();
        let mut import = batch.import()?;
        for record in image {
            import.put(record)?;
        }
        import.finish()?;
        batch.set_applied_state(b"applied 9")?;
        batch.commit()
    }

    #[test]
    fn an_exported_image_imports_to_the_same_store() {
        let dir = tempfile::tempdir().unwrap();
        let source = store(&dir, "a.redb");
        seed(&source, &["10.1/a", "10.1/B", "cnri.test/日本"]);
        let mut batch = source.write().unwrap();
        batch.make_slice(4, &[Slot(0), Slot(1)]).unwrap();
        batch
            .set_slot_state(Slot(1), Some(SlotState::Exporting))
            .unwrap();
        batch.journal_change(Slot(1), "10.1/A").unwrap();
        batch.put_document("map", b"m").unwrap();
        batch.remember_result(5, 2, b"ok").unwrap();
        batch.commit().unwrap();
        let target = store(&dir, "b.redb");
        seed(&target, &["10.1/old", "20.2/old"]);

        let image = source.read().unwrap().image();
        assert_eq!(image[0], ImageRecord::SlotCount(4));
        import(&target, image.clone()).unwrap();

        let read = target.read().unwrap();
        assert_eq!(read.image(), image);
        assert_eq!(read.list_prefixes().unwrap().len(), 2);
        assert_eq!(read.applied_state().unwrap(), Some(b"applied 9".to_vec()));
        let indexed: usize = (0..4)
            .map(|slot| read.slot_page(Slot(slot), None, 10).unwrap().len())
            .sum();
        assert_eq!(indexed, 3);
        assert_eq!(read.journal_page(Slot(1), None, 10).unwrap().len(), 1);
    }

    #[test]
    fn imported_results_of_one_entry_are_all_forgotten_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let target = store(&dir, "t.redb");
        // Recent records as every snapshot format carries them: each with its index.
        let image = [(7, 10), (3, 10), (9, 10), (4, 11)]
            .map(|(request, index)| {
                ImageRecord::Recent(RecentResult {
                    request,
                    index,
                    result: b"ok".to_vec(),
                })
            })
            .to_vec();
        import(&target, image).unwrap();
        let mut batch = target.write().unwrap();
        batch.forget_results_before(11).unwrap();
        for request in [7, 3, 9] {
            assert_eq!(batch.recall_result(request).unwrap(), None, "{request}");
        }
        assert_eq!(batch.recall_result(4).unwrap(), Some(b"ok".to_vec()));
    }

    #[test]
    fn a_misplaced_or_corrupt_record_fails_the_import() {
        let dir = tempfile::tempdir().unwrap();
        let target = store(&dir, "t.redb");
        seed(&target, &["10.1/kept"]);
        let before = target.read().unwrap().image();

        let mut moved = before.clone();
        if let ImageRecord::Handle(key, _) = &mut moved[0] {
            *key = "10.1/ELSEWHERE".into();
        }
        let mut corrupt = before.clone();
        if let ImageRecord::Prefix(_, bytes) = &mut corrupt[1] {
            bytes.truncate(3);
        }
        let mut late_count = before.clone();
        late_count.push(ImageRecord::SlotCount(4));
        for image in [moved, corrupt, late_count] {
            assert!(import(&target, image).is_err());
        }
        assert_eq!(target.read().unwrap().image(), before);
    }

    #[test]
    fn record_octets_encode_as_snapshot_format_4_always_had_them() {
        // Variant, key length, key, octet count, octets: the format of snapshot data
        // written when the octets were a plain `Vec<u8>`.
        let handle = ImageRecord::Handle("a".into(), vec![7, 0xff]);
        let bytes = postcard::to_allocvec(&handle).unwrap();
        assert_eq!(bytes, [2, 1, b'a', 2, 7, 0xff]);
        assert_eq!(postcard::from_bytes::<ImageRecord>(&bytes).unwrap(), handle);
        let recent = ImageRecord::Recent(RecentResult {
            request: 1,
            index: 2,
            result: vec![9; 200],
        });
        let bytes = postcard::to_allocvec(&recent).unwrap();
        assert_eq!(bytes[..5], [5, 1, 2, 0xc8, 0x01]);
        assert_eq!(postcard::from_bytes::<ImageRecord>(&bytes).unwrap(), recent);
    }

    #[test]
    fn a_large_image_is_written_in_several_runs_and_imports_whole() {
        let dir = tempfile::tempdir().unwrap();
        let target = store(&dir, "t.redb");
        seed(&target, &["10.1/old"]);
        // Enough octets for three runs, in no particular key order.
        let data = "x".repeat(4096);
        let image: Vec<ImageRecord> = std::iter::once(ImageRecord::SlotCount(16))
            .chain((0..5000u32).map(|n| {
                let text = format!("10.1/{:04}", n * 7919 % 5000);
                let values = vec![HandleValue::new(1, "URL", format!("https://x/{n}/{data}"))];
                let bytes = tables::HandleRecord::spelled_parts(&text, &values);
                ImageRecord::Handle(fold_key(&text), bytes)
            }))
            .collect();
        import(&target, image).unwrap();
        let read = target.read().unwrap();
        let handles: Vec<String> = read
            .image()
            .into_iter()
            .filter_map(|record| match record {
                ImageRecord::Handle(key, _) => Some(key),
                _ => None,
            })
            .collect();
        assert_eq!(handles.len(), 5000);
        assert!(handles.is_sorted());
        let indexed: usize = (0..16)
            .map(|slot| read.slot_page(Slot(slot), None, 10_000).unwrap().len())
            .sum();
        assert_eq!(indexed, 5000);
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
