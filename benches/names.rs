//! Micro-benchmarks for name parsing: `cargo bench --bench names`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use hdl::names::{Handle, HandleRef};

fn handle_parse(c: &mut Criterion) {
    c.bench_function("Handle::parse ascii", |b| {
        b.iter(|| Handle::parse(black_box("10.1000/182")))
    });
    c.bench_function("Handle::parse non-ascii", |b| {
        b.iter(|| Handle::parse(black_box("handles-in-germany/Universität-Karlsruhe/日本")))
    });
}

fn reference_parse(c: &mut Criterion) {
    let uri = b"hdl:iso-8859-1@handles-in-germany/Universit%E4t-Karlsruhe%2Fhandle%25abc#x";
    c.bench_function("HandleRef::parse hdl: iso-8859-1 escapes", |b| {
        b.iter(|| HandleRef::parse(black_box(uri)))
    });
}

criterion_group!(benches, handle_parse, reference_parse);
criterion_main!(benches);
