//! Authenticated administration over the Handle protocol against a real `hdl serve`:
//! every administrative operation × {no credentials, unknown identity, wrong key,
//! right key without the permission, right key with it}, the store unchanged
//! whenever a request is refused; and the command line's keys and secrets.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use hdl::auth::SigningKey;
use hdl::client::{AdminRequest, Client, Credentials, Key, Overwrite, Transport};
use hdl::codec::ResponseCode;
use hdl::names::Handle;
use hdl::values::{
    AdminPermissions, AdminRecord, HandleValue, Permissions, ValueIndex, ValueSelection,
};

use crate::harness::{ADMIN_ARGS, ADMIN_KEY, KEYED_ADMIN, OTHER_KEY, Server};

fn handle(text: &str) -> Handle {
    Handle::parse(text).expect("valid handle")
}

fn key(path: &str) -> Key {
    let pem = std::fs::read_to_string(path).expect("key file");
    Key::Public(Arc::new(SigningKey::from_pem(&pem).expect("PEM")))
}

fn as_identity(server: &Server, identity: &str, key: Key) -> Client {
    let identity = hdl::config::parse_identity(identity).expect("identity");
    server
        .anonymous_client()
        .with_credentials(Credentials { identity, key })
}

/// `TEST/user` holds OTHER_KEY; `TEST/target` lets it add values, nothing more.
async fn world(server: &Server) {
    let admin = server.client();
    let public = SigningKey::from_pem(&std::fs::read_to_string(OTHER_KEY).expect("key"))
        .expect("PEM")
        .public_key()
        .encode();
    let user = vec![HandleValue::new(300, "HS_PUBKEY", public)];
    admin.admin(create("TEST/user", user)).await.expect("user");
    let record = AdminRecord {
        permissions: AdminPermissions::ADD_VALUE,
        admin_handle: "TEST/user".into(),
        admin_index: 300,
        legacy_padding: false,
    };
    let target = vec![
        HandleValue {
            permissions: Permissions::ADMIN_ONLY,
            ..HandleValue::new(100, "HS_ADMIN", record.encode())
        },
        HandleValue::new(1, "URL", "https://a.example/"),
    ];
    admin
        .admin(create("TEST/target", target))
        .await
        .expect("target");
}

fn create(name: &str, values: Vec<HandleValue>) -> AdminRequest {
    AdminRequest::Create {
        handle: handle(name),
        values,
        overwrite: Overwrite::Refuse,
    }
}

/// Every administrative operation, on `TEST/target` (create: `TEST/new`), in an
/// order that succeeds for an administrator holding every permission.
fn operations() -> Vec<(&'static str, AdminRequest)> {
    let target = || handle("TEST/target");
    let url = |i| HandleValue::new(i, "URL", "https://b.example/");
    vec![
        ("create", create("TEST/new", vec![url(1)])),
        (
            "add",
            AdminRequest::AddValues {
                handle: target(),
                values: vec![url(2)],
                overwrite: Overwrite::Refuse,
            },
        ),
        (
            "modify",
            AdminRequest::ModifyValues {
                handle: target(),
                values: vec![url(1)],
            },
        ),
        (
            "remove",
            AdminRequest::RemoveValues {
                handle: target(),
                indexes: vec![ValueIndex(1)],
            },
        ),
        ("delete", AdminRequest::Delete { handle: target() }),
    ]
}

/// The whole of `TEST/target` and whether `TEST/new` exists, as the admin sees them.
async fn state(server: &Server) -> (Vec<u32>, bool) {
    let client = server.anonymous_client();
    let all = ValueSelection::all();
    let target = client
        .resolve(&handle("TEST/target"), &all, Transport::Tcp)
        .await
        .map(|r| r.values.iter().map(|v| v.index.0).collect())
        .unwrap_or_default();
    let new = client
        .resolve(&handle("TEST/new"), &all, Transport::Tcp)
        .await;
    (target, new.is_ok())
}

async fn refused(server: &Server, client: &Client, expected: ResponseCode, who: &str) {
    let before = state(server).await;
    for (name, request) in operations() {
        let error = client.admin(request).await.expect_err(name);
        assert_eq!(
            error.response_code(),
            Some(expected),
            "{who} {name}: {error}"
        );
        assert_eq!(
            state(server).await,
            before,
            "{who} {name} changed the store"
        );
    }
    let listed = client.list_handles("TEST", 100).await.expect_err("list");
    assert_eq!(
        listed.response_code(),
        Some(expected),
        "{who} list: {listed}"
    );
}

#[tokio::test]
async fn every_operation_needs_an_authenticated_permitted_administrator() {
    let server = Server::start();
    world(&server).await;
    let anonymous = server.anonymous_client();
    refused(
        &server,
        &anonymous,
        ResponseCode::AuthenticationNeeded,
        "anonymous",
    )
    .await;
    let nobody = as_identity(&server, "300:0.NA/NOBODY", key(OTHER_KEY));
    refused(
        &server,
        &nobody,
        ResponseCode::AuthenticationError,
        "unknown",
    )
    .await;
    let impostor = as_identity(&server, crate::harness::ADMIN, key(OTHER_KEY));
    refused(
        &server,
        &impostor,
        ResponseCode::AuthenticationFailed,
        "wrong key",
    )
    .await;
    let stranger = as_identity(&server, "300:TEST/user", key(OTHER_KEY));
    let before = state(&server).await;
    let delete = AdminRequest::Delete {
        handle: handle("TEST/target"),
    };
    let lacking = stranger.admin(delete).await.expect_err("delete");
    assert_eq!(
        lacking.response_code(),
        Some(ResponseCode::InsufficientPermissions)
    );
    let not_admin = stranger
        .admin(create("TEST/new", vec![]))
        .await
        .expect_err("create");
    assert_eq!(not_admin.response_code(), Some(ResponseCode::InvalidAdmin));
    assert_eq!(state(&server).await, before);
    let add = AdminRequest::AddValues {
        handle: handle("TEST/target"),
        values: vec![HandleValue::new(3, "DESC", "added by the user")],
        overwrite: Overwrite::Refuse,
    };
    stranger.admin(add).await.expect("the permitted add");

    let admin = server.client();
    for (name, request) in operations() {
        admin
            .admin(request)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    assert_eq!(
        admin.list_handles("TEST", 100).await.expect("list").len(),
        2
    );
}

fn hdl(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_hdl"))
        .args(args)
        .output()
        .expect("run hdl")
}

fn succeeds(args: &[&str]) -> String {
    let output = hdl(args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "hdl {args:?}: {stderr}");
    String::from_utf8(output.stdout).expect("UTF-8")
}

#[test]
fn keys_from_keygen_and_secrets_authenticate_on_the_command_line() {
    let server = Server::start();
    let dir = tempfile::tempdir().expect("temporary directory");
    let pem = dir.path().join("alice.pem");
    let pem_arg = pem.to_str().expect("UTF-8 path");
    let value = succeeds(&["keygen", "--out", pem_arg]);
    assert!(value.starts_with("300:HS_PUBKEY:"), "{value}");
    let mode = std::os::unix::fs::PermissionsExt::mode(&pem.metadata().expect("pem").permissions());
    assert_eq!(mode & 0o777, 0o600);
    let at = server.server_arg();
    let secret = dir.path().join("bob.secret");
    std::fs::write(&secret, "bob's secret\n").expect("secret");
    let mut create = vec![
        "create",
        "TEST/alice",
        "--value",
        value.trim(),
        "--server",
        &at,
    ];
    create.extend(ADMIN_ARGS);
    succeeds(&create);
    let secret_value = "300:HS_SECKEY:bob's secret";
    let mut bob = vec![
        "create",
        "TEST/bob",
        "--value",
        secret_value,
        "--server",
        &at,
    ];
    bob.extend(ADMIN_ARGS);
    succeeds(&bob);
    // TEST/alice names its creator (the bootstrap admin) in HS_ADMIN; alice creates
    // nothing there. Give alice and bob their own handles through the admin.
    let grant = "100:HS_ADMIN:300:111111111111:TEST/alice";
    let mut own = vec!["create", "TEST/alices", "--value", grant, "--server", &at];
    own.extend(ADMIN_ARGS);
    succeeds(&own);
    let file_key = format!("301:HS_PUBKEY:file:{pem_arg}");
    let as_alice = [
        "--auth",
        "300:TEST/alice",
        "--key",
        pem_arg,
        "--server",
        &at,
    ];
    let mut add = vec!["add", "TEST/alices", "--value", &file_key];
    add.extend(as_alice);
    succeeds(&add);
    let mut denied = vec!["add", "TEST/bob", "--value", "2:DESC:x"];
    denied.extend(as_alice);
    let output = hdl(&denied);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("400"));
    let secret_arg = secret.to_str().expect("UTF-8 path");
    let as_bob = [
        "--auth",
        "300:TEST/bob",
        "--secret-file",
        secret_arg,
        "--server",
        &at,
    ];
    let mut bob_denied = vec!["delete", "TEST/alices"];
    bob_denied.extend(as_bob);
    let output = hdl(&bob_denied);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("400"),
        "bob authenticated but is no admin: {stderr}"
    );
    assert!(Path::new(&pem).exists());
}

#[tokio::test]
async fn a_public_key_bootstrap_administers_a_lone_server() {
    let server = Server::start_keyed(false);
    let identity = hdl::config::parse_identity(KEYED_ADMIN).expect("identity");
    let client = server.anonymous_client().with_credentials(Credentials {
        identity,
        key: key(ADMIN_KEY),
    });
    let made = client
        .admin(create(
            "SEC/1",
            vec![HandleValue::new(1, "URL", "https://s.example/")],
        ))
        .await;
    let listed = client.list_handles("SEC", 10).await;
    made.expect("the prefix administrator creates");
    assert_eq!(listed.expect("and lists"), ["SEC/1"]);
}

/// Digest §3.2: a resolution with PO clear that picks non-public values is challenged,
/// then answered in full to an administrator allowed READ_VALUE and refused (401) to
/// one without it; one that picks public values only is answered to anyone, and a
/// value nobody may read is refused outright.
#[tokio::test]
async fn non_public_values_are_read_only_by_administrators_allowed_read_value() {
    let server = Server::start();
    world(&server).await;
    let admin = server.client();
    let secret_email = HandleValue {
        permissions: Permissions::ADMIN_ONLY,
        ..HandleValue::new(2, "EMAIL", "hidden@example.org")
    };
    let nobody_reads = HandleValue {
        permissions: Permissions::ADMIN_WRITE,
        ..HandleValue::new(3, "DESC", "write-only")
    };
    let values = vec![
        HandleValue::new(1, "URL", "https://p.example/"),
        secret_email,
        nobody_reads,
    ];
    admin
        .admin(create("TEST/private", values))
        .await
        .expect("create");
    let private = handle("TEST/private");
    let only = |indexes: &[u32]| ValueSelection {
        indexes: indexes.iter().copied().map(ValueIndex).collect(),
        types: Vec::new(),
    };
    let indexes = |resolution: hdl::client::Resolution| -> Vec<u32> {
        resolution.values.iter().map(|v| v.index.0).collect()
    };

    let anonymous = server.anonymous_client();
    let public = anonymous
        .resolve(&private, &only(&[1, 2]), Transport::Tcp)
        .await;
    assert_eq!(indexes(public.expect("PO set")), vec![1]);
    let every = anonymous.resolve_every_value(&private, &only(&[1])).await;
    assert_eq!(indexes(every.expect("public values need no one")), vec![1]);
    let challenged = anonymous
        .resolve_every_value(&private, &only(&[1, 2]))
        .await;
    let code = challenged.expect_err("challenged").response_code();
    assert_eq!(code, Some(ResponseCode::AuthenticationNeeded));
    let unreadable = anonymous.resolve_every_value(&private, &only(&[3])).await;
    let code = unreadable.expect_err("readable by no one").response_code();
    assert_eq!(code, Some(ResponseCode::InsufficientPermissions));

    let every = admin.resolve_every_value(&private, &only(&[1, 2])).await;
    assert_eq!(indexes(every.expect("server administrator")), vec![1, 2]);
    let in_session = server.client().with_session();
    let every = in_session.resolve_every_value(&private, &only(&[2])).await;
    assert_eq!(indexes(every.expect("in a session")), vec![2]);

    let user = as_identity(&server, "300:TEST/user", key(OTHER_KEY));
    let target = handle("TEST/target");
    let refused = user
        .resolve_every_value(&target, &ValueSelection::all())
        .await;
    let code = refused.expect_err("no READ_VALUE").response_code();
    assert_eq!(code, Some(ResponseCode::InsufficientPermissions));

    let server_arg = server.server_arg();
    let every = [
        "resolve",
        "TEST/private",
        "--server",
        &server_arg,
        "--index",
        "2",
        "--every-value",
    ];
    let shown = succeeds(&[&every[..], &ADMIN_ARGS[..]].concat());
    assert!(shown.contains("hidden@example.org"), "{shown}");
    let anonymous = hdl(&every);
    assert!(!anonymous.status.success());
    let stderr = String::from_utf8_lossy(&anonymous.stderr);
    assert!(stderr.contains("402"), "{stderr}");
}
