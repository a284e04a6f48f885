//! A write whose answer is lost: the client sends it again under the same RequestId
//! and a real `hdl serve` answers it as the first time, carrying it out once (issue
//! 13, finding 16). Between them, a proxy that drops the connection instead of
//! passing on the first write's answer, as a broken link or a killed primary would.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use hdl::client::{AdminRequest, Client, Overwrite, Transport};
use hdl::codec::{ENVELOPE_LEN, Envelope};
use hdl::names::Handle;
use hdl::values::{HandleValue, ValueSelection};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::harness::{Server, admin_credentials};

/// The most connections the proxy passes on: the write is sent at most three times.
const MAX_CONNECTIONS: usize = 3;

/// Passes connections to `server` on; on the first, the server's answers after
/// `kept` are not passed on: the connection is closed instead.
async fn lossy_proxy(server: SocketAddr, kept: usize) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&connections);
    tokio::spawn(async move {
        for first in (0..MAX_CONNECTIONS).map(|n| n == 0) {
            let Ok((client, _)) = listener.accept().await else {
                return;
            };
            counted.fetch_add(1, Ordering::SeqCst);
            let upstream = TcpStream::connect(server).await.expect("connect");
            let passed = if first { kept } else { usize::MAX };
            tokio::spawn(relay(client, upstream, passed));
        }
    });
    (address, connections)
}

/// Relays `client` and `upstream` both ways, message by message from upstream: the
/// message after the first `passed` is read and dropped, and both are closed.
async fn relay(client: TcpStream, upstream: TcpStream, passed: usize) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut upstream_read, mut upstream_write) = upstream.into_split();
    let requests = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut client_read, &mut upstream_write).await;
    });
    for sent in 0.. {
        let Some(message) = read_message(&mut upstream_read).await else {
            break;
        };
        if sent == passed || client_write.write_all(&message).await.is_err() {
            break;
        }
    }
    requests.abort();
}

/// One whole message (envelope and payload) from `stream`, or `None` at its end.
async fn read_message(stream: &mut (impl AsyncReadExt + Unpin)) -> Option<Vec<u8>> {
    let mut message = vec![0; ENVELOPE_LEN];
    stream.read_exact(&mut message).await.ok()?;
    let length = Envelope::peek(&message).ok()?.message_length as usize;
    let mut payload = vec![0; length];
    stream.read_exact(&mut payload).await.ok()?;
    message.extend(payload);
    Some(message)
}

#[tokio::test]
async fn a_create_whose_answer_was_lost_is_sent_again_and_answered_as_created() {
    let server = Server::start();
    // The challenge is passed on, the answer to the create is not.
    let (proxy, connections) = lossy_proxy(server.address(), 1).await;
    let client = Client::new(vec![proxy]).with_credentials(admin_credentials());
    let handle = Handle::parse("TEST/lost-answer").expect("handle");
    let url = HandleValue::new(1, "URL", "https://first.example/");
    let create = AdminRequest::Create {
        handle: handle.clone(),
        values: vec![url],
        overwrite: Overwrite::Refuse,
    };
    let answer = client.admin(create).await;
    assert!(answer.is_ok(), "{answer:?}");
    assert_eq!(connections.load(Ordering::SeqCst), 2, "sent twice");

    let found = server
        .client()
        .resolve(&handle, &ValueSelection::all(), Transport::Tcp)
        .await
        .expect("resolve");
    assert_eq!(found.values.len(), 1);
    assert_eq!(found.values[0].data, b"https://first.example/");

    // A new create of the same handle is a new request: refused.
    let again = AdminRequest::Create {
        handle,
        values: vec![HandleValue::new(1, "URL", "https://second.example/")],
        overwrite: Overwrite::Refuse,
    };
    let refused = server.client().admin(again).await.expect_err("exists");
    assert_eq!(refused.response_code().map(|code| code.to_u32()), Some(101));
}
