//! Recording one answered request in the node's metrics, as every edge does once a
//! request: alone, and from two threads at once (the HTTP edge's workers share the
//! counters).
//!
//! Run with `cargo bench --bench metrics`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use hdl::metrics::{Metrics, Protocol};

fn record(c: &mut Criterion) {
    let metrics = Arc::new(Metrics::new());
    let elapsed = Duration::from_micros(80);
    c.bench_function("metrics/record", |b| {
        b.iter(|| metrics.record(Protocol::Handle, "resolution", 1, black_box(elapsed)))
    });
    c.bench_function("metrics/record beside another thread", |b| {
        let other = Arc::clone(&metrics);
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let beside = std::thread::spawn(move || {
            while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
                other.record(Protocol::Handle, "resolution", 1, elapsed);
            }
        });
        b.iter(|| metrics.record(Protocol::Handle, "resolution", 1, black_box(elapsed)));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        beside.join().expect("the other recorder ends");
    });
}

criterion_group!(benches, record);
criterion_main!(benches);
