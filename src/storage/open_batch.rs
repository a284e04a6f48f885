//! A [`WriteBatch`] with the tables its handle writes touch held open: [`OpenBatch`].
//!
//! Opening a redb table costs a lookup in the file's table tree and some bookkeeping,
//! closing it as much again; a create touches about ten tables (the handle, its slot,
//! the value index, the prefix count, the request's remembered result…), and a
//! replica applies tens of creates in one batch. An [`OpenBatch`] opens each table at
//! its first use and keeps it until it is dropped, and reads the store's slicing once.
//! Owns nothing on disk: the tables and what they hold are the other modules'; this
//! module only keeps them open. The operations themselves are written once, on
//! [`OpenBatch`]; [`WriteBatch`] runs each on an [`OpenBatch`] of its own.
//!
//! Invariant: a table is open at most once in a transaction (redb refuses a second
//! open). The tables an [`OpenBatch`] holds are reached only through it, and
//! [`OpenBatch::batch`], the way to every other operation of the batch, closes them
//! all first (and forgets the slicing, which those operations may change).

use redb::{Table, TableDefinition, WriteTransaction};

use super::batch::WriteBatch;
use super::error::StorageError;
use super::slots::{Slice, slice_in};
use super::tables::{
    HANDLES, PREFIXES, RECENT_RESULTS, SLOT_INDEX, SLOT_STATES, VALUE_INDEX, ValueIndexKey,
};

type HandlesTable<'b> = Table<'b, &'static [u8], &'static [u8]>;
type PrefixesTable<'b> = Table<'b, &'static [u8], &'static [u8]>;
type ValueIndexTable<'b> = Table<'b, ValueIndexKey<'static>, ()>;
type SlotIndexTable<'b> = Table<'b, (u32, &'static [u8]), ()>;
type SlotStatesTable<'b> = Table<'b, u32, u8>;
type ResultsTable<'b> = Table<'b, (u64, u64), &'static [u8]>;

/// A write batch whose tables stay open from their first use until it is dropped
/// (see the module docs).
pub struct OpenBatch<'b> {
    batch: &'b WriteBatch,
    slice: Option<Slice>,
    handles: Option<HandlesTable<'b>>,
    prefixes: Option<PrefixesTable<'b>>,
    value_index: Option<ValueIndexTable<'b>>,
    slot_index: Option<SlotIndexTable<'b>>,
    slot_states: Option<SlotStatesTable<'b>>,
    recent_results: Option<ResultsTable<'b>>,
}

impl std::fmt::Debug for OpenBatch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenBatch").finish_non_exhaustive()
    }
}

/// `slot`'s table, opened in `txn` unless it is open already.
fn held<'s, 'b, K: redb::Key + 'static, V: redb::Value + 'static>(
    slot: &'s mut Option<Table<'b, K, V>>,
    txn: &'b WriteTransaction,
    definition: TableDefinition<K, V>,
) -> Result<&'s mut Table<'b, K, V>, StorageError> {
    let table = match slot.take() {
        Some(table) => table,
        None => txn.open_table(definition)?,
    };
    Ok(slot.insert(table))
}

impl<'b> OpenBatch<'b> {
    /// `batch`, no table of it open yet.
    pub(super) fn new(batch: &'b WriteBatch) -> OpenBatch<'b> {
        OpenBatch {
            batch,
            slice: None,
            handles: None,
            prefixes: None,
            value_index: None,
            slot_index: None,
            slot_states: None,
            recent_results: None,
        }
    }

    /// The batch, for any operation [`OpenBatch`] does not carry, with every table
    /// this one held closed first (it opens them again at their next use).
    pub fn batch(&mut self) -> &WriteBatch {
        let batch = self.batch;
        *self = OpenBatch::new(batch);
        batch
    }

    /// The batch this one writes in, without closing any table.
    pub(super) fn write_batch(&self) -> &'b WriteBatch {
        self.batch
    }

    /// Which slots the store holds, read at the first call.
    pub fn slice(&mut self) -> Result<Slice, StorageError> {
        if let Some(slice) = self.slice {
            return Ok(slice);
        }
        let slice = slice_in(self.batch.txn())?;
        self.slice = Some(slice);
        Ok(slice)
    }

    /// The value types the batch's index holds.
    pub(super) fn indexed(&self) -> &'b super::IndexedTypes {
        self.batch.indexed()
    }

    /// Notes, for the store's commit watch, that the handle record of folded `key` is
    /// written or deleted.
    pub(super) fn note_handle_change(&self, key: &str) {
        self.batch.changes_handle(key);
    }

    pub(super) fn handles(&mut self) -> Result<&mut HandlesTable<'b>, StorageError> {
        held(&mut self.handles, self.batch.txn(), HANDLES)
    }

    pub(super) fn prefixes(&mut self) -> Result<&mut PrefixesTable<'b>, StorageError> {
        held(&mut self.prefixes, self.batch.txn(), PREFIXES)
    }

    pub(super) fn value_index(&mut self) -> Result<&mut ValueIndexTable<'b>, StorageError> {
        held(&mut self.value_index, self.batch.txn(), VALUE_INDEX)
    }

    pub(super) fn slot_index(&mut self) -> Result<&mut SlotIndexTable<'b>, StorageError> {
        held(&mut self.slot_index, self.batch.txn(), SLOT_INDEX)
    }

    pub(super) fn slot_states(&mut self) -> Result<&mut SlotStatesTable<'b>, StorageError> {
        held(&mut self.slot_states, self.batch.txn(), SLOT_STATES)
    }

    pub(super) fn recent_results(&mut self) -> Result<&mut ResultsTable<'b>, StorageError> {
        held(&mut self.recent_results, self.batch.txn(), RECENT_RESULTS)
    }
}
