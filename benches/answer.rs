//! The whole answer: a resolution request's octets in, the response message out,
//! through the responder and the service a node runs (a lone replica set over a redb
//! store of 10,000 handles), for a handle it holds and for one it does not. The other
//! benches time the steps apart: `codec` (decode, encode), `storage` (the lookup).
//!
//! Run with `cargo bench --bench answer`.

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use hdl::codec::{
    Body, Envelope, Header, Message, OpCode, OpFlags, ProtocolVersion, Request, ResolutionRequest,
};
use hdl::config::Config;
use hdl::metrics::Metrics;
use hdl::names::Handle;
use hdl::server::{Responder, ResponseSettings};
use hdl::service::{AuthPolicy, Caller, Service};
use hdl::storage::{ExistingHandle, Store};
use hdl::values::HandleValue;
use tokio::runtime::Runtime;

const SEEDED: u32 = 10_000;

fn values(n: u32) -> Vec<HandleValue> {
    vec![
        HandleValue::new(1, "URL", format!("https://example.org/objects/{n}")),
        HandleValue::new(2, "EMAIL", "curator@example.org"),
    ]
}

fn seed(store: &Store) {
    let mut batch = store.write().expect("begin");
    for n in 0..SEEDED {
        let handle = Handle::parse(&format!("10.5555/bench-{n}")).expect("valid handle");
        batch
            .create(&handle, values(n), ExistingHandle::Refuse)
            .expect("create");
    }
    batch.commit().expect("commit");
}

/// A responder as `hdl serve` makes one, over a lone set holding [`SEEDED`] handles.
fn responder(runtime: &Runtime, dir: &tempfile::TempDir) -> Responder {
    let store = Arc::new(Store::open(&dir.path().join("handles.redb")).expect("open store"));
    seed(&store);
    let handle_address: SocketAddr = "127.0.0.1:2641".parse().expect("address");
    let set = runtime.block_on(hdl::replication::start_alone(
        Arc::clone(&store),
        dir.path(),
        handle_address,
    ));
    let config = Config::default();
    let policy = AuthPolicy {
        server_admins: Vec::new(),
    };
    let service = Service::new(store, set, policy, config.site.clone());
    Responder::new(
        Arc::new(service),
        ResponseSettings::from_config(&config),
        Arc::new(Metrics::new()),
    )
}

fn resolution(handle: &str) -> Vec<u8> {
    let body = Body::Request(Request::Resolution(ResolutionRequest {
        handle: handle.as_bytes().to_vec(),
        indexes: Vec::new(),
        types: Vec::new(),
    }));
    let header = Header {
        flags: OpFlags::J9_DEFAULT,
        ..Header::request(OpCode::Resolution, 0)
    };
    let envelope = Envelope::new(ProtocolVersion::new(2, 10), 0x0102_0304);
    Message::new(envelope, header, body).encode()
}

fn answer(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let responder = responder(&runtime, &dir);
    let caller = Caller::anonymous(IpAddr::V4(Ipv4Addr::LOCALHOST));
    let hits: Vec<Vec<u8>> = (0..SEEDED)
        .step_by(97)
        .map(|n| resolution(&format!("10.5555/bench-{n}")))
        .collect();
    let misses: Vec<Vec<u8>> = (0..hits.len())
        .map(|n| resolution(&format!("10.5555/absent-{n}")))
        .collect();
    for (name, requests) in [("hit", &hits), ("miss", &misses)] {
        let mut next = requests.iter().cycle();
        c.bench_function(&format!("answer/resolve {name} (10k handles)"), |b| {
            b.iter(|| {
                let request = next.next().expect("cycle");
                let reply = runtime.block_on(responder.respond(caller.clone(), request));
                black_box(reply)
            })
        });
    }
}

criterion_group!(benches, answer);
criterion_main!(benches);
