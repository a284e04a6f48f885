//! Clusters of several replica sets (a ring of hash slots): handles spread over the
//! sets, any node answers any handle, a set added or removed under reads and writes
//! with nothing lost (listed and found by value alike), and a whole set down answering
//! "too busy", never "not found".
//!
//! A backup of several sets, taken while slots move, restores each handle once.
//!
//! Sets of one node keep the process count low where failover is not the point;
//! the migration under a killed primary uses sets of three.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use hdl::codec::{ResponseCode, server_index};
use hdl::values::{InterfaceProtocol, SiteInfo};

use super::backup::{backup, export, restore, serve_restored, text, try_backup};
use super::{Member, Set, create, receive, resolve_at, url};

/// The longest a resharding may take in these tests.
const RESHARD_WAIT: Duration = Duration::from_secs(240);

/// A cluster: set 1 formed with `init` and `add-secondary`, the others with `add-set`.
struct Cluster {
    set: Set,
    /// The members of each set, by position in `set.members`.
    sets: Vec<Vec<usize>>,
    /// The member `hdl cluster` calls and the load's writer go through.
    via: usize,
}

impl Cluster {
    /// `count` sets of `size` nodes each; the sets after the first are added with
    /// `add-set`, which rebalances the (empty) ring.
    fn form(count: usize, size: u64) -> Cluster {
        let set = Set::form(size);
        let first: Vec<usize> = (0..set.members.len()).collect();
        let mut cluster = Cluster {
            set,
            sets: vec![first],
            via: 0,
        };
        for _ in 1..count {
            cluster.add_set(size, &[]);
        }
        cluster
    }

    /// Starts `size` new nodes and runs `add-set` with them (and `extra` arguments).
    fn add_set(&mut self, size: u64, extra: &[&str]) -> std::process::Output {
        let child = self.start_add_set(size, extra);
        let output = child.wait_with_output().expect("reap hdl cluster add-set");
        assert!(
            output.status.success(),
            "hdl cluster add-set: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        output
    }

    /// Starts `size` new nodes and, in the background, `add-set` with them.
    fn start_add_set(&mut self, size: u64, extra: &[&str]) -> std::process::Child {
        let next_id = self.set.members.iter().map(|m| m.id).max().unwrap_or(0) + 1;
        let mut positions = Vec::new();
        let mut nodes = Vec::new();
        for id in next_id..next_id + size {
            let member = self.set.spawn_new(id);
            let l = member.listening;
            nodes.push(format!("{id}:{}:{}:{}", l.handle, l.peer, l.http));
            positions.push(self.set.members.len());
            self.set.members.push(member);
        }
        let peer = self.set.peer(self.via);
        let mut args = vec!["add-set", "--peer", peer.as_str()];
        for node in &nodes {
            args.extend(["--node", node.as_str()]);
        }
        args.extend(extra);
        self.sets.push(positions);
        std::process::Command::new(env!("CARGO_BIN_EXE_hdl"))
            .arg("cluster")
            .args(&args)
            .arg("--secret-file")
            .arg(self.set.dir.path().join("secret"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn hdl cluster add-set")
    }

    /// The position of the primary of set `id` (1-based), as the status reports it.
    fn primary_of(&self, id: u64) -> usize {
        let status = self.set.await_status(self.via, "the set's primary", |s| {
            s["sets"].as_array().is_some_and(|sets| {
                sets.iter()
                    .any(|set| set["id"] == id && set["leader"].is_u64())
            })
        });
        let sets = status["sets"].as_array().expect("sets");
        let set = sets.iter().find(|set| set["id"] == id).expect("the set");
        let leader = set["leader"].as_u64().expect("a leader");
        self.set
            .members
            .iter()
            .position(|m| m.id == leader)
            .expect("the primary is a member")
    }

    /// Waits until the map has moves under way.
    fn await_moving(&self) {
        self.set.await_status(self.via, "moves under way", |s| {
            s["migrations"]
                .as_array()
                .is_some_and(|moves| !moves.is_empty())
        });
    }

    /// Handles held by each set (by set id), as the status reports them once every
    /// set has a primary and every running member has caught up (a primary just
    /// elected may not have applied all it committed).
    fn handles_per_set(&self) -> Vec<(u64, u64)> {
        let status = self.set.await_status(self.via, "every set caught up", |s| {
            s["sets"].as_array().is_some_and(|sets| {
                sets.iter().all(|set| {
                    let members = set["members"].as_array();
                    set["leader"].is_u64()
                        && set["handles"].is_u64()
                        && members.is_some_and(|members| {
                            members
                                .iter()
                                .filter(|m| m["applied"].is_u64())
                                .all(|m| m["lag"] == 0)
                        })
                })
            })
        });
        status["sets"]
            .as_array()
            .expect("sets")
            .iter()
            .map(|set| {
                (
                    set["id"].as_u64().expect("id"),
                    set["handles"].as_u64().expect("handles"),
                )
            })
            .collect()
    }

    fn member(&self, position: usize) -> &Member {
        &self.set.members[position]
    }

    /// A running member picked by `n`.
    fn any_member(&self, n: usize) -> &Member {
        let running: Vec<&Member> = self
            .set
            .members
            .iter()
            .filter(|m| m.child.is_some())
            .collect();
        running[n % running.len()]
    }
}

fn test_names(count: usize, label: &str) -> Vec<String> {
    (0..count).map(|n| format!("test/{label}-{n}")).collect()
}

fn resolves_right(member: &Member, name: &str) -> bool {
    let answer = resolve_at(member, name);
    if answer.header.response_code != ResponseCode::Success {
        return false;
    }
    match answer.body {
        hdl::codec::Body::Response {
            response: hdl::codec::Response::Resolution(found),
            ..
        } => found
            .values
            .first()
            .is_some_and(|v| v.data == url(name).data),
        _ => false,
    }
}

/// Every handle under the prefix `test`, listed through member `via` (which merges
/// every set's listing and drops duplicates).
fn listed(cluster: &Cluster) -> Vec<String> {
    let server = cluster.member(cluster.via).listening.handle.to_string();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_hdl"))
        .args(["list", "test", "--server", &server])
        .args(crate::harness::ADMIN_ARGS)
        .output()
        .expect("run hdl list");
    assert!(
        output.status.success(),
        "hdl list: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Every handle whose URL is under `https://example.org/test/`, searched through
/// member `via`'s JSON API (which asks every set and merges), folded and sorted.
fn searched(cluster: &Cluster) -> Vec<String> {
    let http = cluster.member(cluster.via).listening.http.to_string();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_hdl"))
        .args(["search", "--http", &http, "URL=https://example.org/test/*"])
        .args(crate::harness::ADMIN_ARGS)
        .output()
        .expect("run hdl search");
    assert!(
        output.status.success(),
        "hdl search: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut found: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_ascii_uppercase)
        .collect();
    found.sort();
    found
}

/// The handles listed under `test`, folded and sorted.
fn listed_folded(cluster: &Cluster) -> Vec<String> {
    let mut listed: Vec<String> = listed(cluster)
        .iter()
        .map(|name| name.to_ascii_uppercase())
        .collect();
    listed.sort();
    listed
}

/// Every acknowledged handle is listed, and every listed handle is held by exactly one
/// set: the sets' counts add up to the listing (a handle on two sets would count twice).
fn assert_each_handle_on_one_set(cluster: &Cluster, acked: &[String]) -> Vec<(u64, u64)> {
    let listed = listed(cluster);
    let folded: std::collections::BTreeSet<String> = listed
        .iter()
        .map(|name| name.to_ascii_uppercase())
        .collect();
    for name in acked {
        assert!(
            folded.contains(&name.to_ascii_uppercase()),
            "{name} not listed"
        );
    }
    let per_set = cluster.handles_per_set();
    let total: u64 = per_set.iter().map(|(_, h)| h).sum();
    let expected = u64::try_from(folded.len()).expect("count") + OTHER_HANDLES;
    assert_eq!(
        total,
        expected,
        "sets {per_set:?} against {} listed",
        folded.len()
    );
    per_set
}

/// The Handle protocol address a client picks for `name` in `site`: the digest §7
/// hash over its server entries.
fn hashed_server(site: &SiteInfo, name: &str) -> SocketAddr {
    let index = server_index(name.as_bytes(), site.hash_option, site.servers.len());
    let server = &site.servers[index];
    let tcp = server
        .interfaces
        .iter()
        .find(|i| i.protocol == InterfaceProtocol::Tcp)
        .expect("a TCP interface");
    SocketAddr::new(server.address, u16::try_from(tcp.port).expect("a port"))
}

/// The running member listening at `handle`.
fn member_at(cluster: &Cluster, handle: SocketAddr) -> &Member {
    let running = cluster.set.members.iter().filter(|m| m.child.is_some());
    running
        .into_iter()
        .find(|m| m.listening.handle == handle)
        .unwrap_or_else(|| panic!("no running member at {handle}"))
}

/// Requests every running member has forwarded to another, from `/metrics`.
fn forwards(cluster: &Cluster) -> u64 {
    let running = cluster.set.members.iter().filter(|m| m.child.is_some());
    running
        .map(|member| {
            let mut stream = TcpStream::connect(member.listening.http).expect("connect to HTTP");
            stream
                .write_all(b"GET /metrics HTTP/1.0\r\n\r\n")
                .expect("ask for metrics");
            let mut text = String::new();
            stream.read_to_string(&mut text).expect("metrics");
            text.lines()
                .filter(|line| line.starts_with("hdl_forwarded_requests_total"))
                .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
                .sum::<u64>()
        })
        .sum()
}

/// A client hashing each of `names` over `site` reaches its owner: every one resolves
/// right, and no member forwards anything meanwhile.
fn assert_hashing_reaches_owners(cluster: &Cluster, site: &SiteInfo, names: &[String]) {
    let before = forwards(cluster);
    for name in names {
        let member = member_at(cluster, hashed_server(site, name));
        assert!(resolves_right(member, name), "{name} at its hashed server");
    }
    assert_eq!(
        forwards(cluster),
        before,
        "a hashing client is never forwarded"
    );
}

/// Handles besides the tests' own: the bootstrap administrator's `0.NA/ADMIN`.
const OTHER_HANDLES: u64 = 1;

#[test]
fn two_sets_share_a_thousand_handles_and_any_node_answers_any_of_them() {
    let cluster = Cluster::form(2, 1);
    let names = test_names(1_000, "spread");
    for (n, name) in names.iter().enumerate() {
        assert_eq!(
            create(cluster.any_member(n * 7 + 3), name),
            ResponseCode::Success,
            "{name}"
        );
    }
    let per_set = cluster.handles_per_set();
    assert_eq!(per_set.len(), 2, "{per_set:?}");
    let total: u64 = per_set.iter().map(|(_, h)| h).sum();
    assert_eq!(total, 1_000 + OTHER_HANDLES, "{per_set:?}");
    for (id, handles) in &per_set {
        assert!(
            (420..=580).contains(handles),
            "set {id} holds {handles} of 1000: {per_set:?}"
        );
    }
    for (n, name) in names.iter().enumerate().step_by(7) {
        assert!(resolves_right(cluster.any_member(n), name), "{name}");
    }
    let found = searched(&cluster);
    assert_eq!(
        found.len(),
        1_000,
        "a search finds every handle of both sets once"
    );
    assert_eq!(found, listed_folded(&cluster));
}

/// Resolves every acknowledged name through rotating members until `stop`; counts
/// wrong or failed answers.
fn read_until(
    members: Vec<Member>,
    acked: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    failed: Arc<Mutex<Vec<String>>>,
    reads: Arc<AtomicUsize>,
    killed: Arc<Mutex<Vec<u64>>>,
) {
    for round in 0..1_000_000usize {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let names: Vec<String> = acked.lock().expect("names").clone();
        for (n, name) in names.iter().enumerate() {
            let member = &members[(round + n) % members.len()];
            if killed.lock().expect("killed").contains(&member.id) {
                continue;
            }
            if !resolves_right(member, name) {
                failed
                    .lock()
                    .expect("failures")
                    .push(format!("{name} at node {}", member.id));
            }
            reads.fetch_add(1, Ordering::Relaxed);
            if stop.load(Ordering::Relaxed) {
                return;
            }
        }
    }
}

/// A reader and a writer running against a cluster while it reshards.
struct Load {
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<Vec<String>>>,
    failed: Arc<Mutex<Vec<String>>>,
    reads: Arc<AtomicUsize>,
    threads: Vec<thread::JoinHandle<()>>,
    new_names: mpsc::Receiver<String>,
    /// Members the reader no longer asks (a test is about to kill them).
    killed: Arc<Mutex<Vec<u64>>>,
}

impl Load {
    fn start(cluster: &Cluster, loaded: Vec<String>) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(Mutex::new(loaded));
        let failed = Arc::new(Mutex::new(Vec::new()));
        let reads = Arc::new(AtomicUsize::new(0));
        let copy = |m: &Member| Member {
            id: m.id,
            child: None,
            listening: m.listening,
        };
        let members: Vec<Member> = cluster.set.members.iter().map(copy).collect();
        let killed = Arc::new(Mutex::new(Vec::new()));
        let reader = {
            let (acked, stop, failed, reads) = (
                Arc::clone(&acked),
                Arc::clone(&stop),
                Arc::clone(&failed),
                Arc::clone(&reads),
            );
            let killed = Arc::clone(&killed);
            thread::spawn(move || read_until(members, acked, stop, failed, reads, killed))
        };
        let (sender, new_names) = mpsc::channel();
        let writer = {
            let listening = cluster.member(cluster.via).listening;
            let stop = Arc::clone(&stop);
            thread::spawn(move || super::write_until(listening, stop, sender))
        };
        Load {
            stop,
            acked,
            failed,
            reads,
            threads: vec![reader, writer],
            new_names,
            killed,
        }
    }

    /// Moves newly acknowledged names into the reader's list.
    fn collect(&self, at_least: usize) {
        let mut fresh = Vec::new();
        receive(&self.new_names, at_least, &mut fresh);
        fresh.extend(self.new_names.try_iter());
        self.acked.lock().expect("names").extend(fresh);
    }

    /// Stops both threads; checks that no read failed or was wrong and that every
    /// acknowledged name resolves through any member; every acknowledged name.
    fn finish(self, cluster: &Cluster) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads {
            thread.join().expect("load thread");
        }
        let mut acked = self.acked.lock().expect("names").clone();
        acked.extend(self.new_names.try_iter());
        let failed = self.failed.lock().expect("failures").clone();
        let reads = self.reads.load(Ordering::Relaxed);
        assert!(reads > 0);
        assert!(
            failed.is_empty(),
            "{} failed reads of {reads}: {:?}",
            failed.len(),
            &failed[..failed.len().min(10)]
        );
        for (n, name) in acked.iter().enumerate() {
            assert!(resolves_right(cluster.any_member(n), name), "{name} lost");
        }
        acked
    }
}

#[test]
fn a_third_set_takes_a_third_of_the_handles_under_reads_and_writes() {
    let mut cluster = Cluster::form(2, 1);
    let loaded = test_names(600, "before");
    for (n, name) in loaded.iter().enumerate() {
        assert_eq!(create(cluster.any_member(n), name), ResponseCode::Success);
    }
    let old_site = super::site_info(cluster.member(0));
    assert_eq!(old_site.servers.len(), 256, "one server entry per slot");
    assert_hashing_reaches_owners(&cluster, &old_site, &loaded);
    let load = Load::start(&cluster, loaded);
    load.collect(20);
    let started = Instant::now();
    let output = cluster.add_set(1, &[]);
    assert!(started.elapsed() < RESHARD_WAIT);
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(said.contains("handles/s"), "{said}");
    load.collect(20);
    let acked = load.finish(&cluster);
    // A client holding the HS_SITE from before the move still gets every handle
    // right (the old owner forwards); one holding the new one reaches each owner.
    for name in &acked {
        let old = member_at(&cluster, hashed_server(&old_site, name));
        assert!(resolves_right(old, name), "{name} through the old HS_SITE");
    }
    let new_site = super::site_info(cluster.member(0));
    assert!(new_site.serial_number > old_site.serial_number);
    assert_hashing_reaches_owners(&cluster, &new_site, &acked);
    let per_set = assert_each_handle_on_one_set(&cluster, &acked);
    assert_eq!(
        searched(&cluster),
        listed_folded(&cluster),
        "the value indexes followed the moved slots"
    );
    let total: u64 = per_set.iter().map(|(_, h)| h).sum();
    let third = per_set.iter().find(|(id, _)| *id == 3).expect("set 3").1;
    let fraction = third as f64 / total as f64;
    assert!(
        (0.2833..=0.3834).contains(&fraction),
        "set 3 holds {fraction:.3}: {per_set:?}"
    );
}

#[test]
fn a_removed_set_hands_every_handle_to_the_others_under_reads() {
    let cluster = Cluster::form(3, 1);
    let loaded = test_names(300, "leaving");
    for (n, name) in loaded.iter().enumerate() {
        assert_eq!(create(cluster.any_member(n), name), ResponseCode::Success);
    }
    let load = Load::start(&cluster, loaded);
    load.collect(10);
    let peer = cluster.set.peer(cluster.via);
    cluster
        .set
        .cli(&["remove-set", "--peer", &peer, "--id", "3"]);
    load.collect(10);
    let acked = load.finish(&cluster);
    let per_set = assert_each_handle_on_one_set(&cluster, &acked);
    assert_eq!(
        per_set.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
        [1, 2]
    );
    for position in &cluster.sets[0] {
        for name in acked.iter().step_by(5) {
            assert!(resolves_right(cluster.member(*position), name), "{name}");
        }
    }
}

#[test]
fn a_set_down_makes_its_handles_busy_and_leaves_the_others_working() {
    let mut cluster = Cluster::form(3, 1);
    let names = test_names(90, "down");
    for (n, name) in names.iter().enumerate() {
        assert_eq!(create(cluster.any_member(n), name), ResponseCode::Success);
    }
    let down_holds = cluster
        .handles_per_set()
        .iter()
        .find(|(id, _)| *id == 3)
        .expect("set 3")
        .1;
    for position in cluster.sets[2].clone() {
        cluster.set.members[position].kill();
    }
    let via = cluster.member(cluster.sets[0][0]);
    let mut busy = 0;
    for name in &names {
        let code = resolve_at(via, name).header.response_code;
        match code {
            ResponseCode::Success => {}
            ResponseCode::ServerTooBusy => busy += 1,
            other => panic!("{name}: {other:?}, never not found"),
        }
    }
    assert_eq!(
        busy, down_holds,
        "the down set's handles, and only those, are busy"
    );
    let mut written = 0;
    for name in test_names(30, "down-new") {
        match create(via, &name) {
            ResponseCode::Success => written += 1,
            ResponseCode::ServerTooBusy => {}
            other => panic!("{name}: {other:?}"),
        }
    }
    assert!(written >= 10, "the other sets take writes: {written} of 30");
}

/// Which primary a migration loses midway.
enum Victim {
    Source,
    Destination,
}

/// Adds a third set of three to two sets of three under reads and writes, SIGKILLs
/// `victim`'s primary while slots move, and checks that the moves end with nothing
/// lost or doubled.
fn reshard_losing_a_primary(victim: Victim) {
    let mut cluster = Cluster::form(2, 3);
    // Calls and writes go through a member that is never killed: a secondary of set 2.
    let set_two_primary = cluster.primary_of(2);
    cluster.via = *cluster.sets[1]
        .iter()
        .find(|p| **p != set_two_primary)
        .expect("a secondary");
    let loaded = test_names(300, "kill");
    for (n, name) in loaded.iter().enumerate() {
        assert_eq!(create(cluster.any_member(n), name), ResponseCode::Success);
    }
    let load = Load::start(&cluster, loaded);
    load.collect(10);
    let adding = cluster.start_add_set(3, &[]);
    cluster.await_moving();
    let primary = match victim {
        Victim::Source => cluster.primary_of(1),
        Victim::Destination => cluster.primary_of(3),
    };
    load.killed
        .lock()
        .expect("killed")
        .push(cluster.set.members[primary].id);
    // Let a read under way finish before the member goes.
    thread::sleep(Duration::from_millis(200));
    cluster.set.members[primary].kill();
    let output = adding.wait_with_output().expect("reap hdl cluster add-set");
    assert!(
        output.status.success(),
        "hdl cluster add-set: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    load.collect(10);
    let acked = load.finish(&cluster);
    assert_each_handle_on_one_set(&cluster, &acked);
}

#[test]
fn a_move_survives_the_loss_of_the_source_primary() {
    reshard_losing_a_primary(Victim::Source);
}

#[test]
fn a_move_survives_the_loss_of_the_destination_primary() {
    reshard_losing_a_primary(Victim::Destination);
}

/// The handle count `hdl restore` says it restored.
fn restored_count(output: &std::process::Output) -> u64 {
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "restore: {said} {}",
        text(&output.stderr)
    );
    let count = said
        .strip_prefix("restored ")
        .and_then(|rest| rest.split(' ').next());
    count
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{said}"))
}

#[test]
fn a_backup_of_several_sets_restores_each_handle_once_even_while_slots_move() {
    let mut cluster = Cluster::form(2, 1);
    let names = test_names(200, "kept");
    for (n, name) in names.iter().enumerate() {
        assert_eq!(create(cluster.any_member(n), name), ResponseCode::Success);
    }
    let all = u64::try_from(names.len()).expect("count") + OTHER_HANDLES;
    let secret = cluster.set.dir.path().join("secret");
    let via = cluster.set.peer(cluster.via);
    let original = export(&via, &secret);
    let dir = tempfile::tempdir().expect("temporary directory");

    // While a third set takes slots, each backup is of one epoch of the map, or is
    // refused saying the map kept changing; one of one epoch holds each handle once
    // (a slot's copy at the set it moves to, or left at the set it left, is not taken).
    let mut adding = cluster.start_add_set(1, &[]);
    let mut outcomes = (0, 0);
    for attempt in 0..50 {
        if adding.try_wait().expect("try_wait").is_some() {
            break;
        }
        let file = dir.path().join(format!("moving-{attempt}.backup"));
        let output = try_backup(&via, &secret, &file);
        if output.status.success() {
            let data = dir.path().join(format!("moving-{attempt}"));
            assert_eq!(restored_count(&restore(&file, &data)), all);
            outcomes.0 += 1;
        } else {
            let said = text(&output.stderr);
            assert!(
                said.contains("the cluster map changed during each"),
                "{said}"
            );
            outcomes.1 += 1;
        }
    }
    let added = adding.wait_with_output().expect("reap hdl cluster add-set");
    assert!(added.status.success(), "add-set: {}", text(&added.stderr));
    eprintln!(
        "backups while slots moved: {} taken, {} refused",
        outcomes.0, outcomes.1
    );
    assert!(
        outcomes.0 + outcomes.1 > 0,
        "no backup was tried while slots moved"
    );

    let file = dir.path().join("three.backup");
    let said = backup(&via, &secret, &file);
    assert!(said.contains("replica sets 1, 2, 3 "), "{said}");
    let data = dir.path().join("restored");
    assert_eq!(restored_count(&restore(&file, &data)), all);
    let config = cluster.set.dir.path().join("config.toml");
    let lone = serve_restored(&data, &config, dir.path());
    let exported = export(
        &lone.listening.peer.to_string(),
        &data.join("cluster.secret"),
    );
    assert_eq!(exported, original);
}
