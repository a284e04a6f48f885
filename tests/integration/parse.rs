//! `hdl parse` end to end: arguments in, JSON or an error message out.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::process::{Command, Output};

use serde_json::Value;

fn hdl_parse(reference: &OsStr) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hdl"))
        .args([OsStr::new("parse"), OsStr::new("--json"), reference])
        .output()
        .expect("run hdl")
}

fn parse_json(reference: &str) -> Value {
    let output = hdl_parse(OsStr::new(reference));
    assert!(
        output.status.success(),
        "hdl parse {reference}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("one JSON object")
}

#[test]
fn json_names_every_part_of_a_plain_handle() {
    let parsed = parse_json("CNRI.DLIB/July95-Arms");
    assert_eq!(parsed["handle"], "CNRI.DLIB/July95-Arms");
    assert_eq!(parsed["prefix"], "CNRI.DLIB");
    assert_eq!(parsed["local_name"], "July95-Arms");
    assert_eq!(parsed["key"], "CNRI.DLIB/JULY95-ARMS");
    assert!(parsed.get("server").is_none());
    assert!(parsed.get("encoding").is_none());
}

#[test]
fn json_carries_server_encoding_and_type_when_present() {
    let parsed = parse_json("hdl://127.0.0.1:2641/iso-8859-7type=3@test/%E1%E2");
    assert_eq!(parsed["server"], "127.0.0.1:2641");
    let parsed = parse_json("hdl:iso-8859-7type=3@test/%E1%E2");
    assert_eq!(parsed["handle"], "test/αβ");
    assert_eq!(parsed["key"], "TEST/αβ");
    assert_eq!(parsed["encoding"], "ISO-8859-7");
    assert_eq!(parsed["type"], 3);
}

#[test]
fn non_ascii_is_kept_and_not_folded() {
    let parsed = parse_json("handles-in-germany/Universität-Karlsruhe");
    assert_eq!(parsed["key"], "HANDLES-IN-GERMANY/UNIVERSITäT-KARLSRUHE");
}

#[test]
fn invalid_references_name_the_problem_and_fail() {
    let cases: [(&[u8], &str); 3] = [
        (b"no-slash-here", "'/'"),
        (b"/local", "naming authority"),
        (b"cnri.test/\xe6\x97", "encoding"),
    ];
    for (reference, expected) in cases {
        let output = hdl_parse(OsStr::from_bytes(reference));
        assert!(!output.status.success(), "{reference:?} must be refused");
        assert!(output.stdout.is_empty());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(expected), "{reference:?}: {stderr}");
    }
}

#[test]
fn text_output_lists_the_parts() {
    let output = Command::new(env!("CARGO_BIN_EXE_hdl"))
        .args(["parse", "info:hdl/10.1000/1"])
        .output()
        .expect("run hdl");
    let text = String::from_utf8(output.stdout).expect("UTF-8");
    assert!(text.contains("prefix:     10.1000"), "{text}");
    assert!(text.contains("form:       info"), "{text}");
}

#[test]
fn version_flag_prints_the_version() {
    let output = Command::new(env!("CARGO_BIN_EXE_hdl"))
        .arg("--version")
        .output()
        .expect("run hdl");
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).expect("UTF-8");
    assert_eq!(text.trim(), format!("hdl {}", env!("CARGO_PKG_VERSION")));
}
