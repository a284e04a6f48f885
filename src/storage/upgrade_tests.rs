//! Upgrades of stores an earlier format version wrote: a store is written through the
//! store, then rewritten as format version 2 keyed its tables (through redb, with the
//! definitions of [`tables::text_keyed`]), and opened: every entry of every table,
//! and every read through the store, must come back as it was.

use std::collections::BTreeMap;
use std::path::Path;

use redb::{
    Database, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition,
    WriteTransaction,
};

use super::tables::text_keyed;
use super::*;
use crate::names::Handle;
use crate::values::{HandleValue, SearchQuery, ValueSelection};

/// Handles of the test store: mixed case, non-ASCII, several prefixes.
const NAMES: [&str; 6] = [
    "10.1/a",
    "10.1/Mixed-Case/日本",
    "10.1/b/c",
    "Cnri.Test/x",
    "cnri.test/Y",
    "20.2/z",
];

const SLOTS: u32 = 8;

/// A sliced store holding every kind of entry: handles with indexed and other values,
/// a homed prefix, slot states (one exporting, with a journal), a document, the
/// applied state and a remembered result.
fn rich_store(path: &Path) {
    let store = Store::open(path).unwrap();
    let mut batch = store.write().unwrap();
    let all: Vec<Slot> = (0..SLOTS).map(Slot).collect();
    batch.make_slice(SLOTS, &all).unwrap();
    for (n, name) in NAMES.iter().enumerate() {
        let values = vec![
            HandleValue::new(1, "URL", format!("https://example.org/{n}")),
            HandleValue::new(2, "EMAIL", "curator@example.org"),
            HandleValue::new(3, "DESC", format!("about {name}")),
        ];
        let handle = Handle::parse(name).unwrap();
        batch
            .create(&handle, values, ExistingHandle::Refuse)
            .unwrap();
    }
    batch.home_prefix("Cnri.Test").unwrap();
    let exporting = slot_of(&crate::names::fold_key(NAMES[0]), SLOTS);
    batch
        .set_slot_state(exporting, Some(SlotState::Exporting))
        .unwrap();
    batch
        .journal_change(exporting, &crate::names::fold_key(NAMES[0]))
        .unwrap();
    batch.put_document("map", b"the cluster map").unwrap();
    batch.remember_result(7, 3, b"ok").unwrap();
    batch.set_applied_state(b"applied 3").unwrap();
    batch.commit().unwrap();
}

/// The text of an octet key this test wrote.
fn text(octets: &[u8]) -> String {
    String::from_utf8(octets.to_vec()).unwrap()
}

/// Every entry of every table whose key type format version 3 changed, by table, as
/// format version 3 reads them.
fn contents(path: &Path) -> BTreeMap<String, Vec<String>> {
    let db = Database::open(path).unwrap();
    let txn = db.begin_read().unwrap();
    let mut all = BTreeMap::new();
    macro_rules! dump {
        ($($table:expr),*) => {$(
            let table = txn.open_table($table).unwrap();
            let entries = table.iter().unwrap().map(|entry| {
                let (key, value) = entry.unwrap();
                format!("{:?} => {:?}", key.value(), value.value())
            });
            all.insert(redb::TableHandle::name(&$table).to_owned(), entries.collect());
        )*};
    }
    dump!(
        tables::HANDLES,
        tables::PREFIXES,
        tables::SM_META,
        tables::DOCUMENTS,
        tables::SLOT_JOURNAL,
        tables::SLOT_INDEX,
        tables::VALUE_INDEX,
        tables::INDEXED_TYPES,
        tables::SLOT_STATES,
        tables::RECENT_RESULTS
    );
    all
}

/// What the store answers: every handle, every prefix, each slot's page, searches by
/// URL and EMAIL, the document, the applied state and the whole image.
fn answers(path: &Path) -> Vec<String> {
    let store = Store::open(path).unwrap();
    let read = store.read().unwrap();
    let mut answers = Vec::new();
    for name in NAMES {
        let handle = Handle::parse(name).unwrap();
        answers.push(format!("{:?}", read.get(&handle, &ValueSelection::all())));
    }
    answers.push(format!("{:?}", read.list_prefixes()));
    answers.push(format!("{:?}", read.list_handles("10.1", None, 10)));
    for slot in (0..SLOTS).map(Slot) {
        answers.push(format!("{:?}", read.slot_page(slot, None, 10)));
        answers.push(format!("{:?}", read.journal_page(slot, None, 10)));
    }
    let types = read.indexed_types().unwrap();
    for term in [
        ("URL", "https://example.org/*"),
        ("EMAIL", "curator@example.org"),
    ] {
        let query = SearchQuery::new(None, [term]).unwrap();
        let plan = types.plan(&query).unwrap();
        let hits = read.search(&plan, None, 10).unwrap();
        assert_eq!(hits.len(), NAMES.len(), "{term:?}");
        answers.push(format!("{hits:?}"));
    }
    answers.push(format!("{:?}", read.document("map")));
    answers.push(format!("{:?}", read.applied_state()));
    answers.push(format!("{:?}", read.image()));
    answers
}

/// Rewrites the store at `path` as format version 2 wrote it: the same octets, keyed
/// as `&str`.
pub(super) fn as_format_version_2(path: &Path) {
    let db = Database::open(path).unwrap();
    let txn = db.begin_write().unwrap();
    for (now, earlier) in [
        (tables::HANDLES, text_keyed::HANDLES),
        (tables::PREFIXES, text_keyed::PREFIXES),
        (tables::SM_META, text_keyed::SM_META),
        (tables::DOCUMENTS, text_keyed::DOCUMENTS),
    ] {
        let entries = take(&txn, now, |key, value| (text(key), value.to_vec()));
        let mut table = txn.open_table(earlier).unwrap();
        for (key, value) in &entries {
            table.insert(key.as_str(), value.as_slice()).unwrap();
        }
    }
    {
        let journal = take(&txn, tables::SLOT_JOURNAL, |at, key| (at, text(key)));
        let mut table = txn.open_table(text_keyed::SLOT_JOURNAL).unwrap();
        for (at, key) in &journal {
            table.insert(at, key.as_str()).unwrap();
        }
    }
    {
        let slots = take(&txn, tables::SLOT_INDEX, |(slot, key), ()| {
            (slot, text(key))
        });
        let mut table = txn.open_table(text_keyed::SLOT_INDEX).unwrap();
        for (slot, key) in &slots {
            table.insert((*slot, key.as_str()), ()).unwrap();
        }
    }
    {
        let values = take(&txn, tables::VALUE_INDEX, |(value_type, data, key), ()| {
            (text(value_type), data.to_vec(), text(key))
        });
        let mut table = txn.open_table(text_keyed::VALUE_INDEX).unwrap();
        for (value_type, data, key) in &values {
            let entry = (value_type.as_str(), data.as_slice(), key.as_str());
            table.insert(entry, ()).unwrap();
        }
    }
    {
        let types = take(&txn, tables::INDEXED_TYPES, |key, ()| text(key));
        let mut table = txn.open_table(text_keyed::INDEXED_TYPES).unwrap();
        for key in &types {
            table.insert(key.as_str(), ()).unwrap();
        }
    }
    txn.open_table(tables::META)
        .unwrap()
        .insert(tables::FORMAT_VERSION_KEY, tables::FORMAT_VERSION_TEXT_KEYS)
        .unwrap();
    txn.commit().unwrap();
}

/// Every entry of `table` in `txn`, each owned by `own`; the table deleted.
fn take<K: redb::Key + 'static, V: redb::Value + 'static, T>(
    txn: &WriteTransaction,
    table: TableDefinition<K, V>,
    own: impl Fn(K::SelfType<'_>, V::SelfType<'_>) -> T,
) -> Vec<T> {
    let entries = txn.open_table(table).unwrap();
    let owned = entries.iter().unwrap().map(|entry| {
        let (key, value) = entry.unwrap();
        own(key.value(), value.value())
    });
    let owned = owned.collect();
    drop(entries);
    assert!(txn.delete_table(table).unwrap());
    owned
}

#[test]
fn a_store_of_format_version_2_is_upgraded_on_open_with_every_entry_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("handles.redb");
    rich_store(&path);
    let (tables_before, answers_before) = (contents(&path), answers(&path));
    assert!(tables_before.values().all(|entries| !entries.is_empty()));

    as_format_version_2(&path);
    {
        let db = Database::open(&path).unwrap();
        let txn = db.begin_read().unwrap();
        let version = txn.open_table(tables::META).unwrap();
        let version = version.get(tables::FORMAT_VERSION_KEY).unwrap().unwrap();
        assert_eq!(version.value(), 2);
        assert!(matches!(
            txn.open_table(tables::HANDLES),
            Err(redb::TableError::TableTypeMismatch { .. })
        ));
        let handles = txn.open_table(text_keyed::HANDLES).unwrap();
        assert_eq!(handles.len().unwrap(), NAMES.len() as u64);
    }

    assert_eq!(answers(&path), answers_before);
    assert_eq!(contents(&path), tables_before);
    assert_eq!(
        recorded_version(&Database::open(&path).unwrap()).unwrap(),
        Some(3)
    );
    let store = Store::open(&path).unwrap();
    let mut batch = store.write().unwrap();
    let later = Handle::parse("10.1/written-after").unwrap();
    let values = vec![HandleValue::new(1, "URL", "https://example.org/after")];
    batch
        .create(&later, values, ExistingHandle::Refuse)
        .unwrap();
    batch.commit().unwrap();
    let read = store.read().unwrap();
    assert_eq!(read.handle_count().unwrap(), NAMES.len() as u64 + 1);
}
