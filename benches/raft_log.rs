//! Raft log micro-benchmarks: durable appends through the log store seam, one entry per
//! commit against 64 entries sharing one commit (the group commit a busy leader gets).
//! Each append returns only after its fsync.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use hdl::names::Handle;
use hdl::replication::{HandleCommand, HandleSet, LogStore, Proposal, Request, RequestId};
use hdl::storage::ExistingHandle;
use hdl::values::HandleValue;
use openraft::EntryPayload;
use openraft::storage::RaftLogStorageExt;
use openraft::testing::log_id;

type Entry = hdl::replication::types::Entry<HandleSet>;

fn entry(index: u64) -> Entry {
    let handle = Handle::parse(&format!("10.5555/bench-{index}")).expect("valid handle");
    let values = vec![
        HandleValue::new(1, "URL", format!("https://example.org/objects/{index}")),
        HandleValue::new(2, "EMAIL", "curator@example.org"),
    ];
    Entry {
        log_id: log_id(1, 1, index),
        payload: EntryPayload::Normal(Proposal(
            vec![Request {
                id: RequestId(index),
                command: HandleCommand::Create {
                    handle,
                    values,
                    existing: ExistingHandle::Refuse,
                },
            }]
            .into(),
        )),
    }
}

fn append(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    let mut group = c.benchmark_group("raft_log/durable append");
    group.sample_size(20);
    for per_commit in [1_u64, 64] {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut log = LogStore::<HandleSet>::open(dir.path()).expect("open log");
        let mut next = 1_u64;
        group.throughput(Throughput::Elements(per_commit));
        group.bench_function(format!("{per_commit} entries per commit"), |b| {
            b.iter(|| {
                let entries: Vec<Entry> = (next..next + per_commit).map(entry).collect();
                next += per_commit;
                runtime
                    .block_on(log.blocking_append(entries))
                    .expect("append");
            })
        });
    }
    group.finish();
}

criterion_group!(benches, append);
criterion_main!(benches);
