//! Whole handles many at a time: what an import writes ([`WriteBatch::put_handles`])
//! and what an export reads ([`ReadSnapshot::handle_records`]).
//!
//! Owns [`HandlePut`], [`PutMode`] and [`PutOutcome`]. A put writes the handle's
//! values exactly as given (their timestamps included: an import keeps them) and
//! decides alone what to do with a handle that exists, so that putting the same
//! handles twice changes nothing the second time: identical values are
//! [`PutOutcome::Unchanged`], other values are replaced only under
//! [`PutMode::Replace`]. Each put is checked as a create is (positive, unique indexes;
//! at most [`crate::codec::MAX_VALUE_LIST_LEN`] octets) and one that fails is
//! [`PutOutcome::Refused`] without stopping the others.
//!
//! Each put keeps the value index in step. Speed is the point: the tables are opened
//! once per call, not once per handle, and the prefix counts are added up and written
//! once per prefix.

use std::collections::HashMap;
use std::ops::Bound;

use redb::ReadableTable;
use serde::{Deserialize, Serialize};

use super::batch::{WriteBatch, check_indexes, check_size};
use super::error::StorageError;
use super::read::{ReadSnapshot, decode_handle, stored_key};
use super::slots::{Slice, slice_in, slot_of};
use super::tables::{self, HandleRecord};
use super::value_index::{IndexChanges, IndexedTypes};
use crate::names::{Handle, fold_key};
use crate::values::HandleValue;

/// One handle to write whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandlePut {
    /// The handle, as written.
    pub handle: Handle,
    /// Its values, in stored order, timestamps as they are to be kept.
    pub values: Vec<HandleValue>,
    /// What to do when the handle exists with other values.
    pub mode: PutMode,
}

/// What a put does to a handle that exists with other values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PutMode {
    /// Leave it as it is ([`PutOutcome::Differs`]).
    CreateOnly,
    /// Replace its values, keeping its first spelling ([`PutOutcome::Replaced`]).
    Replace,
}

/// When an existing handle's values are the same as a put's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Sameness {
    /// Equal in every field, timestamps included (values read back from an export).
    Exact,
    /// Equal in every field but their timestamps (values the server dated now, which
    /// an earlier put of the same values dated then).
    TimestampsAside,
}

impl Sameness {
    /// Whether `old` (stored) and `new` (put) are the same values.
    pub fn same(self, old: &[HandleValue], new: &[HandleValue]) -> bool {
        match self {
            Sameness::Exact => old == new,
            Sameness::TimestampsAside => {
                old.len() == new.len()
                    && old.iter().zip(new).all(|(old, new)| {
                        old.index == new.index
                            && old.value_type == new.value_type
                            && old.data == new.data
                            && old.ttl == new.ttl
                            && old.permissions == new.permissions
                            && old.references == new.references
                    })
            }
        }
    }
}

/// What one put did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PutOutcome {
    /// The handle did not exist and now does.
    Created,
    /// It existed with other values, which the put replaced.
    Replaced,
    /// It existed with these very values.
    Unchanged,
    /// It existed with other values, left as they were.
    Differs,
    /// Its values break a rule of the store (an index 0 or twice, too many octets).
    Refused,
}

impl PutOutcome {
    /// Whether the put changed the store.
    pub fn wrote(self) -> bool {
        matches!(self, PutOutcome::Created | PutOutcome::Replaced)
    }
}

type HandlesTable<'txn> = redb::Table<'txn, &'static [u8], &'static [u8]>;

impl WriteBatch {
    /// Writes each of `puts` (see the module docs), an existing handle's values
    /// compared as `sameness` says; one outcome per put, in the order of `puts`. Two
    /// puts of one handle are carried out in their order.
    pub fn put_handles(
        &self,
        puts: &[HandlePut],
        sameness: Sameness,
    ) -> Result<Vec<PutOutcome>, StorageError> {
        self.changes_everything();
        let txn = self.txn();
        let slot_count = match slice_in(txn)? {
            Slice::Whole => None,
            Slice::Ring(count) => Some(count),
        };
        let mut handles = txn.open_table(tables::HANDLES)?;
        let types = self.indexed_types();
        let mut value_changes = IndexChanges::default();
        let mut outcomes = vec![PutOutcome::Refused; puts.len()];
        for at in key_order(puts) {
            let put = &puts[at];
            outcomes[at] = put_one(&mut handles, &types, &mut value_changes, put, sameness)?;
        }
        let mut values = self.value_index()?;
        values.write(value_changes)?;
        let created = || {
            puts.iter()
                .zip(&outcomes)
                .filter(|(_, o)| **o == PutOutcome::Created)
        };
        if let Some(count) = slot_count {
            let mut slotted: Vec<(u32, &[u8])> = created()
                .map(|(put, _)| {
                    let key = put.handle.key();
                    (slot_of(key, count).0, key.as_bytes())
                })
                .collect();
            slotted.sort_unstable();
            let mut index = txn.open_table(tables::SLOT_INDEX)?;
            for entry in slotted {
                index.insert(entry, ())?;
            }
        }
        // Folded prefix → (the spelling of its first new handle, handles created).
        let mut counts: HashMap<String, (&str, u64)> = HashMap::new();
        for (put, _) in created() {
            let prefix = put.handle.prefix();
            counts.entry(fold_key(prefix)).or_insert((prefix, 0)).1 += 1;
        }
        drop((handles, values));
        for (prefix, count) in counts.into_values() {
            self.open().update_prefix(prefix, |record| {
                record.handle_count = record.handle_count.saturating_add(count);
            })?;
        }
        Ok(outcomes)
    }
}

/// The positions of `puts` in the order of their folded keys (two puts of one handle
/// in their own order), so that the `handles` table is written front to back.
fn key_order(puts: &[HandlePut]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..puts.len()).collect();
    order.sort_by_key(|&at| puts[at].handle.key());
    order
}

/// Writes one put into `handles`, and gathers the value index's changes for it.
fn put_one(
    handles: &mut HandlesTable<'_>,
    types: &IndexedTypes,
    value_changes: &mut IndexChanges,
    put: &HandlePut,
    sameness: Sameness,
) -> Result<PutOutcome, StorageError> {
    if check_indexes(&put.values).is_err() || check_size(&put.values).is_err() {
        return Ok(PutOutcome::Refused);
    }
    let key = put.handle.key();
    let existing = handles
        .get(key.as_bytes())?
        .map(|bytes| decode_handle(key, bytes.value()))
        .transpose()?;
    let (display, outcome) = match (&existing, put.mode) {
        (None, _) => (put.handle.as_str(), PutOutcome::Created),
        (Some(old), _) if sameness.same(&old.values, &put.values) => {
            return Ok(PutOutcome::Unchanged);
        }
        (Some(_), PutMode::CreateOnly) => return Ok(PutOutcome::Differs),
        (Some(old), PutMode::Replace) => (old.display.as_str(), PutOutcome::Replaced),
    };
    let bytes = HandleRecord::encode_parts(key, display, &put.values);
    handles.insert(key.as_bytes(), bytes.as_slice())?;
    let old = existing.as_ref().map(|old| old.values.as_slice());
    value_changes.gather(types, key, old, Some(&put.values));
    Ok(outcome)
}

impl ReadSnapshot {
    /// Up to `limit` whole handles in folded-key order after the folded key `after`:
    /// those under the naming authority `prefix` (ASCII case-insensitive), or every
    /// handle the store holds when `prefix` is `None`. Each comes with its folded key.
    pub fn handle_records(
        &self,
        prefix: Option<&str>,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, HandleRecord)>, StorageError> {
        let range = prefix.map(|prefix| tables::prefix_range(&fold_key(prefix)));
        let lower = match (after, &range) {
            (Some(after), _) => Bound::Excluded(after.as_bytes()),
            (None, Some((start, _))) => Bound::Included(start.as_bytes()),
            (None, None) => Bound::Unbounded,
        };
        let upper = match &range {
            Some((_, end)) => Bound::Excluded(end.as_bytes()),
            None => Bound::Unbounded,
        };
        let table = self.txn().open_table(tables::HANDLES)?;
        let mut records = Vec::new();
        for entry in table.range::<&[u8]>((lower, upper))?.take(limit) {
            let (key, bytes) = entry?;
            let key = stored_key(key.value())?;
            records.push((key.to_owned(), decode_handle(key, bytes.value())?));
        }
        Ok(records)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{ExistingHandle, Slot, Store};
    use super::*;
    use crate::values::ValueSelection;

    fn put(text: &str, url: &str, mode: PutMode) -> HandlePut {
        let mut value = HandleValue::new(1, "URL", url);
        value.timestamp = 1_700_000_000;
        HandlePut {
            handle: Handle::parse(text).unwrap(),
            values: vec![value],
            mode,
        }
    }

    fn apply(store: &Store, puts: &[HandlePut]) -> Vec<PutOutcome> {
        let batch = store.write().unwrap();
        let outcomes = batch.put_handles(puts, Sameness::Exact).unwrap();
        batch.commit().unwrap();
        outcomes
    }

    #[test]
    fn putting_the_same_handles_twice_changes_nothing_the_second_time() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.redb")).unwrap();
        let puts = [
            put("10.1/a", "https://a/", PutMode::CreateOnly),
            put("10.1/B", "https://b/", PutMode::CreateOnly),
            put("20.2/c", "https://c/", PutMode::CreateOnly),
        ];
        assert_eq!(apply(&store, &puts), [PutOutcome::Created; 3]);
        let before = store.read().unwrap().image();
        assert_eq!(apply(&store, &puts), [PutOutcome::Unchanged; 3]);
        assert_eq!(store.read().unwrap().image(), before);

        let read = store.read().unwrap();
        let prefixes = read.list_prefixes().unwrap();
        let counts: Vec<u64> = prefixes.iter().map(|p| p.handle_count).collect();
        assert_eq!(counts, [2, 1]);
        let record = read
            .get(&puts[1].handle, &ValueSelection::all())
            .unwrap()
            .unwrap();
        assert_eq!(record.values[0].timestamp, 1_700_000_000, "kept as given");
    }

    #[test]
    fn values_dated_again_are_the_same_when_timestamps_are_set_aside() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.redb")).unwrap();
        apply(&store, &[put("10.1/a", "https://a/", PutMode::CreateOnly)]);
        let mut again = put("10.1/a", "https://a/", PutMode::CreateOnly);
        again.values[0].timestamp += 60;
        let batch = store.write().unwrap();
        let aside = batch.put_handles(std::slice::from_ref(&again), Sameness::TimestampsAside);
        assert_eq!(aside.unwrap(), [PutOutcome::Unchanged]);
        let exact = batch.put_handles(&[again], Sameness::Exact).unwrap();
        assert_eq!(exact, [PutOutcome::Differs]);
    }

    #[test]
    fn other_values_are_replaced_only_when_asked_and_bad_puts_alone_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.redb")).unwrap();
        apply(
            &store,
            &[put("10.1/First", "https://a/", PutMode::CreateOnly)],
        );
        let mut zero = put("10.1/zero", "https://z/", PutMode::CreateOnly);
        zero.values[0].index.0 = 0;
        let outcomes = apply(
            &store,
            &[
                put("10.1/FIRST", "https://other/", PutMode::CreateOnly),
                zero,
                put("10.1/new", "https://n/", PutMode::Replace),
            ],
        );
        let expected = [
            PutOutcome::Differs,
            PutOutcome::Refused,
            PutOutcome::Created,
        ];
        assert_eq!(outcomes, expected);
        let replaced = apply(
            &store,
            &[put("10.1/first", "https://other/", PutMode::Replace)],
        );
        assert_eq!(replaced, [PutOutcome::Replaced]);
        let read = store.read().unwrap();
        let handle = Handle::parse("10.1/first").unwrap();
        let record = read.get(&handle, &ValueSelection::all()).unwrap().unwrap();
        assert_eq!(record.display, "10.1/First", "the first spelling is kept");
        assert_eq!(record.values[0].data, b"https://other/");
        assert_eq!(read.prefix("10.1").unwrap().unwrap().handle_count, 2);
    }

    #[test]
    fn puts_give_the_store_creates_give_and_index_their_slots() {
        let dir = tempfile::tempdir().unwrap();
        let (by_put, by_create) = (dir.path().join("p.redb"), dir.path().join("c.redb"));
        let (by_put, by_create) = (
            Store::open(&by_put).unwrap(),
            Store::open(&by_create).unwrap(),
        );
        let names = ["10.1/a", "10.1/b", "cnri.test/日本", "20.2/x"];
        for store in [&by_put, &by_create] {
            let batch = store.write().unwrap();
            batch
                .make_slice(4, &(0..4).map(Slot).collect::<Vec<_>>())
                .unwrap();
            batch.commit().unwrap();
        }
        let puts: Vec<HandlePut> = names
            .iter()
            .map(|name| put(name, "https://x/", PutMode::CreateOnly))
            .collect();
        apply(&by_put, &puts);
        let mut batch = by_create.write().unwrap();
        for put in puts {
            batch
                .create(&put.handle, put.values, ExistingHandle::Refuse)
                .unwrap();
        }
        batch.commit().unwrap();
        assert_eq!(
            by_put.read().unwrap().image(),
            by_create.read().unwrap().image()
        );
        let read = by_put.read().unwrap();
        let indexed: usize = (0..4)
            .map(|slot| read.slot_page(Slot(slot), None, 10).unwrap().len())
            .sum();
        assert_eq!(indexed, names.len());
    }

    #[test]
    fn records_are_read_in_key_order_by_prefix_or_all_and_after_a_key() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.redb")).unwrap();
        let names = ["10.1/b", "10.1/a", "10.10/a", "10.1/c/d", "9/z"];
        let puts: Vec<HandlePut> = names
            .iter()
            .map(|name| put(name, "https://x/", PutMode::CreateOnly))
            .collect();
        apply(&store, &puts);
        let read = store.read().unwrap();
        let keys = |prefix, after, limit| -> Vec<String> {
            let records = read.handle_records(prefix, after, limit).unwrap();
            records.into_iter().map(|(key, _)| key).collect()
        };
        assert_eq!(
            keys(Some("10.1"), None, 10),
            ["10.1/A", "10.1/B", "10.1/C/D"]
        );
        assert_eq!(keys(Some("10.1"), Some("10.1/A"), 1), ["10.1/B"]);
        assert_eq!(
            keys(None, None, 10),
            ["10.1/A", "10.1/B", "10.1/C/D", "10.10/A", "9/Z"]
        );
        assert_eq!(keys(None, Some("10.10/A"), 10), ["9/Z"]);
        let records = read.handle_records(Some("9"), None, 1).unwrap();
        assert_eq!(records[0].1.display, "9/z");
    }
}
