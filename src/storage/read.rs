//! Reads from one consistent snapshot of the store.
//!
//! A snapshot opens the tables every resolution reads once, on first use, since it
//! serves every reader until the store's next commit: the handles (every
//! resolution) and the prefixes (every resolution of a missing handle).

use std::ops::Bound;
use std::sync::{Arc, OnceLock};

use redb::{ReadOnlyTable, ReadTransaction, ReadableTable, ReadableTableMetadata, TableDefinition};

use super::error::StorageError;
use super::recent::RecentIndex;
use super::slots::SlotTables;
use super::tables::{self, HandleRecord, PrefixRecord};
use crate::names::{Handle, fold_key};
use crate::values::ValueSelection;

/// A read-only, consistent view of the store: later writes are not seen.
pub struct ReadSnapshot {
    txn: ReadTransaction,
    /// The store's commit count the snapshot is exactly the store at; `None` when a
    /// commit ran while it was opened.
    pub(super) version: Option<u64>,
    handles: OnceLock<BytesTable>,
    prefixes: OnceLock<BytesTable>,
    /// The slot states table and the slice, for the slot checks of every read.
    pub(super) slots: OnceLock<SlotTables>,
    /// Where the store's remembered results are, as committed (module `recent`).
    recent: Arc<RecentIndex>,
}

/// A table of folded names and record bytes (the handles, the prefixes).
type BytesTable = ReadOnlyTable<&'static [u8], &'static [u8]>;

impl std::fmt::Debug for ReadSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadSnapshot").finish_non_exhaustive()
    }
}

impl ReadSnapshot {
    pub(super) fn new(
        txn: ReadTransaction,
        version: Option<u64>,
        recent: Arc<RecentIndex>,
    ) -> Self {
        ReadSnapshot {
            txn,
            version,
            handles: OnceLock::new(),
            prefixes: OnceLock::new(),
            slots: OnceLock::new(),
            recent,
        }
    }

    /// Where the store's remembered results are, as committed now.
    pub(super) fn recent_index(&self) -> &RecentIndex {
        &self.recent
    }

    /// The transaction under the snapshot, for the other readers of this module.
    pub(super) fn txn(&self) -> &ReadTransaction {
        &self.txn
    }

    fn handles(&self) -> Result<&BytesTable, StorageError> {
        self.opened(&self.handles, tables::HANDLES)
    }

    fn prefixes(&self) -> Result<&BytesTable, StorageError> {
        self.opened(&self.prefixes, tables::PREFIXES)
    }

    /// The table `definition` as `held` keeps it for the snapshot's life, opened at
    /// its first use.
    fn opened<'a>(
        &self,
        held: &'a OnceLock<BytesTable>,
        definition: TableDefinition<&'static [u8], &'static [u8]>,
    ) -> Result<&'a BytesTable, StorageError> {
        if let Some(table) = held.get() {
            return Ok(table);
        }
        let table = self.txn.open_table(definition)?;
        Ok(held.get_or_init(|| table))
    }

    /// The record of `handle`, with only the values `selection` picks, in stored order;
    /// `None` when the handle does not exist. A handle that exists but has no selected
    /// value comes back with an empty value list.
    pub fn get(
        &self,
        handle: &Handle,
        selection: &ValueSelection,
    ) -> Result<Option<HandleRecord>, StorageError> {
        let Some(bytes) = self.handles()?.get(handle.key().as_bytes())? else {
            return Ok(None);
        };
        let mut record = decode_handle(handle.key(), bytes.value())?;
        if !selection.is_all() {
            record.values.retain(|value| selection.matches(value));
        }
        Ok(Some(record))
    }

    /// How many handles the store holds (redb keeps the count: no scan).
    pub fn handle_count(&self) -> Result<u64, StorageError> {
        Ok(self.handles()?.len()?)
    }

    /// Whether `handle` exists.
    pub fn contains(&self, handle: &Handle) -> Result<bool, StorageError> {
        Ok(self.handles()?.get(handle.key().as_bytes())?.is_some())
    }

    /// Up to `limit` handles under the naming authority `prefix` (ASCII
    /// case-insensitive), in folded-key order, starting after the handle `after` when
    /// given (for paging). Each comes in its display spelling.
    pub fn list_handles(
        &self,
        prefix: &str,
        after: Option<&Handle>,
        limit: usize,
    ) -> Result<Vec<String>, StorageError> {
        let (start, end) = tables::prefix_range(&fold_key(prefix));
        let lower = match after {
            Some(after) if after.key() >= end.as_str() => return Ok(Vec::new()),
            Some(after) if after.key() >= start.as_str() => Bound::Excluded(after.key().as_bytes()),
            _ => Bound::Included(start.as_bytes()),
        };
        let table = self.handles()?;
        let mut range = table.range::<&[u8]>((lower, Bound::Excluded(end.as_bytes())))?;
        let mut handles = Vec::new();
        while handles.len() < limit {
            let Some(entry) = range.next() else { break };
            let (key, bytes) = entry?;
            let key = stored_key(key.value())?;
            handles.push(decode_handle(key, bytes.value())?.display);
        }
        Ok(handles)
    }

    /// Every prefix the store knows, in folded order.
    pub fn list_prefixes(&self) -> Result<Vec<PrefixRecord>, StorageError> {
        let mut prefixes = Vec::new();
        for entry in self.prefixes()?.iter()? {
            let (key, bytes) = entry?;
            prefixes.push(decode_prefix(stored_key(key.value())?, bytes.value())?);
        }
        Ok(prefixes)
    }

    /// The record of one prefix, if the store knows it.
    pub fn prefix(&self, prefix: &str) -> Result<Option<PrefixRecord>, StorageError> {
        let key = fold_key(prefix);
        let found = self.prefixes()?.get(key.as_bytes())?;
        found
            .map(|bytes| decode_prefix(&key, bytes.value()))
            .transpose()
    }
}

/// A key of the store as the text it is (see [`tables`]); one that is not UTF-8 is a
/// corrupt record.
pub(super) fn stored_key(key: &[u8]) -> Result<&str, StorageError> {
    std::str::from_utf8(key).map_err(|error| {
        let source = crate::values::DecodeError::InvalidUtf8 {
            field: "stored key",
            offset: error.valid_up_to(),
        };
        corrupt(&String::from_utf8_lossy(key), source)
    })
}

/// Decodes a stored handle record, naming its key when it is corrupt.
pub(super) fn decode_handle(key: &str, bytes: &[u8]) -> Result<HandleRecord, StorageError> {
    HandleRecord::decode(key, bytes).map_err(|source| corrupt(key, source))
}

/// A stored handle record in layout 1, as records leave the store (see [`tables`]).
pub(super) fn spelled_handle(key: &str, bytes: &[u8]) -> Result<Vec<u8>, StorageError> {
    HandleRecord::spelled(key, bytes).map_err(|source| corrupt(key, source))
}

/// A handle record from outside the store as it is stored (see [`tables`]).
pub(super) fn cased_handle(key: &str, bytes: &[u8]) -> Result<Vec<u8>, StorageError> {
    HandleRecord::cased(key, bytes).map_err(|source| corrupt(key, source))
}

fn corrupt(key: &str, source: crate::values::DecodeError) -> StorageError {
    StorageError::Corrupt {
        key: key.to_owned(),
        source,
    }
}

/// Decodes a stored prefix record, naming its key when it is corrupt.
pub(super) fn decode_prefix(key: &str, bytes: &[u8]) -> Result<PrefixRecord, StorageError> {
    PrefixRecord::decode(bytes).map_err(|source| StorageError::Corrupt {
        key: key.to_owned(),
        source,
    })
}
