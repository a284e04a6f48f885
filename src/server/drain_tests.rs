//! Draining the listeners: what was accepted is answered, nothing new is, and the
//! drain ends by its deadline.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::task::JoinHandle;
use tokio::time::{Instant, timeout};

use super::super::drain::{self, Start};
use super::super::{tcp, udp};
use super::*;

/// Longer than any test runs: a drain that waits for it has failed.
const LONG: Duration = Duration::from_secs(60);
/// How long a step may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(10);

/// A TCP listener served with a test responder.
async fn tcp_server() -> (tempfile::TempDir, SocketAddr, Start, JoinHandle<()>) {
    let (dir, responder) = responder().await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (start, draining) = drain::channel();
    let served = tokio::spawn(tcp::serve(
        listener,
        responder,
        tcp::TcpLimits {
            timeout: LONG,
            per_source: 64,
        },
        draining,
    ));
    (dir, address, start, served)
}

/// Reads one whole answer from `stream`.
async fn answer(stream: &mut TcpStream) -> Message {
    next_answer(stream, &mut Vec::new()).await
}

/// Reads the next whole answer from `stream` after what `received` holds of it,
/// leaving in `received` what came after it.
async fn next_answer(stream: &mut TcpStream, received: &mut Vec<u8>) -> Message {
    let read = async {
        loop {
            if let crate::codec::Frame::Ready { len } = crate::codec::next_frame(received) {
                let message = Message::decode(&received[..len]).unwrap();
                received.drain(..len);
                return message;
            }
            let mut chunk = [0u8; 4096];
            let count = stream.read(&mut chunk).await.unwrap();
            assert!(count > 0, "closed before the answer");
            received.extend_from_slice(&chunk[..count]);
        }
    };
    timeout(PATIENCE, read).await.expect("an answer in time")
}

/// Whether the server closes `stream` (end of stream or reset) within [`PATIENCE`].
async fn closed(stream: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    matches!(
        timeout(PATIENCE, stream.read(&mut byte)).await,
        Ok(Ok(0) | Err(_))
    )
}

/// A connection that has been answered once (so the server has surely accepted it),
/// kept open for more (KC).
async fn answered_connection(address: SocketAddr) -> TcpStream {
    let mut stream = TcpStream::connect(address).await.unwrap();
    answered_not_found(&mut stream, &resolve_keeping("10.1000/none")).await;
    stream
}

/// Sends `request`, a resolution of a missing handle, on `stream` and checks its answer.
async fn answered_not_found(stream: &mut TcpStream, request: &[u8]) {
    stream.write_all(request).await.unwrap();
    let answered = answer(stream).await;
    assert_eq!(answered.header.response_code, ResponseCode::HandleNotFound);
}

/// Connects until the listener refuses (bounded).
async fn refused(address: SocketAddr) -> bool {
    for _ in 0..200 {
        match TcpStream::connect(address).await {
            Err(error) => return error.kind() == std::io::ErrorKind::ConnectionRefused,
            Ok(accepted_before_the_close) => drop(accepted_before_the_close),
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

#[tokio::test]
async fn a_request_in_flight_when_the_drain_begins_is_answered_and_nothing_new_is_accepted() {
    let (_dir, address, start, served) = tcp_server().await;
    let mut stream = answered_connection(address).await;
    let request = resolve_keeping("10.1000/none");
    let (first, rest) = request.split_at(request.len() / 2);
    stream.write_all(first).await.unwrap();

    start.begin(LONG);
    assert!(refused(address).await, "the listener is closed at once");
    stream.write_all(rest).await.unwrap();
    let answered = answer(&mut stream).await;
    assert_eq!(answered.header.response_code, ResponseCode::HandleNotFound);
    assert!(
        closed(&mut stream).await,
        "closed once its request is answered"
    );
    timeout(PATIENCE, served)
        .await
        .expect("the drain ends when the last connection does, not at its deadline")
        .unwrap();
}

#[tokio::test]
async fn an_idle_connection_is_closed_at_once_and_a_new_one_gets_its_first_request_answered() {
    let (_dir, address, start, served) = tcp_server().await;
    let mut idle = answered_connection(address).await;
    // Connected (so queued or accepted) but nothing sent yet: a client sends its
    // request right after connecting, so it is still answered.
    let mut fresh = TcpStream::connect(address).await.unwrap();

    start.begin(LONG);
    assert!(
        closed(&mut idle).await,
        "an idle connection is closed at once"
    );
    fresh
        .write_all(&resolve_keeping("10.1000/none"))
        .await
        .unwrap();
    let answered = answer(&mut fresh).await;
    assert_eq!(answered.header.response_code, ResponseCode::HandleNotFound);
    assert!(closed(&mut fresh).await);
    timeout(PATIENCE, served).await.expect("drained").unwrap();
}

#[tokio::test]
async fn a_connection_is_closed_after_answering_a_request_without_kc() {
    // As J9's server does, and J9 clients close only after the server has: the
    // connection's teardown then runs on the client's side.
    let (_dir, address, _start, _served) = tcp_server().await;
    let mut stream = TcpStream::connect(address).await.unwrap();
    answered_not_found(&mut stream, &resolve("10.1000/none")).await;
    assert!(closed(&mut stream).await, "closed after the answer");
}

#[tokio::test]
async fn a_connection_kept_with_kc_serves_request_after_request() {
    let (_dir, address, _start, _served) = tcp_server().await;
    let mut stream = answered_connection(address).await;
    answered_not_found(&mut stream, &resolve_keeping("10.1000/none")).await;
    // The last request, without KC, ends the connection.
    answered_not_found(&mut stream, &resolve("10.1000/none")).await;
    assert!(
        closed(&mut stream).await,
        "closed after the request without KC"
    );
}

/// A resolution of a missing handle under envelope request id `id`.
fn numbered_resolution(id: u32) -> Vec<u8> {
    let mut message = Message::decode(&resolve("10.1000/none")).unwrap();
    message.envelope.request_id = id;
    message.encode()
}

#[tokio::test]
async fn requests_sent_in_one_write_are_each_answered_in_order() {
    let (_dir, address, _start, _served) = tcp_server().await;
    let mut stream = TcpStream::connect(address).await.unwrap();
    let ids = [7, 8, 9];
    let together: Vec<u8> = ids.iter().flat_map(|&id| numbered_resolution(id)).collect();
    stream.write_all(&together).await.unwrap();
    let mut received = Vec::new();
    for id in ids {
        let answered = next_answer(&mut stream, &mut received).await;
        assert_eq!(answered.envelope.request_id, id);
        assert_eq!(answered.header.response_code, ResponseCode::HandleNotFound);
    }
}

#[tokio::test]
async fn the_drain_gives_up_at_its_deadline() {
    let (_dir, address, start, served) = tcp_server().await;
    let mut stuck = answered_connection(address).await;
    let request = resolve("10.1000/none");
    stuck
        .write_all(&request[..request.len() / 2])
        .await
        .unwrap();

    let drain = Duration::from_millis(300);
    let began = Instant::now();
    let deadline = start.begin(drain);
    timeout(PATIENCE, served).await.expect("drained").unwrap();
    assert!(
        Instant::now() >= deadline,
        "waited for the request in flight"
    );
    assert!(began.elapsed() < PATIENCE / 2);
    assert!(
        closed(&mut stuck).await,
        "the unfinished request is dropped"
    );
}

#[tokio::test]
async fn a_datagram_received_when_the_drain_begins_is_answered_then_the_socket_closes() {
    let (_dir, responder) = responder().await;
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let address = socket.local_addr().unwrap();
    let (start, draining) = drain::channel();
    let limits = udp::UdpLimits::from_config(&crate::config::HandleConfig::default());
    let served = tokio::spawn(udp::serve(socket, responder, limits, None, draining));
    let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    client.connect(address).await.unwrap();

    client.send(&resolve("10.1000/none")).await.unwrap();
    start.begin(LONG);
    let mut buffer = [0u8; 2048];
    let len = timeout(PATIENCE, client.recv(&mut buffer))
        .await
        .expect("answered")
        .unwrap();
    let answered = Message::decode(&buffer[..len]).unwrap();
    assert_eq!(answered.header.response_code, ResponseCode::HandleNotFound);
    timeout(PATIENCE, served).await.expect("drained").unwrap();

    client.send(&resolve("10.1000/none")).await.unwrap();
    let after = timeout(Duration::from_millis(500), client.recv(&mut buffer)).await;
    assert!(
        !matches!(after, Ok(Ok(_))),
        "nothing is answered after the drain"
    );
}
