//! `hdl cluster up` end to end: the shipped `cluster/local.toml` on a temporary
//! directory and a free base port, a write through one node read on another, and
//! SIGTERM to the launcher stopping and reaping every node it started, each with the
//! allocator's settings (as a lone `hdl serve` gives itself); with no
//! administrator given (and a lone `hdl serve` likewise), the one made in the new data
//! directory, whose printed options administer the set; SIGKILL to the launcher
//! taking its nodes with it.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Instant;

use hdl::codec::ResponseCode;
use rustix::process::{Pid, Signal, kill_process, test_kill_process};
use serde_json::Value;
use tempfile::TempDir;

use super::{MAX_POLLS, Member, WAIT, assert_resolves, create};
use crate::harness::{ADMIN_SECRET, Listening};

/// Base ports tried before giving up; each try is a fresh random one.
pub(super) const TRIES: usize = 5;
/// Lines read from the launcher before giving up on `ready`.
const MAX_LINES: usize = 50;

/// A running `hdl cluster up`; SIGTERMed and reaped when dropped, so its own
/// shutdown reaps the nodes even when a test fails.
pub(super) struct Launcher {
    child: Child,
    lines: mpsc::Receiver<String>,
    pub(super) nodes: Vec<(u64, Listening)>,
    /// The words of each `administrator: ` line, as a shell splits them.
    administrator: Vec<Vec<String>>,
}

impl Drop for Launcher {
    fn drop(&mut self) {
        // Only while it runs: the pid of one reaped already may be another's now.
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = kill_process(Pid::from_child(&self.child), Signal::TERM);
        }
        let _ = self.child.wait();
    }
}

impl Launcher {
    /// Starts `hdl cluster up` of `cluster/local.toml` on `dir` with `base_port`;
    /// `None` if it exits before it is ready (a port was taken meanwhile).
    pub(super) fn start(dir: &Path, base_port: u16) -> Option<Launcher> {
        Launcher::start_file("local.toml", dir, base_port)
    }

    /// Starts `hdl cluster up cluster/<name>` on `dir` with `base_port`.
    fn start_file(name: &str, dir: &Path, base_port: u16) -> Option<Launcher> {
        let admin = ["--admin-secret-file", ADMIN_SECRET, "--prefix", "ADMIN"];
        Launcher::start_with(name, dir, base_port, &admin)
    }

    /// Starts `hdl cluster up cluster/<name>` on `dir` with `base_port` and the
    /// bootstrap options `admin`.
    fn start_with(name: &str, dir: &Path, base_port: u16, admin: &[&str]) -> Option<Launcher> {
        let file = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("cluster")
            .join(name);
        let mut child = Command::new(env!("CARGO_BIN_EXE_hdl"))
            .args(["cluster", "up"])
            .arg(file)
            .arg("--data-dir")
            .arg(dir)
            .args(["--base-port", &base_port.to_string()])
            .args(admin)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn hdl cluster up");
        let stdout = child.stdout.take().expect("piped stdout");
        let (sender, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let mut launcher = Launcher {
            child,
            lines,
            nodes: Vec::new(),
            administrator: Vec::new(),
        };
        launcher.await_ready().then_some(launcher)
    }

    /// Reads lines until `ready`, recording every `node … listening` line; false if
    /// the launcher's stdout closes first.
    fn await_ready(&mut self) -> bool {
        let deadline = Instant::now() + WAIT;
        for _ in 0..MAX_LINES {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.starts_with("ready primary=") => return true,
                Ok(line) => {
                    self.nodes.extend(parse_node_line(&line));
                    let options = line.strip_prefix("administrator: ");
                    let words = options.map(|options| shlex::split(options).expect("words"));
                    self.administrator.extend(words);
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return false,
                Err(mpsc::RecvTimeoutError::Timeout) => panic!("hdl cluster up not ready"),
            }
        }
        panic!("no ready line from hdl cluster up")
    }

    /// The `stopped` lines it prints until its stdout closes, within [`WAIT`].
    fn lines_until_exit(&self) -> Vec<String> {
        let deadline = Instant::now() + WAIT;
        let mut stopped = Vec::new();
        for _ in 0..MAX_LINES {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains("stopped") => stopped.push(line),
                Ok(_) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return stopped,
                Err(mpsc::RecvTimeoutError::Timeout) => panic!("hdl cluster up did not exit"),
            }
        }
        panic!("hdl cluster up printed too much")
    }

    pub(super) fn member(&self, id: u64) -> Member {
        let (_, listening) = self.nodes.iter().find(|(n, _)| *n == id).expect("listed");
        Member {
            id,
            child: None,
            listening: *listening,
        }
    }
}

/// `node <id> listening handle=<addr> http=<addr> peer=<addr>`.
fn parse_node_line(line: &str) -> Option<(u64, Listening)> {
    let rest = line.strip_prefix("node ")?;
    let (id, addresses) = rest.split_once(" listening handle=")?;
    let (handle, rest) = addresses.split_once(" http=")?;
    let (http, peer) = rest.split_once(" peer=")?;
    let listening = Listening {
        handle: handle.parse().ok()?,
        http: http.parse().ok()?,
        peer: peer.parse().ok()?,
        https: None,
    };
    Some((id.parse().ok()?, listening))
}

/// A base port whose nine ports (handles at +0..2 over TCP and UDP, peers at
/// +10..12, HTTP at +20..22) are free now.
pub(super) fn free_base_port() -> u16 {
    free_base_port_for(3)
}

/// A base port whose ports for `nodes` nodes (handles at +0.. over TCP and UDP, peers
/// at +10.., HTTP at +20..) are free now. Drawn below Linux's ephemeral range (32768
/// up), where a client socket lingering in TIME_WAIT could block a listener.
fn free_base_port_for(nodes: u16) -> u16 {
    let offsets: Vec<u16> = [0, 10, 20]
        .iter()
        .flat_map(|first| (0..nodes).map(move |n| first + n))
        .collect();
    for _attempt in 0..200 {
        let base: u16 = rand::random_range(20_000..32_000);
        let free = offsets.iter().all(|offset| {
            let address = SocketAddr::from(([127, 0, 0, 1], base + offset));
            let udp_free = *offset >= 10 || UdpSocket::bind(address).is_ok();
            TcpListener::bind(address).is_ok() && udp_free
        });
        if free {
            return base;
        }
    }
    panic!("no free base port in 200 draws")
}

fn node_pids(dir: &Path, peer: SocketAddr) -> Vec<i32> {
    let status = cluster_status(dir, peer);
    let members = status["members"].as_array().expect("members");
    let pids = members.iter().filter_map(|m| m["pid"].as_i64());
    pids.map(|pid| i32::try_from(pid).expect("a pid")).collect()
}

/// `hdl cluster status --json` asked of the node at `peer`.
pub(super) fn cluster_status(dir: &Path, peer: SocketAddr) -> Value {
    let output = Command::new(env!("CARGO_BIN_EXE_hdl"))
        .args(["cluster", "status", "--json", "--peer", &peer.to_string()])
        .arg("--secret-file")
        .arg(dir.join("cluster.secret"))
        .output()
        .expect("run hdl cluster status");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("JSON")
}

#[test]
fn cluster_up_forms_a_set_and_stops_every_node_on_sigterm() {
    let dir = TempDir::new().expect("temporary directory");
    let mut launcher = (0..TRIES)
        .find_map(|_| Launcher::start(dir.path(), free_base_port()))
        .expect("hdl cluster up started on one of the base ports");
    let ids: Vec<u64> = launcher.nodes.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, [1, 2, 3]);

    assert_eq!(
        create(&launcher.member(2), "ADMIN/up"),
        ResponseCode::Success
    );
    assert_resolves(&launcher.member(3), "ADMIN/up");
    let pids = node_pids(dir.path(), launcher.member(1).listening.peer);
    assert_eq!(pids.len(), 3);
    for &pid in &pids {
        assert_eq!(
            allocator_settings(pid),
            NODE_ALLOCATOR_SETTINGS,
            "node {pid}"
        );
    }

    kill_process(Pid::from_child(&launcher.child), Signal::TERM).expect("SIGTERM");
    let stopped = launcher.lines_until_exit();
    let status = launcher.child.wait().expect("reap hdl cluster up");
    assert!(status.success(), "{status}");
    assert_eq!(stopped.len(), 3, "{stopped:?}");
    for pid in pids {
        let pid = Pid::from_raw(pid).expect("a positive pid");
        assert!(
            test_kill_process(pid).is_err(),
            "node pid {pid:?} still exists"
        );
    }
}

/// Runs `hdl <args> <more>`.
fn hdl(args: &[&str], more: &[String]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_hdl"))
        .args(args)
        .args(more)
        .output()
        .expect("run hdl")
}

/// Creates `name` (a URL value) at `server` with the client options `auth`, and waits
/// (within [`WAIT`]) until `reader`, which may be a secondary yet to apply it, resolves
/// it.
fn create_and_resolve(name: &str, server: SocketAddr, reader: SocketAddr, auth: &[String]) {
    let url = format!("https://example.org/{name}");
    let value = format!("1:URL:{url}");
    let (server, reader) = (server.to_string(), reader.to_string());
    let created = hdl(
        &["create", name, "--value", &value, "--server", &server],
        auth,
    );
    let said = String::from_utf8_lossy(&created.stderr);
    assert!(created.status.success(), "hdl create {name}: {said}");
    let deadline = Instant::now() + WAIT;
    for _ in 0..MAX_POLLS {
        let resolved = hdl(&["resolve", name, "--server", &reader, "--json"], &[]);
        let json: Value = serde_json::from_slice(&resolved.stdout).unwrap_or(Value::Null);
        if json["values"][0]["data"]["value"] == url.as_str() {
            return;
        }
        assert!(Instant::now() < deadline, "{name} does not resolve: {json}");
        thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("{name} does not resolve at {reader}");
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .expect("exists")
        .permissions()
        .mode()
        & 0o777
}

#[test]
fn cluster_up_with_no_administrator_makes_one_and_keeps_it_on_a_restart() {
    let dir = TempDir::new().expect("temporary directory");
    let data = dir.path().join("set");
    let (launcher, base_port) = (0..TRIES)
        .find_map(|_| {
            let base_port = free_base_port();
            Launcher::start_with("local.toml", &data, base_port, &[]).map(|l| (l, base_port))
        })
        .expect("hdl cluster up started on one of the base ports");
    let key_file = data.join("admin.pem");
    let expected = [
        "--auth",
        "300:0.NA/ADMIN",
        "--key",
        &key_file.to_string_lossy(),
    ];
    assert_eq!(launcher.administrator, [expected.map(String::from)]);
    assert_eq!(mode(&key_file), 0o600);
    let key = std::fs::read(&key_file).expect("key file");
    let options = launcher.administrator[0].clone();
    let (node_2, node_3) = (launcher.member(2), launcher.member(3));
    create_and_resolve(
        "ADMIN/quick",
        node_2.listening.handle,
        node_3.listening.handle,
        &options,
    );
    drop(launcher);

    // Started again on the same data, it makes nothing new and says the same.
    let launcher = Launcher::start_with("local.toml", &data, base_port, &[])
        .expect("hdl cluster up restarted on the same ports");
    assert_eq!(launcher.administrator, [expected.map(String::from)]);
    assert_eq!(std::fs::read(&key_file).expect("key file"), key);
    let (node_1, node_3) = (launcher.member(1), launcher.member(3));
    create_and_resolve(
        "ADMIN/again",
        node_1.listening.handle,
        node_3.listening.handle,
        &options,
    );
}

#[test]
fn a_lone_serve_with_no_administrator_makes_one_in_its_new_data_directory() {
    let dir = TempDir::new().expect("temporary directory");
    let data = dir.path().join("data");
    let node = Member::start_lone(dir.path());
    let pid = node.child.as_ref().expect("running").id();
    let pid = i32::try_from(pid).expect("a pid");
    assert_eq!(allocator_settings(pid), NODE_ALLOCATOR_SETTINGS);
    let listening = node.listening;
    let key_file = data.join("admin.pem");
    assert_eq!(mode(&key_file), 0o600);
    let auth = [
        "--auth",
        "300:0.NA/ADMIN",
        "--key",
        &key_file.to_string_lossy(),
    ];
    let auth = auth.map(String::from);
    create_and_resolve("ADMIN/lone", listening.handle, listening.handle, &auth);
}

/// The allocator settings a node runs with, whether its launcher gave them or it ran
/// itself again with them (`cli/allocator.rs`).
const NODE_ALLOCATOR_SETTINGS: [&str; 2] =
    ["MIMALLOC_ARENA_EAGER_COMMIT=0", "MIMALLOC_PURGE_DELAY=0"];

/// The `MIMALLOC_*` variables of process `pid`'s environment, sorted.
fn allocator_settings(pid: i32) -> Vec<String> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).expect("read environ");
    let mut settings: Vec<String> = environ
        .split(|&octet| octet == 0)
        .map(|variable| String::from_utf8_lossy(variable).into_owned())
        .filter(|variable| variable.starts_with("MIMALLOC_"))
        .collect();
    settings.sort();
    settings
}

/// Whether process `pid` runs: it exists and is not a zombie awaiting its reaper.
fn is_running(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // `pid (comm) state …`, where comm may hold anything, `)` included.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next());
    !matches!(state, None | Some("Z" | "X"))
}

/// What is left of `pids` and their listeners at `addresses` after waiting (within
/// [`WAIT`]) for them to go: the processes still running and the addresses still held.
/// A process whose first thread is a zombie may still be closing its sockets in others.
fn left_after_wait(pids: &[i32], addresses: &[SocketAddr]) -> (Vec<i32>, Vec<SocketAddr>) {
    let left = || {
        let running = pids.iter().copied().filter(|pid| is_running(*pid));
        let held = addresses.iter().copied();
        let held = held.filter(|address| TcpListener::bind(address).is_err());
        (running.collect::<Vec<_>>(), held.collect::<Vec<_>>())
    };
    let deadline = Instant::now() + WAIT;
    for _ in 0..MAX_POLLS {
        let (running, held) = left();
        if (running.is_empty() && held.is_empty()) || Instant::now() >= deadline {
            return (running, held);
        }
        thread::sleep(std::time::Duration::from_millis(20));
    }
    left()
}

#[test]
fn the_nodes_of_a_sigkilled_cluster_up_exit_and_free_their_ports() {
    let dir = TempDir::new().expect("temporary directory");
    let mut launcher = (0..TRIES)
        .find_map(|_| Launcher::start(dir.path(), free_base_port()))
        .expect("hdl cluster up started on one of the base ports");
    let pids = node_pids(dir.path(), launcher.member(1).listening.peer);
    assert_eq!(pids.len(), 3);
    let addresses: Vec<SocketAddr> = launcher
        .nodes
        .iter()
        .flat_map(|(_, node)| [node.handle, node.peer, node.http])
        .collect();

    launcher.child.kill().expect("SIGKILL hdl cluster up");
    launcher.child.wait().expect("reap hdl cluster up");
    let (outlived, held) = left_after_wait(&pids, &addresses);
    for pid in &outlived {
        // So that a failure leaves no orphan behind: these are the launcher's nodes.
        let _ = kill_process(Pid::from_raw(*pid).expect("a positive pid"), Signal::KILL);
    }
    assert!(
        outlived.is_empty(),
        "nodes {outlived:?} outlived their launcher"
    );
    assert!(held.is_empty(), "{held:?} still held");
}

#[test]
fn a_node_whose_launcher_is_gone_before_it_asked_to_end_with_it_does_not_start() {
    let dir = TempDir::new().expect("temporary directory");
    // Process 1 is not its parent: as if its launcher had ended and it had been
    // handed to init before asking to end with it.
    let mut child = Command::new(env!("CARGO_BIN_EXE_hdl"))
        .args(["serve", "--exit-with-parent", "1", "--data-dir"])
        .arg(dir.path().join("data"))
        .args(["--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"])
        .args(["--peer", "127.0.0.1:0", "--no-bootstrap"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn hdl serve");
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break Some(status);
        }
        if Instant::now() >= deadline {
            break None;
        }
        thread::sleep(std::time::Duration::from_millis(20));
    };
    let _ = child.kill();
    let output = child.wait_with_output().expect("reap hdl serve");
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(status.is_some_and(|s| !s.success()), "it started: {said}");
    assert!(
        said.contains("process 1 is not this one's parent"),
        "{said}"
    );
    assert!(
        !dir.path().join("data").exists(),
        "it made its data directory"
    );
}

/// Each set of a status report: its id, its member ids, the slots it owns and the
/// handles it holds.
fn sets_of(status: &Value) -> Vec<(u64, Vec<u64>, u64, u64)> {
    let sets = status["sets"].as_array().expect("sets");
    sets.iter()
        .map(|set| {
            let members = set["members"].as_array().expect("members");
            let mut ids: Vec<u64> = members.iter().filter_map(|m| m["id"].as_u64()).collect();
            ids.sort_unstable();
            let lagging = members.iter().filter(|m| m["lag"] != 0).count();
            assert_eq!(lagging, 0, "{set}");
            let id = set["id"].as_u64().expect("an id");
            let slots = set["slots"].as_u64().expect("slots");
            (id, ids, slots, set["handles"].as_u64().expect("handles"))
        })
        .collect()
}

#[test]
fn cluster_up_runs_two_sets_sharing_the_ring_and_restarts_them_into_their_sets() {
    let dir = TempDir::new().expect("temporary directory");
    let (launcher, base_port) = (0..TRIES)
        .find_map(|_| {
            let base_port = free_base_port_for(6);
            Launcher::start_file("sharded.toml", dir.path(), base_port).map(|l| (l, base_port))
        })
        .expect("hdl cluster up started on one of the base ports");
    let ids: Vec<u64> = launcher.nodes.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, [1, 2, 3, 4, 5, 6]);
    let node_5 = launcher.member(5).listening.peer;
    let status = cluster_status(dir.path(), node_5);
    assert_eq!(status["slot_count"], 256);
    assert_eq!(status["migrations"], Value::Array(Vec::new()));
    let sets = sets_of(&status);
    let shape: Vec<(u64, Vec<u64>, u64)> = sets
        .iter()
        .map(|(i, m, s, _)| (*i, m.clone(), *s))
        .collect();
    assert_eq!(shape, [(1, vec![1, 2, 3], 128), (2, vec![4, 5, 6], 128)]);
    // The bootstrap administrator's one prefix handle is held by exactly one set.
    assert_eq!(
        sets.iter().map(|(_, _, _, handles)| handles).sum::<u64>(),
        1
    );
    // The asked node's own set heads the report.
    assert_eq!(status["members"].as_array().map(Vec::len), Some(3));
    assert!(
        status["members"][0]["id"]
            .as_u64()
            .is_some_and(|id| id >= 4)
    );
    let epoch = status["epoch"].as_u64().expect("an epoch");
    assert_site_values(dir.path(), node_5, epoch);
    drop(launcher);

    // Started again on the same data, every node comes back in its own set and the
    // ring is the one made before.
    let launcher = Launcher::start_file("sharded.toml", dir.path(), base_port)
        .expect("hdl cluster up restarted on the same ports");
    let status = cluster_status(dir.path(), launcher.member(4).listening.peer);
    let sets = sets_of(&status);
    let shape: Vec<(u64, Vec<u64>, u64)> = sets
        .iter()
        .map(|(i, m, s, _)| (*i, m.clone(), *s))
        .collect();
    assert_eq!(shape, [(1, vec![1, 2, 3], 128), (2, vec![4, 5, 6], 128)]);
    assert!(status["epoch"].as_u64().expect("an epoch") >= epoch);
    for id in [4, 5, 6] {
        let set_dir = dir.path().join(format!("node-{id}/groups/set-2"));
        assert!(set_dir.is_dir(), "node {id} has no set-2 directory");
        assert!(!dir.path().join(format!("node-{id}/groups/set-1")).exists());
    }
}

/// `hdl cluster site-values` prints three HS_SITEs (ranks 0 to 2), each of 256
/// servers numbered 1 to 256 with the map's epoch as serial.
fn assert_site_values(dir: &Path, peer: SocketAddr, epoch: u64) {
    let output = Command::new(env!("CARGO_BIN_EXE_hdl"))
        .args(["cluster", "site-values", "--peer", &peer.to_string()])
        .arg("--secret-file")
        .arg(dir.join("cluster.secret"))
        .output()
        .expect("run hdl cluster site-values");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 3, "{text}");
    for (rank, line) in lines.iter().enumerate() {
        assert_eq!(line["rank"], rank);
        assert_eq!(line["serial"], epoch % 65536);
        let bytes: Vec<u8> = (0..line["hex"].as_str().expect("hex").len())
            .step_by(2)
            .map(|at| {
                u8::from_str_radix(&line["hex"].as_str().unwrap_or("")[at..at + 2], 16)
                    .expect("hex")
            })
            .collect();
        let site = hdl::values::SiteInfo::decode(&bytes).expect("an HS_SITE");
        let ids: Vec<u32> = site.servers.iter().map(|s| s.server_id).collect();
        assert_eq!(ids, (1..=256).collect::<Vec<u32>>());
    }
}
