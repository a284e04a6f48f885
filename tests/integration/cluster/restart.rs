//! Planned restarts: `hdl cluster up` of `cluster/local.toml`, then `hdl cluster
//! restart` under reads and writes. Every node is stopped (SIGTERM), started again and
//! caught up in turn, the primary last; no resolution fails; every acknowledged create
//! resolves afterwards; each node exits 0; and the primary moved by hand-off: the old
//! primary says on stderr that it handed set 1 to the node that leads it now. The
//! longest write wait is printed, not asserted (the target is the bench's: `hdl bench
//! restart`).

use std::net::SocketAddr;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use hdl::client::{Client, ClientConfig, Transport};
use hdl::codec::ResponseCode;
use hdl::names::Handle;
use hdl::values::ValueSelection;
use tempfile::TempDir;
use tokio::runtime::Runtime;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::up::{Launcher, TRIES, cluster_status, free_base_port};
use super::{WAIT, assert_resolves, create, create_request, url};
use crate::harness::admin_credentials;

/// Readers and writers.
const READERS: usize = 2;
const WRITERS: usize = 4;
/// The most operations one reader or writer makes.
const MAX_OPERATIONS: u64 = 200_000;
/// Creates acknowledged before the restart, and again after it.
const ACKNOWLEDGED_AROUND: u64 = 20;

/// What the load saw.
#[derive(Default)]
struct Seen {
    reads: AtomicU64,
    failed_reads: AtomicU64,
    writes: AtomicU64,
    /// The longest wait of an acknowledged create, in microseconds.
    longest_write: AtomicU64,
}

#[test]
fn a_rolling_restart_under_load_fails_no_read_and_hands_the_primary_off() {
    let dir = TempDir::new().expect("temporary directory");
    let launcher = (0..TRIES)
        .find_map(|_| Launcher::start(dir.path(), free_base_port()))
        .expect("hdl cluster up started on one of the base ports");
    let seed = "ADMIN/restart-seed";
    assert_eq!(create(&launcher.member(1), seed), ResponseCode::Success);
    // Read with AT at each member, which waits until it has applied the seed: the
    // plain resolutions below find it at every member.
    for (id, _) in &launcher.nodes {
        assert_resolves(&launcher.member(*id), seed);
    }
    let peer = launcher.member(1).listening.peer;
    let old_primary = cluster_status(dir.path(), peer)["leader"]
        .as_u64()
        .expect("a primary");
    let handles: Vec<SocketAddr> = launcher.nodes.iter().map(|(_, l)| l.handle).collect();

    let runtime = Runtime::new().expect("runtime");
    let (stop, seen) = (Arc::new(AtomicBool::new(false)), Arc::new(Seen::default()));
    let mut load = JoinSet::new();
    for first in 0..READERS {
        let (stop, seen) = (Arc::clone(&stop), Arc::clone(&seen));
        let client = reader(&handles, first);
        load.spawn_on(read_until(client, seed, stop, seen), runtime.handle());
    }
    for first in 0..WRITERS {
        let (stop, seen) = (Arc::clone(&stop), Arc::clone(&seen));
        let client = Client::new(rotated(&handles, first)).with_credentials(admin_credentials());
        load.spawn_on(write_until(client, first, stop, seen), runtime.handle());
    }
    await_writes(&seen, ACKNOWLEDGED_AROUND);

    let restart = Command::new(env!("CARGO_BIN_EXE_hdl"))
        .args(["cluster", "restart"])
        .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("cluster/local.toml"))
        .arg("--data-dir")
        .arg(dir.path())
        .output()
        .expect("run hdl cluster restart");
    let said = String::from_utf8_lossy(&restart.stdout).into_owned();
    assert!(
        restart.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&restart.stderr)
    );
    let after_restart = seen.writes.load(Ordering::Relaxed);
    await_writes(&seen, after_restart + ACKNOWLEDGED_AROUND);
    stop.store(true, Ordering::Relaxed);
    let mut acknowledged = Vec::new();
    runtime.block_on(async {
        while let Some(done) = load.join_next().await {
            acknowledged.extend(done.expect("a load task"));
        }
    });

    // Each node stopped cleanly, started again and caught up, the primary last.
    let stopping: Vec<&str> = said.lines().filter(|l| l.ends_with(": stopping")).collect();
    assert_eq!(stopping.len(), 3, "{said}");
    let last = format!("node {old_primary} (primary of replica set 1): stopping");
    assert_eq!(stopping[2], last, "{said}");
    assert_eq!(said.matches("(exit status: 0)").count(), 3, "{said}");
    assert_eq!(said.matches("started and caught up").count(), 3, "{said}");

    // The old primary handed set 1 to the primary there is now.
    let new_primary = cluster_status(dir.path(), peer)["leader"]
        .as_u64()
        .expect("a primary");
    assert_ne!(new_primary, old_primary);
    let log = std::fs::read_to_string(dir.path().join(format!("node-{old_primary}.log")))
        .expect("the old primary's log");
    let handed = format!("handed the primary of replica set 1 to node {new_primary} in");
    assert!(log.contains(&handed), "{log}");

    let (reads, failed) = (
        seen.reads.load(Ordering::Relaxed),
        seen.failed_reads.load(Ordering::Relaxed),
    );
    println!(
        "rolling restart under load: {reads} resolutions, {failed} failed; {} creates acknowledged, the longest waited {} ms",
        acknowledged.len(),
        seen.longest_write.load(Ordering::Relaxed) / 1000
    );
    assert!(reads > 0);
    assert_eq!(failed, 0, "resolutions failed during the restart");
    for (n, name) in acknowledged.iter().enumerate() {
        let (id, _) = launcher.nodes[n % launcher.nodes.len()];
        assert_resolves(&launcher.member(id), name);
    }
}

/// `servers` from the `first`-th on, the others after.
fn rotated(servers: &[SocketAddr], first: usize) -> Vec<SocketAddr> {
    let mut order = servers.to_vec();
    order.rotate_left(first % servers.len());
    order
}

/// A resolver over UDP asking the members from the `first`-th on, passing a silent
/// one over quickly.
fn reader(servers: &[SocketAddr], first: usize) -> Client {
    let config = ClientConfig {
        udp_waits: [250, 500].map(Duration::from_millis).to_vec(),
        ..ClientConfig::default()
    };
    Client::with_config(rotated(servers, first), config)
}

/// Waits (within [`WAIT`]) until `count` creates have been acknowledged.
fn await_writes(seen: &Seen, count: u64) {
    let deadline = std::time::Instant::now() + WAIT;
    while seen.writes.load(Ordering::Relaxed) < count {
        assert!(
            std::time::Instant::now() < deadline,
            "creates stopped being acknowledged"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Resolves `seed` until `stop`, counting resolutions and failures (none answered
/// with its value).
async fn read_until(
    client: Client,
    seed: &str,
    stop: Arc<AtomicBool>,
    seen: Arc<Seen>,
) -> Vec<String> {
    let seed = Handle::parse(seed).expect("handle");
    let all = ValueSelection::all();
    for _ in 0..MAX_OPERATIONS {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let found = client.resolve(&seed, &all, Transport::Udp).await;
        let answered = found.is_ok_and(|found| {
            found.values.first().map(|v| &v.data) == Some(&url(seed.as_str()).data)
        });
        if !answered {
            seen.failed_reads.fetch_add(1, Ordering::Relaxed);
        }
        seen.reads.fetch_add(1, Ordering::Relaxed);
    }
    Vec::new()
}

/// Creates `ADMIN/restart-<writer>-<n>` until `stop`; the names acknowledged.
async fn write_until(
    client: Client,
    writer: usize,
    stop: Arc<AtomicBool>,
    seen: Arc<Seen>,
) -> Vec<String> {
    let mut acknowledged = Vec::new();
    for n in 0..MAX_OPERATIONS {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let name = format!("ADMIN/restart-{writer}-{n}");
        let request = create_request(&name, url(&name));
        let sent = Instant::now();
        if client.admin(request).await.is_ok() {
            let waited = u64::try_from(sent.elapsed().as_micros()).unwrap_or(u64::MAX);
            seen.longest_write.fetch_max(waited, Ordering::Relaxed);
            seen.writes.fetch_add(1, Ordering::Relaxed);
            acknowledged.push(name);
        }
    }
    acknowledged
}
