//! Peer link micro-benchmarks on loopback: calls through one authenticated,
//! multiplexed connection to a dispatcher that answers at once, one at a time and 64
//! at once (the forwarded writes of `hdl bench write --concurrency 64`), with bodies
//! the size of a forwarded create. The figure is the link's own cost: sealing,
//! opening, the socket and the task hand-offs, with no Raft behind it.

use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use hdl::replication::NodeId;
use hdl::replication::network::{
    ClusterSecret, Dispatch, DispatchFuture, Links, PeerLimits, serve,
};
use tokio::net::TcpListener;

/// Answers every request with itself.
struct Echo;

impl Dispatch for Echo {
    fn dispatch(&self, _from: NodeId, request: Vec<u8>) -> DispatchFuture<'_> {
        Box::pin(async move { request })
    }
}

fn calls(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    let secret = ClusterSecret::new(b"a shared cluster secret, 32 byte").expect("secret");
    let listener = runtime
        .block_on(TcpListener::bind("127.0.0.1:0"))
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    let dispatch: Arc<dyn Dispatch> = Arc::new(Echo);
    runtime.spawn(serve(
        listener,
        secret.clone(),
        dispatch,
        PeerLimits::default(),
        std::future::pending(),
    ));
    let links = Links::new(1, secret);
    let timeout = Duration::from_secs(10);
    let request = vec![0x5a_u8; 200];

    let mut group = c.benchmark_group("peer_link/calls");
    for concurrent in [1_u64, 64] {
        group.throughput(Throughput::Elements(concurrent));
        group.bench_function(format!("{concurrent} at once, 200-byte bodies"), |b| {
            b.iter(|| {
                runtime.block_on(async {
                    let mut calls = tokio::task::JoinSet::new();
                    for _ in 0..concurrent {
                        let (links, request) = (links.clone(), request.clone());
                        calls.spawn(async move { links.call(addr, request, timeout).await });
                    }
                    while let Some(answer) = calls.join_next().await {
                        let answer = answer.expect("call task").expect("answer");
                        assert_eq!(answer.len(), 200);
                    }
                })
            })
        });
    }
    group.finish();
}

criterion_group!(benches, calls);
criterion_main!(benches);
