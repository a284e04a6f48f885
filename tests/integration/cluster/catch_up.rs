//! A learner added under writes to a set whose primary snapshots every 20 entries and
//! keeps 1 behind: its install takes longer than the primary takes to snapshot again,
//! yet it installs one snapshot, streamed from the primary's store, catches up from
//! the log the primary held for it, and has every acknowledged write; neither member
//! keeps a snapshot file.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use super::{CONFIG, Member, Set, Writer, assert_resolves};
use crate::harness::{ADMIN_ARGS, metrics_of};

/// Handles imported before the learner joins: enough that installing them takes far
/// longer than the writer takes to make 20 entries.
const IMPORTED: usize = 300_000;

/// The set's configuration: [`CONFIG`] with 1 entry kept behind a snapshot and the
/// default bound for members behind.
fn config() -> String {
    let config = CONFIG
        .replace("keep_after_snapshot = 5\n", "keep_after_snapshot = 1\n")
        .replace("keep_for_members = 10\n", "");
    assert_ne!(config, CONFIG, "CONFIG changed under this test");
    config
}

/// A batch file creating `test/bulk-0` to `test/bulk-<count - 1>`.
fn batch_file(path: &Path, count: usize) {
    let mut batch = String::new();
    for n in 0..count {
        let _ = write!(
            batch,
            "CREATE test/bulk-{n}\n1 URL 86400 1110 UTF8 https://example.org/bulk/{n}\n\n"
        );
    }
    std::fs::write(path, batch).expect("batch file");
}

/// `hdl import` of `file` through member `index`'s peer port, which must succeed.
fn import(set: &Set, index: usize, file: &Path) {
    let output = Command::new(env!("CARGO_BIN_EXE_hdl"))
        .arg("import")
        .arg(file)
        .args(["--peer", &set.peer(index), "--cluster-secret-file"])
        .arg(set.dir.path().join("secret"))
        .args(ADMIN_ARGS)
        .output()
        .expect("run hdl import");
    assert!(
        output.status.success(),
        "import: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The snapshots `member` says on `/metrics` it installed, and the octets of
/// snapshot data it received for them.
fn snapshots_installed(member: &Member) -> (u64, u64) {
    let url = format!("http://{}", member.listening.http);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let metrics = runtime.block_on(metrics_of(&url));
    let counter = |name: &str| -> u64 {
        let line = metrics
            .lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '));
        line.and_then(|count| count.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name}: {metrics}"))
    };
    (
        counter("hdl_raft_snapshots_installed_total"),
        counter("hdl_raft_snapshot_octets_installed_total"),
    )
}

/// The files of member `id`'s replica set directory whose names start with
/// "snapshot" (a kept snapshot, or a scratch file left behind).
fn snapshot_files(set: &Set, id: u64) -> Vec<String> {
    let dir = set.data_dir(id).join("groups/set-1");
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|error| panic!("{dir:?}: {error}"));
    entries
        .map(|entry| entry.expect("directory entry").file_name())
        .map(|name| name.to_string_lossy().into_owned())
        .filter(|name| name.starts_with("snapshot"))
        .collect()
}

#[test]
fn a_learner_joining_under_writes_installs_one_snapshot_and_loses_no_write() {
    let mut set = Set::empty();
    std::fs::write(set.dir.path().join("config.toml"), config()).expect("config file");
    set.form_members(1);
    let file = set.dir.path().join("bulk.txt");
    batch_file(&file, IMPORTED);
    import(&set, 0, &file);

    let writer = Writer::start(set.members[0].listening);
    let mut names = Vec::new();
    writer.receive(30, &mut names);
    let learner = set.spawn_new(2);
    set.add_learner(0, &learner);
    set.members.push(learner);
    // Writes go on after it joined: it follows them from the log.
    writer.receive(30, &mut names);
    writer.finish(&mut names);
    set.await_status(0, "the learner caught up", |s| {
        s["members"]
            .as_array()
            .is_some_and(|members| members.len() == 2 && members.iter().all(|m| m["lag"] == 0))
    });

    let (installs, octets) = snapshots_installed(&set.members[1]);
    assert_eq!(installs, 1, "{}", set.stderr(1));
    // More than one chunk of 8 MiB came.
    assert!(octets > 8 << 20, "{octets} octets received");
    for id in [1, 2] {
        assert_eq!(
            snapshot_files(&set, id),
            Vec::<String>::new(),
            "member {id}"
        );
    }
    for name in &names {
        assert_resolves(&set.members[1], name);
    }
    for n in [0, IMPORTED / 2, IMPORTED - 1] {
        assert_resolves_bulk(&set.members[1], n);
    }
}

/// `test/bulk-<n>` resolves at `member` to its imported URL.
fn assert_resolves_bulk(member: &Member, n: usize) {
    let url = format!("https://example.org/bulk/{n}");
    super::assert_resolves_data(member, &format!("test/bulk-{n}"), url.as_bytes());
}
