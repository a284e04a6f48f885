//! The peer link over loopback TCP: [`Links`] against [`serve`] with a small echoing
//! dispatcher, a relay in the middle that counts connections and can tamper with or
//! swallow bytes, and a client driven by hand that sends forged, replayed, reordered
//! and spliced frames.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, oneshot};
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep, timeout};

use super::auth;
use super::frame::{FrameError, HEADER_LEN, MAX_FRAME_LEN};
use super::seal::{self, Frame, Kind, Opener, SEALED_HEADER_LEN, Sealer};
use super::stream::PeerStream;
use super::*;
use crate::replication::NodeId;

const WAIT: Duration = Duration::from_secs(10);

fn secret() -> ClusterSecret {
    ClusterSecret::new(b"a shared cluster secret, 32 byte").unwrap()
}

/// Waits (bounded) until `condition` holds.
async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        sleep(Duration::from_millis(5)).await;
    }
}

/// Answers a request with the caller's id and the request. A request starting with
/// `gate` waits for a permit of the gate; one starting with `hang` never gets an answer.
struct Echo {
    seen: Mutex<Vec<Vec<u8>>>,
    gate: Semaphore,
    in_flight: AtomicUsize,
    peak: AtomicUsize,
}

impl Default for Echo {
    fn default() -> Echo {
        Echo {
            seen: Mutex::default(),
            gate: Semaphore::new(0),
            in_flight: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
        }
    }
}

impl Echo {
    fn seen(&self) -> Vec<Vec<u8>> {
        self.seen.lock().unwrap().clone()
    }

    fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }
}

impl Dispatch for Echo {
    fn dispatch(&self, from: NodeId, request: Vec<u8>) -> DispatchFuture<'_> {
        Box::pin(async move {
            self.seen.lock().unwrap().push(request.clone());
            let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.peak.fetch_max(now, Ordering::SeqCst);
            if request.starts_with(b"gate") {
                self.gate.acquire().await.unwrap().forget();
            } else if request.starts_with(b"hang") {
                std::future::pending::<()>().await;
            }
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            echoed(from, &request)
        })
    }
}

/// What [`Echo`] answers `from` for `request`.
fn echoed(from: NodeId, request: &[u8]) -> Vec<u8> {
    let mut answer = from.to_be_bytes().to_vec();
    answer.extend_from_slice(request);
    answer
}

/// A running [`serve`] with an [`Echo`].
struct TestServer {
    addr: SocketAddr,
    echo: Arc<Echo>,
    stop: oneshot::Sender<()>,
    task: JoinHandle<std::io::Result<()>>,
}

async fn start_server(listener: TcpListener) -> TestServer {
    let addr = listener.local_addr().unwrap();
    let echo = Arc::new(Echo::default());
    let (stop, stopped) = oneshot::channel::<()>();
    let shutdown = async move {
        let _ = stopped.await;
    };
    let dispatch: Arc<dyn Dispatch> = echo.clone();
    let task = tokio::spawn(serve(
        listener,
        secret(),
        dispatch,
        PeerLimits::default(),
        shutdown,
    ));
    TestServer {
        addr,
        echo,
        stop,
        task,
    }
}

async fn server() -> TestServer {
    start_server(TcpListener::bind("127.0.0.1:0").await.unwrap()).await
}

impl TestServer {
    /// Shuts the server down and waits until it closed every connection.
    async fn stop(self) {
        self.stop.send(()).unwrap();
        timeout(WAIT, self.task).await.unwrap().unwrap().unwrap();
    }
}

/// A TCP relay in front of a server: counts the connections it accepts, can swallow
/// every byte (a black hole with the sockets open) and can flip one bit of what the
/// server sends on the next connection.
struct Relay {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    frozen: Arc<AtomicBool>,
    flip_to_client: Arc<Mutex<Option<usize>>>,
}

impl Relay {
    async fn start(target: SocketAddr) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let relay = Relay {
            addr: listener.local_addr().unwrap(),
            accepted: Arc::default(),
            frozen: Arc::default(),
            flip_to_client: Arc::default(),
        };
        let accepted = Arc::clone(&relay.accepted);
        let frozen = Arc::clone(&relay.frozen);
        let flip = Arc::clone(&relay.flip_to_client);
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                accepted.fetch_add(1, Ordering::SeqCst);
                let server = TcpStream::connect(target).await.unwrap();
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                let flip = flip.lock().unwrap().take();
                tokio::spawn(pump(client_read, server_write, Arc::clone(&frozen), None));
                tokio::spawn(pump(server_read, client_write, Arc::clone(&frozen), flip));
            }
        });
        relay
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    frozen: Arc<AtomicBool>,
    flip: Option<usize>,
) {
    let mut offset = 0;
    let mut buffer = [0; 4096];
    loop {
        let read = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => read,
        };
        if frozen.load(Ordering::SeqCst) {
            continue;
        }
        if let Some(at) = flip.filter(|at| (offset..offset + read).contains(at)) {
            buffer[at - offset] ^= 1;
        }
        offset += read;
        if to.write_all(&buffer[..read]).await.is_err() {
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_share_one_connection_and_get_their_own_answers() {
    let server = server().await;
    let relay = Relay::start(server.addr).await;
    let links = Links::new(7, secret());

    // All at once on fresh links: one connection is made for all of them. The gated
    // calls are answered only after every other call was, so answers come back in
    // another order than the calls went out.
    let finished = Arc::new(AtomicUsize::new(0));
    let mut calls = Vec::new();
    for i in 0..200_u32 {
        let (links, finished) = (links.clone(), Arc::clone(&finished));
        let gated = i % 10 == 0;
        let request = format!("{}{i}", if gated { "gate" } else { "free" }).into_bytes();
        let addr = relay.addr;
        calls.push(tokio::spawn(async move {
            let answer = links.call(addr, request.clone(), WAIT).await.unwrap();
            let order = finished.fetch_add(1, Ordering::SeqCst);
            (request, answer, order)
        }));
    }
    wait_until("180 calls are answered and 20 wait at the gate", || {
        finished.load(Ordering::SeqCst) == 180 && server.echo.in_flight() == 20
    })
    .await;
    server.echo.gate.add_permits(20);
    for call in calls {
        let (request, answer, order) = timeout(WAIT, call).await.unwrap().unwrap();
        assert_eq!(answer, echoed(7, &request));
        if request.starts_with(b"gate") {
            assert!(order >= 180, "a gated call finished as number {order}");
        }
    }
    assert_eq!(relay.accepted(), 1, "more than one connection was opened");
    assert_eq!(server.echo.seen().len(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_dispatches_at_most_max_in_flight_calls_and_then_stops_reading() {
    let server = server().await;
    let links = Links::new(7, secret());
    let total = MAX_IN_FLIGHT + 44;
    let calls: Vec<_> = (0..total)
        .map(|i| {
            let links = links.clone();
            let addr = server.addr;
            tokio::spawn(async move {
                links
                    .call(addr, format!("gate{i}").into_bytes(), WAIT)
                    .await
            })
        })
        .collect();
    wait_until("the connection is full", || {
        server.echo.in_flight() == MAX_IN_FLIGHT
    })
    .await;
    // Give the connection a chance to dispatch more than it may.
    sleep(Duration::from_millis(200)).await;
    assert_eq!(server.echo.seen().len(), MAX_IN_FLIGHT);
    server.echo.gate.add_permits(total);
    for call in calls {
        timeout(WAIT, call).await.unwrap().unwrap().unwrap();
    }
    assert_eq!(server.echo.peak.load(Ordering::SeqCst), MAX_IN_FLIGHT);
    assert_eq!(server.echo.seen().len(), total);
}

#[tokio::test]
async fn a_call_times_out_alone_and_the_link_serves_later_calls() {
    let server = server().await;
    let relay = Relay::start(server.addr).await;
    let settings = LinkSettings {
        probe_timeout: Duration::from_millis(200),
        ..LinkSettings::default()
    };
    let links = Links::with_settings(7, secret(), settings);
    let short = Duration::from_millis(100);
    let timed_out = links.call(relay.addr, b"hang".to_vec(), short).await;
    assert!(
        matches!(timed_out, Err(PeerError::Timeout(t)) if t == short),
        "{timed_out:?}"
    );
    // The silent call made the link ping the peer; the pong keeps the link.
    sleep(settings.probe_timeout * 2).await;
    assert!(links.is_connected(relay.addr));
    let answer = links
        .call(relay.addr, b"fine".to_vec(), WAIT)
        .await
        .unwrap();
    assert_eq!(answer, echoed(7, b"fine"));
    assert_eq!(relay.accepted(), 1);
}

#[tokio::test]
async fn a_silent_connection_is_dropped_after_an_unanswered_ping_and_replaced() {
    let server = server().await;
    let relay = Relay::start(server.addr).await;
    let settings = LinkSettings {
        probe_timeout: Duration::from_millis(200),
        ..LinkSettings::default()
    };
    let links = Links::with_settings(7, secret(), settings);
    links.call(relay.addr, b"one".to_vec(), WAIT).await.unwrap();

    // A black hole: the sockets stay open, nothing gets through.
    relay.frozen.store(true, Ordering::SeqCst);
    let short = Duration::from_millis(100);
    let timed_out = links.call(relay.addr, b"two".to_vec(), short).await;
    assert!(
        matches!(timed_out, Err(PeerError::Timeout(_))),
        "{timed_out:?}"
    );
    wait_until("the silent link is dropped", || {
        !links.is_connected(relay.addr)
    })
    .await;

    relay.frozen.store(false, Ordering::SeqCst);
    let answer = links
        .call(relay.addr, b"three".to_vec(), WAIT)
        .await
        .unwrap();
    assert_eq!(answer, echoed(7, b"three"));
    assert_eq!(relay.accepted(), 2);
    assert_eq!(server.echo.seen(), [b"one".to_vec(), b"three".to_vec()]);
}

#[tokio::test]
async fn a_tampered_answer_fails_the_link_and_the_next_call_reconnects() {
    let server = server().await;
    let relay = Relay::start(server.addr).await;
    // The first body byte of the first sealed frame from the server, after its two
    // handshake frames (challenge and proof: a header and 32 bytes each).
    let first_body_byte = 2 * (HEADER_LEN + 32) + SEALED_HEADER_LEN;
    *relay.flip_to_client.lock().unwrap() = Some(first_body_byte);
    let links = Links::new(7, secret());
    let failed = links.call(relay.addr, b"one".to_vec(), WAIT).await;
    let Err(PeerError::LinkFailed(cause)) = failed else {
        panic!("a tampered answer was taken: {failed:?}");
    };
    assert!(
        matches!(*cause, PeerError::Frame(FrameError::BadTag)),
        "{cause:?}"
    );
    let answer = links.call(relay.addr, b"two".to_vec(), WAIT).await.unwrap();
    assert_eq!(answer, echoed(7, b"two"));
    assert_eq!(relay.accepted(), 2);
}

#[tokio::test]
async fn a_restarted_server_is_reconnected_to() {
    let first = server().await;
    let addr = first.addr;
    let links = Links::new(7, secret());
    links.call(addr, b"before".to_vec(), WAIT).await.unwrap();
    assert!(links.is_connected(addr));

    first.stop().await;
    wait_until("the link sees the connection closed", || {
        !links.is_connected(addr)
    })
    .await;
    let refused = links.call(addr, b"down".to_vec(), WAIT).await;
    assert!(matches!(refused, Err(PeerError::Io(_))), "{refused:?}");

    let second = start_server(TcpListener::bind(addr).await.unwrap()).await;
    let answer = links.call(addr, b"after".to_vec(), WAIT).await.unwrap();
    assert_eq!(answer, echoed(7, b"after"));
    assert_eq!(second.echo.seen(), [b"after".to_vec()]);
}

#[tokio::test]
async fn a_stranger_is_refused_and_nothing_is_dispatched() {
    let server = server().await;
    let stranger = Links::new(
        7,
        ClusterSecret::new(b"not the cluster secret, 32 bytes").unwrap(),
    );
    let refused = stranger
        .call(server.addr, b"let me in".to_vec(), WAIT)
        .await;
    assert!(refused.is_err());
    assert!(!stranger.is_connected(server.addr));
    assert!(server.echo.seen().is_empty());
}

#[tokio::test]
async fn an_oversize_request_is_refused_before_connecting() {
    let server = server().await;
    let relay = Relay::start(server.addr).await;
    let links = Links::new(7, secret());
    let refused = links
        .call(relay.addr, vec![0; MAX_FRAME_LEN + 1], WAIT)
        .await;
    assert!(
        matches!(refused, Err(PeerError::Frame(FrameError::TooLarge { .. }))),
        "{refused:?}"
    );
    assert_eq!(relay.accepted(), 0);
}

#[tokio::test]
async fn calls_wait_for_a_free_slot_on_a_full_link() {
    let server = server().await;
    let settings = LinkSettings {
        max_pending_calls: 2,
        ..LinkSettings::default()
    };
    let links = Links::with_settings(7, secret(), settings);
    let addr = server.addr;
    let hanging: Vec<_> = (0..2)
        .map(|_| {
            let links = links.clone();
            tokio::spawn(async move { links.call(addr, b"hang".to_vec(), WAIT).await })
        })
        .collect();
    wait_until("both slots are taken", || server.echo.in_flight() == 2).await;
    let short = Duration::from_millis(100);
    let waited = links.call(addr, b"third".to_vec(), short).await;
    assert!(matches!(waited, Err(PeerError::Timeout(_))), "{waited:?}");
    assert_eq!(server.echo.seen().len(), 2, "a third call went out");
    for call in hanging {
        call.abort();
    }
}

/// A client that speaks sealed frames by hand, to send what [`Links`] never would.
struct RawClient {
    stream: TcpStream,
    sealer: Sealer,
    opener: Opener,
}

impl RawClient {
    async fn connect(addr: SocketAddr) -> RawClient {
        let mut stream = PeerStream::new(TcpStream::connect(addr).await.unwrap()).unwrap();
        let keys = auth::connect(&mut stream, &secret(), 7).await.unwrap();
        RawClient {
            stream: stream.into_inner(),
            sealer: keys.sealer,
            opener: keys.opener,
        }
    }

    fn seal(&mut self, kind: Kind, call: u64, body: &[u8]) -> Vec<u8> {
        let mut bytes = Vec::new();
        self.sealer.seal(kind, call, body, &mut bytes).unwrap();
        bytes
    }

    async fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.unwrap();
    }

    /// The next frame from the server, or `None` once it closed the connection.
    async fn receive(&mut self) -> Option<Frame> {
        let read = async {
            let mut header = [0; SEALED_HEADER_LEN];
            self.stream.read_exact(&mut header).await.ok()?;
            let mut rest = vec![0; seal::rest_len(&header).unwrap()];
            self.stream.read_exact(&mut rest).await.ok()?;
            Some(self.opener.open(&header, rest).unwrap())
        };
        timeout(WAIT, read)
            .await
            .expect("the server neither answered nor closed")
    }

    /// Sends a call and checks its answer.
    async fn call(&mut self, call: u64, body: &[u8]) {
        let bytes = self.seal(Kind::Call, call, body);
        self.send(&bytes).await;
        let answer = self
            .receive()
            .await
            .expect("the server closed the connection");
        assert_eq!((answer.kind, answer.call), (Kind::Answer, call));
        assert_eq!(answer.body, echoed(7, body));
    }
}

#[tokio::test]
async fn a_frame_with_a_flipped_bit_drops_the_connection_undispatched() {
    let server = server().await;
    let mut client = RawClient::connect(server.addr).await;
    client.call(1, b"good").await;
    let mut forged = client.seal(Kind::Call, 2, b"evil");
    forged[SEALED_HEADER_LEN] ^= 0x20;
    client.send(&forged).await;
    assert_eq!(client.receive().await, None);
    assert_eq!(server.echo.seen(), [b"good".to_vec()]);
}

#[tokio::test]
async fn a_replayed_frame_drops_the_connection_undispatched() {
    let server = server().await;
    let mut client = RawClient::connect(server.addr).await;
    let once = client.seal(Kind::Call, 1, b"once");
    client.send(&once).await;
    assert_eq!(client.receive().await.unwrap().call, 1);
    client.send(&once).await;
    assert_eq!(client.receive().await, None);
    assert_eq!(server.echo.seen(), [b"once".to_vec()]);
}

#[tokio::test]
async fn reordered_frames_drop_the_connection_undispatched() {
    let server = server().await;
    let mut client = RawClient::connect(server.addr).await;
    let first = client.seal(Kind::Call, 1, b"first");
    let second = client.seal(Kind::Call, 2, b"second");
    client.send(&second).await;
    client.send(&first).await;
    assert_eq!(client.receive().await, None);
    assert!(server.echo.seen().is_empty());
}

#[tokio::test]
async fn a_frame_spliced_from_another_connection_drops_the_connection_undispatched() {
    let server = server().await;
    let mut one = RawClient::connect(server.addr).await;
    let mut other = RawClient::connect(server.addr).await;
    one.call(1, b"on one").await;
    other.call(1, b"on other").await;
    // The next frame of `one`, at the very position `other` expects its own next
    // frame: only the keys differ.
    let spliced = one.seal(Kind::Call, 2, b"spliced");
    other.send(&spliced).await;
    assert_eq!(other.receive().await, None);
    assert_eq!(
        server.echo.seen(),
        [b"on one".to_vec(), b"on other".to_vec()]
    );
    // `one` is untouched and goes on.
    one.send(&spliced).await;
    assert_eq!(one.receive().await.unwrap().call, 2);
}

#[tokio::test]
async fn a_client_sending_answers_is_dropped_and_a_ping_is_answered() {
    let server = server().await;
    let mut client = RawClient::connect(server.addr).await;
    let ping = client.seal(Kind::Ping, 0, b"");
    client.send(&ping).await;
    assert_eq!(client.receive().await.unwrap().kind, Kind::Pong);
    let answer = client.seal(Kind::Answer, 1, b"not yours to send");
    client.send(&answer).await;
    assert_eq!(client.receive().await, None);
    assert!(server.echo.seen().is_empty());
}

#[tokio::test]
async fn shutdown_closes_the_connections() {
    let server = server().await;
    let addr = server.addr;
    let mut client = RawClient::connect(addr).await;
    client.call(1, b"hi").await;
    let hanging = client.seal(Kind::Call, 2, b"hang");
    client.send(&hanging).await;
    wait_until("the call is in flight", || server.echo.in_flight() == 1).await;
    server.stop().await;
    assert_eq!(client.receive().await, None);
    assert!(TcpStream::connect(addr).await.is_err(), "still accepting");
}
