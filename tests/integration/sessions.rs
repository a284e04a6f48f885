//! Handle protocol sessions against a real `hdl serve`: authenticate once and create
//! many handles with one challenge (secret key), a session of an identity without
//! the permission refused per request (public key), replayed, forged, terminated and
//! expired session messages refused, and `hdl batch` end to end.

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdl::auth::{ClientKeyExchange, SessionKey, SigningKey, session_credential};
use hdl::client::{AdminRequest, Credentials, Key, Overwrite, Transport};
use hdl::codec::{
    Body, ENVELOPE_LEN, Message, OpCode, Request, ResolutionRequest, Response, ResponseCode,
    SessionSetup,
};
use hdl::names::Handle;
use hdl::values::{HandleValue, ValueSelection};

use crate::harness::{ADMIN_ARGS, OTHER_KEY, Server};
use crate::raw::{encode, tcp};

fn handle(text: &str) -> Handle {
    Handle::parse(text).expect("valid handle")
}

fn create(name: &str) -> AdminRequest {
    AdminRequest::Create {
        handle: handle(name),
        values: vec![HandleValue::new(1, "URL", "https://example.org/")],
        overwrite: Overwrite::Refuse,
    }
}

/// How many challenges (response code 402) the server has sent, from `/metrics`.
async fn challenges_sent(server: &Server) -> u64 {
    let text = server.metrics().await;
    text.lines()
        .filter(|line| line.starts_with("hdl_requests_total") && line.contains("code=\"402\""))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

async fn exists(server: &Server, name: &str) -> bool {
    server
        .anonymous_client()
        .resolve(&handle(name), &ValueSelection::all(), Transport::Tcp)
        .await
        .is_ok()
}

#[tokio::test]
async fn a_session_creates_many_handles_after_one_challenge() {
    let server = Server::start();
    let client = server.client().with_session();
    let before = challenges_sent(&server).await;
    for n in 0..5 {
        client
            .admin(create(&format!("ADMIN/s{n}")))
            .await
            .expect("create in session");
    }
    assert_eq!(challenges_sent(&server).await - before, 1);
    for n in 0..5 {
        assert!(exists(&server, &format!("ADMIN/s{n}")).await);
    }
}

#[tokio::test]
async fn a_session_grants_no_permission_its_identity_lacks() {
    let server = Server::start();
    let public = SigningKey::from_pem(&std::fs::read_to_string(OTHER_KEY).expect("key"))
        .expect("PEM")
        .public_key()
        .encode();
    let user = vec![HandleValue::new(300, "HS_PUBKEY", public)];
    let user_create = AdminRequest::Create {
        handle: handle("ADMIN/user"),
        values: user,
        overwrite: Overwrite::Refuse,
    };
    server.client().admin(user_create).await.expect("user");
    let key = SigningKey::from_pem(&std::fs::read_to_string(OTHER_KEY).expect("key")).expect("PEM");
    let credentials = Credentials {
        identity: hdl::config::parse_identity("300:ADMIN/user").expect("identity"),
        key: Key::Public(Arc::new(key)),
    };
    let client = server
        .anonymous_client()
        .with_credentials(credentials)
        .with_session();
    client
        .open_session()
        .await
        .expect("session with a public key");
    for n in 0..2 {
        let error = client
            .admin(create(&format!("ADMIN/denied{n}")))
            .await
            .expect_err("no permission");
        let code = error.response_code().expect("a response code");
        assert!((400..500).contains(&code.to_u32()), "{error}");
        assert!(!exists(&server, &format!("ADMIN/denied{n}")).await);
    }
}

/// An anonymous session opened over raw messages (Diffie-Hellman, J9's default
/// exchange): its id and key.
pub(crate) fn raw_session(server: &Server) -> (u32, SessionKey) {
    let exchange = ClientKeyExchange::diffie_hellman().expect("DH");
    let setup = Request::SessionSetup(SessionSetup {
        timeout: 0,
        identity_handle: vec![],
        identity_index: u32::MAX,
        exchange: exchange.offer(),
    });
    let message: Message = tcp(server.address(), &encode(setup, 11).encode()).expect("answer");
    let Body::Response {
        response: Response::SessionSetup(answer),
        ..
    } = &message.body
    else {
        panic!("not a setup answer: {message:?}");
    };
    let key = exchange.finish(answer).expect("key");
    (message.envelope.session_id, key)
}

/// A resolution in session `id`, MACed with `key` and `counter`.
pub(crate) fn in_session(request: Request, id: u32, key: &SessionKey, counter: u32) -> Vec<u8> {
    let mut message = encode(request, 1000 + counter);
    message.envelope.session_id = id;
    let unsigned = message.encode();
    let header_and_body = &unsigned[ENVELOPE_LEN..unsigned.len() - 4];
    message.credential =
        Some(session_credential(key, &message.envelope, counter, header_and_body).expect("MAC"));
    message.encode()
}

pub(crate) fn resolve_admin() -> Request {
    Request::Resolution(ResolutionRequest {
        handle: b"0.NA/ADMIN".to_vec(),
        indexes: vec![],
        types: vec![],
    })
}

/// Whether a session message was admitted (answered with anything but a session
/// error: the resolution itself finds only administrative values).
fn admitted(code: ResponseCode) -> bool {
    code.to_u32() < ResponseCode::SessionTimeout.to_u32()
}

pub(crate) fn code_of(server: &Server, bytes: &[u8]) -> ResponseCode {
    tcp(server.address(), bytes)
        .expect("answer")
        .header
        .response_code
}

#[test]
fn replayed_forged_and_terminated_session_messages_are_refused() {
    let server = Server::start();
    let (id, key) = raw_session(&server);
    let first = in_session(resolve_admin(), id, &key, 1);
    assert!(admitted(code_of(&server, &first)));
    assert_eq!(
        code_of(&server, &first),
        ResponseCode::SessionMessageRejected
    );
    let mut forged = in_session(resolve_admin(), id, &key, 2);
    let last = forged.len() - 1;
    forged[last] ^= 1;
    assert_eq!(
        code_of(&server, &forged),
        ResponseCode::SessionMessageRejected
    );
    let unsigned = {
        let mut message = encode(resolve_admin(), 7);
        message.envelope.session_id = id;
        message.encode()
    };
    assert_eq!(
        code_of(&server, &unsigned),
        ResponseCode::SessionMessageRejected
    );
    // The refused messages changed nothing: counter 2 is still new.
    let second = in_session(resolve_admin(), id, &key, 2);
    assert!(admitted(code_of(&server, &second)));
    // An anonymous session grants nothing: its create is challenged.
    let create = Request::CreateHandle(hdl::codec::HandleValues {
        handle: b"ADMIN/anon".to_vec(),
        values: vec![HandleValue::new(1, "URL", "https://example.org/")],
    });
    let created = in_session(create, id, &key, 3);
    assert_eq!(
        code_of(&server, &created),
        ResponseCode::AuthenticationNeeded
    );
    let terminate = Request::SessionTerminate {
        handle: b"/".to_vec(),
    };
    let end = in_session(terminate, id, &key, 4);
    let answer = tcp(server.address(), &end).expect("answer");
    assert_eq!(answer.header.response_code, ResponseCode::Success);
    assert_eq!(answer.header.opcode, OpCode::SessionTerminate);
    let after = in_session(resolve_admin(), id, &key, 5);
    assert_eq!(code_of(&server, &after), ResponseCode::SessionTimeout);
}

#[test]
fn an_expired_session_is_refused() {
    let server = Server::start_with_config("[auth]\nsession_lifetime_secs = 1\n");
    let (id, key) = raw_session(&server);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut counter = 1;
    let code = loop {
        let code = code_of(&server, &in_session(resolve_admin(), id, &key, counter));
        if !admitted(code) || Instant::now() > deadline {
            break code;
        }
        counter += 1;
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(code, ResponseCode::SessionTimeout);
}

#[test]
fn batch_runs_every_line_in_one_session_and_names_the_bad_one() {
    let server = Server::start();
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("commands");
    let text = "# a comment\n\ncreate ADMIN/b1 --value 1:URL:https://example.org/\n\
        add ADMIN/b1 --value 2:EMAIL:x@example.org\n\
        add ADMIN/b1 --value '3:DESC:two words, quoted'\n\
        create ADMIN/b1 --value 1:URL:https://example.org/\n\
        modify ADMIN/b1 --value 2:EMAIL:y@example.org\n\
        remove ADMIN/b1 --index 2\n\
        create ADMIN/b2 --value 1:URL:https://example.org/\n\
        delete ADMIN/b2\n";
    std::fs::write(&file, text).expect("batch file");
    let output = Command::new(env!("CARGO_BIN_EXE_hdl"))
        .arg("batch")
        .arg(&file)
        .args(["--server", &server.server_arg()])
        .args(ADMIN_ARGS)
        .output()
        .expect("hdl batch");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stdout}{stderr}");
    assert_eq!(
        stdout.lines().filter(|l| l.contains(": ok: ")).count(),
        7,
        "{stdout}"
    );
    assert!(stdout.contains("line 6: failed"), "{stdout}");
    assert!(stderr.contains("line 6"), "{stderr}");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    assert!(runtime.block_on(exists(&server, "ADMIN/b1")));
    assert!(!runtime.block_on(exists(&server, "ADMIN/b2")));
}

/// The highest log index a member reports in `/metrics`.
async fn last_log_index(server: &Server) -> u64 {
    let text = server.metrics().await;
    text.lines()
        .filter(|line| line.starts_with("hdl_raft_last_log_index"))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
        .max()
        .unwrap_or(0)
}

#[test]
fn batch_pipelines_its_lines_in_one_session_and_keeps_each_handles_order() {
    const HANDLES: usize = 150;
    let server = Server::start();
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("commands");
    // Each handle's lines follow one another, so a window of 64 holds several lines
    // of one handle: each must wait for the one before it.
    let text: String = (0..HANDLES)
        .map(|n| {
            format!(
                "create ADMIN/p{n} --value 1:URL:https://example.org/{n}\n\
                 add ADMIN/p{n} --value 2:EMAIL:a{n}@example.org\n\
                 modify ADMIN/p{n} --value 2:EMAIL:b{n}@example.org\n"
            )
        })
        .collect();
    std::fs::write(&file, text).expect("batch file");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let (challenges, entries) = runtime.block_on(async {
        (
            challenges_sent(&server).await,
            last_log_index(&server).await,
        )
    });
    let output = Command::new(env!("CARGO_BIN_EXE_hdl"))
        .arg("batch")
        .arg(&file)
        .args(["--server", &server.server_arg(), "--window", "64"])
        .args(ADMIN_ARGS)
        .output()
        .expect("hdl batch");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let reported: Vec<usize> = stdout
        .lines()
        .filter_map(|line| line.strip_prefix("line ")?.split(':').next()?.parse().ok())
        .collect();
    assert_eq!(
        reported,
        (1..=3 * HANDLES).collect::<Vec<_>>(),
        "in file order"
    );
    runtime.block_on(async {
        assert_eq!(
            challenges_sent(&server).await - challenges,
            1,
            "one challenge"
        );
        let written = last_log_index(&server).await - entries;
        assert!(
            written < 3 * HANDLES as u64,
            "{} writes went into {written} log entries: none shared an entry",
            3 * HANDLES
        );
        for n in [0, HANDLES / 2, HANDLES - 1] {
            let resolution = server
                .anonymous_client()
                .resolve(
                    &handle(&format!("ADMIN/p{n}")),
                    &ValueSelection::all(),
                    Transport::Tcp,
                )
                .await
                .expect("resolve");
            let email = resolution.values.iter().find(|value| value.index.0 == 2);
            assert_eq!(
                email.map(|value| value.data.as_slice()),
                Some(format!("b{n}@example.org").as_bytes()),
                "ADMIN/p{n}: {:?}",
                resolution.values
            );
        }
    });
}
