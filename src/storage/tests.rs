//! Store tests on temporary files: operations, refusals, reopen, crash safety.

use std::path::Path;

use redb::Database;

use super::*;
use crate::names::Handle;
use crate::values::{HandleValue, ValueIndex, ValueSelection};

fn handle(text: &str) -> Handle {
    Handle::parse(text).unwrap()
}

fn url(index: u32, url: &str) -> HandleValue {
    HandleValue::new(index, "URL", url)
}

fn temp_store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("handles.redb")).unwrap();
    (dir, store)
}

fn create(
    store: &Store,
    text: &str,
    values: Vec<HandleValue>,
) -> Result<CreateOutcome, StorageError> {
    let mut batch = store.write().unwrap();
    let outcome = batch.create(&handle(text), values, ExistingHandle::Refuse);
    batch.commit().unwrap();
    outcome
}

fn get(store: &Store, text: &str) -> Option<HandleRecord> {
    store
        .read()
        .unwrap()
        .get(&handle(text), &ValueSelection::all())
        .unwrap()
}

fn selected(store: &Store, text: &str, selection: &ValueSelection) -> Vec<HandleValue> {
    let read = store.read().unwrap();
    read.get(&handle(text), selection).unwrap().unwrap().values
}

fn refusal(result: Result<impl std::fmt::Debug, StorageError>) -> Refusal {
    match result {
        Err(StorageError::Refused(refusal)) => refusal,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn create_get_modify_delete() {
    let (_dir, store) = temp_store();
    let values = vec![
        url(1, "https://a.example/"),
        HandleValue::new(2, "EMAIL", "x@a.example"),
    ];
    assert_eq!(
        create(&store, "Cnri.Test/Abc", values.clone()).unwrap(),
        CreateOutcome::Created
    );

    let record = get(&store, "CNRI.TEST/ABC").unwrap();
    assert_eq!(record.display, "Cnri.Test/Abc");
    assert_eq!(record.values, values);

    let mut batch = store.write().unwrap();
    batch
        .modify_values(&handle("cnri.test/abc"), vec![url(1, "https://b.example/")])
        .unwrap();
    batch
        .add_values(
            &handle("cnri.test/abc"),
            vec![url(3, "https://c.example/")],
            ExistingValue::Refuse,
        )
        .unwrap();
    batch
        .remove_values(&handle("cnri.test/abc"), &[ValueIndex(2)])
        .unwrap();
    batch.commit().unwrap();
    let record = get(&store, "cnri.test/abc").unwrap();
    assert_eq!(
        record.values,
        vec![url(1, "https://b.example/"), url(3, "https://c.example/")]
    );

    let mut batch = store.write().unwrap();
    batch.delete(&handle("cnri.test/ABC")).unwrap();
    batch.commit().unwrap();
    assert_eq!(get(&store, "cnri.test/abc"), None);
    assert!(store.read().unwrap().list_prefixes().unwrap().is_empty());
}

#[test]
fn selection_filters_values_in_stored_order() {
    let (_dir, store) = temp_store();
    let values = vec![
        url(3, "https://a.example/"),
        HandleValue::new(1, "EMAIL", "x@a.example"),
        HandleValue::new(2, "URL.alt", "https://b.example/"),
    ];
    create(&store, "10.1000/1", values.clone()).unwrap();
    let selection = ValueSelection {
        indexes: vec![ValueIndex(1)],
        types: vec!["url.".into()],
    };
    assert_eq!(selected(&store, "10.1000/1", &selection), values);
    let selection = ValueSelection {
        indexes: vec![],
        types: vec!["URL".into()],
    };
    assert_eq!(
        selected(&store, "10.1000/1", &selection),
        [values[0].clone()]
    );
}

/// A value of `octets` octets in the value list encoding.
fn value_of_len(index: u32, octets: usize) -> HandleValue {
    let mut value = HandleValue::new(index, "DESC", Vec::new());
    value.data = vec![b'x'; octets - value.encoded_len()];
    value
}

#[test]
fn no_write_makes_a_handle_larger_than_one_answer_holds() {
    use crate::codec::MAX_VALUE_LIST_LEN;
    let (_dir, store) = temp_store();
    let half = MAX_VALUE_LIST_LEN / 2;
    let too_large = |octets| Refusal::TooLarge {
        octets,
        limit: MAX_VALUE_LIST_LEN as u64,
    };
    let over = MAX_VALUE_LIST_LEN + 1 - 4;
    assert_eq!(
        refusal(create(&store, "10.1000/big", vec![value_of_len(1, over)])),
        too_large(MAX_VALUE_LIST_LEN as u64 + 1)
    );
    create(&store, "10.1000/big", vec![value_of_len(1, half)]).unwrap();
    let h = handle("10.1000/big");
    let mut batch = store.write().unwrap();
    // Two adds that each fit alone: the second is refused as it lands.
    batch
        .add_values(&h, vec![value_of_len(2, half - 8)], ExistingValue::Refuse)
        .unwrap();
    let refused = batch.add_values(&h, vec![value_of_len(3, 100)], ExistingValue::Refuse);
    assert_eq!(refusal(refused), too_large(MAX_VALUE_LIST_LEN as u64 + 96));
    let refused = batch.modify_values(&h, vec![value_of_len(2, half + 1)]);
    assert_eq!(refusal(refused), too_large(MAX_VALUE_LIST_LEN as u64 + 5));
    batch.commit().unwrap();
    let values = get(&store, "10.1000/big").unwrap().values;
    assert_eq!(crate::values::value_list_len(&values), 4 + half + half - 8);
}

#[test]
fn refusals_change_nothing() {
    let (_dir, store) = temp_store();
    let original = vec![url(1, "https://a.example/")];
    create(&store, "10.1000/x", original.clone()).unwrap();
    let h = handle("10.1000/X");

    assert_eq!(
        refusal(create(&store, "10.1000/X", vec![url(5, "https://z/")])),
        Refusal::HandleExists
    );
    let mut batch = store.write().unwrap();
    assert_eq!(
        refusal(batch.add_values(
            &h,
            vec![url(2, "https://b/"), url(1, "https://c/")],
            ExistingValue::Refuse
        ),),
        Refusal::ValueExists(ValueIndex(1))
    );
    assert_eq!(
        refusal(batch.add_values(
            &h,
            vec![url(2, "https://b/"), url(2, "https://c/")],
            ExistingValue::Refuse
        ),),
        Refusal::DuplicateIndex(ValueIndex(2))
    );
    assert_eq!(
        refusal(batch.add_values(&h, vec![url(0, "https://b/")], ExistingValue::Refuse),),
        Refusal::ZeroIndex
    );
    assert_eq!(
        refusal(batch.add_values(&h, vec![], ExistingValue::Refuse)),
        Refusal::NoValues
    );
    assert_eq!(
        refusal(batch.modify_values(&h, vec![url(1, "https://b/"), url(9, "https://c/")])),
        Refusal::ValueNotFound(ValueIndex(9))
    );
    assert_eq!(
        refusal(batch.remove_values(&h, &[ValueIndex(1), ValueIndex(4)])),
        Refusal::ValueNotFound(ValueIndex(4))
    );
    assert_eq!(
        refusal(batch.delete(&handle("10.1000/none"))),
        Refusal::HandleNotFound
    );
    assert_eq!(
        refusal(batch.add_values(
            &handle("10.1000/none"),
            vec![url(1, "https://b/")],
            ExistingValue::Refuse
        ),),
        Refusal::HandleNotFound
    );
    batch.commit().unwrap();

    assert_eq!(get(&store, "10.1000/x").unwrap().values, original);
    let prefixes = store.read().unwrap().list_prefixes().unwrap();
    assert_eq!(prefixes[0].handle_count, 1);
}

#[test]
fn add_with_replace_overwrites_taken_indexes_in_place() {
    let (_dir, store) = temp_store();
    create(
        &store,
        "10.1000/add",
        vec![url(1, "https://a/"), url(2, "https://b/")],
    )
    .unwrap();
    let mut batch = store.write().unwrap();
    let h = handle("10.1000/add");
    let values = vec![url(1, "https://new/"), url(3, "https://c/")];
    batch
        .add_values(&h, values, ExistingValue::Replace)
        .unwrap();
    batch.commit().unwrap();
    let expected = [
        url(1, "https://new/"),
        url(2, "https://b/"),
        url(3, "https://c/"),
    ];
    assert_eq!(get(&store, "10.1000/add").unwrap().values, expected);
}

#[test]
fn overwrite_replaces_values_and_keeps_first_spelling() {
    let (_dir, store) = temp_store();
    create(&store, "10.1000/Mixed", vec![url(1, "https://a/")]).unwrap();
    let mut batch = store.write().unwrap();
    let outcome = batch
        .create(
            &handle("10.1000/MIXED"),
            vec![url(7, "https://b/")],
            ExistingHandle::Overwrite,
        )
        .unwrap();
    batch.commit().unwrap();
    assert_eq!(outcome, CreateOutcome::Replaced);
    let record = get(&store, "10.1000/mixed").unwrap();
    assert_eq!(record.display, "10.1000/Mixed");
    assert_eq!(record.values, vec![url(7, "https://b/")]);
    assert_eq!(
        store.read().unwrap().list_prefixes().unwrap()[0].handle_count,
        1
    );
}

#[test]
fn listing_pages_through_one_prefix_in_key_order() {
    let (_dir, store) = temp_store();
    for name in [
        "10.1000/b",
        "10.1000/A",
        "10.1000/c/d",
        "10.10000/x",
        "10.100/y",
        "11/z",
    ] {
        create(&store, name, vec![url(1, "https://a/")]).unwrap();
    }
    let read = store.read().unwrap();
    assert_eq!(
        read.list_handles("10.1000", None, 10).unwrap(),
        ["10.1000/A", "10.1000/b", "10.1000/c/d"]
    );
    let first = read.list_handles("10.1000", None, 2).unwrap();
    assert_eq!(first, ["10.1000/A", "10.1000/b"]);
    let rest = read
        .list_handles("10.1000", Some(&handle(&first[1])), 2)
        .unwrap();
    assert_eq!(rest, ["10.1000/c/d"]);
    assert!(
        read.list_handles("10.1000", Some(&handle("10.1000/zzz")), 2)
            .unwrap()
            .is_empty()
    );
    assert!(
        read.list_handles("10.1000", Some(&handle("12/a")), 2)
            .unwrap()
            .is_empty()
    );

    let prefixes: Vec<_> = read
        .list_prefixes()
        .unwrap()
        .into_iter()
        .map(|p| (p.display, p.handle_count))
        .collect();
    assert_eq!(
        prefixes,
        [
            ("10.100".into(), 1),
            ("10.1000".into(), 3),
            ("10.10000".into(), 1),
            ("11".into(), 1)
        ]
    );
}

#[test]
fn homed_prefix_survives_without_handles() {
    let (_dir, store) = temp_store();
    let mut batch = store.write().unwrap();
    batch.home_prefix("Cnri.Test").unwrap();
    batch.commit().unwrap();
    let record = store.read().unwrap().prefix("CNRI.TEST").unwrap().unwrap();
    assert_eq!(
        (record.display.as_str(), record.homed, record.handle_count),
        ("Cnri.Test", true, 0)
    );
    let mut batch = store.write().unwrap();
    batch.unhome_prefix("cnri.test").unwrap();
    batch.commit().unwrap();
    assert_eq!(store.read().unwrap().prefix("cnri.test").unwrap(), None);
}

#[test]
fn uncommitted_batch_is_invisible_and_aborted_batch_is_gone() {
    let (_dir, store) = temp_store();
    let mut batch = store.write().unwrap();
    batch
        .create(
            &handle("10.1000/1"),
            vec![url(1, "https://a/")],
            ExistingHandle::Refuse,
        )
        .unwrap();
    batch.abort().unwrap();
    assert_eq!(get(&store, "10.1000/1"), None);
}

#[test]
fn committed_writes_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("handles.redb");
    {
        let store = Store::open(&path).unwrap();
        create(
            &store,
            "cnri.test/日本",
            vec![url(1, "https://jp.example/")],
        )
        .unwrap();
    }
    let store = Store::open(&path).unwrap();
    assert_eq!(
        get(&store, "cnri.test/日本").unwrap().values,
        vec![url(1, "https://jp.example/")]
    );
}

#[test]
fn format_version_mismatch_is_refused_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("handles.redb");
    {
        let db = Database::create(&path).unwrap();
        let txn = db.begin_write().unwrap();
        txn.open_table(tables::META)
            .unwrap()
            .insert(tables::FORMAT_VERSION_KEY, 99)
            .unwrap();
        txn.commit().unwrap();
    }
    let error = Store::open(&path).unwrap_err();
    assert!(
        matches!(
            error,
            StorageError::FormatVersion {
                found: 99,
                expected: tables::FORMAT_VERSION
            }
        ),
        "{error:?}"
    );
    assert!(error.to_string().contains("format version 99"), "{error}");
}

#[test]
fn a_stored_key_that_is_not_utf8_is_a_corrupt_record_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("handles.redb");
    drop(Store::open(&path).unwrap());
    {
        let db = Database::open(&path).unwrap();
        let txn = db.begin_write().unwrap();
        let record = HandleRecord::spelled_parts("10.1/x", &[url(1, "https://x/")]);
        txn.open_table(tables::HANDLES)
            .unwrap()
            .insert(b"10.1/\xff".as_slice(), record.as_slice())
            .unwrap();
        txn.commit().unwrap();
    }
    let store = Store::open(&path).unwrap();
    let read = store.read().unwrap();
    let listed = read.list_handles("10.1", None, 10);
    assert!(
        matches!(&listed, Err(StorageError::Corrupt { key, .. }) if key.starts_with("10.1/")),
        "{listed:?}"
    );
    let exported = read.export(|_| Ok::<(), StorageError>(()));
    assert!(
        matches!(exported, Err(StorageError::Corrupt { .. })),
        "{exported:?}"
    );
}

/// Environment variable that makes [`crash_child`] run: the directory of its store.
const CRASH_DIR: &str = "HDL_STORAGE_CRASH_DIR";

/// Runs only inside the child process of [`committed_write_survives_a_crash`]: commits
/// one create, commits one unsynced and syncs it, commits another unsynced, starts a
/// last without committing, then aborts the process at once
/// (no destructors, no flush), as a power cut or SIGKILL would.
#[test]
#[ignore = "child process of committed_write_survives_a_crash"]
fn crash_child() {
    let Some(dir) = std::env::var_os(CRASH_DIR) else {
        return;
    };
    let store = Store::open(&Path::new(&dir).join("handles.redb")).unwrap();
    create(&store, "10.1000/committed", vec![url(1, "https://kept/")]).unwrap();
    let unsynced = |name: &str| {
        let mut batch = store.write().unwrap();
        batch
            .create(
                &handle(name),
                vec![url(1, "https://u/")],
                ExistingHandle::Refuse,
            )
            .unwrap();
        batch.commit_unsynced().unwrap();
    };
    unsynced("10.1000/synced");
    store.sync().unwrap();
    unsynced("10.1000/unsynced");
    assert!(get(&store, "10.1000/unsynced").is_some(), "visible at once");
    let mut batch = store.write().unwrap();
    batch
        .create(
            &handle("10.1000/pending"),
            vec![url(1, "https://lost/")],
            ExistingHandle::Refuse,
        )
        .unwrap();
    std::process::abort();
}

#[test]
fn committed_write_survives_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "storage::tests::crash_child",
            "--ignored",
            "--nocapture",
        ])
        .env(CRASH_DIR, dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(!status.success(), "the child must die before it finishes");
    let store = Store::open(&dir.path().join("handles.redb")).unwrap();
    assert_eq!(
        get(&store, "10.1000/committed").unwrap().values,
        vec![url(1, "https://kept/")]
    );
    assert_eq!(get(&store, "10.1000/pending"), None);
    assert!(get(&store, "10.1000/synced").is_some());
    assert_eq!(get(&store, "10.1000/unsynced"), None);
}

#[test]
fn add_with_replace_refuses_what_add_refuses() {
    let (_dir, store) = temp_store();
    let h = handle("cnri.test/put");
    create(
        &store,
        "cnri.test/put",
        vec![url(1, "https://a/"), url(2, "https://b/")],
    )
    .unwrap();
    let mut batch = store.write().unwrap();
    batch
        .add_values(
            &h,
            vec![url(3, "https://c/"), url(1, "https://z/")],
            ExistingValue::Replace,
        )
        .unwrap();
    assert_eq!(
        refusal(batch.add_values(&h, Vec::new(), ExistingValue::Replace)),
        Refusal::NoValues
    );
    let missing = handle("cnri.test/none");
    assert_eq!(
        refusal(batch.add_values(&missing, vec![url(1, "https://a/")], ExistingValue::Replace)),
        Refusal::HandleNotFound
    );
    batch.commit().unwrap();
    let values = get(&store, "cnri.test/put").unwrap().values;
    let found: Vec<_> = values.iter().map(|v| (v.index.0, v.data.clone())).collect();
    assert_eq!(
        found,
        vec![
            (1, b"https://z/".to_vec()),
            (2, b"https://b/".to_vec()),
            (3, b"https://c/".to_vec())
        ]
    );
}

#[test]
fn a_kept_value_is_read_again_after_each_commit_and_only_then() {
    let (_dir, store) = temp_store();
    let kept = Kept::default();
    let reads = std::cell::Cell::new(0);
    let count = |store: &Store| {
        kept.get(&store.read().unwrap(), |read| {
            reads.set(reads.get() + 1);
            Ok(read
                .get(&handle("10.1/a"), &ValueSelection::all())?
                .is_some())
        })
        .unwrap()
    };
    assert!(!*count(&store));
    assert!(!*count(&store));
    assert_eq!(reads.get(), 1);

    create(&store, "10.1/a", vec![url(1, "https://a/")]).unwrap();
    assert!(*count(&store));
    assert_eq!(reads.get(), 2);

    let mut batch = store.write().unwrap();
    batch.delete(&handle("10.1/a")).unwrap();
    batch.abort().unwrap();
    assert!(*count(&store));
    assert_eq!(reads.get(), 2);

    let mut batch = store.write().unwrap();
    batch.delete(&handle("10.1/a")).unwrap();
    batch.commit_unsynced().unwrap();
    assert!(!*count(&store));
    assert_eq!(reads.get(), 3);
}

#[test]
fn readers_share_a_snapshot_until_a_commit_and_then_see_it() {
    let (_dir, store) = temp_store();
    let first = store.read().unwrap();
    assert!(Arc::ptr_eq(&first, &store.read().unwrap()));

    create(&store, "10.1/a", vec![url(1, "https://a/")]).unwrap();
    let second = store.read().unwrap();
    assert!(!Arc::ptr_eq(&first, &second));
    assert!(second.contains(&handle("10.1/a")).unwrap());
    assert!(!first.contains(&handle("10.1/a")).unwrap());

    let mut batch = store.write().unwrap();
    batch.delete(&handle("10.1/a")).unwrap();
    batch.abort().unwrap();
    assert!(Arc::ptr_eq(&second, &store.read().unwrap()));
}
