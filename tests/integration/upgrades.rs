//! Upgrades keep data: a data directory written by an earlier release of hdl
//! (`tests/fixtures/earlier-releases/<commit>/`, made by `scripts/make-format-fixture.sh`
//! with that release's binary) opens with this one, exports exactly what the earlier
//! release exported, takes writes and keeps them over a SIGKILL; a store whose format
//! this hdl does not read is refused at start with a message saying what to do.

use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard};

use crate::harness::{ADMIN_ARGS, Node, try_spawn_serve_through};

/// The fixtures, one directory per earlier release.
fn earlier_releases() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/earlier-releases");
    let mut releases: Vec<PathBuf> = fs::read_dir(&root)
        .expect("tests/fixtures/earlier-releases")
        .map(|entry| entry.expect("fixture entry").path())
        .collect();
    releases.sort();
    assert!(!releases.is_empty(), "no fixture in {}", root.display());
    releases
}

/// A private copy of `release`'s data directory in `dir` (git keeps no modes; hdl
/// refuses a data directory others can read).
fn copy_data(release: &Path, dir: &Path) -> PathBuf {
    let data = dir.join("data");
    let copied = Command::new("cp")
        .arg("-r")
        .arg(release.join("data"))
        .arg(&data)
        .status()
        .expect("run cp");
    assert!(copied.success(), "copying {}", release.display());
    fs::set_permissions(&data, fs::Permissions::from_mode(0o700)).expect("chmod data dir");
    data
}

fn hdl(args: &[OsString]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hdl"))
        .args(args)
        .output()
        .expect("run hdl")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The `hdl serve` arguments of `release`'s node on the private copy `data`: its data
/// directory, the addresses it was written with (its set records its peer address) and
/// its server administrator.
fn serve_args(release: &Path, data: &Path) -> Vec<OsString> {
    let addresses = fs::read_to_string(release.join("serve-args")).expect("serve-args");
    let mut args: Vec<OsString> = vec!["--data-dir".into(), data.into()];
    args.extend(addresses.split_whitespace().map(OsString::from));
    args
}

/// `hdl export` of `node`, whose data directory is `data`.
fn export(node: &Node, data: &Path) -> String {
    let mut args: Vec<OsString> = vec![
        "export".into(),
        "--peer".into(),
        node.listening.peer.to_string().into(),
        "--cluster-secret-file".into(),
        data.join("cluster.secret").into(),
    ];
    args.extend(ADMIN_ARGS.map(OsString::from));
    let output = hdl(&args);
    assert!(output.status.success(), "export: {}", text(&output.stderr));
    text(&output.stdout)
}

/// The first line where `exported` and `expected` differ, both shown.
fn first_difference(exported: &str, expected: &str) -> Option<String> {
    let mut exported = exported.lines();
    let mut expected = expected.lines();
    (1..).find_map(|number| match (exported.next(), expected.next()) {
        (None, None) => Some(None),
        (got, want) if got == want => None,
        (got, want) => Some(Some(format!("line {number}: {got:?}, expected {want:?}"))),
    })?
}

/// Creates `handle` with one URL value on `node`.
fn create(node: &Node, handle: &str) {
    let mut args: Vec<OsString> = ["create", handle, "--value", "1:URL:https://example.org/new"]
        .map(OsString::from)
        .to_vec();
    args.extend(["--server".into(), node.listening.handle.to_string().into()]);
    args.extend(ADMIN_ARGS.map(OsString::from));
    let output = hdl(&args);
    assert!(output.status.success(), "create: {}", text(&output.stderr));
}

/// Held by a test while a fixture's node runs: every fixture's node listens on the
/// addresses it was written with.
static FIXTURE_ADDRESSES: Mutex<()> = Mutex::new(());

fn fixture_addresses() -> MutexGuard<'static, ()> {
    FIXTURE_ADDRESSES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[test]
fn a_data_directory_of_an_earlier_release_opens_and_answers_the_same() {
    let _addresses = fixture_addresses();
    for release in earlier_releases() {
        let name = release.display();
        let expected = fs::read_to_string(release.join("expected.jsonl")).expect("expected.jsonl");
        assert!(expected.lines().count() > 50, "{name}: too small a fixture");
        let dir = tempfile::tempdir().expect("tempdir");
        let data = copy_data(&release, dir.path());
        let args = serve_args(&release, &data);

        let node = Node::spawn(&args, &dir.path().join("stderr-1"));
        let exported = export(&node, &data);
        if let Some(difference) = first_difference(&exported, &expected) {
            panic!("{name}: the export differs from the earlier release's: {difference}");
        }
        create(&node, "ADMIN/written-after-the-upgrade");
        drop(node); // SIGKILL

        let again = Node::spawn(&args, &dir.path().join("stderr-2"));
        let after = export(&again, &data);
        let added: Vec<&str> = after
            .lines()
            .filter(|line| !expected.lines().any(|kept| kept == *line))
            .collect();
        assert_eq!(added.len(), 1, "{name}: {added:?}");
        assert!(
            added[0].contains("\"ADMIN/written-after-the-upgrade\""),
            "{name}: {added:?}"
        );
        assert_eq!(
            after.lines().count(),
            expected.lines().count() + 1,
            "{name}"
        );
    }
}

#[test]
fn a_store_of_an_unknown_format_version_is_refused_saying_what_to_do() {
    let _addresses = fixture_addresses();
    let release = &earlier_releases()[0];
    let dir = tempfile::tempdir().expect("tempdir");
    let data = copy_data(release, dir.path());
    let store = data.join("groups/set-1/handles.redb");
    set_format_version(&store, 999);

    let failure =
        match try_spawn_serve_through(&[], &serve_args(release, &data), &dir.path().join("stderr"))
        {
            Ok((mut child, _)) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("hdl serve started on a store of format 999");
            }
            Err(failure) => failure,
        };
    assert!(
        failure.contains("store format version 999 is not supported"),
        "{failure}"
    );
    assert!(failure.contains("export the data"), "{failure}");
}

/// Writes `version` as the store format version of the redb file `store`.
fn set_format_version(store: &Path, version: u64) {
    const META: redb::TableDefinition<&str, u64> = redb::TableDefinition::new("meta");
    let db = redb::Database::open(store).expect("open fixture store");
    let txn = db.begin_write().expect("write transaction");
    txn.open_table(META)
        .expect("meta table")
        .insert("format_version", version)
        .expect("insert");
    txn.commit().expect("commit");
}
