//! `hdl bench chaos`, short: a set of three under writes and reads whose members are
//! SIGKILLed every 1–3 s must lose nothing acknowledged, end alike on every member and
//! leave a linearizable history; the bench's own figures say kills happened and writes
//! were acknowledged. Two writes in three modify a handle created before, often
//! through a member that lags: one refused "not found" from a stale copy shows in the
//! history check.

use std::fs::File;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};
use tempfile::TempDir;

use super::up::free_base_port;

/// Seconds of kills under load.
const DURATION: u64 = 45;
/// How long the run may take in all: forming the set, the kills, catching up, reading
/// every handle at every member and checking the history.
const WITHIN: Duration = Duration::from_secs(DURATION + 240);
/// How often the run is polled for its end.
const POLL: Duration = Duration::from_millis(200);

#[test]
fn members_killed_under_load_lose_nothing_and_keep_a_linearizable_history() {
    let dir = TempDir::new().expect("temporary directory");
    let stdout = dir.path().join("stdout");
    let stderr = dir.path().join("stderr");
    let mut child = Command::new(env!("CARGO_BIN_EXE_hdl"))
        .args(["bench", "chaos"])
        .args(["--duration", &DURATION.to_string()])
        .args(["--base-port", &free_base_port().to_string()])
        .arg("--cluster")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("cluster/local.toml"))
        .arg("--data-dir")
        .arg(dir.path().join("set"))
        .stdin(Stdio::null())
        .stdout(File::create(&stdout).expect("stdout file"))
        .stderr(File::create(&stderr).expect("stderr file"))
        .spawn()
        .expect("spawn hdl bench chaos");
    let status = wait_within(&mut child, WITHIN);
    let said = std::fs::read_to_string(&stdout).expect("stdout");
    let complained = std::fs::read_to_string(&stderr).expect("stderr");
    let status = status.unwrap_or_else(|| {
        // SIGTERM: the bench stops and reaps its own nodes before it exits.
        let _ = kill_process(Pid::from_child(&child), Signal::TERM);
        let _ = child.wait();
        panic!("hdl bench chaos did not end within {WITHIN:?}: {said}\n{complained}")
    });
    assert!(status.success(), "{status}: {said}\n{complained}");
    let kills = figure(&said, "kills     ", " SIGKILLs");
    let acknowledged = figure(&said, "writes    ", " acknowledged");
    assert!(kills >= DURATION / 3, "{kills} kills: {said}");
    assert!(acknowledged > 0, "{said}");
    assert!(
        said.contains(": 0 lost writes, 0 handles differing"),
        "{said}"
    );
    assert!(said.contains(" operations: linearizable"), "{said}");
}

/// Polls `child` until it exits, within `within`; `None` if it is still running.
fn wait_within(child: &mut std::process::Child, within: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return Some(status);
        }
        thread::sleep(POLL);
    }
    child.try_wait().expect("try_wait")
}

/// The number between `before` and `after` on the line starting with `before`.
fn figure(text: &str, before: &str, after: &str) -> u64 {
    let line = text.lines().find_map(|line| line.strip_prefix(before));
    let number = line.and_then(|rest| rest.split_once(after)).map(|(n, _)| n);
    number
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {before:?}…{after:?} figure in {text}"))
}
