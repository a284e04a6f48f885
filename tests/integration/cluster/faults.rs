//! Faults and membership changes under load: a secondary that must catch up from a
//! snapshot, a learner added and removed while writes go on, and rounds of SIGKILL
//! and restart of random members that must lose nothing acknowledged.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread;

use hdl::client::Client;
use hdl::codec::ResponseCode;
use serde_json::Value;

use super::{
    Set, Writer, assert_resolves, create, create_request, receive, secondary_catches_up_after, url,
};
use crate::harness::{ADMIN_ARGS, admin_credentials};

/// Every member of the status is caught up (lag 0) and there are `count` of them.
fn all_caught_up(status: &Value, count: usize) -> bool {
    status["members"]
        .as_array()
        .is_some_and(|members| members.len() == count && members.iter().all(|m| m["lag"] == 0))
}

#[test]
fn a_secondary_behind_a_purged_log_catches_up_from_a_snapshot() {
    // Three times snapshot_every (20) with 5 kept: the entries it misses are purged.
    secondary_catches_up_after(60, "purged");
}

#[test]
fn a_learner_added_under_load_serves_reads_and_leaves_cleanly() {
    let mut set = Set::form(3);
    let writer = Writer::start(set.members[0].listening);
    let mut names = Vec::new();
    writer.receive(10, &mut names);
    let learner = set.spawn(4, "127.0.0.1:0", "127.0.0.1:0");
    set.add_learner(0, &learner);
    set.members.push(learner);
    let first = set.peer(0);
    writer.receive(10, &mut names);
    writer.finish(&mut names);
    let status = set.await_status(0, "the learner caught up", |s| all_caught_up(s, 4));
    let row = status["members"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["id"] == 4));
    assert_eq!(row.map(|r| &r["role"]), Some(&Value::from("learner")));
    for name in &names {
        assert_resolves(&set.members[3], name);
    }

    set.cli(&["remove", "--peer", &first, "--id", "4"]);
    set.await_status(0, "a set of three", |s| {
        s["members"]
            .as_array()
            .is_some_and(|m| m.len() == 3 && m.iter().all(|m| m["id"] != 4))
    });
    let primary = set.primary(0);
    assert_eq!(
        create(&set.members[primary], "test/after-removal"),
        ResponseCode::Success
    );
}

/// Creates `test/chaos-N` through a client of every member (the next one when a
/// member is down) until `stop`; sends the name of every acknowledged create.
fn write_through_any(servers: Vec<SocketAddr>, stop: &AtomicBool, acked: &mpsc::Sender<String>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let client = Client::new(servers).with_credentials(admin_credentials());
    for n in 0..100_000 {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let name = format!("test/chaos-{n}");
        let request = create_request(&name, url(&name));
        if runtime.block_on(client.admin(request)).is_ok() && acked.send(name).is_err() {
            return;
        }
    }
}

/// `hdl list test` at `handle`, as a set of names.
fn list(handle: SocketAddr) -> BTreeSet<String> {
    let output = Command::new(env!("CARGO_BIN_EXE_hdl"))
        .args(["list", "test", "--server", &handle.to_string()])
        .args(ADMIN_ARGS)
        .output()
        .expect("run hdl list");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn random_kills_and_restarts_under_writes_lose_nothing_acknowledged() {
    const ROUNDS: usize = 5;
    let mut set = Set::form(3);
    let servers: Vec<SocketAddr> = set.members.iter().map(|m| m.listening.handle).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let (sender, acked) = mpsc::channel();
    let writer = {
        let stop = Arc::clone(&stop);
        thread::spawn(move || write_through_any(servers, &stop, &sender))
    };
    let mut names = Vec::new();
    for _ in 0..ROUNDS {
        receive(&acked, 5, &mut names);
        let victim = rand::random_range(0..set.members.len());
        set.members[victim].kill();
        // The two others still form a quorum: writes go on.
        receive(&acked, 5, &mut names);
        set.restart(victim);
        let id = set.members[victim].id;
        set.await_status((victim + 1) % 3, "the restarted member answers", |s| {
            s["members"].as_array().is_some_and(|members| {
                members
                    .iter()
                    .any(|m| m["id"] == id && m["role"] != "unreachable")
            })
        });
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().expect("writer");
    names.extend(acked.try_iter());

    set.await_status(0, "every member caught up", |s| all_caught_up(s, 3));
    let lists: Vec<BTreeSet<String>> = set
        .members
        .iter()
        .map(|m| list(m.listening.handle))
        .collect();
    assert_eq!(lists[0], lists[1], "members 1 and 2 differ");
    assert_eq!(lists[0], lists[2], "members 1 and 3 differ");
    let lost: Vec<&String> = names
        .iter()
        .filter(|name| !lists[0].contains(*name))
        .collect();
    assert!(lost.is_empty(), "acknowledged but lost: {lost:?}");
    assert!(names.len() >= ROUNDS * 10, "{} acknowledged", names.len());
}
