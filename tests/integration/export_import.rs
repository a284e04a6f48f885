//! `hdl export` and `hdl import` end to end against real `hdl serve` processes: a
//! set exported and imported into a fresh one exports the same; importing again
//! changes nothing; a GenericBatch file of the reference server is read; a malformed
//! line stops the import naming it, keeping what came before.

use std::path::Path;
use std::process::{Command, Output};

use crate::harness::{ADMIN, ADMIN_SECRET, Server};

/// Runs `hdl ARGS` against `server`'s peer port as the bootstrap administrator.
fn bulk(server: &Server, args: &[&str]) -> Output {
    let peer = server.peer_address().to_string();
    let secret = server.data_dir().join("cluster.secret");
    Command::new(env!("CARGO_BIN_EXE_hdl"))
        .args(args)
        .args(["--peer", &peer, "--cluster-secret-file"])
        .arg(secret)
        .args(["--auth", ADMIN, "--secret-file", ADMIN_SECRET])
        .output()
        .expect("run hdl")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `hdl export` of `server`, which must succeed.
fn export(server: &Server) -> String {
    let output = bulk(server, &["export"]);
    assert!(output.status.success(), "export: {}", text(&output.stderr));
    text(&output.stdout)
}

/// `hdl import FILE ARGS` into `server`: whether it succeeded, and its stdout.
fn import(server: &Server, file: &Path, args: &[&str]) -> (bool, String, String) {
    let file = file.to_str().expect("UTF-8 path");
    let output = bulk(server, &[&["import", file], args].concat());
    (
        output.status.success(),
        text(&output.stdout),
        text(&output.stderr),
    )
}

/// Runs `hdl COMMAND HANDLE --value …` on `server` (`create` or `add`).
fn create(server: &Server, handle: &str, values: &[&str]) {
    change(server, "create", handle, values);
}

fn change(server: &Server, command: &str, handle: &str, values: &[&str]) {
    let mut args = vec![command, handle];
    for value in values {
        args.extend(["--value", value]);
    }
    let server_arg = server.server_arg();
    args.extend([
        "--server",
        &server_arg,
        "--auth",
        ADMIN,
        "--secret-file",
        ADMIN_SECRET,
    ]);
    let output = Command::new(env!("CARGO_BIN_EXE_hdl"))
        .args(&args)
        .output()
        .expect("run hdl");
    assert!(output.status.success(), "create: {}", text(&output.stderr));
}

#[test]
fn an_export_imported_into_a_fresh_set_exports_the_same_and_a_second_import_changes_nothing() {
    let source = Server::start();
    create(
        &source,
        "ADMIN/Mixed-Case",
        &["1:URL:https://example.org/a b", "2:EMAIL:hdl@example.org"],
    );
    create(
        &source,
        "ADMIN/secret",
        &["300:HS_SECKEY:not public", "7:DESC:日本"],
    );
    create(&source, "ADMIN/a/b/c", &["1:URL:https://example.org/c"]);
    // The target's own bootstrap makes 0.NA/ADMIN too: this makes it differ.
    change(&source, "add", "0.NA/ADMIN", &["7:DESC:the source's"]);
    let exported = export(&source);
    assert_eq!(exported.lines().count(), 4, "{exported}");
    assert!(
        exported.contains(r#""value":"not public""#),
        "non-public values kept"
    );
    let dir = tempfile::tempdir().expect("temporary directory");
    let file = dir.path().join("export.jsonl");
    std::fs::write(&file, &exported).expect("export file");

    let target = Server::start();
    // Its own 0.NA/ADMIN differs: reported, left alone.
    let (ok, out, _) = import(&target, &file, &[]);
    assert!(!ok, "a differing handle fails the import: {out}");
    assert!(
        out.contains("line 1: 0.NA/ADMIN: exists with other values"),
        "{out}"
    );
    assert!(
        out.contains("3 created, 0 replaced, 0 unchanged, 1 differing"),
        "{out}"
    );
    assert_ne!(export(&target), exported);

    let (ok, out, err) = import(&target, &file, &["--overwrite"]);
    assert!(ok, "{out} {err}");
    assert!(
        out.contains("0 created, 1 replaced, 3 unchanged, 0 differing"),
        "{out}"
    );
    assert_eq!(
        export(&target),
        exported,
        "the same handles, values and timestamps"
    );

    for args in [&[][..], &["--overwrite"]] {
        let (ok, out, err) = import(&target, &file, args);
        assert!(ok, "{out} {err}");
        assert!(
            out.contains("0 created, 0 replaced, 4 unchanged, 0 differing, 0 refused"),
            "{out}"
        );
        assert_eq!(export(&target), exported, "a second import changes nothing");
    }
}

#[test]
fn a_generic_batch_file_of_the_reference_server_yields_its_handles() {
    let server = Server::start();
    let dir = tempfile::tempdir().expect("temporary directory");
    let file = dir.path().join("handles.batch");
    let batch = "\
AUTHENTICATE SECKEY:300:0.NA/ADMIN
s3cret-for-tests

CREATE ADMIN/ts1
100 HS_ADMIN 86400 1110 ADMIN 300:111111111111:0.NA/ADMIN
1 URL 86400 1110 UTF8 http://www.handle.net/
2 DESC 3600 1110 UTF8 to be removed

CREATE ADMIN/ts2
100 HS_ADMIN 86400 1110 ADMIN 300:111111111111:0.NA/ADMIN
1 URL 86400 1110 UTF8 http://www.handle.net/2

ADD ADMIN/ts1
3 EMAIL 60 1100 UTF8 hdl@example.org

MODIFY ADMIN/ts1
1 URL 86400 1110 UTF8 http://www.handle.net/new

REMOVE 2:ADMIN/ts1

DELETE ADMIN/ts2
";
    std::fs::write(&file, batch).expect("batch file");
    let (ok, out, err) = import(&server, &file, &[]);
    assert!(ok, "{out} {err}");
    assert!(out.contains("2 created"), "{out}");
    assert!(out.contains("4 operations done, 0 refused"), "{out}");
    let exported = export(&server);
    let lines: Vec<&str> = exported.lines().collect();
    assert_eq!(lines.len(), 2, "0.NA/ADMIN and ADMIN/ts1: {exported}");
    let ts1 = lines[1];
    assert!(ts1.starts_with(r#"{"handle":"ADMIN/ts1""#), "{ts1}");
    assert!(ts1.contains("http://www.handle.net/new"), "{ts1}");
    assert!(ts1.contains(r#""index":3,"type":"EMAIL""#), "{ts1}");
    assert!(ts1.contains(r#""permissions":"1100""#), "{ts1}");
    assert!(!ts1.contains("to be removed"), "{ts1}");
    assert!(ts1.contains(r#""ttl":60"#), "{ts1}");
}

#[test]
fn a_malformed_line_is_named_and_every_handle_before_it_stays_imported() {
    let server = Server::start();
    let dir = tempfile::tempdir().expect("temporary directory");
    let file = dir.path().join("lines.jsonl");
    let line = |n: u32| {
        format!(
            r#"{{"handle":"ADMIN/line-{n}","values":[{{"index":1,"type":"URL","data":"https://example.org/{n}","ttl":86400,"timestamp":"2024-01-01T00:00:00Z"}}]}}"#
        )
    };
    let mut lines: Vec<String> = (1..=9).map(line).collect();
    lines[6] = r#"{"handle":"ADMIN/line-7","values":[{"index":1,"type":"URL"}]}"#.into();
    std::fs::write(&file, lines.join("\n")).expect("file");
    let (ok, out, err) = import(&server, &file, &["--batch", "2"]);
    assert!(!ok, "{out}");
    assert!(err.contains("lines.jsonl:7:"), "the line is named: {err}");
    assert!(
        err.contains("\"data\"") || err.contains("missing field"),
        "{err}"
    );
    assert!(out.contains("6 created"), "{out}");
    let exported = export(&server);
    for n in 1..=6 {
        assert!(
            exported.contains(&format!("ADMIN/line-{n}\"")),
            "line {n}: {exported}"
        );
    }
    for n in 7..=9 {
        assert!(
            !exported.contains(&format!("ADMIN/line-{n}\"")),
            "line {n}: {exported}"
        );
    }

    lines[6] = line(7);
    std::fs::write(&file, lines.join("\n")).expect("file");
    let (ok, out, err) = import(&server, &file, &["--batch", "2"]);
    assert!(ok, "{out} {err}");
    assert!(
        out.contains("3 created, 0 replaced, 6 unchanged"),
        "run again, it resumes: {out}"
    );
}
