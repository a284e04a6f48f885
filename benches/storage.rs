//! Store micro-benchmarks: a point read, creates committed one by one (each an
//! fsync) or a hundred to a commit (the group commit replication uses; unsynced, as
//! a replica applies them, with each create opening its tables or with the tables
//! held open across the hundred, as a replica's apply does), and reverse
//! lookups through the value index on a store of `HDL_BENCH_SEARCH_HANDLES` handles
//! (default 100,000; each with a URL of its own and a shared EMAIL). And a replica's
//! apply of a hundred creates with their results remembered, as the state machine
//! does, on a store that remembers `HDL_BENCH_REMEMBERED` results already (default
//! 300,000; request ids are digests, so they are drawn at random here).

use std::hint::black_box;

use criterion::measurement::WallTime;
use criterion::{BatchSize, BenchmarkGroup, Criterion, criterion_group, criterion_main};
use hdl::names::Handle;
use hdl::replication::RECENT_WINDOW;
use hdl::storage::{ExistingHandle, HandlePut, PutMode, Sameness, Store, WriteBatch};
use hdl::values::{HandleValue, SearchQuery, ValueSelection};

const SEEDED: u32 = 10_000;

fn record(n: u32) -> Vec<HandleValue> {
    vec![
        HandleValue::new(1, "URL", format!("https://example.org/objects/{n}")),
        HandleValue::new(2, "EMAIL", "curator@example.org"),
    ]
}

fn handle(n: u32) -> Handle {
    Handle::parse(&format!("10.5555/bench-{n}")).expect("valid handle")
}

fn seeded_store(dir: &tempfile::TempDir) -> Store {
    let store = Store::open(&dir.path().join("bench.redb")).expect("open store");
    let mut batch = store.write().expect("begin");
    for n in 0..SEEDED {
        batch
            .create(&handle(n), record(n), ExistingHandle::Refuse)
            .expect("create");
    }
    batch.commit().expect("commit");
    store
}

fn get(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = seeded_store(&dir);
    let handles: Vec<Handle> = (0..SEEDED).step_by(97).map(handle).collect();
    let all = ValueSelection::all();
    let mut next = handles.iter().cycle();
    c.bench_function("store/get (10k handles)", |b| {
        b.iter(|| {
            let read = store.read().expect("read");
            let h = next.next().expect("cycle");
            black_box(read.get(h, &all).expect("get"))
        })
    });
}

fn put(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = seeded_store(&dir);
    let mut n = SEEDED;
    let mut group = c.benchmark_group("store/create");
    group.sample_size(20);
    group.bench_function("one per durable commit", |b| {
        b.iter(|| {
            n += 1;
            let mut batch = store.write().expect("begin");
            batch
                .create(&handle(n), record(n), ExistingHandle::Refuse)
                .expect("create");
            batch.commit().expect("commit");
        })
    });
    hundreds(&mut group, "100 per durable commit", &mut n, |last| {
        let mut batch = store.write().expect("begin");
        create_hundred(&mut batch, last);
        batch.commit().expect("commit");
    });
    hundreds(
        &mut group,
        "100 per unsynced commit, tables opened per create",
        &mut n,
        |last| {
            let mut batch = store.write().expect("begin");
            create_hundred(&mut batch, last);
            batch.commit_unsynced().expect("commit");
        },
    );
    hundreds(
        &mut group,
        "100 per unsynced commit, tables held open",
        &mut n,
        |last| {
            let batch = store.write().expect("begin");
            let mut open = batch.open();
            for m in last - 99..=last {
                open.create(&handle(m), record(m), ExistingHandle::Refuse)
                    .expect("create");
            }
            drop(open);
            batch.commit_unsynced().expect("commit");
        },
    );
    group.finish();
}

/// Benchmarks `run` on the next hundred handles each time: it is given the last.
fn hundreds(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    next: &mut u32,
    mut run: impl FnMut(u32),
) {
    group.bench_function(name, |b| {
        b.iter_batched(
            || {
                *next += 100;
                *next
            },
            &mut run,
            BatchSize::SmallInput,
        )
    });
}

/// Creates the hundred handles up to `last` in `batch`, each create opening its tables.
fn create_hundred(batch: &mut WriteBatch, last: u32) {
    for m in last - 99..=last {
        batch
            .create(&handle(m), record(m), ExistingHandle::Refuse)
            .expect("create");
    }
}

/// Handles of the search benchmark's store, from `HDL_BENCH_SEARCH_HANDLES`.
fn search_handles() -> u32 {
    count_from_env("HDL_BENCH_SEARCH_HANDLES", 100_000)
}

/// Results the remembering benchmark's store holds before it is measured, from
/// `HDL_BENCH_REMEMBERED`.
fn remembered_results() -> u32 {
    count_from_env("HDL_BENCH_REMEMBERED", 300_000)
}

/// The count in the environment variable `name`, or `default` when unset or not a
/// number.
fn count_from_env(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(default)
}

/// A store of `count` handles, put 10,000 to a commit as an import does.
fn search_store(dir: &tempfile::TempDir, count: u32) -> Store {
    let store = Store::open(&dir.path().join("search.redb")).expect("open store");
    let all: Vec<u32> = (0..count).collect();
    for chunk in all.chunks(10_000) {
        let puts: Vec<HandlePut> = chunk
            .iter()
            .map(|&n| HandlePut {
                handle: handle(n),
                values: record(n),
                mode: PutMode::CreateOnly,
            })
            .collect();
        let batch = store.write().expect("begin");
        batch.put_handles(&puts, Sameness::Exact).expect("put");
        batch.commit().expect("commit");
    }
    store
}

fn search(c: &mut Criterion) {
    let count = search_handles();
    let dir = tempfile::tempdir().expect("temp dir");
    let started = std::time::Instant::now();
    let store = search_store(&dir, count);
    eprintln!(
        "search store of {count} handles built in {:.1?}",
        started.elapsed()
    );
    let last = count - 1;
    let exact = format!("https://example.org/objects/{last}");
    let suffix = format!("*/objects/{last}");
    let cases = [
        ("exact URL, 1 hit", "URL", exact.as_str(), 10),
        (
            "URL prefix https://example.org/objects/1*, first 100",
            "URL",
            "https://example.org/objects/1*",
            100,
        ),
        (
            "EMAIL shared by all, first 1000",
            "EMAIL",
            "curator@example.org",
            1000,
        ),
        (
            "leading * (whole URL range), 1 hit",
            "URL",
            suffix.as_str(),
            10,
        ),
    ];
    let mut group = c.benchmark_group(format!("store/search ({count} handles)"));
    for (name, value_type, pattern, limit) in cases {
        let query = SearchQuery::new(None, [(value_type, pattern)]).expect("query");
        group.bench_function(name, |b| {
            b.iter(|| {
                let read = store.read().expect("read");
                let types = read.indexed_types().expect("types");
                let plan = types.plan(&query).expect("indexed");
                let hits = read.search(&plan, None, limit).expect("search");
                assert!(!hits.is_empty(), "{name} finds nothing");
                black_box(hits)
            })
        });
    }
    group.finish();
}

/// A pseudo-random request id for the `n`th request (splitmix64): ids are digests.
fn request_id(n: u32) -> u64 {
    let mut x = u64::from(n).wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Applies the hundred creates up to `last` as the state machine applies an entry (log
/// index `last / 100`): the results of entries [`RECENT_WINDOW`] before it forgotten,
/// then each request recalled, created, and its result remembered.
fn apply_hundred(store: &Store, last: u32) {
    let index = u64::from(last / 100);
    let batch = store.write().expect("begin");
    let mut open = batch.open();
    open.forget_results_before(index.saturating_sub(RECENT_WINDOW))
        .expect("forget");
    for m in last - 99..=last {
        let id = request_id(m);
        assert!(open.recall_result(id).expect("recall").is_none());
        open.create(&handle(m), record(m), ExistingHandle::Refuse)
            .expect("create");
        open.remember_result(id, index, b"created")
            .expect("remember");
    }
    drop(open);
    batch.commit_unsynced().expect("commit");
}

fn remember(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open(&dir.path().join("bench.redb")).expect("open store");
    let seeded = remembered_results() / 100 * 100;
    for last in (100..=seeded).step_by(100) {
        apply_hundred(&store, last);
    }
    store.sync().expect("sync");
    let mut next = seeded;
    let mut group = c.benchmark_group(format!("store/apply ({seeded} results remembered)"));
    group.sample_size(20);
    hundreds(
        &mut group,
        "100 creates, each recalled and remembered",
        &mut next,
        |last| apply_hundred(&store, last),
    );
    group.finish();
}

criterion_group!(benches, get, put, search, remember);
criterion_main!(benches);
