//! Atomic writes: one [`WriteBatch`] is one redb transaction.
//!
//! Each operation reads the record, computes the new one completely and only then
//! writes it, so a [`Refusal`] leaves the batch untouched. A write that would leave a
//! handle's values larger than [`MAX_VALUE_LIST_LEN`] octets is refused
//! ([`Refusal::TooLarge`]): every stored handle fits one resolution answer. The limit
//! is a constant, so every replica refuses the same writes. Every write of a handle
//! record keeps the value index in step (module `value_index`).

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use redb::{Durability, ReadableTable, WriteTransaction};
use serde::{Deserialize, Serialize};

use super::commits::{Changes, Commits};
use super::error::{Refusal, StorageError};
use super::open_batch::OpenBatch;
use super::read::{decode_handle, decode_prefix};
use super::recent::{RecentChanges, RecentIndex};
use super::tables::{HandleRecord, PrefixRecord};
use super::value_index::{IndexWriter, IndexedTypes};
use crate::codec::MAX_VALUE_LIST_LEN;
use crate::names::Handle;
use crate::values::{HandleValue, ValueIndex, value_list_len};

/// What a create did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateOutcome {
    /// The handle did not exist and now does.
    Created,
    /// The handle existed and its values were replaced (overwrite was asked for).
    Replaced,
}

/// Whether a create may replace an existing handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExistingHandle {
    /// Refuse with [`Refusal::HandleExists`] (the default).
    Refuse,
    /// Replace every value of the existing handle.
    Overwrite,
}

/// Whether adding a value whose index is taken is refused or replaces it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExistingValue {
    /// Refuse with [`Refusal::ValueExists`] (the default).
    Refuse,
    /// Replace the value in place (the reference server's OverwriteWhenExists).
    Replace,
}

/// A set of writes that become visible and durable together on [`WriteBatch::commit`].
pub struct WriteBatch {
    txn: WriteTransaction,
    commits: Arc<Commits>,
    indexed: Arc<IndexedTypes>,
    /// What the batch's writes may change, for the store's commit watch.
    changes: Mutex<Changes>,
    /// Where the store's remembered results are, as committed.
    recent: Arc<RecentIndex>,
    /// What the batch changed of them.
    recent_changes: Mutex<RecentChanges>,
}

impl std::fmt::Debug for WriteBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteBatch").finish_non_exhaustive()
    }
}

impl WriteBatch {
    pub(super) fn new(
        txn: WriteTransaction,
        commits: Arc<Commits>,
        indexed: Arc<IndexedTypes>,
        recent: Arc<RecentIndex>,
    ) -> Self {
        WriteBatch {
            txn,
            commits,
            indexed,
            changes: Mutex::default(),
            recent,
            recent_changes: Mutex::default(),
        }
    }

    /// Notes that the handle record of folded `key` is written or deleted.
    pub(super) fn changes_handle(&self, key: &str) {
        self.changes().handle(key);
    }

    /// Notes a change that is not one handle record's (module `commits`).
    pub(super) fn changes_everything(&self) {
        self.changes().everything();
    }

    fn changes(&self) -> MutexGuard<'_, Changes> {
        self.changes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What the batch changed of the remembered results (module `recent`).
    pub(super) fn recent_changes(&self) -> MutexGuard<'_, RecentChanges> {
        self.recent_changes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Where the store's remembered results are, as committed.
    pub(super) fn recent_index(&self) -> &RecentIndex {
        &self.recent
    }

    /// The transaction under the batch, for the other writers of this module.
    pub(super) fn txn(&self) -> &WriteTransaction {
        &self.txn
    }

    /// The value index of the batch, open for updates.
    pub(super) fn value_index(&self) -> Result<IndexWriter<'_, '_>, StorageError> {
        IndexWriter::open(&self.txn, &self.indexed)
    }

    /// The value types this batch's index holds.
    pub(super) fn indexed_types(&self) -> Arc<IndexedTypes> {
        Arc::clone(&self.indexed)
    }

    /// The value types this batch's index holds, borrowed.
    pub(super) fn indexed(&self) -> &IndexedTypes {
        &self.indexed
    }

    /// This batch with the tables its handle writes touch held open from their first
    /// use until the [`OpenBatch`] is dropped: many writes in a row open each once.
    pub fn open(&self) -> OpenBatch<'_> {
        OpenBatch::new(self)
    }

    /// Makes every write of the batch durable (fsync) and visible.
    pub fn commit(self) -> Result<(), StorageError> {
        let WriteBatch {
            txn,
            commits,
            changes,
            recent,
            recent_changes,
            ..
        } = self;
        let changes = changes.into_inner().unwrap_or_else(PoisonError::into_inner);
        let recent_changes = recent_changes
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        commits.around(&changes, || recent.around(recent_changes, || txn.commit()))?;
        Ok(())
    }

    /// Makes every write of the batch visible now, and durable with the next durable
    /// commit or [`super::Store::sync`]: a crash before then loses the batch, and the
    /// store opens as of its last durable commit.
    pub fn commit_unsynced(mut self) -> Result<(), StorageError> {
        self.txn.set_durability(Durability::None)?;
        self.commit()
    }

    /// Drops every write of the batch.
    pub fn abort(self) -> Result<(), StorageError> {
        self.txn.abort()?;
        Ok(())
    }

    /// Every value of `handle` as this batch sees it; `None` when it does not exist.
    pub fn values(&self, handle: &Handle) -> Result<Option<Vec<HandleValue>>, StorageError> {
        self.open().values(handle)
    }

    /// [`OpenBatch::create`].
    pub fn create(
        &mut self,
        handle: &Handle,
        values: Vec<HandleValue>,
        existing: ExistingHandle,
    ) -> Result<CreateOutcome, StorageError> {
        self.open().create(handle, values, existing)
    }

    /// [`OpenBatch::delete`].
    pub fn delete(&mut self, handle: &Handle) -> Result<(), StorageError> {
        self.open().delete(handle)
    }

    /// [`OpenBatch::add_values`].
    pub fn add_values(
        &mut self,
        handle: &Handle,
        values: Vec<HandleValue>,
        existing: ExistingValue,
    ) -> Result<(), StorageError> {
        self.open().add_values(handle, values, existing)
    }

    /// [`OpenBatch::modify_values`].
    pub fn modify_values(
        &mut self,
        handle: &Handle,
        values: Vec<HandleValue>,
    ) -> Result<(), StorageError> {
        self.open().modify_values(handle, values)
    }

    /// [`OpenBatch::remove_values`].
    pub fn remove_values(
        &mut self,
        handle: &Handle,
        indexes: &[ValueIndex],
    ) -> Result<(), StorageError> {
        self.open().remove_values(handle, indexes)
    }

    /// [`OpenBatch::home_prefix`].
    pub fn home_prefix(&mut self, prefix: &str) -> Result<(), StorageError> {
        self.open().home_prefix(prefix)
    }

    /// [`OpenBatch::unhome_prefix`].
    pub fn unhome_prefix(&mut self, prefix: &str) -> Result<(), StorageError> {
        self.open().unhome_prefix(prefix)
    }
}

impl OpenBatch<'_> {
    fn load(&mut self, handle: &Handle) -> Result<Option<HandleRecord>, StorageError> {
        let table = self.handles()?;
        let found = table.get(handle.key().as_bytes())?;
        found
            .map(|bytes| decode_handle(handle.key(), bytes.value()))
            .transpose()
    }

    /// Every value of `handle` as this batch sees it; `None` when it does not exist.
    pub fn values(&mut self, handle: &Handle) -> Result<Option<Vec<HandleValue>>, StorageError> {
        Ok(self.load(handle)?.map(|record| record.values))
    }

    fn load_existing(&mut self, handle: &Handle) -> Result<HandleRecord, StorageError> {
        self.load(handle)?
            .ok_or(StorageError::Refused(Refusal::HandleNotFound))
    }

    /// Writes `record` under `handle`, and the value index with it.
    fn store(&mut self, handle: &Handle, record: &HandleRecord) -> Result<(), StorageError> {
        let key = handle.key();
        self.note_handle_change(key);
        let table = self.handles()?;
        let bytes = HandleRecord::encode_parts(key, &record.display, &record.values);
        let old = (table.insert(key.as_bytes(), bytes.as_slice())?)
            .map(|bytes| decode_handle(key, bytes.value()))
            .transpose()?;
        let old = old.as_ref().map(|old| old.values.as_slice());
        self.update_value_index(key, old, Some(&record.values))
    }

    /// Creates `handle` with `values` (in that order). With
    /// [`ExistingHandle::Refuse`] an existing handle is [`Refusal::HandleExists`]; with
    /// [`ExistingHandle::Overwrite`] its values are replaced and its first spelling kept.
    pub fn create(
        &mut self,
        handle: &Handle,
        values: Vec<HandleValue>,
        existing: ExistingHandle,
    ) -> Result<CreateOutcome, StorageError> {
        check_indexes(&values)?;
        check_size(&values)?;
        let outcome = match (self.load(handle)?, existing) {
            (Some(_), ExistingHandle::Refuse) => return Err(Refusal::HandleExists.into()),
            (Some(old), ExistingHandle::Overwrite) => {
                let record = HandleRecord {
                    display: old.display,
                    values,
                };
                self.store(handle, &record)?;
                return Ok(CreateOutcome::Replaced);
            }
            (None, _) => CreateOutcome::Created,
        };
        let record = HandleRecord {
            display: handle.as_str().to_owned(),
            values,
        };
        self.store(handle, &record)?;
        self.index_handle(handle.key())?;
        self.count_handle(handle, CountChange::Added)?;
        Ok(outcome)
    }

    /// Deletes `handle` and every value it has.
    pub fn delete(&mut self, handle: &Handle) -> Result<(), StorageError> {
        let key = handle.key();
        self.note_handle_change(key);
        let removed = (self.handles()?.remove(key.as_bytes())?)
            .map(|old| decode_handle(key, old.value()))
            .transpose()?;
        let Some(old) = removed else {
            return Err(Refusal::HandleNotFound.into());
        };
        self.update_value_index(key, Some(&old.values), None)?;
        self.unindex_handle(key)?;
        self.count_handle(handle, CountChange::Removed)
    }

    /// Appends `values` to `handle`. With [`ExistingValue::Refuse`] every index must
    /// be new; with [`ExistingValue::Replace`] a value whose index is taken replaces the
    /// old one in place.
    pub fn add_values(
        &mut self,
        handle: &Handle,
        values: Vec<HandleValue>,
        existing: ExistingValue,
    ) -> Result<(), StorageError> {
        check_request(&values)?;
        let mut record = self.load_existing(handle)?;
        for value in values {
            match (find(&record, value.index), existing) {
                (None, _) => record.values.push(value),
                (Some(at), ExistingValue::Replace) => record.values[at] = value,
                (Some(_), ExistingValue::Refuse) => {
                    return Err(Refusal::ValueExists(value.index).into());
                }
            }
        }
        check_size(&record.values)?;
        self.store(handle, &record)
    }

    /// Replaces the values of `handle` that have the indexes of `values`, in place;
    /// every index must exist.
    pub fn modify_values(
        &mut self,
        handle: &Handle,
        values: Vec<HandleValue>,
    ) -> Result<(), StorageError> {
        check_request(&values)?;
        let mut record = self.load_existing(handle)?;
        for value in values {
            let position = find(&record, value.index).ok_or(Refusal::ValueNotFound(value.index))?;
            record.values[position] = value;
        }
        check_size(&record.values)?;
        self.store(handle, &record)
    }

    /// Removes the values of `handle` with `indexes`; every index must exist.
    pub fn remove_values(
        &mut self,
        handle: &Handle,
        indexes: &[ValueIndex],
    ) -> Result<(), StorageError> {
        check_index_list(indexes.iter().copied())?;
        if indexes.is_empty() {
            return Err(Refusal::NoValues.into());
        }
        let mut record = self.load_existing(handle)?;
        if let Some(missing) = indexes.iter().find(|&&i| find(&record, i).is_none()) {
            return Err(Refusal::ValueNotFound(*missing).into());
        }
        record.values.retain(|v| !indexes.contains(&v.index));
        self.store(handle, &record)
    }

    /// Records that this server serves the naming authority `prefix` (as written).
    pub fn home_prefix(&mut self, prefix: &str) -> Result<(), StorageError> {
        self.update_prefix(prefix, |record| record.homed = true)
    }

    /// Records that this server no longer serves `prefix`; its handles stay.
    pub fn unhome_prefix(&mut self, prefix: &str) -> Result<(), StorageError> {
        self.update_prefix(prefix, |record| record.homed = false)
    }

    fn count_handle(&mut self, handle: &Handle, change: CountChange) -> Result<(), StorageError> {
        self.update_prefix(handle.prefix(), |record| {
            record.handle_count = match change {
                CountChange::Added => record.handle_count.saturating_add(1),
                CountChange::Removed => record.handle_count.saturating_sub(1),
            }
        })
    }

    pub(super) fn update_prefix(
        &mut self,
        prefix: &str,
        change: impl FnOnce(&mut PrefixRecord),
    ) -> Result<(), StorageError> {
        let key = crate::names::fold_key(prefix);
        let table = self.prefixes()?;
        let found = table
            .get(key.as_bytes())?
            .map(|bytes| decode_prefix(&key, bytes.value()))
            .transpose()?;
        let mut record = match found {
            Some(record) => record,
            None => PrefixRecord {
                display: prefix.to_owned(),
                handle_count: 0,
                homed: false,
            },
        };
        change(&mut record);
        if record.is_empty() {
            table.remove(key.as_bytes())?;
        } else {
            table.insert(key.as_bytes(), record.encode().as_slice())?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy)]
enum CountChange {
    Added,
    Removed,
}

fn find(record: &HandleRecord, index: ValueIndex) -> Option<usize> {
    record.values.iter().position(|v| v.index == index)
}

/// A handle's values take at most [`MAX_VALUE_LIST_LEN`] octets.
pub(super) fn check_size(values: &[HandleValue]) -> Result<(), Refusal> {
    let octets = value_list_len(values);
    if octets > MAX_VALUE_LIST_LEN {
        return Err(Refusal::TooLarge {
            octets: octets as u64,
            limit: MAX_VALUE_LIST_LEN as u64,
        });
    }
    Ok(())
}

/// Indexes of a value list: positive and unique.
pub fn check_indexes(values: &[HandleValue]) -> Result<(), Refusal> {
    check_index_list(values.iter().map(|v| v.index))
}

/// Like [`check_indexes`], and the list must name at least one value.
fn check_request(values: &[HandleValue]) -> Result<(), Refusal> {
    if values.is_empty() {
        return Err(Refusal::NoValues);
    }
    check_indexes(values)
}

fn check_index_list(indexes: impl Iterator<Item = ValueIndex>) -> Result<(), Refusal> {
    let mut seen = HashSet::new();
    for index in indexes {
        if index.0 == 0 {
            return Err(Refusal::ZeroIndex);
        }
        if !seen.insert(index) {
            return Err(Refusal::DuplicateIndex(index));
        }
    }
    Ok(())
}
