//! `hdl backup` and `hdl restore` end to end: a set of three backed up from a
//! secondary while a client keeps writing, restored into a fresh directory, served by
//! a lone `hdl serve` that exports exactly what the set held at the backup's point
//! and that a new member then joins; a truncated or damaged backup refused by name,
//! leaving no data directory.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use super::{Member, Set, Writer, assert_resolves};
use crate::harness::{
    ADMIN, ADMIN_SECRET, Listening, Server, lone_node_args, spawn_serve, try_spawn_serve_through,
};

/// Runs `hdl ARGS`.
pub(super) fn hdl(args: &[OsString]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hdl"))
        .args(args)
        .output()
        .expect("run hdl")
}

pub(super) fn words(words: &[&str]) -> Vec<OsString> {
    words.iter().map(OsString::from).collect()
}

pub(super) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `hdl backup` of the cluster of the member at `peer` into `out`.
pub(super) fn try_backup(peer: &str, secret: &Path, out: &Path) -> Output {
    let mut args = words(&["backup", "--peer", peer, "--secret-file"]);
    args.extend([secret.into(), "--out".into(), out.into()]);
    hdl(&args)
}

/// [`try_backup`], which must succeed; what it says.
pub(super) fn backup(peer: &str, secret: &Path, out: &Path) -> String {
    let output = try_backup(peer, secret, out);
    assert!(output.status.success(), "backup: {}", text(&output.stderr));
    let said = text(&output.stdout);
    assert!(said.contains("backed up replica set"), "{said}");
    said
}

/// `hdl restore FILE --data-dir DIR`.
pub(super) fn restore(file: &Path, dir: &Path) -> Output {
    hdl(&[
        "restore".into(),
        file.into(),
        "--data-dir".into(),
        dir.into(),
    ])
}

/// `hdl export` of the cluster of the member at `peer` (cluster secret `secret`) as
/// the bootstrap administrator, which must succeed.
pub(super) fn export(peer: &str, secret: &Path) -> String {
    let mut args = words(&["export", "--peer", peer, "--cluster-secret-file"]);
    args.push(secret.into());
    args.extend(words(&["--auth", ADMIN, "--secret-file", ADMIN_SECRET]));
    let output = hdl(&args);
    assert!(output.status.success(), "export: {}", text(&output.stderr));
    text(&output.stdout)
}

/// The number N of an export line of `test/load-N`, if it is one.
fn load_number(line: &str) -> Option<usize> {
    let rest = line.strip_prefix(r#"{"handle":"test/load-"#)?;
    rest.split('"').next()?.parse().ok()
}

#[test]
fn a_backup_under_writes_restores_to_a_set_that_exports_the_same_and_takes_members() {
    let set = Set::form(3);
    let primary = set.primary(0);
    let secondary = (primary + 1) % 3;
    let writer = Writer::start(set.members[primary].listening);
    let mut before = Vec::new();
    writer.receive(30, &mut before);

    let dir = tempfile::tempdir().expect("temporary directory");
    let file = dir.path().join("set.backup");
    let secret = set.dir.path().join("secret");
    let said = backup(&set.peer(secondary), &secret, &file);
    assert!(said.contains("replica set 1 "), "{said}");
    let mode = std::fs::metadata(&file)
        .expect("the backup")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "a backup holds secret keys");
    // Writes went on after the backup was taken.
    let mut after = Vec::new();
    writer.receive(20, &mut after);
    writer.finish(&mut after);
    let original = export(&set.peer(primary), &secret);

    let data = dir.path().join("restored");
    let restored = restore(&file, &data);
    assert!(restored.status.success(), "{}", text(&restored.stderr));
    let config = set.dir.path().join("config.toml");
    let lone = serve_restored(&data, &config, dir.path());
    let restored_secret = data.join("cluster.secret");
    let exported = export(&lone.listening.peer.to_string(), &restored_secret);

    // The backup's point: the writer creates test/load-0, 1, 2… one after another,
    // so the restored set holds those up to some N, every one acknowledged before
    // the backup began among them, and the set went on past N.
    let last = exported.lines().filter_map(load_number).max();
    let last = last.expect("the restored set holds the writer's handles");
    assert!(
        last + 1 >= before.len(),
        "{} acknowledged before the backup, restored up to {last}",
        before.len()
    );
    let went_on = original.lines().filter_map(load_number).max();
    assert!(
        went_on.is_some_and(|n| n > last),
        "writes went on past the backup"
    );
    let at_the_backup: Vec<&str> = original
        .lines()
        .filter(|line| load_number(line).is_none_or(|n| n <= last))
        .collect();
    assert_eq!(exported.lines().collect::<Vec<_>>(), at_the_backup);
    for name in &before {
        assert!(
            exported.contains(&format!("\"handle\":\"{name}\"")),
            "{name} was acknowledged before the backup"
        );
    }

    // A member that joins the restored set receives its handles.
    let joining = spawn_joiner(dir.path(), &config, &restored_secret);
    let (peer, handle) = (joining.listening.peer, joining.listening.handle);
    let mut args = words(&["cluster", "add-secondary", "--peer"]);
    args.push(lone.listening.peer.to_string().into());
    args.extend(["--secret-file".into(), restored_secret.clone().into()]);
    args.extend(words(&["--id", "2", "--node-peer", &peer.to_string()]));
    args.extend(words(&["--node-handle", &handle.to_string(), "--voter"]));
    let added = hdl(&args);
    assert!(added.status.success(), "{}", text(&added.stderr));
    for name in before.iter().chain(&after).filter(|name| {
        let n = name.strip_prefix("test/load-").and_then(|n| n.parse().ok());
        n.is_some_and(|n: usize| n <= last)
    }) {
        assert_resolves(&joining, name);
    }
}

/// A lone `hdl serve` on the restored directory `data` (configured by `config`), its
/// stderr in `dir`.
pub(super) fn serve_restored(data: &Path, config: &Path, dir: &Path) -> Member {
    let mut args = lone_node_args(data);
    args.extend(["--config".into(), config.into()]);
    let (child, listening) = spawn_serve(&args, &dir.join("stderr-restored"));
    Member {
        id: 1,
        child: Some(child),
        listening,
    }
}

/// A node that waits to join a set, with the restored set's secret.
fn spawn_joiner(dir: &Path, config: &Path, secret: &Path) -> Member {
    let mut args = lone_node_args(&dir.join("joining"));
    args.extend(["--config".into(), config.into()]);
    args.extend(["--secret-file".into(), secret.into()]);
    args.extend(words(&["--node-id", "2", "--no-bootstrap"]));
    let (child, listening): (_, Listening) = spawn_serve(&args, &dir.join("stderr-joining"));
    Member {
        id: 2,
        child: Some(child),
        listening,
    }
}

#[test]
fn a_truncated_or_damaged_backup_is_refused_and_leaves_no_data_directory() {
    let server = Server::start();
    let dir = tempfile::tempdir().expect("temporary directory");
    let file = dir.path().join("lone.backup");
    let peer = server.peer_address().to_string();
    backup(&peer, &server.data_dir().join("cluster.secret"), &file);
    let whole = std::fs::read(&file).expect("the backup");

    let truncated = dir.path().join("truncated.backup");
    std::fs::write(&truncated, &whole[..whole.len() / 2]).expect("a truncated copy");
    let damaged = dir.path().join("damaged.backup");
    let mut flipped = whole.clone();
    let at = flipped
        .windows(9)
        .position(|window| window == b"0.NA/ADMI")
        .expect("the administrator's handle is in the backup");
    flipped[at + 8] ^= 0x20;
    std::fs::write(&damaged, &flipped).expect("a damaged copy");

    let target = dir.path().join("data");
    for (file, says) in [
        (&truncated, "the backup is truncated"),
        (&damaged, "checksum does not match"),
    ] {
        let refused = restore(file, &target);
        assert!(!refused.status.success(), "{} restored", file.display());
        let stderr = text(&refused.stderr);
        assert!(stderr.contains(says), "{stderr}");
        assert!(stderr.contains(&file.display().to_string()), "{stderr}");
        assert!(!target.exists(), "nothing is left of a refused restore");
        assert!(!dir.path().join("data.restoring").exists());
    }

    let restored = restore(&file, &target);
    assert!(restored.status.success(), "{}", text(&restored.stderr));
    // Its node must form the restored set alone before others join it.
    let mut args = lone_node_args(&target);
    args.push("--no-bootstrap".into());
    let waiting = try_spawn_serve_through(&[], &args, &dir.path().join("stderr-waiting"));
    let refused = match waiting {
        Err(refused) => refused,
        Ok((mut child, _)) => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("a restored directory started without forming its set");
        }
    };
    assert!(refused.contains("made by hdl restore"), "{refused}");
    let again = restore(&file, &target);
    assert!(!again.status.success());
    assert!(
        text(&again.stderr).contains("is not empty"),
        "{}",
        text(&again.stderr)
    );
}
