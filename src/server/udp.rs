//! The Handle protocol over UDP (digest §1.3): requests of one or more datagrams,
//! answers cut into 492-octet pieces.
//!
//! The socket is read by a thread of the edge's own, blocking in `recvfrom` as a
//! bare echo server does ([`socket`]): while datagrams come, one system call each,
//! and no reactor woken for them. Whatever must wait goes from that thread to tokio.
//!
//! Multi-datagram requests are reassembled per (peer, request id); partial requests
//! are bounded in number and octets, in all and per source address (whose datagrams
//! anyone can forge, so the totals are what bounds memory), and dropped after
//! [`REASSEMBLY_TIMEOUT`]. A resolution that can be answered without waiting (most:
//! a store read) is answered in the receiving loop, with no task; every other complete
//! request is answered on its own task, so a slow write never holds up resolution;
//! resolutions are answered in room of their own ([`MAX_IN_FLIGHT`]), apart from
//! every other request ([`MAX_OTHERS_IN_FLIGHT`]), so a flood of costly requests (key
//! checks waiting for a core) answers its senders "busy" and never takes the room a
//! resolution needs. One source address holds at most [`MAX_OTHERS_PER_SOURCE`] of
//! that room, so that its flood leaves the rest to other addresses' key checks.
//!
//! A resolution whose store read had to wait for the disk holds up the loop; while
//! such answers are seen, resolutions are handed to a bounded set of reader threads
//! instead ([`hand_off`]), so that many disk reads are in flight at once and the loop
//! keeps receiving. From memory, answers are given in the loop as before.
//!
//! A plain resolution whose answer is kept ([`super::answer_cache`]) is answered in
//! the loop with a copy of it, before anything else is done for it; a miss notes its
//! ticket, and the answer is kept once given, if the responder read it from this
//! node's store at once.
//!
//! On shutdown ([`super::drain`]) the datagrams already queued on the socket are still
//! taken, then the socket is read no more; the requests in flight are answered by the
//! drain's deadline.
//!
//! Answers are capped: one request draws at most [`UdpLimits::answer_max_octets`]
//! octets (datagrams and envelopes counted), whatever the handle holds, so a forged
//! source address gains a bounded factor (4096 octets by default for a request of 63
//! or more: at most 65 times). A larger answer is not sent; the request is answered
//! instead with RC_ERROR (2) saying to ask over TCP ([`Responder::too_large`]), the
//! cheapest signal for real clients: J9's `HandleResolver` throws on RC_ERROR from any
//! interface and its protocol loop goes on to TCP at once, and hdl's client does the
//! same. The alternatives cost more: silence, or a cut answer (J9 ignores TC and waits
//! for the missing pieces), costs a J9 client its whole UDP schedule (500 + 1000 +
//! 1500 ms) before it turns to TCP; any other error code (busy, protocol error) is
//! taken by J9 as the answer and the resolution fails. The per-source volume of
//! answers is not budgeted.

use std::borrow::Cow;
use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

use tokio::net::UdpSocket;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};
use tracing::{debug, info, warn};

use crate::codec::{
    ENVELOPE_LEN, Envelope, MAX_DATAGRAM_LEN, MessageFlags, OpCode, Reassembler, ResponseCode,
};
use crate::config::HandleConfig;
use crate::metrics::{Metrics, Protocol};
use crate::service::{Answered, Caller};

use super::answer_cache::{AnswerCache, Ticket};
use super::drain::{self, Draining};
use super::responder::{Reply, Responder};
use super::source_share::{Share, SourceShares};

mod hand_off;
mod socket;

use hand_off::{AnswerClock, HandOff};
use socket::ServerSocket;

/// How long the pieces of an incomplete request are kept.
pub const REASSEMBLY_TIMEOUT: Duration = Duration::from_secs(5);

/// At most this many requests are being reassembled at once.
const MAX_PARTIAL_REQUESTS: usize = 1024;

/// At most this many octets are held by requests being reassembled.
const MAX_PARTIAL_BYTES: usize = 8 << 20;

/// At most this many requests from one source address are being reassembled.
const MAX_PARTIAL_PER_SOURCE: usize = 16;

/// At most this many resolutions (and site-info requests) are answered at once; more
/// are answered at once with "server busy" (RC 3) so the client retries.
const MAX_IN_FLIGHT: u32 = 4096;

/// At most this many other requests (key checks, sessions, administration, sealed
/// messages) are answered at once, in room of their own: a flood of costly ones
/// never takes the room resolutions are answered in.
const MAX_OTHERS_IN_FLIGHT: u32 = 256;

/// Of those, at most this many from one source address: one address flooding costly
/// requests is answered busy once it holds a quarter of the room, and the rest is
/// left to every other address.
const MAX_OTHERS_PER_SOURCE: u32 = MAX_OTHERS_IN_FLIGHT / 4;

/// The bounds of the UDP edge a node's configuration sets.
#[derive(Debug, Clone, Copy)]
pub struct UdpLimits {
    /// The most octets, datagrams and envelopes included, one answer may take.
    pub answer_max_octets: usize,
    /// The most reader threads resolutions are handed to at once ([`hand_off`]).
    pub disk_readers: usize,
    /// An answer in the loop taking this long or longer means the loop was blocked.
    pub slow_answer: Duration,
}

impl UdpLimits {
    /// The bounds `config` sets.
    pub fn from_config(config: &HandleConfig) -> Self {
        UdpLimits {
            answer_max_octets: config.udp_answer_max_octets,
            disk_readers: config.udp_disk_readers,
            slow_answer: Duration::from_micros(config.udp_slow_answer_micros as u64),
        }
    }
}

/// Receives datagrams on a thread of its own until the drain begins, then answers
/// those in flight by its deadline; answers plain resolutions from `cache` when it
/// holds them.
pub async fn serve(
    socket: UdpSocket,
    responder: Responder,
    limits: UdpLimits,
    cache: Option<Arc<AnswerCache>>,
    draining: Draining,
) {
    let socket = match ServerSocket::new(socket) {
        Ok(socket) => socket,
        Err(error) => {
            warn!(%error, "cannot take the UDP socket off the reactor; not serving UDP");
            return;
        }
    };
    let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT as usize));
    let others_in_flight = Arc::new(Semaphore::new(MAX_OTHERS_IN_FLIGHT as usize));
    let other_shares = SourceShares::new(MAX_OTHERS_PER_SOURCE);
    let runtime = tokio::runtime::Handle::current();
    let receiver = Receiver {
        socket: socket.clone(),
        responder,
        limits,
        cache,
        copy: Vec::new(),
        in_flight: Arc::clone(&in_flight),
        others_in_flight: Arc::clone(&others_in_flight),
        other_shares,
        partial: Partial::default(),
        hand_off: HandOff::new(limits.disk_readers, limits.slow_answer, runtime.clone()),
    };
    let (ended, receiving) = oneshot::channel();
    let watched = draining.clone();
    let started = std::thread::Builder::new()
        .name("hdl-udp".into())
        .spawn(move || {
            // Answers that must wait are given to tasks, spawned from here.
            let _entered = runtime.enter();
            let _ = ended.send(catch_unwind(AssertUnwindSafe(|| receiver.run(&watched))));
        });
    if let Err(error) = started {
        warn!(%error, "cannot start the UDP receiving thread; not serving UDP");
        return;
    }
    let deadline = draining.started().await;
    socket.stop_receiving();
    if let Ok(Err(panic)) = receiving.await {
        std::panic::resume_unwind(panic);
    }
    // The socket stays open only as long as the answers in flight need it.
    drop(socket);
    let left = drain::settled(&in_flight, MAX_IN_FLIGHT, deadline).await
        + drain::settled(&others_in_flight, MAX_OTHERS_IN_FLIGHT, deadline).await;
    if left > 0 {
        info!(left, "UDP drain deadline passed; requests left unanswered");
    }
}

/// The receiving end of the socket.
struct Receiver {
    socket: ServerSocket,
    responder: Responder,
    limits: UdpLimits,
    /// Kept answers to plain resolutions.
    cache: Option<Arc<AnswerCache>>,
    /// The datagram a kept answer is copied into.
    copy: Vec<u8>,
    /// One permit per resolution being answered.
    in_flight: Arc<Semaphore>,
    /// One permit per other request being answered.
    others_in_flight: Arc<Semaphore>,
    /// Each source address's share of `others_in_flight`.
    other_shares: Arc<SourceShares>,
    partial: Partial,
    /// Whether resolutions go to reader threads, and those threads' room.
    hand_off: HandOff,
}

impl Receiver {
    /// Receives and takes datagrams until the drain has begun, then takes those
    /// already queued, and returns.
    fn run(mut self, draining: &Draining) {
        let mut buffer = vec![0u8; 64 * 1024];
        // Checked after every receive: one atomic load a datagram.
        while !draining.has_started() {
            match self.socket.receive(&mut buffer) {
                Ok(Some((len, peer))) => self.take(peer, &buffer[..len]),
                Ok(None) => {}
                Err(error) => warn!(%error, "receiving a datagram failed"),
            }
        }
        for _ in 0..MAX_IN_FLIGHT {
            let Some((len, peer)) = self.socket.receive_queued(&mut buffer) else {
                break;
            };
            self.take(peer, &buffer[..len]);
        }
    }

    /// Takes one datagram from `peer`: once it completes a request, answers it here
    /// or on a task of its own (or at once with "server busy" when too many are in
    /// flight).
    fn take(&mut self, peer: SocketAddr, datagram: &[u8]) {
        let Some(request) = self.partial.take(peer, datagram) else {
            return;
        };
        let ticket = match self.answered_from_cache(peer, &request) {
            Ok(()) => return,
            Err(ticket) => ticket,
        };
        let resolution = is_resolution(&request);
        let (room, share) = if resolution {
            (&self.in_flight, None)
        } else {
            let Some(share) = self.other_shares.take(peer.ip()) else {
                debug!(%peer, "its share of requests in flight is used; answering busy");
                self.answer_busy(peer, &request);
                return;
            };
            (&self.others_in_flight, Some(share))
        };
        let Ok(permit) = Arc::clone(room).try_acquire_owned() else {
            debug!(%peer, "too many requests in flight; answering busy");
            self.answer_busy(peer, &request);
            return;
        };
        let keep = self.cache.as_ref().zip(ticket).map(|(cache, ticket)| Keep {
            cache: Arc::clone(cache),
            ticket,
        });
        let answering = Box::pin(answer(
            self.socket.clone(),
            self.responder.clone(),
            self.limits.answer_max_octets,
            peer,
            request.into_owned(),
            (permit, keep, share),
        ));
        // A resolution most often reads the store and sends its answer without
        // waiting: answered here, it costs no task. Anything else (a key check may
        // take a core for milliseconds), or a resolution that must wait (a fresh
        // read), is answered on a task of its own. While store reads wait for the
        // disk, a resolution goes to a reader thread, unless they are all busy.
        if !resolution {
            tokio::spawn(answering);
            return;
        }
        let clock = AnswerClock::start();
        let Some(mut answering) = self.hand_off.hand(clock.started(), answering) else {
            self.responder.metrics().handed_off();
            return;
        };
        let finished = ready_at_once(&mut answering);
        self.hand_off.timed(clock, Instant::now());
        if !finished {
            tokio::spawn(answering);
        }
    }
}

impl Receiver {
    /// Answers `request` from `peer` with "server busy", if the socket has room for it
    /// now: under a flood, a busy answer is dropped rather than waited for.
    fn answer_busy(&self, peer: SocketAddr, request: &[u8]) {
        // A busy reply is one message, or nothing for a request too broken to answer.
        let Reply::One(busy) = self.responder.busy(request) else {
            return;
        };
        for datagram in busy.encode_datagrams() {
            if let Err(error) = self.socket.try_send(&datagram, peer) {
                debug!(%peer, %error, "a busy answer was not sent");
                return;
            }
        }
    }

    /// Sends the kept answer to `request` from `peer`, when there is one; else the
    /// ticket to keep its answer with, when it may be kept.
    fn answered_from_cache(
        &mut self,
        peer: SocketAddr,
        request: &[u8],
    ) -> Result<(), Option<Ticket>> {
        let Some(cache) = &self.cache else {
            return Err(None);
        };
        let started = Instant::now();
        cache.answer(request, &mut self.copy)?;
        // Counted before it is sent, as the normal path's answers are: whoever has
        // the answer sees it counted.
        let metrics = self.responder.metrics();
        metrics.answer_cache_hit();
        let (op, code) = (OpCode::Resolution.label(), ResponseCode::Success.to_u32());
        metrics.record(Protocol::Handle, op, code, started.elapsed());
        match self.socket.try_send(&self.copy, peer) {
            Ok(()) => {}
            // The socket's buffer is full: the send waits on a task of its own, holding
            // a resolution's place as any answer does, so these tasks stay bounded;
            // with no place left the answer is dropped (the client asks again).
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                match Arc::clone(&self.in_flight).try_acquire_owned() {
                    Ok(permit) => {
                        let (socket, datagram) = (self.socket.clone(), self.copy.clone());
                        tokio::spawn(async move {
                            socket.send(peer, vec![datagram]).await;
                            drop(permit);
                        });
                    }
                    Err(_) => {
                        debug!(%peer, "dropped a kept answer: the socket and every place are full")
                    }
                }
            }
            Err(error) => debug!(%peer, %error, "sending a datagram failed"),
        }
        Ok(())
    }
}

/// Where an answer may be kept, and the ticket its request was looked up with.
struct Keep {
    cache: Arc<AnswerCache>,
    ticket: Ticket,
}

impl Keep {
    /// Keeps `datagrams`, the answer to `request`, when it is one datagram of a
    /// success (`kept`: RC 1 read from this node's store at once).
    fn keep(self, request: &[u8], kept: Keepable, datagrams: &[Vec<u8>], metrics: &Metrics) {
        if let ([datagram], Keepable::Yes) = (datagrams, kept)
            && self.cache.insert(self.ticket, request, datagram)
        {
            metrics.answer_cache_inserted();
        }
    }
}

/// Whether an answer may be kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keepable {
    /// A success read from this node's store at once.
    Yes,
    No,
}

impl Keepable {
    fn of(reply: &Reply, answered: Answered) -> Keepable {
        match reply {
            Reply::One(answer)
                if answered == Answered::FromStore
                    && answer.header.response_code == ResponseCode::Success =>
            {
                Keepable::Yes
            }
            _ => Keepable::No,
        }
    }
}

/// Answers `request` from `peer` and sends the answer, holding its room in flight
/// meanwhile, and keeps it where `keep` says when it may be kept.
async fn answer(
    socket: ServerSocket,
    responder: Responder,
    limit: usize,
    peer: SocketAddr,
    request: Vec<u8>,
    (permit, keep, share): (OwnedSemaphorePermit, Option<Keep>, Option<Share>),
) {
    let caller = Caller::anonymous(peer.ip());
    let (reply, answered) = responder.respond_noting(caller, &request).await;
    let keepable = Keepable::of(&reply, answered);
    let datagrams = match datagrams_within(reply, limit).await {
        Some(datagrams) => {
            if let Some(keep) = keep {
                keep.keep(&request, keepable, &datagrams, responder.metrics());
            }
            datagrams
        }
        None => {
            debug!(%peer, limit, "answer too large for UDP; telling the client to use TCP");
            let refusal = responder.too_large(&request, limit).await;
            datagrams_within(refusal, usize::MAX)
                .await
                .unwrap_or_default()
        }
    };
    socket.send(peer, datagrams).await;
    drop((permit, share));
}

/// Polls `future` once; whether it finished. One that did not is polled again, with
/// a real waker, by the task it is then given to.
fn ready_at_once(future: &mut Pin<Box<impl Future<Output = ()>>>) -> bool {
    let mut context = Context::from_waker(Waker::noop());
    future.as_mut().poll(&mut context).is_ready()
}

/// Whether the complete message `request` asks for a resolution or site information
/// in the clear: what the main room is kept for.
fn is_resolution(request: &[u8]) -> bool {
    let sealed =
        Envelope::peek(request).map_or(true, |envelope| envelope.flags.contains(MessageFlags::EC));
    let opcode = request
        .get(ENVELOPE_LEN..ENVELOPE_LEN + 4)
        .and_then(|bytes| bytes.try_into().ok())
        .map(|bytes| OpCode::from_u32(u32::from_be_bytes(bytes)));
    !sealed && matches!(opcode, Some(OpCode::Resolution | OpCode::GetSiteInfo))
}

/// The datagrams of `reply`, every message of it in order, or `None` when they would
/// take more than `limit` octets (a listing's pages are not read past the limit).
async fn datagrams_within(reply: Reply, limit: usize) -> Option<Vec<Vec<u8>>> {
    let mut datagrams = Vec::new();
    let mut octets = 0usize;
    let mut add = |more: Vec<Vec<u8>>| {
        octets = more
            .iter()
            .map(Vec::len)
            .fold(octets, usize::saturating_add);
        if datagrams.is_empty() {
            datagrams = more;
        } else {
            datagrams.extend(more);
        }
        octets <= limit
    };
    let within = match reply {
        Reply::One(message) => add(message.encode_datagrams()),
        Reply::Sealed(sealed) => add(sealed.encode_datagrams()),
        Reply::List(mut pages) => loop {
            let Some(message) = pages.next_page().await else {
                break true;
            };
            if !add(message.encode_datagrams()) {
                break false;
            }
        },
        Reply::Nothing => true,
    };
    within.then_some(datagrams)
}

/// Requests whose datagrams have not all arrived.
#[derive(Default)]
struct Partial {
    requests: HashMap<(SocketAddr, u32), (Reassembler, Instant)>,
    /// Octets held by every reassembler.
    bytes: usize,
    /// Requests being reassembled per source address.
    sources: HashMap<IpAddr, usize>,
}

impl Partial {
    /// Takes one datagram; returns a whole request once it is complete (the datagram
    /// itself, not copied, when it is one). A datagram too short for an envelope is
    /// dropped; one whose envelope says the message fits in it is a whole request by
    /// itself (and is answered even when malformed). A datagram that would start a
    /// request beyond the limits, or hold octets beyond them, is dropped.
    fn take<'d>(&mut self, peer: SocketAddr, datagram: &'d [u8]) -> Option<Cow<'d, [u8]>> {
        let envelope = Envelope::peek(datagram).ok()?;
        let whole = ENVELOPE_LEN + envelope.message_length as usize;
        if datagram.len() >= whole || datagram.len() > MAX_DATAGRAM_LEN {
            return Some(Cow::Borrowed(datagram));
        }
        let key = (peer, envelope.request_id);
        if !self.admits(&key, datagram.len()) {
            self.expire();
            if !self.admits(&key, datagram.len()) {
                return None;
            }
        }
        if !self.requests.contains_key(&key) {
            *self.sources.entry(peer.ip()).or_insert(0) += 1;
        }
        let (reassembler, _) = self
            .requests
            .entry(key)
            .or_insert_with(|| (Reassembler::new(), Instant::now()));
        let before = reassembler.held();
        let pushed = reassembler.push(datagram);
        let after = reassembler.held();
        self.bytes = self.bytes + after - before;
        match pushed {
            Ok(Some(message)) => {
                self.remove(&key);
                Some(Cow::Owned(message))
            }
            Ok(None) => None,
            Err(error) => {
                debug!(%peer, %error, "dropping a bad datagram");
                None
            }
        }
    }

    /// Whether a datagram of `len` octets for `key` fits the limits.
    fn admits(&self, key: &(SocketAddr, u32), len: usize) -> bool {
        let started = self.requests.contains_key(key);
        let from_source = self.sources.get(&key.0.ip()).copied().unwrap_or(0);
        self.bytes + len <= MAX_PARTIAL_BYTES
            && (started
                || (self.requests.len() < MAX_PARTIAL_REQUESTS
                    && from_source < MAX_PARTIAL_PER_SOURCE))
    }

    fn remove(&mut self, key: &(SocketAddr, u32)) {
        let Some((reassembler, _)) = self.requests.remove(key) else {
            return;
        };
        self.bytes -= reassembler.held();
        let source = key.0.ip();
        if let Some(count) = self.sources.get_mut(&source) {
            *count -= 1;
            if *count == 0 {
                self.sources.remove(&source);
            }
        }
    }

    fn expire(&mut self) {
        let now = Instant::now();
        let expired: Vec<_> = self
            .requests
            .iter()
            .filter(|(_, (_, started))| now.duration_since(*started) >= REASSEMBLY_TIMEOUT)
            .map(|(key, _)| *key)
            .collect();
        for key in expired {
            self.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{ProtocolVersion, split_datagrams};

    /// The datagrams of a request of `len` octets with `request_id`.
    fn pieces(request_id: u32, len: u32) -> Vec<Vec<u8>> {
        let mut envelope = Envelope::new(ProtocolVersion::new(2, 10), request_id);
        envelope.message_length = len;
        split_datagrams(&envelope, &vec![7; len as usize])
    }

    #[test]
    fn partial_requests_are_bounded_per_source_and_in_octets() {
        let mut partial = Partial::default();
        let one: SocketAddr = "192.0.2.1:1000".parse().unwrap();
        for id in 0..100 {
            assert!(partial.take(one, &pieces(id, 10_000)[0]).is_none());
        }
        assert_eq!(partial.requests.len(), MAX_PARTIAL_PER_SOURCE);

        // Every piece but the last of 100 requests of 200,000 octets from forged
        // sources: 20 MB offered.
        for n in 0..100u8 {
            let forged = SocketAddr::from(([10, 0, 0, n], 2641));
            let all = pieces(n.into(), 200_000);
            for piece in &all[..all.len() - 1] {
                assert!(partial.take(forged, piece).is_none());
            }
        }
        assert!(partial.bytes <= MAX_PARTIAL_BYTES, "{}", partial.bytes);
        assert!(partial.requests.len() <= MAX_PARTIAL_REQUESTS);
        let held: usize = partial.requests.values().map(|(r, _)| r.held()).sum();
        assert_eq!(held, partial.bytes);
    }

    #[test]
    fn a_whole_request_gives_back_its_octets_and_its_source_slot() {
        let mut partial = Partial::default();
        let peer: SocketAddr = "192.0.2.1:1000".parse().unwrap();
        let mut envelope = Envelope::new(ProtocolVersion::new(2, 10), 9);
        envelope.message_length = 1000;
        let pieces = split_datagrams(&envelope, &[1; 1000]);
        let mut whole = None;
        for piece in &pieces {
            whole = partial.take(peer, piece);
        }
        assert_eq!(
            whole.map(|message| message.len()),
            Some(ENVELOPE_LEN + 1000)
        );
        assert_eq!((partial.bytes, partial.sources.len()), (0, 0));
    }
}
