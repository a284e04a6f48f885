//! The peer port against a stranger without the cluster secret: connections that never
//! authenticate, more than the port serves, keep neither `hdl cluster status` nor a
//! member coming back out, and one source address holds a bounded number of them.

use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use hdl::codec::ResponseCode;
use serde_json::Value;

use super::{Set, assert_resolves, create};
use crate::harness::Server;

/// More than the 256 connections the port served at once before it told strangers
/// from peers.
const FLOOD: usize = 300;

/// How often the flood replaces the connections the nodes closed.
const TOP_UP: Duration = Duration::from_secs(1);

/// The most rounds a flood makes (a bound on its thread, whatever the test does).
const MAX_ROUNDS: usize = 120;

/// Connects to `target` and waits (bounded) for the server's first handshake frame, so
/// that the server has taken the connection; then sends nothing, ever.
fn stranger(target: SocketAddr) -> Option<TcpStream> {
    let mut stream = TcpStream::connect(target).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut challenge = [0u8; 256];
    match stream.read(&mut challenge) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(stream),
    }
}

/// Whether the server has closed `stream`: its end or a reset, once whatever it sent
/// before is read.
fn closed(stream: &mut TcpStream, wait: Duration) -> bool {
    stream.set_read_timeout(Some(wait)).expect("read timeout");
    let mut buffer = [0u8; 256];
    for _ in 0..16 {
        match stream.read(&mut buffer) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(error) => {
                return !matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut);
            }
        }
    }
    false
}

/// `FLOOD` connections that never authenticate held on each target from 127.0.0.1,
/// those the targets close replaced every [`TOP_UP`] by a thread of their own until
/// dropped. The first round is made before [`Flood::start`] returns.
struct Flood {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Flood {
    fn start(targets: Vec<SocketAddr>) -> Flood {
        let mut held: Vec<Vec<TcpStream>> = targets.iter().map(|_| Vec::new()).collect();
        top_up(&targets, &mut held);
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = Arc::clone(&stop);
            thread::spawn(move || {
                for _ in 0..MAX_ROUNDS {
                    let next = Instant::now() + TOP_UP;
                    while Instant::now() < next {
                        if stop.load(Ordering::Relaxed) {
                            return;
                        }
                        thread::sleep(Duration::from_millis(20));
                    }
                    top_up(&targets, &mut held);
                }
            })
        };
        Flood {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Drops the connections of `held` that their target closed and opens new ones up to
/// [`FLOOD`] per target (without waiting for an answer: a target at its limit closes
/// them at once).
fn top_up(targets: &[SocketAddr], held: &mut [Vec<TcpStream>]) {
    for (target, held) in targets.iter().zip(held.iter_mut()) {
        held.retain_mut(|stream| {
            stream.set_nonblocking(true).is_ok() && !closed(stream, Duration::from_millis(1))
        });
        while held.len() < FLOOD {
            match TcpStream::connect(target) {
                Ok(stream) => held.push(stream),
                Err(_) => break,
            }
        }
    }
}

/// `hdl cluster status --json` through member `via`, asked once: it must answer.
fn status_once(set: &Set, via: usize) -> Value {
    let peer = set.peer(via);
    let output = set.try_cli(&["status", "--peer", &peer, "--json"]);
    assert!(
        output.status.success(),
        "hdl cluster status under a flood of strangers: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("JSON")
}

#[test]
fn a_flood_of_strangers_keeps_out_neither_status_nor_a_member_coming_back() {
    let mut set = Set::form(3);
    let primary = set.primary(0);
    let targets = set.members.iter().map(|m| m.listening.peer).collect();
    let flood = Flood::start(targets);

    let status = status_once(&set, primary);
    let members = status["members"].as_array().expect("members");
    assert_eq!(members.len(), 3, "{status}");
    assert!(
        members.iter().all(|m| m["role"] != "unreachable"),
        "{status}"
    );

    // The survivors elect a primary over flooded ports, replicate a write, and take
    // the old primary back when it returns on its data.
    let id = set.members[primary].id;
    set.members[primary].kill();
    let new_primary = set.primary_besides((primary + 1) % 3, id);
    assert_eq!(
        create(&set.members[new_primary], "test/flooded"),
        ResponseCode::Success
    );
    set.restart(primary);
    set.await_status(new_primary, "the old primary back and caught up", |s| {
        s["members"].as_array().is_some_and(|members| {
            members
                .iter()
                .any(|m| m["id"] == id && m["lag"] == 0 && m["role"] == "secondary")
        })
    });
    assert_resolves(&set.members[primary], "test/flooded");
    drop(flood);
}

#[test]
fn one_source_holds_a_bounded_number_of_unauthenticated_peer_connections() {
    // A deadline far beyond the test, so that only the per-source bound closes any.
    let server = Server::start_with_config("[cluster]\npeer_handshake_timeout_ms = 60000\n");
    let peer = server.peer_address();
    let mut held: Vec<TcpStream> = (0..20)
        .map(|n| stranger(peer).unwrap_or_else(|| panic!("stranger {n} taken")))
        .collect();
    // Eight per source: each newcomer past them took the place of the oldest.
    let (oldest, newest) = held.split_at_mut(12);
    for (n, stream) in oldest.iter_mut().enumerate() {
        assert!(
            closed(stream, Duration::from_secs(2)),
            "stranger {n} made room for a newer one"
        );
    }
    for (n, stream) in newest.iter_mut().enumerate() {
        assert!(
            !closed(stream, Duration::from_millis(100)),
            "stranger {} still held",
            n + 12
        );
    }
}
