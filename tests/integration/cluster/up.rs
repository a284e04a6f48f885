//! `hdl cluster up` end to end: the shipped `cluster/local.toml` on a temporary
//! directory and a free base port, a write through one node read on another, and
//! SIGTERM to the launcher stopping and reaping every node it started.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Instant;

use hdl::codec::ResponseCode;
use rustix::process::{Pid, Signal, kill_process, test_kill_process};
use serde_json::Value;
use tempfile::TempDir;

use super::{Member, WAIT, assert_resolves, create};
use crate::harness::{ADMIN_SECRET, Listening};

/// Base ports tried before giving up; each try is a fresh random one.
const TRIES: usize = 5;
/// Lines read from the launcher before giving up on `ready`.
const MAX_LINES: usize = 50;

/// A running `hdl cluster up`; SIGTERMed and reaped when dropped, so its own
/// shutdown reaps the nodes even when a test fails.
struct Launcher {
    child: Child,
    lines: mpsc::Receiver<String>,
    nodes: Vec<(u64, Listening)>,
}

impl Drop for Launcher {
    fn drop(&mut self) {
        let _ = kill_process(Pid::from_child(&self.child), Signal::TERM);
        let _ = self.child.wait();
    }
}

impl Launcher {
    /// Starts `hdl cluster up` on `dir` with `base_port`; `None` if it exits before
    /// it is ready (a port was taken meanwhile).
    fn start(dir: &Path, base_port: u16) -> Option<Launcher> {
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("cluster/local.toml");
        let mut child = Command::new(env!("CARGO_BIN_EXE_hdl"))
            .args(["cluster", "up"])
            .arg(file)
            .arg("--data-dir")
            .arg(dir)
            .args(["--base-port", &base_port.to_string()])
            .args(["--admin-secret-file", ADMIN_SECRET, "--prefix", "ADMIN"])
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
                Ok(line) => self.nodes.extend(parse_node_line(&line)),
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

    fn member(&self, id: u64) -> Member {
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
/// +10..12, HTTP at +20..22) are free now. Drawn below Linux's ephemeral range (32768 up), where a
/// client socket lingering in TIME_WAIT could block a listener.
fn free_base_port() -> u16 {
    for _attempt in 0..200 {
        let base: u16 = rand::random_range(20_000..32_000);
        let free = [0, 1, 2, 10, 11, 12, 20, 21, 22].iter().all(|offset| {
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
    let status: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let members = status["members"].as_array().expect("members");
    let pids = members.iter().filter_map(|m| m["pid"].as_i64());
    pids.map(|pid| i32::try_from(pid).expect("a pid")).collect()
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
