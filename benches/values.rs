//! Benchmarks of the value codec and registry: encoding and decoding a typical handle
//! record (HS_ADMIN, URL, EMAIL) as a value list, and validating a URL.
//!
//! Run with `cargo bench --bench values`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use hdl::values::{
    AdminPermissions, AdminRecord, HandleValue, Permissions, Reader, Writer, decode_value_list,
    encode_value_list, validate,
};

const URL: &str = "https://www.example.org/articles/2024/handle-system?lang=en#section-2";

fn typical_record() -> Vec<HandleValue> {
    let admin = AdminRecord {
        permissions: AdminPermissions::ALL,
        admin_handle: "0.NA/10.1000".into(),
        admin_index: 200,
        legacy_padding: false,
    };
    vec![
        HandleValue {
            permissions: Permissions::ADMIN_ONLY,
            ..HandleValue::new(100, "HS_ADMIN", admin.encode())
        },
        HandleValue::new(1, "URL", URL),
        HandleValue::new(2, "EMAIL", "curator@example.org"),
    ]
}

fn encode_record(values: &[HandleValue]) -> Vec<u8> {
    let mut w = Writer::new();
    encode_value_list(values, &mut w);
    w.into_bytes()
}

fn bench_values(c: &mut Criterion) {
    let record = typical_record();
    let bytes = encode_record(&record);
    c.bench_function("encode_value_list/3 values", |b| {
        b.iter(|| encode_record(black_box(&record)))
    });
    c.bench_function("decode_value_list/3 values", |b| {
        b.iter(|| decode_value_list(&mut Reader::new(black_box(&bytes))))
    });
    c.bench_function("validate/URL", |b| {
        b.iter(|| validate(black_box("URL"), black_box(URL.as_bytes())))
    });
}

criterion_group!(benches, bench_values);
criterion_main!(benches);
