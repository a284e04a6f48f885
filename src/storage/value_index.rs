//! The value index: handles by the values they hold, for reverse lookup.
//!
//! Owns the `value_index` and `indexed_types` tables, [`IndexedTypes`] (which value
//! types are indexed, the node's configuration) and the search over the index
//! ([`ReadSnapshot::search`]). Every write of the `handles` table goes through
//! [`IndexWriter::update`] in the same transaction, with the handle's values before
//! and after, so the index never disagrees with the handles a reader sees: create,
//! add, modify, remove and delete ([`WriteBatch`]), bulk puts, image imports (a
//! snapshot installed) and slot deletions (which delete handle by handle).
//! Invariant: the index holds exactly `(folded type, first INDEXED_OCTETS octets of
//! the data, folded handle key)` for each value of an indexed type of each handle, and
//! `indexed_types` the folded types it was built for. A file whose `indexed_types`
//! differs from the configuration, or that has no index (written before it existed),
//! gets it rebuilt on open ([`ensure_index`]): a pass over the store, no format change.
//!
//! A search walks the index range of one term of the query (the one with the longest
//! literal head among the indexed types, so `URL=https://a/*` reads only the URLs
//! starting `https://a/`, an exact pattern only its equals, and a pattern starting
//! with `*` every value of its type), reads each candidate handle and checks it whole:
//! every pattern against the full data (the index holds only a head), every other
//! term against its values. Hits come in index order (matched value, then folded
//! handle), each handle once: at the first position where it matches. Since who reads
//! decides what matches (a value that is not public counts only for a caller allowed
//! to read it, module [`crate::service`]), a hit says at which of the two positions
//! it stands ([`HitAccess`]): the first match counting every value, and the first
//! counting public values only.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use redb::{ReadableTable, Table, TableHandle, WriteTransaction};
use serde::{Deserialize, Serialize};

use super::batch::WriteBatch;
use super::error::StorageError;
use super::open_batch::OpenBatch;
use super::read::{ReadSnapshot, decode_handle, stored_key};
use super::tables::{HANDLES, INDEXED_TYPES, VALUE_INDEX, ValueIndexKey};
use crate::names::fold_key;
use crate::values::{HandleValue, SearchQuery, SearchTerm, ValuePattern};

/// How many octets of a value's data the index keeps; longer data is checked whole on
/// the handle's record.
pub const INDEXED_OCTETS: usize = 1024;

/// The value types a store indexes, folded (ASCII upper case).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexedTypes(BTreeSet<String>);

impl IndexedTypes {
    /// The types `names` (any case).
    pub fn new<S: AsRef<str>>(names: impl IntoIterator<Item = S>) -> IndexedTypes {
        IndexedTypes(names.into_iter().map(|name| fold(name.as_ref())).collect())
    }

    /// The folded names, in order.
    pub fn names(&self) -> Vec<String> {
        self.0.iter().cloned().collect()
    }

    fn holds(&self, value_type: &str) -> bool {
        !self.0.is_empty() && self.0.contains(&fold(value_type))
    }

    /// How `query` is searched with this index: along its indexed term with the
    /// longest literal head (the first such on a tie); `None` when it names no indexed
    /// type.
    pub fn plan<'q>(&self, query: &'q SearchQuery) -> Option<SearchPlan<'q>> {
        let mut best: Option<(usize, &ValuePattern)> = None;
        for (at, term) in query.terms.iter().enumerate() {
            if !self.holds(&term.value_type) {
                continue;
            }
            let Some(longest) = term.patterns.iter().max_by_key(|p| p.head().len()) else {
                continue;
            };
            if best.is_none_or(|(_, p)| longest.head().len() > p.head().len()) {
                best = Some((at, longest));
            }
        }
        let (driving, pattern) = best?;
        Some(SearchPlan {
            query,
            driving,
            pattern,
            folded_type: fold(&query.terms[driving].value_type),
            prefix_key: query.prefix.as_deref().map(|p| format!("{}/", fold_key(p))),
        })
    }

    /// The index entries of `values`: (folded type, data head).
    fn entries<'v>(&self, values: &'v [HandleValue]) -> BTreeSet<(String, &'v [u8])> {
        values
            .iter()
            .filter(|value| self.holds(&value.value_type))
            .map(|value| (fold(&value.value_type), head(&value.data)))
            .collect()
    }

    /// The entries (folded type, data head) that go from `old` values to `new` ones:
    /// those only `old` has are removed, those only `new` has inserted.
    fn changes<'v>(
        &self,
        old: Option<&'v [HandleValue]>,
        new: Option<&'v [HandleValue]>,
    ) -> Vec<((String, &'v [u8]), IndexChange)> {
        let old = self.entries(old.unwrap_or_default());
        let new = self.entries(new.unwrap_or_default());
        let removed = old
            .difference(&new)
            .map(|entry| (entry.clone(), IndexChange::Remove));
        let inserted = new
            .difference(&old)
            .map(|entry| (entry.clone(), IndexChange::Insert));
        removed.chain(inserted).collect()
    }
}

impl Default for IndexedTypes {
    /// URL and EMAIL.
    fn default() -> Self {
        IndexedTypes::new(["URL", "EMAIL"])
    }
}

fn fold(value_type: &str) -> String {
    value_type.to_ascii_uppercase()
}

/// What the index keeps of `data`.
fn head(data: &[u8]) -> &[u8] {
    &data[..data.len().min(INDEXED_OCTETS)]
}

/// Which values count when a handle is matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visibility {
    /// Every value.
    All,
    /// Publicly readable values only.
    Public,
}

impl Visibility {
    fn admits(self, value: &HandleValue) -> bool {
        self == Visibility::All || value.is_public()
    }
}

/// A query and the index range it is searched along ([`IndexedTypes::plan`]).
#[derive(Debug, Clone)]
pub struct SearchPlan<'q> {
    query: &'q SearchQuery,
    driving: usize,
    pattern: &'q ValuePattern,
    folded_type: String,
    prefix_key: Option<String>,
}

impl SearchPlan<'_> {
    fn term(&self) -> &SearchTerm {
        &self.query.terms[self.driving]
    }

    /// The first index position (data head) at which a handle holding `values`
    /// matches the query, counting the values `visibility` admits; `None` when it does
    /// not match.
    pub fn first_match<'v>(
        &self,
        values: &'v [HandleValue],
        visibility: Visibility,
    ) -> Option<&'v [u8]> {
        let others = self.query.terms.iter().enumerate();
        let others_match = others
            .filter(|(at, _)| *at != self.driving)
            .all(|(_, term)| {
                values
                    .iter()
                    .any(|value| visibility.admits(value) && term.matches(value))
            });
        if !others_match {
            return None;
        }
        values
            .iter()
            .filter(|value| visibility.admits(value) && self.term().matches(value))
            .map(|value| head(&value.data))
            .min()
    }

    /// Whether a handle whose folded key is `key` lies under the query's prefix.
    pub fn covers(&self, key: &str) -> bool {
        self.prefix_key
            .as_deref()
            .is_none_or(|prefix| key.starts_with(prefix))
    }
}

/// Where a hit stands in the index, for paging: its matched value's head, then its
/// handle's folded key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SearchPosition {
    /// The head of the matched value's data.
    pub data: Vec<u8>,
    /// The folded handle key.
    pub key: String,
}

/// A handle a search found, and where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Found {
    /// Its position in the index.
    pub position: SearchPosition,
    /// The handle, as first written.
    pub handle: String,
}

/// Who a hit is for, by what they may read of the handle (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HitAccess {
    /// Its first match counting every value is its first counting public ones: every
    /// caller finds it here.
    Public,
    /// Its first match counting every value, which is not public: a caller allowed to
    /// read the handle's values (these) finds it here, others not.
    IfReadable(Vec<HandleValue>),
    /// Its first match counting public values only: a caller not allowed to read the
    /// handle's values (these) finds it here; others found it before.
    UnlessReadable(Vec<HandleValue>),
}

/// One hit of [`ReadSnapshot::search`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchHit {
    /// The handle and its position.
    pub found: Found,
    /// Who finds it there.
    pub access: HitAccess,
}

type IndexTable<'txn> = Table<'txn, ValueIndexKey<'static>, ()>;

/// The value index of one write transaction, open for a run of updates.
pub(super) struct IndexWriter<'txn, 't> {
    table: IndexTable<'txn>,
    types: &'t IndexedTypes,
}

/// Changes to the index gathered over many handles (a bulk put), written in index
/// order by [`IndexWriter::write`]: a batch of handles then touches each page of the
/// index once, where writing each handle's entries as it comes would touch a page per
/// handle. Of two changes to one entry the later wins.
#[derive(Debug, Default)]
pub(super) struct IndexChanges(BTreeMap<(String, Vec<u8>, String), IndexChange>);

impl IndexChanges {
    /// Adds what [`IndexWriter::update`] would write, with the index of `types`, for
    /// these arguments.
    pub(super) fn gather(
        &mut self,
        types: &IndexedTypes,
        key: &str,
        old: Option<&[HandleValue]>,
        new: Option<&[HandleValue]>,
    ) {
        for ((value_type, data), change) in types.changes(old, new) {
            let entry = (value_type, data.to_vec(), key.to_owned());
            self.0.insert(entry, change);
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum IndexChange {
    Insert,
    Remove,
}

impl<'txn, 't> IndexWriter<'txn, 't> {
    /// The index in `txn`, for the types `types`.
    pub(super) fn open(
        txn: &'txn WriteTransaction,
        types: &'t IndexedTypes,
    ) -> Result<Self, StorageError> {
        Ok(IndexWriter {
            table: txn.open_table(VALUE_INDEX)?,
            types,
        })
    }

    /// Makes the index follow the handle whose folded key is `key` from `old` values
    /// (`None`: it did not exist) to `new` ones (`None`: it is deleted).
    pub(super) fn update(
        &mut self,
        key: &str,
        old: Option<&[HandleValue]>,
        new: Option<&[HandleValue]>,
    ) -> Result<(), StorageError> {
        update_in(&mut self.table, self.types, key, old, new)
    }

    /// Writes `changes`, in index order.
    pub(super) fn write(&mut self, changes: IndexChanges) -> Result<(), StorageError> {
        for ((value_type, data, key), change) in changes.0 {
            let entry = (value_type.as_bytes(), data.as_slice(), key.as_bytes());
            apply_change(&mut self.table, entry, change)?;
        }
        Ok(())
    }
}

impl OpenBatch<'_> {
    /// [`IndexWriter::update`] on the batch's index, kept open.
    pub(super) fn update_value_index(
        &mut self,
        key: &str,
        old: Option<&[HandleValue]>,
        new: Option<&[HandleValue]>,
    ) -> Result<(), StorageError> {
        let types = self.indexed();
        update_in(self.value_index()?, types, key, old, new)
    }
}

/// Makes `table`, an index of `types`, follow the handle whose folded key is `key`
/// from `old` values to `new` ones (see [`IndexWriter::update`]).
fn update_in(
    table: &mut IndexTable<'_>,
    types: &IndexedTypes,
    key: &str,
    old: Option<&[HandleValue]>,
    new: Option<&[HandleValue]>,
) -> Result<(), StorageError> {
    for ((value_type, data), change) in types.changes(old, new) {
        apply_change(table, (value_type.as_bytes(), data, key.as_bytes()), change)?;
    }
    Ok(())
}

fn apply_change(
    table: &mut IndexTable<'_>,
    entry: ValueIndexKey<'_>,
    change: IndexChange,
) -> Result<(), StorageError> {
    match change {
        IndexChange::Insert => table.insert(entry, ())?,
        IndexChange::Remove => table.remove(entry)?,
    };
    Ok(())
}

/// Rebuilds the index when the file has none or one of other types than `types`.
pub(super) fn ensure_index(
    txn: &WriteTransaction,
    types: &IndexedTypes,
) -> Result<(), StorageError> {
    let present = txn
        .list_tables()?
        .any(|table| table.name() == VALUE_INDEX.name());
    let recorded = recorded_types(&txn.open_table(INDEXED_TYPES)?)?;
    if present && recorded == *types {
        return Ok(());
    }
    rebuild_index(txn, types)
}

/// The types an `indexed_types` table records.
fn recorded_types(
    table: &impl ReadableTable<&'static [u8], ()>,
) -> Result<IndexedTypes, StorageError> {
    let mut names = BTreeSet::new();
    for entry in table.iter()? {
        names.insert(stored_key(entry?.0.value())?.to_owned());
    }
    Ok(IndexedTypes(names))
}

/// Empties the index and indexes every handle the store holds for `types`.
fn rebuild_index(txn: &WriteTransaction, types: &IndexedTypes) -> Result<(), StorageError> {
    txn.delete_table(VALUE_INDEX)?;
    let mut index = IndexWriter::open(txn, types)?;
    let handles = txn.open_table(HANDLES)?;
    for entry in handles.iter()? {
        let (key, bytes) = entry?;
        let key = stored_key(key.value())?;
        let record = decode_handle(key, bytes.value())?;
        index.update(key, None, Some(&record.values))?;
    }
    txn.delete_table(INDEXED_TYPES)?;
    let mut recorded = txn.open_table(INDEXED_TYPES)?;
    for name in &types.0 {
        recorded.insert(name.as_bytes(), ())?;
    }
    Ok(())
}

impl WriteBatch {
    /// Empties the value index, for an image import that brings every handle anew.
    pub(super) fn clear_value_index(&self) -> Result<(), StorageError> {
        self.txn().delete_table(VALUE_INDEX)?;
        self.txn().open_table(VALUE_INDEX)?;
        Ok(())
    }
}

impl ReadSnapshot {
    /// The value types the store's index holds.
    pub fn indexed_types(&self) -> Result<IndexedTypes, StorageError> {
        recorded_types(&self.txn().open_table(INDEXED_TYPES)?)
    }

    /// Up to `limit` hits of `plan` after the position `after`, in index order (see the
    /// module docs). Reads the plan's index range up to the last hit (all of it when
    /// fewer match) and the record of each candidate.
    pub fn search(
        &self,
        plan: &SearchPlan<'_>,
        after: Option<&SearchPosition>,
        limit: usize,
    ) -> Result<Vec<SearchHit>, StorageError> {
        let index = self.txn().open_table(VALUE_INDEX)?;
        let handles = self.txn().open_table(HANDLES)?;
        let value_type = plan.folded_type.as_bytes();
        let wanted = head(plan.pattern.head());
        let exact = plan.pattern.is_exact() && wanted.len() < INDEXED_OCTETS;
        let lower = match after {
            Some(after) if after.data.as_slice() >= wanted => {
                Bound::Excluded((value_type, after.data.as_slice(), after.key.as_bytes()))
            }
            _ => Bound::Included((value_type, wanted, b"".as_slice())),
        };
        let mut hits = Vec::new();
        for entry in index.range::<ValueIndexKey<'_>>((lower, Bound::Unbounded))? {
            if hits.len() >= limit {
                break;
            }
            let (entry, _) = entry?;
            let (found_type, data, key) = entry.value();
            let in_range = if exact {
                data == wanted
            } else {
                data.starts_with(wanted)
            };
            if found_type != value_type || !in_range {
                break;
            }
            let key = stored_key(key)?;
            let whole = data.len() < INDEXED_OCTETS;
            let candidate = plan.covers(key)
                && (!whole || plan.term().patterns.iter().all(|p| p.matches(data)));
            if !candidate {
                continue;
            }
            let Some(bytes) = handles.get(key.as_bytes())? else {
                return Err(StorageError::Unindexed {
                    key: key.to_owned(),
                });
            };
            let record = decode_handle(key, bytes.value())?;
            let every = plan.first_match(&record.values, Visibility::All) == Some(data);
            let public = plan.first_match(&record.values, Visibility::Public) == Some(data);
            let access = match (every, public) {
                (true, true) => HitAccess::Public,
                (true, false) => HitAccess::IfReadable(record.values),
                (false, true) => HitAccess::UnlessReadable(record.values),
                (false, false) => continue,
            };
            let position = SearchPosition {
                data: data.to_vec(),
                key: key.to_owned(),
            };
            hits.push(SearchHit {
                found: Found {
                    position,
                    handle: record.display,
                },
                access,
            });
        }
        Ok(hits)
    }
}

#[cfg(test)]
mod tests;
