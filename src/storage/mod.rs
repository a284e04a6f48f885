//! Durable handle storage on redb.
//!
//! Owns the on-disk store: handle records keyed by folded handle (and, once the store is
//! sliced into a ring's slots, by slot: [`ReadSnapshot::slot_page`]), the prefix table,
//! named documents (small states kept whole, such as the cluster map) and the
//! format-version record ([`tables`] holds every definition). Depends on
//! [`crate::names`], [`crate::values`] and the hash of [`crate::codec`] only; knows nothing of the network,
//! replication or the clock (timestamps arrive inside the values), so applying the
//! same operations in the same order gives the same store on every replica.
//!
//! Every write happens in a [`WriteBatch`]: each operation checks everything before it
//! changes anything, so a refused operation leaves the batch as it was and later
//! operations in the batch still apply. [`WriteBatch::commit`] makes the whole batch
//! durable at once (fsync), which lets a caller share one commit among many writes;
//! [`WriteBatch::open`] holds the tables those writes touch open across them
//! ([`OpenBatch`]), as a replica applying many log entries in one batch does.
//!
//! For replication the store also keeps, without interpreting them, the applied state
//! of the replicated state machine ([`WriteBatch::set_applied_state`], committed with
//! the handle writes it accounts for), whole-store images for snapshots, streamed
//! record by record ([`ReadSnapshot::export`], [`WriteBatch::import`]), whole handles
//! put and read many at a time for bulk import and export ([`WriteBatch::put_handles`],
//! [`ReadSnapshot::handle_records`]), an index of the values of configured types kept
//! in the same transaction as the handles, for reverse lookup ([`ReadSnapshot::search`],
//! module `value_index`), in segment files of its own, the replicated log
//! ([`EntryLog`]), and, offline, the rebuild of a store file in key order ([`compact`],
//! which also upgrades a store of an earlier format version on open). A
//! [`CommitWatch`] installed on a store ([`Store::watch`]) is told, before and after
//! each commit, which handle records it changes or that it may change anything (module
//! `commits`): how kept answers above are dropped, without this module knowing them.
//! Nothing here knows the replication library.

mod applied;
mod batch;
mod bulk;
mod commits;
mod compact;
mod documents;
mod error;
mod image;
mod journal;
pub mod log;
mod open_batch;
mod read;
mod recent;
mod slot_index;
mod slots;
pub mod tables;
mod value_index;

use std::path::Path;
use std::sync::Arc;

use redb::{Database, ReadableDatabase, ReadableTable, TableHandle, WriteTransaction};

pub use applied::{Applied, ImportTally};
pub use batch::{CreateOutcome, ExistingHandle, ExistingValue, WriteBatch, check_indexes};
pub use bulk::{HandlePut, PutMode, PutOutcome, Sameness};
use commits::Commits;
pub use commits::{Changed, CommitWatch, Kept};
pub use compact::{Compacted, TableFill, compact, table_fill};
pub use error::{Refusal, StorageError};
pub use image::{ImageImport, ImageRecord, RecentResult};
pub use journal::{JournalEntry, JournalRecord};
pub use log::EntryLog;
pub use open_batch::OpenBatch;
pub use read::ReadSnapshot;
pub use slot_index::StoredRecord;
pub use slots::{Slice, Slot, SlotState, slot_of};
pub use tables::{HandleRecord, PrefixRecord};
pub use value_index::{
    Found, HitAccess, INDEXED_OCTETS, IndexedTypes, SearchHit, SearchPlan, SearchPosition,
    Visibility,
};

/// A handle store in one redb file.
#[derive(Debug)]
pub struct Store {
    db: Database,
    commits: Arc<Commits>,
    indexed: Arc<IndexedTypes>,
    /// Where each remembered result is (module `recent`).
    recent: Arc<recent::RecentIndex>,
}

/// How much memory each redb file may use to cache its pages, in octets. redb's own
/// default is 1 GiB a file, which a node with a large store fills: its resident memory
/// then grows with the store. Set by `[storage]` of the configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheSizes {
    /// A handle store's cache.
    pub store: usize,
    /// The metadata group's store's cache: it holds the cluster map, a few pages.
    pub map: usize,
}

impl Default for CacheSizes {
    fn default() -> Self {
        CacheSizes {
            store: 16 << 20,
            map: 4 << 20,
        }
    }
}

impl Store {
    /// Opens the store at `path` with the default page cache and the default indexed
    /// types, URL and EMAIL ([`Store::open_with`]).
    pub fn open(path: &Path) -> Result<Store, StorageError> {
        Store::open_with(path, CacheSizes::default().store, IndexedTypes::default())
    }

    /// Opens the store at `path`, creating it when it does not exist, with a page
    /// cache of `cache` octets, and checks the format version recorded in it (a store
    /// of format version 1 or 2 is upgraded first, see [`tables`]); its value index holds
    /// the types `indexed` (built on open when the file's was built for others, or has
    /// none).
    pub fn open_with(
        path: &Path,
        cache: usize,
        indexed: IndexedTypes,
    ) -> Result<Store, StorageError> {
        let mut db = redb::Builder::new().set_cache_size(cache).create(path)?;
        let recorded = recorded_version(&db)?;
        if let Some(earlier @ (tables::FORMAT_VERSION_SPELLED | tables::FORMAT_VERSION_TEXT_KEYS)) =
            recorded
        {
            drop(db);
            upgrade(path, earlier)?;
            db = redb::Builder::new().set_cache_size(cache).create(path)?;
        }
        let store = Store {
            db,
            commits: Arc::default(),
            indexed: Arc::new(indexed),
            recent: Arc::default(),
        };
        store.check_format_version()?;
        Ok(store)
    }

    fn check_format_version(&self) -> Result<(), StorageError> {
        let txn = self.begin_write()?;
        check_format_version(&txn, tables::FORMAT_VERSION)?;
        txn.open_table(tables::HANDLES)?;
        txn.open_table(tables::PREFIXES)?;
        txn.open_table(tables::SM_META)?;
        recent::upgrade_results(&txn)?;
        self.recent.load(&txn)?;
        txn.open_table(tables::DOCUMENTS)?;
        txn.open_table(tables::SLOT_STATES)?;
        txn.open_table(tables::SLOT_JOURNAL)?;
        let indexed = txn
            .list_tables()?
            .any(|table| table.name() == tables::SLOT_INDEX.name());
        if !indexed {
            let slot_count = match slots::slice_in(&txn)? {
                Slice::Whole => None,
                Slice::Ring(count) => Some(count),
            };
            slot_index::rebuild_index(&txn, slot_count)?;
        }
        value_index::ensure_index(&txn, &self.indexed)?;
        txn.commit()?;
        Ok(())
    }

    /// A consistent, read-only view of the store as of now (shared with the other
    /// readers until the next commit).
    pub fn read(&self) -> Result<Arc<ReadSnapshot>, StorageError> {
        self.commits.snapshot(&self.db, &self.recent)
    }

    /// Tells `watch` what every commit from now on may change, before it starts and
    /// once it is visible (module `commits`).
    pub fn watch(&self, watch: Arc<dyn CommitWatch>) {
        self.commits.watch(watch);
    }

    /// Starts a batch of writes; nothing is visible or durable until it is committed.
    pub fn write(&self) -> Result<WriteBatch, StorageError> {
        Ok(WriteBatch::new(
            self.begin_write()?,
            Arc::clone(&self.commits),
            Arc::clone(&self.indexed),
            Arc::clone(&self.recent),
        ))
    }

    /// Makes every batch committed before it durable, changing nothing.
    pub fn sync(&self) -> Result<(), StorageError> {
        self.begin_write()?.commit()?;
        Ok(())
    }

    /// A write transaction whose durable commit records redb's allocator state (and
    /// so commits in two phases: one fsync more). Without that record, opening the
    /// file after a crash walks every page of it to verify checksums and rebuild the
    /// allocator state, which takes longer the larger the store (most of a restart
    /// after SIGKILL); with it the open loads the record. Every durable commit must
    /// record it, since each one drops the previous record. Unsynced commits
    /// ([`WriteBatch::commit_unsynced`]) record nothing and cost nothing more; the
    /// durable ones are [`Store::sync`] (which replication runs on a timer, off the
    /// write path), snapshot installs and opens.
    fn begin_write(&self) -> Result<WriteTransaction, StorageError> {
        let mut txn = self.db.begin_write()?;
        txn.set_quick_repair(true);
        Ok(txn)
    }
}

/// The format version recorded in `db`; `None` in a new file.
fn recorded_version(db: &Database) -> Result<Option<u64>, StorageError> {
    let txn = db.begin_read()?;
    let meta = match txn.open_table(tables::META) {
        Ok(meta) => meta,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
        Err(error) => return Err(error.into()),
    };
    Ok(meta.get(tables::FORMAT_VERSION_KEY)?.map(|v| v.value()))
}

/// Rebuilds the store at `path` of the format version `earlier` (1 or 2) as this one
/// (see [`tables`]).
fn upgrade(path: &Path, earlier: u64) -> Result<(), StorageError> {
    tracing::info!(
        path = %path.display(),
        from = earlier,
        to = tables::FORMAT_VERSION,
        "upgrading the store's format version: rebuilding it with its keys as octets and \
         its handle records in layout 2"
    );
    let done = compact(path)?;
    tracing::info!(
        path = %path.display(),
        before_octets = done.before,
        after_octets = done.after,
        version = tables::FORMAT_VERSION,
        "upgraded the store's format version"
    );
    Ok(())
}

/// Makes the entries of directory `dir` (files made, renamed, removed) durable.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Records `expected` as the format version of a new file, or checks the one recorded.
fn check_format_version(txn: &WriteTransaction, expected: u64) -> Result<(), StorageError> {
    let mut meta = txn.open_table(tables::META)?;
    let found = meta.get(tables::FORMAT_VERSION_KEY)?.map(|v| v.value());
    match found {
        Some(version) if version == expected => Ok(()),
        Some(found) => Err(StorageError::FormatVersion { found, expected }),
        None => {
            meta.insert(tables::FORMAT_VERSION_KEY, expected)?;
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod upgrade_tests;
