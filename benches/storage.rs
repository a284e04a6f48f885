//! Store micro-benchmarks: a point read, and creates committed one by one (each an
//! fsync) or a hundred to a commit (the group commit replication uses).

use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use hdl::names::Handle;
use hdl::storage::{ExistingHandle, Store};
use hdl::values::{HandleValue, ValueSelection};

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
    group.bench_function("100 per durable commit", |b| {
        b.iter_batched(
            || {
                n += 100;
                n
            },
            |last| {
                let mut batch = store.write().expect("begin");
                for m in last - 99..=last {
                    batch
                        .create(&handle(m), record(m), ExistingHandle::Refuse)
                        .expect("create");
                }
                batch.commit().expect("commit");
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(benches, get, put);
criterion_main!(benches);
