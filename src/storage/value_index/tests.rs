//! The value index on temporary stores: kept on every write path, rebuilt on open,
//! searched exactly, by wildcard and by prefix, paged, each handle once.

use std::collections::BTreeSet;

use redb::{Database, ReadableDatabase, TableHandle};

use super::*;
use crate::names::Handle;
use crate::storage::{
    CacheSizes, ExistingHandle, ExistingValue, HandlePut, ImageRecord, PutMode, PutOutcome,
    Sameness, Slot, Store, slot_of,
};
use crate::values::{Permissions, ValueIndex};

fn handle(text: &str) -> Handle {
    Handle::parse(text).unwrap()
}

fn url(index: u32, url: &str) -> HandleValue {
    HandleValue::new(index, "URL", url)
}

fn temp_store(dir: &tempfile::TempDir) -> Store {
    Store::open(&dir.path().join("handles.redb")).unwrap()
}

/// A store sliced into a ring of 4 slots, holding every one.
fn sliced_store(dir: &tempfile::TempDir) -> Store {
    let store = temp_store(dir);
    let batch = store.write().unwrap();
    batch
        .make_slice(4, &(0..4).map(Slot).collect::<Vec<_>>())
        .unwrap();
    batch.commit().unwrap();
    store
}

/// A bulk put of `name` with one URL value, `data`.
fn put(name: &str, data: &str, mode: PutMode) -> HandlePut {
    HandlePut {
        handle: handle(name),
        values: vec![url(1, data)],
        mode,
    }
}

fn create(store: &Store, text: &str, values: Vec<HandleValue>) {
    let mut batch = store.write().unwrap();
    batch
        .create(&handle(text), values, ExistingHandle::Refuse)
        .unwrap();
    batch.commit().unwrap();
}

/// Every hit of `pairs` under `prefix` for a reader of every value (`All`) or of
/// public values only, read two at a time.
fn search_as(
    store: &Store,
    prefix: Option<&str>,
    pairs: &[(&str, &str)],
    reader: Visibility,
) -> Vec<String> {
    let query = SearchQuery::new(prefix, pairs.iter().copied()).unwrap();
    let read = store.read().unwrap();
    let types = read.indexed_types().unwrap();
    let plan = types.plan(&query).expect("an indexed term");
    let mut found = Vec::new();
    let mut after: Option<SearchPosition> = None;
    loop {
        let page = read.search(&plan, after.as_ref(), 2).unwrap();
        let Some(last) = page.last() else {
            return found;
        };
        after = Some(last.found.position.clone());
        for hit in page {
            let shown = match (&hit.access, reader) {
                (HitAccess::Public, _) => true,
                (HitAccess::IfReadable(_), reader) => reader == Visibility::All,
                (HitAccess::UnlessReadable(_), reader) => reader == Visibility::Public,
            };
            if shown {
                found.push(hit.found.handle);
            }
        }
    }
}

fn search(store: &Store, prefix: Option<&str>, pairs: &[(&str, &str)]) -> Vec<String> {
    search_as(store, prefix, pairs, Visibility::All)
}

/// Index entries: folded type, data head, folded handle key.
type Entries = BTreeSet<(String, Vec<u8>, String)>;

/// The index as stored, and as the handles say it must be.
fn index_and_expected(store: &Store) -> (Entries, Entries) {
    let read = store.read().unwrap();
    let types = read.indexed_types().unwrap();
    let index = read.txn().open_table(VALUE_INDEX).unwrap();
    let stored = index
        .iter()
        .unwrap()
        .map(|entry| {
            let (key, _) = entry.unwrap();
            let (value_type, data, handle) = key.value();
            let text = |octets: &[u8]| String::from_utf8(octets.to_vec()).unwrap();
            (text(value_type), data.to_vec(), text(handle))
        })
        .collect();
    let mut expected = BTreeSet::new();
    for (key, record) in read.handle_records(None, None, usize::MAX).unwrap() {
        for (value_type, data) in types.entries(&record.values) {
            expected.insert((value_type, data.to_vec(), key.clone()));
        }
    }
    (stored, expected)
}

fn assert_index_follows_handles(store: &Store) {
    let (stored, expected) = index_and_expected(store);
    assert_eq!(stored, expected);
}

#[test]
fn every_batch_write_keeps_the_index_and_drops_what_it_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let store = temp_store(&dir);
    create(
        &store,
        "10.1/a",
        vec![
            url(1, "https://a.example/x"),
            HandleValue::new(2, "EMAIL", "a@example.org"),
            HandleValue::new(3, "DESC", "not indexed"),
        ],
    );
    create(&store, "10.1/b", vec![url(1, "https://b.example/x")]);
    assert_index_follows_handles(&store);
    assert_eq!(
        search(&store, None, &[("URL", "https://a.example/x")]),
        ["10.1/a"]
    );

    let a = handle("10.1/a");
    let mut batch = store.write().unwrap();
    batch
        .modify_values(&a, vec![url(1, "https://a.example/moved")])
        .unwrap();
    batch
        .add_values(&a, vec![url(4, "https://extra/")], ExistingValue::Refuse)
        .unwrap();
    batch.remove_values(&a, &[ValueIndex(2)]).unwrap();
    batch.commit().unwrap();
    assert_index_follows_handles(&store);
    assert!(search(&store, None, &[("URL", "https://a.example/x")]).is_empty());
    assert!(search(&store, None, &[("EMAIL", "a@example.org")]).is_empty());
    assert_eq!(
        search(&store, None, &[("url", "https://a.example/moved")]),
        ["10.1/a"]
    );
    assert_eq!(
        search(&store, None, &[("URL", "https://extra/")]),
        ["10.1/a"]
    );

    let mut batch = store.write().unwrap();
    batch
        .create(&a, vec![url(1, "https://over/")], ExistingHandle::Overwrite)
        .unwrap();
    batch.delete(&handle("10.1/b")).unwrap();
    batch.commit().unwrap();
    assert_index_follows_handles(&store);
    assert_eq!(search(&store, None, &[("URL", "*")]), ["10.1/a"]);
    assert!(search(&store, None, &[("URL", "https://extra/")]).is_empty());
}

/// A search case: the prefix, the `TYPE=PATTERN` pairs, the handles found.
type Case<'a> = (Option<&'a str>, &'a [(&'a str, &'a str)], &'a [&'a str]);

#[test]
fn wildcards_match_anywhere_and_terms_are_anded() {
    let dir = tempfile::tempdir().unwrap();
    let store = temp_store(&dir);
    create(
        &store,
        "10.1/pdf",
        vec![url(1, "https://a.example/doc.pdf")],
    );
    create(
        &store,
        "10.1/html",
        vec![url(1, "https://a.example/doc.html")],
    );
    create(
        &store,
        "20.2/other",
        vec![
            url(1, "https://b.example/doc.pdf"),
            HandleValue::new(2, "EMAIL", "curator@b.example"),
        ],
    );
    let cases: &[Case] = &[
        (
            None,
            &[("URL", "https://a.example/*")],
            &["10.1/html", "10.1/pdf"],
        ),
        (None, &[("URL", "*.pdf")], &["10.1/pdf", "20.2/other"]),
        (
            None,
            &[("URL", "*example/doc*")],
            &["10.1/html", "10.1/pdf", "20.2/other"],
        ),
        (None, &[("URL", "https://A.example/*")], &[]),
        (Some("20.2"), &[("URL", "*.pdf")], &["20.2/other"]),
        (
            Some("10.1"),
            &[("URL", "*"), ("URL", "*.html")],
            &["10.1/html"],
        ),
        (
            None,
            &[("URL", "*.pdf"), ("EMAIL", "curator@*")],
            &["20.2/other"],
        ),
        (None, &[("URL", "*.pdf"), ("DESC", "*")], &[]),
    ];
    for &(prefix, pairs, expected) in cases {
        assert_eq!(
            search(&store, prefix, pairs),
            expected,
            "{prefix:?} {pairs:?}"
        );
    }
    let query = SearchQuery::new(None, [("DESC", "x")]).unwrap();
    assert!(
        IndexedTypes::default().plan(&query).is_none(),
        "DESC is not indexed"
    );
}

#[test]
fn a_handle_with_several_matching_values_is_found_once_in_value_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = temp_store(&dir);
    create(
        &store,
        "10.1/twice",
        vec![url(1, "https://z.example/"), url(2, "https://a.example/")],
    );
    create(&store, "10.1/between", vec![url(1, "https://m.example/")]);
    for n in 0..5 {
        create(
            &store,
            &format!("10.1/same{n}"),
            vec![url(1, "https://same/")],
        );
    }
    assert_eq!(
        search(&store, None, &[("URL", "https://*")]),
        [
            "10.1/twice",
            "10.1/between",
            "10.1/same0",
            "10.1/same1",
            "10.1/same2",
            "10.1/same3",
            "10.1/same4"
        ]
    );
    assert_eq!(search(&store, None, &[("URL", "https://same/")]).len(), 5);
}

#[test]
fn long_values_are_indexed_by_their_head_and_checked_whole() {
    let dir = tempfile::tempdir().unwrap();
    let store = temp_store(&dir);
    let base = format!("https://long.example/{}", "x".repeat(INDEXED_OCTETS));
    create(&store, "10.1/one", vec![url(1, &format!("{base}/one"))]);
    create(&store, "10.1/two", vec![url(1, &format!("{base}/two"))]);
    assert_index_follows_handles(&store);
    assert_eq!(
        search(&store, None, &[("URL", &format!("{base}/two"))]),
        ["10.1/two"]
    );
    assert_eq!(search(&store, None, &[("URL", "*/one")]), ["10.1/one"]);
    assert_eq!(
        search(&store, None, &[("URL", "https://long.example/*")]).len(),
        2
    );
}

#[test]
fn values_that_are_not_public_count_only_for_readers_of_every_value() {
    let dir = tempfile::tempdir().unwrap();
    let store = temp_store(&dir);
    let private = |index, data: &str| HandleValue {
        permissions: Permissions::ADMIN_ONLY,
        ..HandleValue::new(index, "EMAIL", data)
    };
    create(&store, "10.1/hidden", vec![private(1, "a@secret.example")]);
    create(
        &store,
        "10.1/both",
        vec![
            private(1, "a@both.example"),
            HandleValue::new(2, "EMAIL", "z@both.example"),
        ],
    );
    let everyone = |pattern| search_as(&store, None, &[("EMAIL", pattern)], Visibility::Public);
    let readers = |pattern| search_as(&store, None, &[("EMAIL", pattern)], Visibility::All);
    assert!(everyone("a@secret.example").is_empty());
    assert_eq!(readers("a@secret.example"), ["10.1/hidden"]);
    assert!(everyone("a@*").is_empty());
    assert_eq!(everyone("*"), ["10.1/both"], "at its public value");
    assert_eq!(readers("*"), ["10.1/both", "10.1/hidden"], "each once");
}

#[test]
fn bulk_puts_and_slot_deletions_keep_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let store = sliced_store(&dir);
    let batch = store.write().unwrap();
    let puts = [
        put("10.1/a", "https://a/", PutMode::CreateOnly),
        put("10.1/b", "https://b/", PutMode::CreateOnly),
    ];
    batch.put_handles(&puts, Sameness::Exact).unwrap();
    batch.commit().unwrap();
    assert_eq!(
        search(&store, None, &[("URL", "https://*")]),
        ["10.1/a", "10.1/b"]
    );

    let batch = store.write().unwrap();
    let replace = [put("10.1/a", "https://new-a/", PutMode::Replace)];
    batch.put_handles(&replace, Sameness::Exact).unwrap();
    batch.commit().unwrap();
    assert_index_follows_handles(&store);
    assert_eq!(
        search(&store, None, &[("URL", "https://new-a/")]),
        ["10.1/a"]
    );
    assert!(search(&store, None, &[("URL", "https://a/")]).is_empty());

    let batch = store.write().unwrap();
    batch.delete_slot(slot_of("10.1/B", 4)).unwrap();
    batch.commit().unwrap();
    assert_index_follows_handles(&store);
    assert!(search(&store, None, &[("URL", "https://b/")]).is_empty());
}

#[test]
fn one_bulk_batch_putting_a_handle_twice_out_of_key_order_ends_as_its_last_put() {
    let dir = tempfile::tempdir().unwrap();
    let store = sliced_store(&dir);
    let batch = store.write().unwrap();
    let puts = [
        put("10.1/z", "https://first/", PutMode::CreateOnly),
        put("10.1/a", "https://a/", PutMode::CreateOnly),
        put("10.1/Z", "https://second/", PutMode::Replace),
        put("10.1/z", "https://third/", PutMode::CreateOnly),
    ];
    let outcomes = batch.put_handles(&puts, Sameness::Exact).unwrap();
    batch.commit().unwrap();
    let expected = [
        PutOutcome::Created,
        PutOutcome::Created,
        PutOutcome::Replaced,
        PutOutcome::Differs,
    ];
    assert_eq!(
        outcomes, expected,
        "one outcome per put, in the puts' order"
    );
    assert_index_follows_handles(&store);
    assert_eq!(
        search(&store, None, &[("URL", "https://second/")]),
        ["10.1/z"]
    );
    assert!(search(&store, None, &[("URL", "https://first/")]).is_empty());
    let read = store.read().unwrap();
    let indexed: usize = (0..4)
        .map(|slot| read.slot_page(Slot(slot), None, 10).unwrap().len())
        .sum();
    assert_eq!(indexed, 2, "each created handle in the slot index once");
    assert_eq!(read.prefix("10.1").unwrap().unwrap().handle_count, 2);
}

#[test]
fn an_installed_image_brings_its_index_and_drops_the_old_one() {
    let dir = tempfile::tempdir().unwrap();
    let source = Store::open(&dir.path().join("a.redb")).unwrap();
    let target = Store::open(&dir.path().join("b.redb")).unwrap();
    create(&source, "10.1/new", vec![url(1, "https://new/")]);
    create(&target, "10.1/old", vec![url(1, "https://old/")]);
    let image: Vec<ImageRecord> = source.read().unwrap().image();
    let mut batch = target.write().unwrap();
    let mut import = batch.import().unwrap();
    for record in image {
        import.put(record).unwrap();
    }
    import.finish().unwrap();
    batch.commit().unwrap();
    assert_index_follows_handles(&target);
    assert_eq!(search(&target, None, &[("URL", "https://*")]), ["10.1/new"]);
}

#[test]
fn a_file_without_the_index_or_with_other_types_gets_it_built_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("handles.redb");
    {
        let store = Store::open(&path).unwrap();
        create(
            &store,
            "10.1/a",
            vec![url(1, "https://a/"), HandleValue::new(2, "DESC", "about a")],
        );
    }
    {
        // As a file written before the index existed.
        let db = Database::create(&path).unwrap();
        let txn = db.begin_write().unwrap();
        assert!(txn.delete_table(VALUE_INDEX).unwrap());
        assert!(txn.delete_table(INDEXED_TYPES).unwrap());
        txn.commit().unwrap();
        let read = db.begin_read().unwrap();
        let names: Vec<String> = read
            .list_tables()
            .unwrap()
            .map(|t| t.name().to_owned())
            .collect();
        assert!(!names.iter().any(|name| name == VALUE_INDEX.name()));
    }
    let store = Store::open(&path).unwrap();
    assert_index_follows_handles(&store);
    assert_eq!(search(&store, None, &[("URL", "https://a/")]), ["10.1/a"]);
    drop(store);

    let store = Store::open_with(
        &path,
        CacheSizes::default().store,
        IndexedTypes::new(["desc"]),
    )
    .unwrap();
    assert_eq!(
        store.read().unwrap().indexed_types().unwrap().names(),
        ["DESC"]
    );
    assert_index_follows_handles(&store);
    assert_eq!(search(&store, None, &[("DESC", "about *")]), ["10.1/a"]);
    let query = SearchQuery::new(None, [("URL", "https://a/")]).unwrap();
    let types = store.read().unwrap().indexed_types().unwrap();
    assert!(types.plan(&query).is_none(), "URL is no longer indexed");
}
