//! The client side of the peer link: one authenticated, multiplexed connection per
//! peer, shared by every call to it.
//!
//! Owns [`Links`], the process's connections to its peers by address. A call sends
//! opaque bytes and waits for the bytes of its answer; calls from any number of tasks
//! go out over the same connection, each under its own call id, and answers come
//! back in whatever order the peer finishes them.
//!
//! Invariants:
//! - at most one live connection per address; it is opened (connect, handshake, within
//!   [`CONNECT_TIMEOUT`]) by the first call that needs it, the others wait for it
//!   within their own timeouts;
//! - a connection that fails (socket error, end of stream, a frame that does not open,
//!   a frame of the wrong kind) fails every call pending on it at once and is replaced
//!   by the next call; a call that times out only gives up its own answer;
//! - a call that timed out without the connection showing any sign of life sends a
//!   ping; a connection that stays silent for [`LinkSettings::probe_timeout`] after it
//!   is dropped, so a half-open connection (a peer host gone, a firewall that forgot
//!   the flow) is replaced instead of swallowing calls;
//! - bounded: [`LinkSettings::max_pending_calls`] calls in flight per connection (the
//!   others wait for a slot within their timeouts), the same number of frames queued
//!   for the socket and at most [`super::stream::MAX_HELD_OCTETS`] of their bodies (a call that times
//!   out gives up its answer, not its frame's place in the queue: without a bound on
//!   octets, a peer too busy to read let a caller that kept retrying pile up frames),
//!   and bodies of at most [`MAX_FRAME_LEN`] bytes both ways. The table of peers has one
//!   entry per address the caller names (the members it knows).

use std::collections::HashMap;
use std::fmt;
use std::mem;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio::task::AbortHandle;
use tokio::time::{Instant, sleep_until, timeout_at};
use tracing::{debug, warn};

use super::auth::{self, ClusterSecret};
use super::frame::{FrameError, MAX_FRAME_LEN};
use super::seal::Kind;
use super::stream::{OctetBudget, Outgoing, PeerError, PeerStream, SealedReader, SealedWriter};
use crate::replication::NodeId;

/// The most calls in flight on one connection, by default.
pub const MAX_PENDING_CALLS: usize = 1024;

/// How long connecting to a peer and authenticating may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a connection that went quiet has to answer a ping, by default.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// How the links behave; [`Default`] gives the constants above.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkSettings {
    /// The most calls in flight on one connection; more wait for a slot.
    pub max_pending_calls: usize,
    /// How long a connection that let a call time out without sending anything has
    /// to answer a ping before it is dropped.
    pub probe_timeout: Duration,
}

impl Default for LinkSettings {
    fn default() -> LinkSettings {
        LinkSettings {
            max_pending_calls: MAX_PENDING_CALLS,
            probe_timeout: PROBE_TIMEOUT,
        }
    }
}

/// This process's connections to its peers; clones share them.
#[derive(Clone)]
pub struct Links {
    inner: Arc<Inner>,
}

struct Inner {
    id: NodeId,
    secret: ClusterSecret,
    settings: LinkSettings,
    peers: Mutex<HashMap<SocketAddr, Peer>>,
}

/// The connection to one address, and the lock its (re)connection is made under.
#[derive(Default)]
struct Peer {
    live: Option<Arc<Link>>,
    connecting: Arc<tokio::sync::Mutex<()>>,
}

impl Peer {
    /// The connection, unless there is none or it failed (then it is let go).
    fn live(&mut self) -> Option<Arc<Link>> {
        if self
            .live
            .as_ref()
            .is_some_and(|link| link.shared.has_failed())
        {
            self.live = None;
        }
        self.live.clone()
    }
}

impl fmt::Debug for Links {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Links")
            .field("id", &self.inner.id)
            .field("settings", &self.inner.settings)
            .finish_non_exhaustive()
    }
}

impl Links {
    /// The links of node `id` (0 for a client that is not a member, such as the
    /// `hdl cluster` command), authenticating with `secret`.
    pub fn new(id: NodeId, secret: ClusterSecret) -> Links {
        Links::with_settings(id, secret, LinkSettings::default())
    }

    /// The links of node `id` with other settings than the defaults.
    pub fn with_settings(id: NodeId, secret: ClusterSecret, settings: LinkSettings) -> Links {
        let inner = Inner {
            id,
            secret,
            settings,
            peers: Mutex::new(HashMap::new()),
        };
        Links {
            inner: Arc::new(inner),
        }
    }

    /// The node id these links give in the handshake.
    pub fn id(&self) -> NodeId {
        self.inner.id
    }

    /// Sends `request` to the peer at `addr` and waits for its answer, all within
    /// `timeout`: connecting and authenticating first if there is no live connection.
    ///
    /// Errors: [`PeerError::Timeout`] when the time ran out (the connection stays);
    /// [`PeerError::LinkFailed`] when the connection failed with the call on it (the
    /// next call reconnects); the connect or handshake error when there was none and
    /// none could be made; [`FrameError::TooLarge`] for a request over
    /// [`MAX_FRAME_LEN`] bytes.
    pub async fn call(
        &self,
        addr: SocketAddr,
        request: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, PeerError> {
        if request.len() > MAX_FRAME_LEN {
            let len = u64::try_from(request.len()).unwrap_or(u64::MAX);
            let max = MAX_FRAME_LEN;
            return Err(FrameError::TooLarge { len, max }.into());
        }
        let deadline = Instant::now() + timeout;
        let mut request = request;
        let mut failure = None;
        // A second try only when the first connection failed before taking the
        // request: it cannot have reached the peer.
        for _try in 0..2 {
            let link = timeout_at(deadline, self.link(addr))
                .await
                .map_err(|_| PeerError::Timeout(timeout))??;
            match link.call(request, deadline, timeout).await {
                Ok(answer) => return Ok(answer),
                Err(Attempt::Failed(error)) => return Err(error),
                Err(Attempt::Unsent(back)) => {
                    failure = Some(link.shared.failure());
                    request = back;
                }
            }
        }
        let failure = failure.unwrap_or_else(|| Arc::new(PeerError::Closed));
        Err(PeerError::LinkFailed(failure))
    }

    /// Whether there is a live connection to `addr` (one that has not failed).
    pub fn is_connected(&self, addr: SocketAddr) -> bool {
        self.peers()
            .get_mut(&addr)
            .is_some_and(|peer| peer.live().is_some())
    }

    fn peers(&self) -> MutexGuard<'_, HashMap<SocketAddr, Peer>> {
        self.inner
            .peers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The live connection to `addr`, made if needed by one caller at a time.
    async fn link(&self, addr: SocketAddr) -> Result<Arc<Link>, PeerError> {
        let connecting = {
            let mut peers = self.peers();
            let peer = peers.entry(addr).or_default();
            if let Some(link) = peer.live() {
                return Ok(link);
            }
            Arc::clone(&peer.connecting)
        };
        let _turn = connecting.lock().await;
        if let Some(link) = self.peers().get_mut(&addr).and_then(Peer::live) {
            return Ok(link);
        }
        let link = tokio::time::timeout(CONNECT_TIMEOUT, Link::connect(addr, &self.inner))
            .await
            .map_err(|_| PeerError::Timeout(CONNECT_TIMEOUT))??;
        self.peers().entry(addr).or_default().live = Some(Arc::clone(&link));
        Ok(link)
    }
}

/// How a call on one connection ended, when it did not get its answer.
enum Attempt {
    /// The connection had failed before it took the request, given back.
    Unsent(Vec<u8>),
    /// The call failed.
    Failed(PeerError),
}

/// One authenticated connection and the calls pending on it.
struct Link {
    shared: Arc<Shared>,
    queue: mpsc::Sender<Outgoing>,
    permits: Semaphore,
    /// The octets of the frames queued for the socket.
    queued: OctetBudget,
    next_call: AtomicU64,
    probing: AtomicBool,
    probe_timeout: Duration,
    task: AbortHandle,
}

/// What the connection's task and the callers share.
#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    /// Set once `state.failure` is; read without the lock on every call.
    failed: AtomicBool,
    /// Frames (headers) received so far: the connection's sign of life.
    progress: AtomicU64,
}

#[derive(Default)]
struct State {
    calls: HashMap<u64, oneshot::Sender<Vec<u8>>>,
    failure: Option<Arc<PeerError>>,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn has_failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// Records why the connection failed (the first reason wins) and fails every
    /// pending call: their answer senders are dropped.
    fn fail(&self, error: PeerError) {
        let calls = {
            let mut state = self.state();
            state.failure.get_or_insert_with(|| Arc::new(error));
            self.failed.store(true, Ordering::Release);
            mem::take(&mut state.calls)
        };
        drop(calls);
    }

    fn failure(&self) -> Arc<PeerError> {
        self.state()
            .failure
            .clone()
            .unwrap_or_else(|| Arc::new(PeerError::Closed))
    }

    /// Hands `body` to the call `call`, if it still waits (it may have timed out).
    fn answer(&self, call: u64, body: Vec<u8>) {
        let waiting = self.state().calls.remove(&call);
        if let Some(waiting) = waiting {
            let _gone = waiting.send(body);
        }
    }
}

/// A call's place in the pending table, removed when the call ends however it ends
/// (answered, failed, timed out or dropped by its caller).
struct Pending<'a> {
    shared: &'a Shared,
    call: u64,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        self.shared.state().calls.remove(&self.call);
    }
}

impl Link {
    async fn connect(addr: SocketAddr, inner: &Inner) -> Result<Arc<Link>, PeerError> {
        let mut stream = PeerStream::new(TcpStream::connect(addr).await?)?;
        let keys = auth::connect(&mut stream, &inner.secret, inner.id).await?;
        let (reader, writer) = stream.into_sealed(keys);
        let settings = inner.settings;
        let (queue, outgoing) = mpsc::channel(settings.max_pending_calls.max(1));
        let shared = Arc::new(Shared::default());
        let task = tokio::spawn(run(Arc::clone(&shared), reader, writer, outgoing));
        debug!(%addr, "peer link connected");
        Ok(Arc::new(Link {
            shared,
            queue,
            permits: Semaphore::new(settings.max_pending_calls.max(1)),
            queued: OctetBudget::new(),
            // 0 is the call id of pings.
            next_call: AtomicU64::new(1),
            probing: AtomicBool::new(false),
            probe_timeout: settings.probe_timeout,
            task: task.abort_handle(),
        }))
    }

    /// One call on this connection. [`Attempt::Unsent`] gives the request back when
    /// the connection failed before the request was handed to it, so it can go out
    /// on a new one.
    async fn call(
        self: &Arc<Self>,
        request: Vec<u8>,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<Vec<u8>, Attempt> {
        let Ok(acquired) = timeout_at(deadline, self.permits.acquire()).await else {
            return Err(Attempt::Failed(PeerError::Timeout(timeout)));
        };
        let Ok(_permit) = acquired else {
            return Err(Attempt::Unsent(request));
        };
        let Ok(held) = timeout_at(deadline, self.queued.hold(request.len())).await else {
            return Err(Attempt::Failed(PeerError::Timeout(timeout)));
        };
        let call = self.next_call.fetch_add(1, Ordering::Relaxed);
        let (answered, answer) = oneshot::channel();
        let pending = {
            let mut state = self.shared.state();
            if state.failure.is_some() {
                return Err(Attempt::Unsent(request));
            }
            state.calls.insert(call, answered);
            Pending {
                shared: &self.shared,
                call,
            }
        };
        let progress = self.shared.progress.load(Ordering::Relaxed);
        let frame = Outgoing {
            kind: Kind::Call,
            call,
            body: request,
            held,
        };
        let sent = match timeout_at(deadline, self.queue.send(frame)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(closed)) => return Err(Attempt::Unsent(closed.0.body)),
            Err(elapsed) => Err(elapsed),
        };
        let outcome = match sent {
            Ok(()) => timeout_at(deadline, answer).await,
            Err(elapsed) => Err(elapsed),
        };
        drop(pending);
        match outcome {
            Ok(Ok(body)) => Ok(body),
            Ok(Err(_failed)) => Err(Attempt::Failed(PeerError::LinkFailed(
                self.shared.failure(),
            ))),
            Err(_elapsed) => {
                if self.shared.progress.load(Ordering::Relaxed) == progress {
                    self.probe();
                }
                Err(Attempt::Failed(PeerError::Timeout(timeout)))
            }
        }
    }

    /// Pings the peer, unless a ping is already out, and drops the connection if
    /// nothing at all arrives within the probe timeout.
    fn probe(self: &Arc<Self>) {
        if self.probing.swap(true, Ordering::AcqRel) {
            return;
        }
        let link = Arc::downgrade(self);
        let queue = self.queue.clone();
        let progress = self.shared.progress.load(Ordering::Relaxed);
        let deadline = Instant::now() + self.probe_timeout;
        tokio::spawn(async move {
            let ping = Outgoing {
                kind: Kind::Ping,
                call: 0,
                body: Vec::new(),
                held: None,
            };
            let _sent = timeout_at(deadline, queue.send(ping)).await;
            drop(queue);
            sleep_until(deadline).await;
            let Some(link) = Weak::upgrade(&link) else {
                return;
            };
            if link.shared.progress.load(Ordering::Relaxed) == progress {
                debug!(timeout = ?link.probe_timeout, "peer link silent; dropping it");
                link.shared.fail(PeerError::Timeout(link.probe_timeout));
                link.task.abort();
            }
            link.probing.store(false, Ordering::Release);
        });
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The connection's task: writes queued frames and hands answers to their calls
/// until either direction fails, then fails the link.
async fn run(
    shared: Arc<Shared>,
    mut reader: SealedReader,
    writer: SealedWriter,
    outgoing: mpsc::Receiver<Outgoing>,
) {
    let read = async {
        loop {
            let started = || {
                shared.progress.fetch_add(1, Ordering::Relaxed);
            };
            let frame = match reader.next(started).await {
                Ok(Some(frame)) => frame,
                Ok(None) => return PeerError::Closed,
                Err(error) => return error,
            };
            match frame.kind {
                Kind::Answer => shared.answer(frame.call, frame.body),
                Kind::Pong => {}
                kind @ (Kind::Call | Kind::Ping) => return PeerError::Unexpected(kind),
            }
        }
    };
    let error = tokio::select! {
        error = read => error,
        error = writer.run(outgoing) => error,
    };
    if error.is_forgery() {
        warn!(%error, "peer link dropped");
    } else {
        debug!(%error, "peer link ended");
    }
    shared.fail(error);
}
