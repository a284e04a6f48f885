//! Bounded sizes against real `hdl serve` processes: a handle's values are bounded on
//! every write path (Handle protocol and HTTP), an answer over UDP is capped (a forged
//! request draws at most the cap, answered beyond it by RC_ERROR "ask over TCP"), and
//! hdl's client still reads every handle the server accepts, turning to TCP at once.

use std::net::{SocketAddr, UdpSocket};
use std::process::Command;
use std::time::{Duration, Instant};

use hdl::auth::VerifyingKey;
use hdl::client::{
    AdminRequest, AttemptError, Client, ClientConfig, ClientError, Overwrite, Transport,
};
use hdl::codec::{
    Body, MAX_DATAGRAM_LEN, MAX_VALUE_LIST_LEN, Message, OpFlags, Reassembler, Response,
    ResponseCode,
};
use hdl::config::DEFAULT_UDP_ANSWER_MAX_OCTETS;
use hdl::names::Handle;
use hdl::values::{HandleValue, ValueSelection, value_list_len};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::harness::Server;
use crate::http::{Api, admin_client, json_of};
use crate::raw;

/// The handle bound of the servers that test it with small handles.
const BOUND: usize = 20_000;
/// How long a UDP socket stays quiet before every datagram of an answer is taken to
/// have arrived.
const QUIET: Duration = Duration::from_millis(500);
/// Datagrams read before giving up (more than the largest answer's 533).
const MAX_DATAGRAMS: usize = 600;

fn handle(text: &str) -> Handle {
    Handle::parse(text).expect("valid handle")
}

/// A DESC value taking `octets` octets in the value list encoding.
fn value_of_len(index: u32, octets: usize) -> HandleValue {
    let mut value = HandleValue::new(index, "DESC", Vec::new());
    value.data = vec![b'x'; octets - value.encoded_len()];
    value
}

/// The JSON of [`value_of_len`] for the HTTP API.
fn json_value_of_len(index: u32, octets: usize) -> Value {
    let text = String::from_utf8(value_of_len(index, octets).data).expect("ASCII");
    json!({"index": index, "type": "DESC", "data": {"format": "string", "value": text}})
}

/// Values taking `octets` octets in all (value list encoding), in pieces of about
/// 60,000 octets.
fn values_totalling(octets: usize) -> Vec<HandleValue> {
    const PIECE: usize = 60_000;
    let total = octets - 4;
    let mut sizes = vec![PIECE; total / PIECE];
    let rest = total % PIECE;
    match sizes.last_mut() {
        Some(last) if rest < 100 => *last += rest,
        _ => sizes.push(rest),
    }
    let values: Vec<HandleValue> = (1..).zip(sizes).map(|(i, s)| value_of_len(i, s)).collect();
    assert_eq!(value_list_len(&values), octets);
    values
}

async fn create(client: &Client, name: &str, values: Vec<HandleValue>) -> Result<(), ClientError> {
    let request = AdminRequest::Create {
        handle: handle(name),
        values,
        overwrite: Overwrite::Refuse,
    };
    client.admin(request).await.map(drop)
}

fn assert_too_large(result: Result<impl std::fmt::Debug, ClientError>, octets: usize) {
    let error = result.expect_err("refused");
    assert_eq!(
        error.response_code(),
        Some(ResponseCode::InvalidValue),
        "{error}"
    );
    let text = error.to_string();
    assert!(text.contains(&format!("{octets} octets")), "{text}");
}

async fn values_of(client: &Client, name: &str) -> Vec<HandleValue> {
    client
        .resolve(&handle(name), &ValueSelection::all(), Transport::Tcp)
        .await
        .expect("resolved")
        .values
}

#[tokio::test]
async fn writes_past_the_handle_bound_are_refused_over_the_handle_protocol() {
    let server = Server::start_with_config(&format!("[handle]\nmax_handle_octets = {BOUND}\n"));
    let client = server.client();
    let refused = create(&client, "TEST/big", vec![value_of_len(1, BOUND - 4 + 1)]).await;
    assert_too_large(refused, BOUND + 1);
    let missing = client
        .resolve(&handle("TEST/big"), &ValueSelection::all(), Transport::Tcp)
        .await
        .expect_err("nothing stored");
    assert_eq!(missing.response_code(), Some(ResponseCode::HandleNotFound));

    let first = value_of_len(1, BOUND - 4 - 100);
    create(&client, "TEST/big", vec![first.clone()])
        .await
        .expect("a handle at the bound less 100 octets");
    let add = AdminRequest::AddValues {
        handle: handle("TEST/big"),
        values: vec![value_of_len(2, 101)],
        overwrite: Overwrite::Refuse,
    };
    assert_too_large(client.admin(add).await, BOUND + 1);
    let modify = AdminRequest::ModifyValues {
        handle: handle("TEST/big"),
        values: vec![value_of_len(1, BOUND - 4 + 1)],
    };
    assert_too_large(client.admin(modify).await, BOUND + 1);
    let fits = AdminRequest::AddValues {
        handle: handle("TEST/big"),
        values: vec![value_of_len(2, 100)],
        overwrite: Overwrite::Refuse,
    };
    client.admin(fits).await.expect("exactly at the bound");
    let values = values_of(&client, "TEST/big").await;
    assert_eq!(value_list_len(&values), BOUND);
    assert_eq!(values[0].data, first.data);
}

#[tokio::test]
async fn writes_past_the_handle_bound_are_refused_over_http() {
    let api = Api {
        server: Server::start_with_config(&format!("[handle]\nmax_handle_octets = {BOUND}\n")),
        http: admin_client(),
    };
    let too_large = json!([json_value_of_len(1, BOUND - 4 + 1)]);
    let (status, body) = json_of(api.put("/api/handles/TEST/web", &too_large).await).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["responseCode"], 202);
    let message = body["message"].as_str().expect("a message");
    assert!(
        message.contains(&format!("{} octets", BOUND + 1)),
        "{message}"
    );
    let (status, _) = json_of(api.get("/api/handles/TEST/web").await).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "nothing stored");

    let fits = json!([json_value_of_len(1, BOUND - 4 - 100)]);
    let (status, _) = json_of(api.put("/api/handles/TEST/web", &fits).await).await;
    assert_eq!(status, StatusCode::CREATED);
    let more = json_value_of_len(2, 101);
    let (status, body) = json_of(api.put("/api/handles/TEST/web?index=various", &more).await).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["responseCode"], 202);
    let minted = json_of(
        api.put("/api/handles/TEST/?mintNewSuffix=true", &too_large)
            .await,
    )
    .await;
    assert_eq!(
        (minted.0, &minted.1["responseCode"]),
        (StatusCode::BAD_REQUEST, &json!(202))
    );
    let (_, body) = json_of(api.get("/api/handles/TEST/web").await).await;
    assert_eq!(body["values"].as_array().expect("values").len(), 1);
}

/// Sends `request` from a fresh UDP socket and takes every datagram that comes back
/// until the socket has been quiet for [`QUIET`].
fn every_datagram(server: SocketAddr, request: &Message) -> Vec<Vec<u8>> {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("bind");
    socket.connect(server).expect("connect");
    for datagram in request.encode_datagrams() {
        socket.send(&datagram).expect("send");
    }
    socket.set_read_timeout(Some(QUIET)).expect("timeout");
    let deadline = Instant::now() + raw::DEADLINE;
    let mut received = Vec::new();
    let mut buffer = [0u8; MAX_DATAGRAM_LEN];
    while received.len() < MAX_DATAGRAMS && Instant::now() < deadline {
        match socket.recv(&mut buffer) {
            Ok(len) => received.push(buffer[..len].to_vec()),
            Err(_) if !received.is_empty() => break,
            Err(error) => panic!("no answer over UDP: {error}"),
        }
    }
    received
}

fn whole(datagrams: &[Vec<u8>]) -> Message {
    let mut reassembler = Reassembler::new();
    let mut answer = None;
    for datagram in datagrams {
        answer = reassembler.push(datagram).expect("a valid piece");
    }
    Message::decode(&answer.expect("a whole answer")).expect("decodable")
}

fn error_text(answer: &Message) -> &str {
    match &answer.body {
        Body::Response {
            response: Response::Error(error),
            ..
        } => &error.message,
        other => panic!("not an error: {other:?}"),
    }
}

#[tokio::test]
async fn the_largest_handle_draws_a_capped_answer_over_udp_and_is_read_over_tcp() {
    let server = Server::start();
    let client = server.client();
    let values = values_totalling(MAX_VALUE_LIST_LEN);
    let count = values.len();
    create(&client, "TEST/largest", values)
        .await
        .expect("a handle at the default bound");
    let one_more = create(
        &client,
        "TEST/over",
        values_totalling(MAX_VALUE_LIST_LEN + 1),
    )
    .await;
    assert_too_large(one_more, MAX_VALUE_LIST_LEN + 1);

    // A forged request: every octet that answers it, counted at the socket.
    let request = raw::resolution(b"TEST/largest", 41);
    let asked = request.encode().len();
    let datagrams = every_datagram(server.address(), &request);
    let octets: usize = datagrams.iter().map(Vec::len).sum();
    assert!(
        octets <= DEFAULT_UDP_ANSWER_MAX_OCTETS,
        "{octets} octets in {} datagrams answer {asked}",
        datagrams.len()
    );
    let answer = whole(&datagrams);
    assert_eq!(answer.header.response_code, ResponseCode::Error);
    assert!(error_text(&answer).contains("ask over TCP"), "{answer:?}");

    // Asked with CT, the signal is signed, as J9 checks it before turning to TCP.
    let mut certified = raw::resolution(b"TEST/largest", 42);
    certified.header.flags = OpFlags::J9_DEFAULT.with(OpFlags::CT);
    let answer = whole(&every_datagram(server.address(), &certified));
    assert_eq!(answer.header.response_code, ResponseCode::Error);
    let site = client.site_info().await.expect("site info");
    let key = VerifyingKey::from_hs_pubkey(&site.servers[0].public_key).expect("server key");
    assert_eq!(hdl::client::check_signature(&answer, &key), Ok(()));

    // Over TCP the whole handle comes back in one message.
    let over_tcp = raw::tcp(server.address(), &request.encode()).expect("an answer");
    let Body::Response {
        response: Response::Resolution(found),
        ..
    } = over_tcp.body
    else {
        panic!("not a resolution: {:?}", over_tcp.header);
    };
    assert_eq!(found.values.len(), count);
    assert_eq!(value_list_len(&found.values), MAX_VALUE_LIST_LEN);
}

#[tokio::test]
async fn hdls_client_reads_a_handle_too_large_for_udp_by_turning_to_tcp_at_once() {
    let server = Server::start();
    let values = values_totalling(MAX_VALUE_LIST_LEN);
    let count = values.len();
    create(&server.client(), "TEST/largest", values)
        .await
        .expect("a handle at the default bound");

    // One long UDP wait: only the signal, not a timeout, ends it in time.
    let patient = ClientConfig {
        udp_waits: vec![Duration::from_secs(30)],
        tcp_timeout: Duration::from_secs(30),
        ..ClientConfig::default()
    };
    let client = Client::with_config(vec![server.address()], patient);
    let started = Instant::now();
    let resolved = client
        .resolve(
            &handle("TEST/largest"),
            &ValueSelection::all(),
            Transport::Auto,
        )
        .await
        .expect("resolved over TCP");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(resolved.values.len(), count);
    assert_eq!(value_list_len(&resolved.values), MAX_VALUE_LIST_LEN);

    let udp_only = client
        .resolve(
            &handle("TEST/largest"),
            &ValueSelection::all(),
            Transport::Udp,
        )
        .await
        .expect_err("too large for UDP");
    let ClientError::NoAnswer { last, .. } = &udp_only else {
        panic!("{udp_only}");
    };
    assert!(
        matches!(**last, AttemptError::ServerError { .. }),
        "{udp_only}"
    );
    assert!(udp_only.to_string().contains("ask over TCP"), "{udp_only}");

    // `hdl resolve` prefers UDP and prints every value.
    let output = Command::new(env!("CARGO_BIN_EXE_hdl"))
        .args(["resolve", "TEST/largest", "--server", &server.server_arg()])
        .output()
        .expect("run hdl");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let printed = String::from_utf8(output.stdout).expect("UTF-8");
    assert_eq!(printed.lines().count(), count, "one line per value");
}
