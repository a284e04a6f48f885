//! The slots of the cluster's ring a store holds, and the state of each: which handles
//! the store's replica set answers for, and which are moving in or out.
//!
//! Owns [`Slot`], [`SlotState`] and [`Slice`], the `slot_states` table and the `slot_count`
//! record, and [`slot_of`], the ring's hash (the RFC 3652 site hash from
//! [`crate::codec`]): the store computes a handle's slot to keep its slot index
//! ([`super::slot_index`]); which slots it holds is what its replica set's log said.

use redb::{ReadOnlyTable, ReadableTable, ReadableTableMetadata, WriteTransaction};
use serde::{Deserialize, Serialize};

use super::batch::WriteBatch;
use super::error::StorageError;
use super::open_batch::OpenBatch;
use super::read::ReadSnapshot;
use super::slot_index::rebuild_index;
use super::tables::{META, SLOT_COUNT_KEY, SLOT_STATES};
use crate::codec::handle_hash;
use crate::values::{DecodeError, HashOption};

/// The slot of the handle whose folded key is `key` in a ring of `slot_count` slots:
/// the RFC 3652 site hash of the whole handle (digest §7) modulo the slot count, so
/// that a client choosing among an HS_SITE's `slot_count` servers lands on the slot's.
pub fn slot_of(key: &str, slot_count: u32) -> Slot {
    let hash = handle_hash(key.as_bytes(), HashOption::ByHandle);
    Slot(hash % slot_count.max(1))
}

/// One hash slot of a cluster's ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Slot(pub u32);

impl std::fmt::Display for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "slot {}", self.0)
    }
}

/// What a store's replica set does with one slot it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SlotState {
    /// The set owns the slot: it answers reads and takes writes.
    Owned,
    /// The set owns the slot and journals its changes for the set it moves to.
    Exporting,
    /// The set still answers reads but holds writes: the slot is about to change hands.
    Frozen,
    /// The slot is being copied in; the set answers for it only once it owns it.
    Importing,
}

impl SlotState {
    fn to_u8(self) -> u8 {
        match self {
            SlotState::Owned => 1,
            SlotState::Exporting => 2,
            SlotState::Frozen => 3,
            SlotState::Importing => 4,
        }
    }

    fn from_u8(byte: u8) -> Option<SlotState> {
        Some(match byte {
            1 => SlotState::Owned,
            2 => SlotState::Exporting,
            3 => SlotState::Frozen,
            4 => SlotState::Importing,
            _ => return None,
        })
    }

    /// Whether reads of the slot are answered here.
    pub fn answers_reads(self) -> bool {
        matches!(
            self,
            SlotState::Owned | SlotState::Exporting | SlotState::Frozen
        )
    }

    /// Whether writes to the slot are taken here.
    pub fn takes_writes(self) -> bool {
        matches!(self, SlotState::Owned | SlotState::Exporting)
    }
}

/// Which slots a store holds: every one (never sliced), or those of a ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slice {
    /// The store was never sliced: it holds every handle.
    Whole,
    /// The store holds the slots of a ring of this many that `slot_states` names.
    Ring(u32),
}

/// What a snapshot reads to tell whether it holds a slot, opened once per snapshot.
pub(super) struct SlotTables {
    slice: Slice,
    states: ReadOnlyTable<u32, u8>,
}

impl ReadSnapshot {
    fn slot_tables(&self) -> Result<&SlotTables, StorageError> {
        if let Some(tables) = self.slots.get() {
            return Ok(tables);
        }
        let meta = self.txn().open_table(META)?;
        let slice = slice_of(meta.get(SLOT_COUNT_KEY)?.map(|count| count.value()))?;
        let states = self.txn().open_table(SLOT_STATES)?;
        Ok(self.slots.get_or_init(|| SlotTables { slice, states }))
    }

    /// Which slots the store holds.
    pub fn slice(&self) -> Result<Slice, StorageError> {
        Ok(self.slot_tables()?.slice)
    }

    /// The state of `slot`, or `None` when the store does not hold it.
    pub fn slot_state(&self, slot: Slot) -> Result<Option<SlotState>, StorageError> {
        let table = &self.slot_tables()?.states;
        let found = table.get(slot.0)?.map(|state| state.value());
        found.map(|byte| state_of(slot, byte)).transpose()
    }

    /// Every slot the store holds, with its state, in slot order.
    pub fn slot_states(&self) -> Result<Vec<(Slot, SlotState)>, StorageError> {
        let table = self.txn().open_table(SLOT_STATES)?;
        let mut states = Vec::with_capacity(usize::try_from(table.len()?).unwrap_or(0));
        for entry in table.iter()? {
            let (slot, state) = entry?;
            let slot = Slot(slot.value());
            states.push((slot, state_of(slot, state.value())?));
        }
        Ok(states)
    }
}

impl WriteBatch {
    /// Which slots the store holds, as this batch sees it.
    pub fn slice(&self) -> Result<Slice, StorageError> {
        slice_in(self.txn())
    }

    /// The state of `slot` as this batch sees it.
    pub fn slot_state(&self, slot: Slot) -> Result<Option<SlotState>, StorageError> {
        self.open().slot_state(slot)
    }

    /// Slices the store into a ring of `slot_count` slots of which it owns `owned`
    /// (replacing any slice it had), and indexes every handle it holds by slot (a
    /// pass over the store, unless it was sliced into as many slots already).
    pub fn make_slice(&self, slot_count: u32, owned: &[Slot]) -> Result<(), StorageError> {
        self.changes_everything();
        let indexed = self.slice()? == Slice::Ring(slot_count);
        self.txn()
            .open_table(META)?
            .insert(SLOT_COUNT_KEY, u64::from(slot_count))?;
        if !indexed {
            rebuild_index(self.txn(), Some(slot_count))?;
        }
        self.txn().delete_table(SLOT_STATES)?;
        let mut table = self.txn().open_table(SLOT_STATES)?;
        for slot in owned {
            table.insert(slot.0, SlotState::Owned.to_u8())?;
        }
        Ok(())
    }

    /// Sets the state of `slot` (`None`: the store no longer holds it).
    pub fn set_slot_state(&self, slot: Slot, state: Option<SlotState>) -> Result<(), StorageError> {
        self.changes_everything();
        let mut table = self.txn().open_table(SLOT_STATES)?;
        match state {
            Some(state) => table.insert(slot.0, state.to_u8())?,
            None => table.remove(slot.0)?,
        };
        Ok(())
    }
}

impl OpenBatch<'_> {
    /// The state of `slot` as this batch sees it.
    pub fn slot_state(&mut self, slot: Slot) -> Result<Option<SlotState>, StorageError> {
        let found = self.slot_states()?.get(slot.0)?.map(|state| state.value());
        found.map(|byte| state_of(slot, byte)).transpose()
    }
}

/// Which slots the store holds, as `txn` sees it.
pub(super) fn slice_in(txn: &WriteTransaction) -> Result<Slice, StorageError> {
    let meta = txn.open_table(META)?;
    let found = meta.get(SLOT_COUNT_KEY)?.map(|count| count.value());
    slice_of(found)
}

fn slice_of(count: Option<u64>) -> Result<Slice, StorageError> {
    match count {
        None => Ok(Slice::Whole),
        Some(count) => u32::try_from(count)
            .map(Slice::Ring)
            .map_err(|_| corrupt(SLOT_COUNT_KEY.to_owned(), count)),
    }
}

fn state_of(slot: Slot, byte: u8) -> Result<SlotState, StorageError> {
    SlotState::from_u8(byte).ok_or_else(|| corrupt(slot.to_string(), u64::from(byte)))
}

fn corrupt(key: String, value: u64) -> StorageError {
    StorageError::Corrupt {
        key,
        source: DecodeError::InvalidField {
            field: "slot state",
            value,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::super::Store;
    use super::*;

    #[test]
    fn a_store_is_whole_until_sliced_and_keeps_its_slot_states() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.redb")).unwrap();
        assert_eq!(store.read().unwrap().slice().unwrap(), Slice::Whole);
        let batch = store.write().unwrap();
        batch.make_slice(8, &[Slot(0), Slot(1)]).unwrap();
        batch
            .set_slot_state(Slot(1), Some(SlotState::Frozen))
            .unwrap();
        batch
            .set_slot_state(Slot(5), Some(SlotState::Importing))
            .unwrap();
        batch.set_slot_state(Slot(0), None).unwrap();
        batch.commit().unwrap();
        let read = store.read().unwrap();
        assert_eq!(read.slice().unwrap(), Slice::Ring(8));
        assert_eq!(read.slot_state(Slot(0)).unwrap(), None);
        assert_eq!(read.slot_state(Slot(1)).unwrap(), Some(SlotState::Frozen));
        assert_eq!(
            read.slot_states().unwrap(),
            [
                (Slot(1), SlotState::Frozen),
                (Slot(5), SlotState::Importing)
            ]
        );
        assert!(!SlotState::Frozen.takes_writes() && SlotState::Frozen.answers_reads());
        assert!(!SlotState::Importing.answers_reads());
    }
}
