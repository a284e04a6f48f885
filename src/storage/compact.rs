//! Rebuilding a store file in key order, and how full its tables' pages are.
//!
//! Owns `hdl store compact` and `hdl store stats`'s work on a store file that no node
//! has open (redb locks the file: a running node's store is refused). redb splits a full
//! leaf in half when a key lands inside it, and nothing merges half-empty leaves again
//! (its own `Database::compact` moves pages to give free ones back, byte for byte), so a
//! store whose keys arrived out of order keeps pages about half full. A table written in
//! key order into an empty file packs its leaves: [`compact`] copies every table so into
//! a new file beside the store, then puts it in the store's place with one rename.
//! Crash-safe at every step: until the rename the store is untouched (a leftover new
//! file is removed by the next compaction); the new file is committed durably before
//! the rename, and the rename is made durable before [`compact`] returns.
//! Copies records as they are stored, but for handle records, written in layout 2
//! whatever their layout, and for the tables an earlier format version keyed as `&str`,
//! written keyed as `&[u8]` (see [`tables`]): so the same rebuild upgrades a store of
//! format version 1 or 2, on open ([`super::Store::open_with`]). A table it does not
//! know makes it refuse, so nothing is left behind.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use redb::{
    Database, Durability, Key, ReadTransaction, ReadableDatabase, ReadableTable,
    ReadableTableMetadata, Table, TableDefinition, TableHandle, Value,
};

use super::error::StorageError;
use super::read::{cased_handle, stored_key};
use super::tables;

/// Entries copied in one write transaction of the new file: its memory is bounded by
/// a run, whatever the store's size.
const RUN: usize = 100_000;

/// The page cache of either file while copying.
const CACHE: usize = 64 << 20;

/// What a compaction did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compacted {
    /// The store file's octets before (as the file system allocated them).
    pub before: u64,
    /// And after.
    pub after: u64,
}

/// How full one table's pages are (redb's `TableStats`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableFill {
    /// The table's name.
    pub name: String,
    /// Its entries.
    pub entries: u64,
    /// Octets of keys and values stored in its leaves.
    pub stored: u64,
    /// Octets of the pages (leaves and branches) it takes.
    pub pages: u64,
}

/// Rebuilds the store at `path` in key order (see the module docs). Refused while a
/// node has the store open.
pub fn compact(path: &Path) -> Result<Compacted, StorageError> {
    let before = allocated(path)?;
    let source = redb::Builder::new().set_cache_size(CACHE).open(path)?;
    let rebuilt = rebuilt_path(path);
    remove_leftover(&rebuilt)?;
    if let Err(error) = write_rebuilt(&source, &rebuilt) {
        // The store is untouched; the partial copy goes.
        let _ = fs::remove_file(&rebuilt);
        return Err(error);
    }
    fs::rename(&rebuilt, path).map_err(StorageError::file(path))?;
    sync_parent(path)?;
    drop(source);
    Ok(Compacted {
        before,
        after: allocated(path)?,
    })
}

/// Every table of the store at `path` with how full its pages are, by name.
pub fn table_fill(path: &Path) -> Result<Vec<TableFill>, StorageError> {
    let db = redb::Builder::new().set_cache_size(CACHE).open(path)?;
    let txn = db.begin_read()?;
    let mut fills = Vec::new();
    for handle in txn.list_tables()? {
        let table = txn.open_untyped_table(handle)?;
        let stats = table.stats()?;
        fills.push(TableFill {
            name: table.name().to_owned(),
            entries: table.len()?,
            stored: stats.stored_bytes(),
            pages: stats.stored_bytes() + stats.metadata_bytes() + stats.fragmented_bytes(),
        });
    }
    Ok(fills)
}

/// Where the new file is written: beside the store, so that the rename stays on one
/// file system.
fn rebuilt_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".compacting");
    PathBuf::from(name)
}

fn remove_leftover(rebuilt: &Path) -> Result<(), StorageError> {
    match fs::remove_file(rebuilt) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => {
            Err(StorageError::file(rebuilt)(error))
        }
        _ => Ok(()),
    }
}

/// Writes every table of `source` into a new file at `rebuilt`, in key order, and
/// commits it durably.
fn write_rebuilt(source: &Database, rebuilt: &Path) -> Result<(), StorageError> {
    let from = source.begin_read()?;
    let keys = check_version(&from)?;
    let target = redb::Builder::new().set_cache_size(CACHE).create(rebuilt)?;
    let mut left: BTreeSet<String> = from
        .list_tables()?
        .map(|table| table.name().to_owned())
        .collect();
    copy_known_tables(&from, &target, &mut left, keys)?;
    if let Some(name) = left.into_iter().next() {
        return Err(StorageError::UnknownTable { name });
    }
    if from.list_multimap_tables()?.next().is_some() {
        return Err(StorageError::UnknownTable {
            name: "a multimap table".into(),
        });
    }
    // A durable commit persists the unsynced ones before it; it records the allocator
    // state, as every durable commit of a store does (see `Store::begin_write`).
    let mut txn = target.begin_write()?;
    txn.set_quick_repair(true);
    txn.open_table(tables::META)?
        .insert(tables::FORMAT_VERSION_KEY, tables::FORMAT_VERSION)?;
    txn.commit()?;
    Ok(())
}

/// How the keys of a store's tables are typed (see [`tables`]).
#[derive(Debug, Clone, Copy)]
enum Keys {
    /// As `&str`: format versions 1 and 2 ([`tables::text_keyed`]).
    Text,
    /// As `&[u8]`: this format version.
    Octets,
}

/// The key types of the store `from`, by its format version; one this build does not
/// read is refused.
fn check_version(from: &ReadTransaction) -> Result<Keys, StorageError> {
    let meta = from.open_table(tables::META)?;
    let found = meta.get(tables::FORMAT_VERSION_KEY)?.map(|v| v.value());
    match found {
        Some(tables::FORMAT_VERSION) | None => Ok(Keys::Octets),
        Some(tables::FORMAT_VERSION_TEXT_KEYS | tables::FORMAT_VERSION_SPELLED) => Ok(Keys::Text),
        Some(found) => Err(StorageError::FormatVersion {
            found,
            expected: tables::FORMAT_VERSION,
        }),
    }
}

/// Copies each table of [`tables`] that `left` names, taking its name out of `left`:
/// tables keyed as `keys` says, written as this format version keys them.
fn copy_known_tables(
    from: &ReadTransaction,
    to: &Database,
    left: &mut BTreeSet<String>,
    keys: Keys,
) -> Result<(), StorageError> {
    // Each `source => target, |key, value| (target key, target value);` copies the
    // table `source` into `target` (of the same name), entry by entry.
    macro_rules! copy {
        ($($source:expr => $target:expr,
            |$key:pat_param, $value:pat_param| ($k:expr, $v:expr);)*) => {{$(
            if left.remove($target.name()) {
                copy_table(from, to, $source, $target, |table, $key, $value| {
                    table.insert($k, $v)?;
                    Ok(())
                })?;
            }
        )*}};
    }
    use tables::text_keyed as text;
    match keys {
        Keys::Text => copy! {
            text::HANDLES => tables::HANDLES,
                |key, bytes| (key.as_bytes(), cased_handle(key, bytes)?.as_slice());
            text::PREFIXES => tables::PREFIXES, |key, bytes| (key.as_bytes(), bytes);
            text::SM_META => tables::SM_META, |key, bytes| (key.as_bytes(), bytes);
            text::DOCUMENTS => tables::DOCUMENTS, |key, bytes| (key.as_bytes(), bytes);
            text::SLOT_JOURNAL => tables::SLOT_JOURNAL, |at, key| (at, key.as_bytes());
            text::SLOT_INDEX => tables::SLOT_INDEX,
                |(slot, key), ()| ((slot, key.as_bytes()), ());
            text::VALUE_INDEX => tables::VALUE_INDEX,
                |(value_type, data, key), ()|
                ((value_type.as_bytes(), data, key.as_bytes()), ());
            text::INDEXED_TYPES => tables::INDEXED_TYPES, |key, ()| (key.as_bytes(), ());
        },
        Keys::Octets => copy! {
            tables::HANDLES => tables::HANDLES,
                |key, bytes| (key, cased_handle(stored_key(key)?, bytes)?.as_slice());
            tables::PREFIXES => tables::PREFIXES, |key, bytes| (key, bytes);
            tables::SM_META => tables::SM_META, |key, bytes| (key, bytes);
            tables::DOCUMENTS => tables::DOCUMENTS, |key, bytes| (key, bytes);
            tables::SLOT_JOURNAL => tables::SLOT_JOURNAL, |at, key| (at, key);
            tables::SLOT_INDEX => tables::SLOT_INDEX, |key, ()| (key, ());
            tables::VALUE_INDEX => tables::VALUE_INDEX, |key, ()| (key, ());
            tables::INDEXED_TYPES => tables::INDEXED_TYPES, |key, ()| (key, ());
        },
    }
    copy! {
        tables::META => tables::META, |key, value| (key, value);
        tables::RECENT_RESULTS => tables::RECENT_RESULTS, |key, value| (key, value);
        tables::RECENT_REQUESTS_BEFORE_RESULTS => tables::RECENT_REQUESTS_BEFORE_RESULTS,
            |key, value| (key, value);
        tables::RECENT_BY_ENTRY_BEFORE_RESULTS => tables::RECENT_BY_ENTRY_BEFORE_RESULTS,
            |key, ()| (key, ());
        tables::RECENT_BY_INDEX_BEFORE_ENTRIES => tables::RECENT_BY_INDEX_BEFORE_ENTRIES,
            |key, value| (key, value);
        tables::SLOT_STATES => tables::SLOT_STATES, |key, value| (key, value);
    }
    Ok(())
}

/// Copies the table `source` into `target` in key order, each entry by `put`, [`RUN`]
/// entries a transaction (unsynced: the file is no store until it is renamed, after
/// the durable commit that ends the copy).
fn copy_table<K, V, L, W>(
    from: &ReadTransaction,
    to: &Database,
    source: TableDefinition<K, V>,
    target: TableDefinition<L, W>,
    mut put: impl FnMut(
        &mut Table<'_, L, W>,
        K::SelfType<'_>,
        V::SelfType<'_>,
    ) -> Result<(), StorageError>,
) -> Result<(), StorageError>
where
    K: Key + 'static,
    V: Value + 'static,
    L: Key + 'static,
    W: Value + 'static,
{
    let source = from.open_table(source)?;
    let mut entries = source.iter()?;
    loop {
        let mut txn = to.begin_write()?;
        txn.set_durability(Durability::None)?;
        let mut copied = 0;
        {
            let mut target = txn.open_table(target)?;
            for entry in entries.by_ref().take(RUN) {
                let (key, value) = entry?;
                put(&mut target, key.value(), value.value())?;
                copied += 1;
            }
        }
        txn.commit()?;
        if copied < RUN {
            return Ok(());
        }
    }
}

/// The octets the file system allocated to `path`.
fn allocated(path: &Path) -> Result<u64, StorageError> {
    use std::os::unix::fs::MetadataExt;
    let metadata = fs::metadata(path).map_err(StorageError::file(path))?;
    Ok(metadata.blocks() * 512)
}

/// Makes a rename in the directory of `path` durable.
fn sync_parent(path: &Path) -> Result<(), StorageError> {
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    super::sync_dir(parent).map_err(StorageError::file(parent))
}

#[cfg(test)]
mod tests {
    use super::super::{ExistingHandle, ImageRecord, Slot, Store};
    use super::*;
    use crate::names::Handle;
    use crate::values::HandleValue;

    const HANDLES: u32 = 3_000;

    /// A sliced store whose handles were created out of key order, as later import
    /// batches land among earlier ones, and its image.
    fn scattered() -> (tempfile::TempDir, PathBuf, Vec<ImageRecord>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("handles.redb");
        scattered_store(&path);
        let records = image(&path);
        (dir, path, records)
    }

    fn scattered_store(path: &Path) {
        let store = Store::open(path).unwrap();
        let batch = store.write().unwrap();
        batch
            .make_slice(16, &(0..16).map(Slot).collect::<Vec<_>>())
            .unwrap();
        batch.commit().unwrap();
        for run in 0..10 {
            let mut batch = store.write().unwrap();
            for n in (run..HANDLES).step_by(10) {
                let handle = Handle::parse(&format!("Test/item-{n}")).unwrap();
                let url = HandleValue::new(1, "URL", format!("https://example.org/{n}"));
                batch
                    .create(&handle, vec![url], ExistingHandle::Refuse)
                    .unwrap();
            }
            batch.commit().unwrap();
        }
    }

    fn image(path: &Path) -> Vec<ImageRecord> {
        let store = Store::open(path).unwrap();
        let mut records = Vec::new();
        store
            .read()
            .unwrap()
            .export(|record| -> Result<(), StorageError> {
                records.push(record);
                Ok(())
            })
            .unwrap();
        records
    }

    fn by_table(path: &Path) -> Vec<(String, u64, u64)> {
        let fills = table_fill(path).unwrap();
        fills
            .into_iter()
            .map(|t| (t.name, t.entries, t.stored))
            .collect()
    }

    fn pages(path: &Path) -> u64 {
        table_fill(path).unwrap().iter().map(|t| t.pages).sum()
    }

    #[test]
    fn compaction_keeps_every_entry_and_packs_the_pages() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("handles.redb");
        scattered_store(&path);
        let (tables, records, pages_before) = (by_table(&path), image(&path), pages(&path));
        assert!(
            tables
                .iter()
                .any(|(name, entries, _)| name == "slot_index" && *entries == u64::from(HANDLES))
        );
        compact(&path).unwrap();
        assert_eq!(by_table(&path), tables);
        assert_eq!(image(&path), records);
        let pages_after = pages(&path);
        assert!(
            pages_after * 10 < pages_before * 8,
            "{pages_before} -> {pages_after}"
        );
        assert!(!rebuilt_path(&path).exists());
    }

    #[test]
    fn a_store_in_use_is_refused_and_kept() {
        let (_dir, path, records) = scattered();
        let open = Store::open(&path).unwrap();
        assert!(compact(&path).is_err());
        drop(open);
        assert_eq!(image(&path), records);
    }

    #[test]
    fn a_leftover_rebuild_is_replaced() {
        let (_dir, path, records) = scattered();
        fs::write(rebuilt_path(&path), b"a copy cut short by a crash").unwrap();
        compact(&path).unwrap();
        assert_eq!(image(&path), records);
    }

    #[test]
    fn a_table_of_a_later_release_is_refused_and_the_store_kept() {
        let (_dir, path, records) = scattered();
        {
            let db = Database::open(&path).unwrap();
            let txn = db.begin_write().unwrap();
            let later: TableDefinition<u64, u64> = TableDefinition::new("later");
            txn.open_table(later).unwrap().insert(1, 2).unwrap();
            txn.commit().unwrap();
        }
        match compact(&path) {
            Err(StorageError::UnknownTable { name }) => assert_eq!(name, "later"),
            other => panic!("expected an unknown table, got {other:?}"),
        }
        assert!(!rebuilt_path(&path).exists());
        assert_eq!(image(&path), records);
    }

    /// The layouts of the handle records of the store at `path`, and its version.
    fn layouts(path: &Path) -> (BTreeSet<u8>, Option<u64>) {
        let db = Database::open(path).unwrap();
        let txn = db.begin_read().unwrap();
        let layouts = match txn.open_table(tables::HANDLES) {
            Ok(handles) => first_octets(&handles),
            Err(_) => first_octets(&txn.open_table(tables::text_keyed::HANDLES).unwrap()),
        };
        let meta = txn.open_table(tables::META).unwrap();
        let version = meta
            .get(tables::FORMAT_VERSION_KEY)
            .unwrap()
            .map(|v| v.value());
        (layouts, version)
    }

    /// The first octet of each record of `handles`.
    fn first_octets<K: Key + 'static>(
        handles: &impl ReadableTable<K, &'static [u8]>,
    ) -> BTreeSet<u8> {
        let records = handles.iter().unwrap();
        records.map(|e| e.unwrap().1.value()[0]).collect()
    }

    /// Rewrites the store at `path` as format version 1 wrote it: keys as `&str`,
    /// records spelled out.
    fn as_format_version_1(path: &Path) {
        super::super::upgrade_tests::as_format_version_2(path);
        let db = Database::open(path).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut handles = txn.open_table(tables::text_keyed::HANDLES).unwrap();
            let spelled: Vec<(String, Vec<u8>)> = handles
                .iter()
                .unwrap()
                .map(|entry| {
                    let (key, bytes) = entry.unwrap();
                    let key = key.value().to_owned();
                    let bytes = tables::HandleRecord::spelled(&key, bytes.value()).unwrap();
                    (key, bytes)
                })
                .collect();
            for (key, bytes) in &spelled {
                handles.insert(key.as_str(), bytes.as_slice()).unwrap();
            }
            txn.open_table(tables::META)
                .unwrap()
                .insert(tables::FORMAT_VERSION_KEY, tables::FORMAT_VERSION_SPELLED)
                .unwrap();
        }
        txn.commit().unwrap();
    }

    #[test]
    fn a_store_of_format_version_1_is_upgraded_on_open() {
        let (_dir, path, records) = scattered();
        assert_eq!(layouts(&path), (BTreeSet::from([2]), Some(3)));
        as_format_version_1(&path);
        assert_eq!(layouts(&path), (BTreeSet::from([1]), Some(1)));
        let pages_before = pages(&path);
        assert_eq!(image(&path), records);
        assert_eq!(layouts(&path), (BTreeSet::from([2]), Some(3)));
        assert!(pages(&path) < pages_before);
    }
}
