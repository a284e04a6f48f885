//! The client commands end to end: `hdl create`, `resolve`, `add`, `modify`,
//! `remove`, `list` and `delete` against a real `hdl serve`.

use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::harness::{ADMIN_ARGS, Server};

/// Runs `hdl ARGS --server …`, authenticated as the bootstrap administrator when the
/// command administers.
fn hdl(server: &Server, args: &[&str]) -> Output {
    let administers = ["create", "delete", "add", "modify", "remove", "list"];
    let auth: &[&str] = if administers.contains(&args[0]) {
        &ADMIN_ARGS
    } else {
        &[]
    };
    Command::new(env!("CARGO_BIN_EXE_hdl"))
        .args(args)
        .args(["--server", &server.server_arg()])
        .args(auth)
        .output()
        .expect("run hdl")
}

pub fn succeeds(server: &Server, args: &[&str]) -> String {
    let output = hdl(server, args);
    assert!(
        output.status.success(),
        "hdl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8")
}

pub fn fails(server: &Server, args: &[&str]) -> String {
    let output = hdl(server, args);
    assert!(!output.status.success(), "hdl {args:?} must fail");
    assert!(output.stdout.is_empty());
    String::from_utf8(output.stderr).expect("UTF-8")
}

#[test]
fn created_handles_resolve_as_rest_json() {
    let server = Server::start();
    succeeds(
        &server,
        &[
            "create",
            "TEST/cli",
            "--value",
            "1:URL:https://example.org/a:b",
            "--value",
            "2:EMAIL:hdl@example.org",
            "--value",
            "100:HS_ADMIN:300:111111111111:0.NA/TEST",
        ],
    );
    let json: Value =
        serde_json::from_str(&succeeds(&server, &["resolve", "--json", "hdl:TEST/cli"]))
            .expect("one JSON object");
    assert_eq!(json["responseCode"], 1);
    assert_eq!(json["handle"], "TEST/cli");
    let values = json["values"].as_array().expect("values");
    assert_eq!(values.len(), 3, "the HS_ADMIN has public read: {json}");
    assert_eq!(values[2]["type"], "HS_ADMIN");
    let url = &values[0];
    assert_eq!(url["index"], 1);
    assert_eq!(url["type"], "URL");
    assert_eq!(
        url["data"],
        json!({"format": "string", "value": "https://example.org/a:b"})
    );
    assert_eq!(url["ttl"], 86400);
    assert!(url.get("permissions").is_none());
    let timestamp = url["timestamp"].as_str().expect("timestamp");
    assert_eq!(timestamp.len(), "2024-01-01T00:00:00Z".len(), "{timestamp}");
    assert!(timestamp.ends_with('Z') && timestamp.as_bytes()[10] == b'T');
    assert_eq!(values[1]["data"]["value"], "hdl@example.org");
}

#[test]
fn text_output_follows_each_change() {
    let server = Server::start();
    succeeds(
        &server,
        &["create", "TEST/t", "--value", "1:URL:https://a.example/"],
    );
    succeeds(&server, &["add", "TEST/t", "--value", "2:DESC:two words"]);
    succeeds(
        &server,
        &["modify", "TEST/t", "--value", "1:URL:https://b.example/"],
    );
    let text = succeeds(&server, &["resolve", "TEST/t", "--udp"]);
    // The HS_ADMIN `hdl create` adds has public read, as the reference tools make it.
    assert_eq!(
        text,
        "1 URL https://b.example/\n100 HS_ADMIN 300:011111110011:0.NA/ADMIN\n2 DESC two words\n"
    );
    let text = succeeds(&server, &["resolve", "TEST/t", "--tcp", "--type", "DESC"]);
    assert_eq!(text, "2 DESC two words\n");
    succeeds(&server, &["remove", "TEST/t", "--index", "2"]);
    assert_eq!(
        succeeds(
            &server,
            &["resolve", "TEST/t", "--index", "1", "--index", "2"]
        ),
        "1 URL https://b.example/\n"
    );
    succeeds(&server, &["create", "TEST/u", "--value", "1:DESC:x"]);
    assert_eq!(succeeds(&server, &["list", "TEST"]), "TEST/t\nTEST/u\n");
    succeeds(&server, &["delete", "TEST/t"]);
    assert_eq!(succeeds(&server, &["list", "0.NA/TEST"]), "TEST/u\n");
}

#[test]
fn errors_print_the_response_code_and_fail() {
    let server = Server::start();
    let stderr = fails(&server, &["resolve", "TEST/missing"]);
    assert!(stderr.starts_with("hdl: 100 handle not found"), "{stderr}");
    succeeds(
        &server,
        &["create", "TEST/e", "--value", "1:URL:https://a.example/"],
    );
    let stderr = fails(
        &server,
        &["create", "TEST/e", "--value", "1:URL:https://a.example/"],
    );
    assert!(
        stderr.starts_with("hdl: 101 handle already exists"),
        "{stderr}"
    );
    succeeds(
        &server,
        &["create", "TEST/e", "--overwrite", "--value", "1:DESC:again"],
    );
    let stderr = fails(&server, &["create", "TEST/f", "--value", "1:EMAIL:nobody"]);
    assert!(stderr.starts_with("hdl: 202 invalid value"), "{stderr}");
    let stderr = fails(&server, &["resolve", "TEST/e", "--type", "URL"]);
    assert!(stderr.starts_with("hdl: 200 values not found"), "{stderr}");
}

#[test]
fn bad_arguments_name_the_problem() {
    let server = Server::start();
    let cases: [(&[&str], &str); 4] = [
        (&["create", "TEST/x", "--value", "x:URL:y"], "value index"),
        (
            &["create", "no-slash", "--value", "1:URL:y"],
            "invalid handle",
        ),
        (&["remove", "TEST/x", "--index", "0"], "value index"),
        (&["resolve", "hdl://127.0.0.1:9/TEST/x"], "--server"),
    ];
    for (args, expected) in cases {
        let stderr = fails(&server, args);
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}
