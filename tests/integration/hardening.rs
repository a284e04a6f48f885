//! What a stranger on the network (or another local user) must not be able to do to
//! a running node: grow its metrics, read its secrets, bounce browsers through it to
//! another site, or hold its Handle TCP listener with slow or many connections.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hdl::codec::{OpCode, ResponseCode};
use reqwest::StatusCode;
use reqwest::header::LOCATION;
use serde_json::json;

use crate::harness::Server;
use crate::http::{Api, client};
use crate::raw;
use crate::sessions::{code_of, in_session, raw_session, resolve_admin};

#[tokio::test]
async fn unknown_opcodes_share_one_metrics_series() {
    let server = Server::start();
    let request = raw::resolution(b"TEST/x", 7).encode();
    for opcode in 5000..5020 {
        let bytes = raw::with_opcode(request.clone(), OpCode::Unknown(opcode));
        raw::tcp(server.address(), &bytes).expect("an answer");
    }
    let metrics = server.metrics().await;
    let series: Vec<&str> = metrics
        .lines()
        .filter(|line| line.starts_with("hdl_requests_total") && line.contains("op=\"unknown"))
        .collect();
    assert_eq!(
        series.len(),
        1,
        "one series for every unknown opcode: {series:?}"
    );
    assert!(series[0].contains("op=\"unknown\""), "{series:?}");
    assert!(series[0].ends_with(" 20"), "{series:?}");
}

#[test]
fn the_data_directory_is_private_and_a_shared_one_is_refused() {
    let server = Server::start();
    let mode = std::fs::metadata(server.data_dir())
        .expect("data directory")
        .permissions()
        .mode();
    assert_eq!(
        mode & 0o777,
        0o700,
        "a new data directory is the owner's only"
    );

    let shared = tempfile::tempdir().expect("temporary directory");
    std::fs::set_permissions(shared.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let mut child = Command::new(env!("CARGO_BIN_EXE_hdl"))
        .arg("serve")
        .arg("--data-dir")
        .arg(shared.path())
        .args(["--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"])
        .args(["--peer", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn hdl serve");
    let deadline = Instant::now() + raw::DEADLINE;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break Some(status);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = child.kill();
    let output = child.wait_with_output().expect("reap");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        status.is_some_and(|status| !status.success()),
        "hdl serve must refuse a data directory others can read: {stderr}"
    );
    assert!(stderr.contains("chmod 700"), "{stderr}");
}

#[tokio::test]
async fn the_proxy_never_sends_a_browser_to_another_site() {
    let api = Api::start();
    let alias = json!([{"index": 1, "type": "HS_ALIAS", "data": "/evil.example/x"}]);
    let slashes = json!([{"index": 1, "type": "URL", "data": "//evil.example/x"}]);
    for (path, body) in [("TEST/alias", alias), ("TEST/slashes", slashes)] {
        let made = api.put(&format!("/api/handles/{path}"), &body).await;
        assert!(made.status().is_success(), "{path}: {}", made.status());
    }
    let browser = client();
    let get = |path: &str| browser.get(api.url(path)).send();
    let front = get("/?handle=/evil.example/x").await.expect("GET /");
    assert_eq!(front.headers()[LOCATION], "/%2Fevil.example/x");
    let alias = get("/TEST/alias").await.expect("GET alias");
    assert_eq!(alias.headers()[LOCATION], "/%2Fevil.example/x");
    let slashes = get("/TEST/slashes").await.expect("GET slashes");
    assert_eq!(slashes.status(), StatusCode::BAD_GATEWAY);
    assert!(slashes.headers().get(LOCATION).is_none());
}

/// Whether the server has closed `stream` (a read sees its end or a reset).
fn closed(stream: &mut TcpStream) -> bool {
    stream
        .set_read_timeout(Some(Duration::from_millis(50)))
        .expect("timeout");
    let mut byte = [0u8; 1];
    match stream.read(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(error) => !matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
    }
}

/// Whether the server closes `stream` within `within`.
fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if closed(stream) {
            return true;
        }
    }
    false
}

/// Sends `octets` one at a time, `pause` apart, until the server closes `stream`:
/// how long it took, or `None` if it never did.
fn trickle_until_closed(
    stream: &mut TcpStream,
    octets: &[u8],
    pause: Duration,
) -> Option<Duration> {
    let started = Instant::now();
    for &octet in octets {
        if stream.write_all(&[octet]).is_err() || closed(stream) {
            return Some(started.elapsed());
        }
        std::thread::sleep(pause);
    }
    None
}

#[test]
fn a_peer_trickling_a_request_is_closed_at_the_message_deadline() {
    let server = Server::start_with_config("[handle]\ntcp_idle_timeout_secs = 2\n");
    let request = raw::resolution(b"TEST/x", 9).encode();
    let mut stream = TcpStream::connect(server.address()).expect("connect");
    let closed_after =
        trickle_until_closed(&mut stream, &request[..24], Duration::from_millis(250))
            .expect("a trickle of one octet each 250 ms is closed");
    assert!(closed_after < Duration::from_secs(5), "{closed_after:?}");
}

#[test]
fn one_source_holds_a_bounded_number_of_tcp_connections() {
    let server = Server::start_with_config("[handle]\ntcp_connections_per_source = 4\n");
    let mut held: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut stream = TcpStream::connect(server.address()).expect("connect");
            stream.write_all(&[0; 10]).expect("part of an envelope");
            stream
        })
        .collect();
    // Give the server time to take the four before the fifth arrives.
    std::thread::sleep(Duration::from_millis(300));
    let mut fifth = TcpStream::connect(server.address()).expect("connect");
    let refused = closed_within(&mut fifth, Duration::from_secs(5));
    assert!(refused, "the fifth connection from one source is closed");
    assert!(!closed(&mut held[0]), "the first four stay open");

    let first = held.remove(0);
    first.shutdown(Shutdown::Both).expect("close");
    drop(first);
    let request = raw::resolution(b"TEST/none", 11).encode();
    let answered = (0..50).find_map(|_| {
        std::thread::sleep(Duration::from_millis(100));
        raw::tcp(server.address(), &request)
    });
    assert!(answered.is_some(), "a freed slot takes a new connection");
}

#[test]
fn one_source_holds_a_bounded_number_of_sessions_nobody_authenticated_in() {
    let server = Server::start();
    let (first, first_key) = raw_session(&server);
    let mut last = None;
    for _ in 0..16 {
        last = Some(raw_session(&server));
    }
    let (last, last_key) = last.expect("sessions");
    let gone = in_session(resolve_admin(), first, &first_key, 1);
    assert_eq!(
        code_of(&server, &gone),
        ResponseCode::SessionTimeout,
        "the source's oldest anonymous session made room"
    );
    let live = in_session(resolve_admin(), last, &last_key, 1);
    assert_ne!(code_of(&server, &live), ResponseCode::SessionTimeout);
}

#[test]
fn an_http_client_trickling_its_headers_is_closed_at_the_header_deadline() {
    let server = Server::start_with_config("[http]\nheader_timeout_secs = 1\n");
    let mut stream = TcpStream::connect(server.http_address()).expect("connect");
    let request = b"GET /status HTTP/1.1\r\nHost: localhost\r\nX-Slow: yes\r\n";
    let closed_after = trickle_until_closed(&mut stream, request, Duration::from_millis(200))
        .expect("a trickle of headers is closed");
    assert!(closed_after < Duration::from_secs(5), "{closed_after:?}");
}

#[tokio::test]
async fn one_source_holds_a_bounded_number_of_http_connections() {
    let server = Server::start_with_config("[http]\nconnections_per_source = 4\n");
    let mut held: Vec<TcpStream> = (0..4)
        .map(|_| TcpStream::connect(server.http_address()).expect("connect"))
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut fifth = TcpStream::connect(server.http_address()).expect("connect");
    let refused = closed_within(&mut fifth, Duration::from_secs(5));
    assert!(
        refused,
        "the fifth HTTP connection from one source is closed"
    );
    assert!(!closed(&mut held[0]), "the first four stay open");
    drop(held.drain(..));
    let mut answered = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if let Ok(response) = reqwest::get(format!("{}/status", server.http_url())).await {
            answered = response.status().is_success();
            break;
        }
    }
    assert!(answered, "freed slots take new connections");
}

#[tokio::test]
async fn guesses_of_basic_credentials_are_bounded_per_source() {
    let server = Server::start();
    let url = format!("{}/api/handles?prefix=ADMIN", server.http_url());
    let http = client();
    let try_secret = |secret: String| {
        let request = http
            .get(&url)
            .basic_auth(crate::harness::ADMIN_BASIC, Some(secret));
        async move { request.send().await.expect("GET").status() }
    };
    for guess in 0..10 {
        assert_eq!(
            try_secret(format!("guess-{guess}")).await,
            StatusCode::UNAUTHORIZED
        );
    }
    let status = try_secret(crate::harness::ADMIN_SECRET_TEXT.to_owned()).await;
    assert_eq!(
        status,
        StatusCode::SERVICE_UNAVAILABLE,
        "past its budget the source is not checked, even with the right secret"
    );
}
