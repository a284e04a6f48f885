//! Codec benchmarks: encode and decode of a resolution request and of a resolution
//! response with three values.
//!
//! Run with `cargo bench --bench codec`.

use criterion::{Criterion, criterion_group, criterion_main};
use hdl::codec::{
    Body, Envelope, HandleValues, Header, Message, OpCode, ProtocolVersion, Request,
    ResolutionRequest, Response, ResponseCode,
};
use hdl::values::HandleValue;
use std::hint::black_box;

const EXPIRY: u32 = 0x5f5e_1000;

fn resolution_request() -> Message {
    let body = Body::Request(Request::Resolution(ResolutionRequest {
        handle: b"10.1000/182".to_vec(),
        indexes: vec![],
        types: vec![b"URL".to_vec(), b"HS_ADMIN".to_vec()],
    }));
    let envelope = Envelope::new(ProtocolVersion::new(2, 10), 0x0102_0304);
    Message::new(envelope, Header::request(OpCode::Resolution, EXPIRY), body)
}

fn resolution_response() -> Message {
    let values = vec![
        HandleValue::new(1, "URL", "https://www.doi.org/the-doi-handbook"),
        HandleValue::new(2, "EMAIL", "doi-help@doi.org"),
        HandleValue::new(100, "HS_ADMIN", vec![0x0f, 0xff, 0, 0, 0, 12]),
    ];
    let header = Header {
        response_code: ResponseCode::Success,
        ..Header::request(OpCode::Resolution, EXPIRY)
    };
    let response = Response::Resolution(HandleValues {
        handle: b"10.1000/182".to_vec(),
        values,
    });
    let envelope = Envelope::new(ProtocolVersion::MAX_SUPPORTED, 0x0102_0304);
    let body = Body::Response {
        digest: None,
        response,
    };
    Message::new(envelope, header, body)
}

fn bench(c: &mut Criterion, name: &str, message: &Message) {
    let bytes = message.encode();
    c.bench_function(&format!("encode {name}"), |b| {
        b.iter(|| black_box(message).encode())
    });
    c.bench_function(&format!("decode {name}"), |b| {
        b.iter(|| Message::decode(black_box(&bytes)))
    });
}

fn codec(c: &mut Criterion) {
    bench(c, "resolution request", &resolution_request());
    bench(c, "resolution response (3 values)", &resolution_response());
}

criterion_group!(benches, codec);
criterion_main!(benches);
