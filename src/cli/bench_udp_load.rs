//! `hdl bench resolve` over UDP: the load, on a plain OS thread, that offers a server
//! more than one core of it can answer and times each request from when it was due.
//!
//! Owns the pacing of the sends ([`Pacing`]), the requests awaiting an answer
//! ([`InFlight`]), the sorting of what comes back ([`Reply`]) and the UDP figures.
//! Sends the client's own encoding ([`ResolutionDatagram`]: each name encoded once, up
//! to [`PRE_ENCODED`] names, its RequestId set per send) and reads answers with
//! [`Header::peek`]; uses no async runtime and touches nothing of the server.
//!
//! One thread does it all on one socket connected to the server: it sends what is due,
//! takes what has arrived (at most [`BATCH`] datagrams, without blocking, before it
//! looks at the clock again), gives up requests unanswered [`ANSWER_DEADLINE`] after
//! they were due, and yields its core when there was nothing to do. A receiving thread
//! of its own would cost a wake-up per answer on the one core the load has.
//!
//! With a rate the load is an open loop: request n is due `n / rate` seconds after the
//! start, read off the clock (a timer would round it to its tick and send in bursts);
//! its latency counts from then, so a client or server that falls behind shows in the
//! latencies, and a request sent over [`LATE`] after its turn is counted late. Without
//! one, `--concurrency` requests are kept outstanding: another leaves as each is
//! answered or given up, so the load follows the server.
//!
//! RequestIds are consecutive, so each request in flight has its slot in a ring of
//! [`RING`]. An answer is sorted by its header: a response with RC 1 answers a hit, RC
//! 100 a miss, RC 3 says the server is too busy, any other code (or a hit answered 100,
//! a miss answered 1) is wrong; a request coming back (RC 0, as an echo server sends
//! it) is echoed, timed like an answer. Only a first datagram (sequence number 0) is
//! read: an answer of several counts by its first. An answer to a request given up, or
//! a second one, is dropped. Every request sent ends answered or unanswered.
//!
//! When the server's port refuses (ICMP port unreachable: it closed), sending stops and
//! the requests in flight are waited for; [`super::bench_close`] then tells those it
//! never answered from those sent after it stopped taking them.

use std::io::ErrorKind;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use crate::client::ResolutionDatagram;
use crate::clock::unix_now;
use crate::codec::{Envelope, Header, MAX_DATAGRAM_LEN, ResponseCode};
use crate::values::ValueSelection;
use anyhow::Context;
use hdrhistogram::Histogram;
use rustix::net::RecvFlags;

use super::bench::{Load, Names, Unit, histogram, line, print_close, print_cpu};
use super::bench_close::{Answering, verdict};
use super::bench_cpu;

/// How long after it was due a request is given up as unanswered.
const ANSWER_DEADLINE: Duration = Duration::from_secs(1);

/// A request of an open loop sent more than this after its turn is late.
const LATE: Duration = Duration::from_millis(1);

/// Requests in flight at most: a second's worth at 262,144 a second. Sending one
/// more gives up the oldest.
const RING: usize = 1 << 18;

/// Datagrams sent, or taken, in a row before the clock is read again.
const BATCH: usize = 64;

/// Names encoded ahead, of hits and of misses each (about 80 octets each); later
/// ones are encoded as they are sent.
const PRE_ENCODED: u32 = 1 << 18;

/// The socket's receive buffer: room for the answers that arrive while the thread
/// sends.
const RECEIVE_BUFFER: usize = 4 << 20;

/// The largest RequestId: ids are positive 31-bit values, as J9 draws them.
const MAX_REQUEST_ID: u64 = 0x7fff_ffff;

/// Offers `load` over UDP to `server`, asking for `hits` (which must exist) and
/// `misses` (which must not), and prints the figures.
pub(super) fn offer(
    server: SocketAddr,
    hits: &Names,
    misses: &Names,
    load: &Load,
) -> anyhow::Result<()> {
    let socket = connect(server)?;
    let mut run = Run {
        socket,
        hits: Requests::new(hits)?,
        misses: Requests::new(misses)?,
        miss_percent: load.miss_percent,
        mode: match load.rate {
            Some(rate) => Mode::Open(Pacing::new(rate, Instant::now())),
            None => Mode::Closed(load.concurrency as usize),
        },
        in_flight: InFlight::new(),
        figures: Figures::new()?,
    };
    let cpu_before = load.server_pid.map(bench_cpu::cpu_time).transpose()?;
    let timing = run.run(load.duration)?;
    let cpu = match (load.server_pid, cpu_before) {
        (Some(pid), Some(before)) => Some(bench_cpu::cpu_time(pid)?.saturating_sub(before)),
        _ => None,
    };
    run.figures
        .report(&run.mode, &timing, hits.count(), load, cpu)
}

/// A socket connected to `server` (so an ICMP refusal reaches it), from any port.
fn connect(server: SocketAddr) -> anyhow::Result<UdpSocket> {
    let any: SocketAddr = match server {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let socket = UdpSocket::bind(any).context("cannot open a UDP socket")?;
    socket
        .connect(server)
        .with_context(|| format!("cannot send to {server}"))?;
    // The kernel caps the size at net.core.rmem_max; a smaller buffer only drops more.
    rustix::net::sockopt::set_socket_recv_buffer_size(&socket, RECEIVE_BUFFER)
        .context("cannot size the UDP receive buffer")?;
    Ok(socket)
}

/// Whether a request asks for a handle that exists or one that does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Asked {
    Hit,
    Miss,
}

/// When each request of an open loop is due: the n-th `n / rate` seconds after the
/// start.
#[derive(Debug, Clone, Copy)]
struct Pacing {
    start: Instant,
    rate: u32,
}

impl Pacing {
    fn new(rate: u32, start: Instant) -> Pacing {
        Pacing { start, rate }
    }

    /// The turn of request `n` (counted from 0).
    fn turn(&self, n: u64) -> Instant {
        let nanos = u128::from(n) * 1_000_000_000 / u128::from(self.rate.max(1));
        self.start + Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }
}

/// Open loop at a rate, or closed with this many requests outstanding.
#[derive(Debug, Clone, Copy)]
enum Mode {
    Open(Pacing),
    Closed(usize),
}

/// A request sent and not yet answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pending {
    request_id: u32,
    asked: Asked,
    /// When it was due: its turn, or when it was sent in a closed loop.
    due: Instant,
}

/// The requests in flight, each in the slot of its RequestId in a ring: RequestIds
/// are handed out in order, so the slot of sequence number `s` is `s mod RING` and
/// holds either that request or nothing (the ring never holds more than [`RING`]).
#[derive(Debug)]
struct InFlight {
    slots: Vec<Option<Pending>>,
    /// The sequence number of the next request.
    next: u64,
    /// No request in flight has a lower sequence number.
    oldest: u64,
    /// Requests in flight.
    count: usize,
}

impl InFlight {
    fn new() -> InFlight {
        InFlight {
            slots: vec![None; RING],
            next: 1,
            oldest: 1,
            count: 0,
        }
    }

    /// The RequestId of sequence number `n`: `n` mod 2^31.
    fn request_id(n: u64) -> u32 {
        (n & MAX_REQUEST_ID) as u32
    }

    /// The slot of RequestId `request_id`, and so of its sequence number (2^31 is a
    /// multiple of [`RING`]).
    fn slot(request_id: u32) -> usize {
        request_id as usize % RING
    }

    /// Records a request asking `asked`, due at `due`: its RequestId, and the oldest
    /// request, given up, when the ring was full.
    fn send(&mut self, asked: Asked, due: Instant) -> (u32, Option<Pending>) {
        if InFlight::request_id(self.next) == 0 {
            self.next += 1; // RequestId 0 is never sent
        }
        let overtaken = if self.next - self.oldest >= RING as u64 {
            self.give_up_oldest()
        } else {
            None
        };
        let request_id = InFlight::request_id(self.next);
        self.slots[InFlight::slot(request_id)] = Some(Pending {
            request_id,
            asked,
            due,
        });
        self.next += 1;
        self.count += 1;
        (request_id, overtaken)
    }

    /// The request `request_id` answers, if it is in flight (then no longer).
    fn answered(&mut self, request_id: u32) -> Option<Pending> {
        let slot = &mut self.slots[InFlight::slot(request_id)];
        let pending = slot.filter(|pending| pending.request_id == request_id)?;
        *slot = None;
        self.count -= 1;
        Some(pending)
    }

    /// The oldest request in flight, given up when it was due before `before`.
    fn expired(&mut self, before: Instant) -> Option<Pending> {
        self.skip_answered();
        match *self.oldest_slot() {
            Some(pending) if pending.due < before => self.give_up_oldest(),
            _ => None,
        }
    }

    /// Gives up the oldest request in flight.
    fn give_up_oldest(&mut self) -> Option<Pending> {
        self.skip_answered();
        let pending = self.oldest_slot().take()?;
        self.oldest += 1;
        self.count -= 1;
        Some(pending)
    }

    /// Moves `oldest` past the slots already answered.
    fn skip_answered(&mut self) {
        while self.oldest < self.next && self.oldest_slot().is_none() {
            self.oldest += 1;
        }
    }

    /// The slot of sequence number `oldest`.
    fn oldest_slot(&mut self) -> &mut Option<Pending> {
        &mut self.slots[InFlight::slot(InFlight::request_id(self.oldest))]
    }

    fn is_empty(&self) -> bool {
        self.count == 0
    }
}

/// What a datagram that came back says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reply {
    /// RC 1.
    Found,
    /// RC 100 (HANDLE_NOT_FOUND).
    NotFound,
    /// RC 3 (SERVER_TOO_BUSY).
    Busy,
    /// Any other response code, or a header that does not decode.
    Other,
    /// A request: what was sent, sent back.
    Echoed,
}

/// The RequestId of `datagram` and what it says; `None` for a datagram with no header
/// (not the first of its message, or too short for an envelope).
fn sort(datagram: &[u8]) -> Option<(u32, Reply)> {
    let envelope = Envelope::peek(datagram).ok()?;
    if envelope.sequence_number != 0 {
        return None;
    }
    let reply = match Header::peek(datagram) {
        Ok((_, header)) if header.is_request() => Reply::Echoed,
        Ok((_, header)) => match header.response_code {
            ResponseCode::Success => Reply::Found,
            ResponseCode::HandleNotFound => Reply::NotFound,
            ResponseCode::ServerTooBusy => Reply::Busy,
            _ => Reply::Other,
        },
        Err(_) => Reply::Other,
    };
    Some((envelope.request_id, reply))
}

/// The encoded requests for some names: the first [`PRE_ENCODED`] encoded once,
/// the rest when sent.
#[derive(Debug)]
struct Requests {
    names: Names,
    encoded: Vec<ResolutionDatagram>,
    /// The request for a name past the encoded ones, encoded last.
    last: Option<ResolutionDatagram>,
    /// When the requests were encoded (their expiry counts from then).
    now: u32,
}

impl Requests {
    fn new(names: &Names) -> anyhow::Result<Requests> {
        let now = unix_now();
        let encoded = (0..names.count().min(PRE_ENCODED))
            .map(|n| encode(names, n, now))
            .collect::<anyhow::Result<_>>()?;
        Ok(Requests {
            names: names.clone(),
            encoded,
            last: None,
            now,
        })
    }

    /// The request for the next name to ask for; `None` once every one was asked
    /// (`--each-once`).
    fn next(&mut self) -> anyhow::Result<Option<&mut ResolutionDatagram>> {
        let Some(n) = self.names.pick_index() else {
            return Ok(None);
        };
        match usize::try_from(n).ok().filter(|&n| n < self.encoded.len()) {
            Some(n) => Ok(self.encoded.get_mut(n)),
            None => Ok(Some(self.last.insert(encode(&self.names, n, self.now)?))),
        }
    }
}

/// The request for the `n`-th of `names`.
fn encode(names: &Names, n: u32, now: u32) -> anyhow::Result<ResolutionDatagram> {
    let handle = names.nth(n)?;
    ResolutionDatagram::new(&handle, &ValueSelection::all(), now).with_context(|| {
        format!("the request for {handle} takes more than one datagram: use a shorter --prefix")
    })
}

/// One load: the socket, what to send, and what came of it.
#[derive(Debug)]
struct Run {
    socket: UdpSocket,
    hits: Requests,
    misses: Requests,
    miss_percent: u8,
    mode: Mode,
    in_flight: InFlight,
    figures: Figures,
}

/// When a run started and stopped sending.
#[derive(Debug, Clone, Copy)]
struct Timing {
    started: Instant,
    stopped: Instant,
}

/// Whether a step did something, or the thread may yield.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Progress {
    Busy,
    Idle,
}

/// Whether a request left, or sending is over (every name was asked for once, or the
/// server's port refused).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sent {
    One,
    Over,
}

impl Run {
    /// Sends for `duration` (or until every name was asked, or the server closed),
    /// then waits at most [`ANSWER_DEADLINE`] for the answers still due.
    fn run(&mut self, duration: Duration) -> anyhow::Result<Timing> {
        let started = match self.mode {
            Mode::Open(pacing) => pacing.start,
            Mode::Closed(_) => Instant::now(),
        };
        let until = started + duration;
        let mut stopped = None;
        loop {
            let now = Instant::now();
            let mut progress = Progress::Idle;
            if stopped.is_none() {
                match self.send_due(now, until)? {
                    Some(sent) => progress = sent,
                    None => stopped = Some(now),
                }
            }
            if self.receive()? == Progress::Busy {
                progress = Progress::Busy;
            }
            if let Some(stopped) = stopped
                && (self.in_flight.is_empty() || now >= stopped + ANSWER_DEADLINE)
            {
                self.give_up_all();
                return Ok(Timing { started, stopped });
            }
            self.give_up_expired(now);
            if progress == Progress::Idle {
                std::thread::yield_now();
            }
        }
    }

    /// Sends what is due at `now`, at most [`BATCH`]; `None` once sending is over:
    /// every turn before `until` was taken (open loop) or `until` has passed (closed),
    /// the names ran out or the server refused.
    fn send_due(&mut self, now: Instant, until: Instant) -> anyhow::Result<Option<Progress>> {
        let over = match self.mode {
            Mode::Open(pacing) => pacing.turn(self.figures.sent) >= until,
            Mode::Closed(_) => now >= until,
        };
        if over || self.figures.answering.refused() {
            return Ok(None);
        }
        let mut progress = Progress::Idle;
        for _ in 0..BATCH {
            let due = match self.mode {
                Mode::Open(pacing) => match pacing.turn(self.figures.sent) {
                    turn if turn <= now && turn < until => turn,
                    _ => break,
                },
                Mode::Closed(outstanding) if self.in_flight.count < outstanding => now,
                Mode::Closed(_) => break,
            };
            if self.send_one(due)? == Sent::Over {
                return Ok(None);
            }
            progress = Progress::Busy;
        }
        Ok(Some(progress))
    }

    /// Sends one request, due at `due`.
    fn send_one(&mut self, due: Instant) -> anyhow::Result<Sent> {
        let asked = if rand::random_range(0..100u8) < self.miss_percent {
            Asked::Miss
        } else {
            Asked::Hit
        };
        let requests = match asked {
            Asked::Hit => &mut self.hits,
            Asked::Miss => &mut self.misses,
        };
        let Some(datagram) = requests.next()? else {
            return Ok(Sent::Over);
        };
        let (request_id, overtaken) = self.in_flight.send(asked, due);
        if let Some(overtaken) = overtaken {
            self.figures.unanswered(overtaken);
        }
        self.figures.sent += 1;
        let sent = self.socket.send(datagram.with_request_id(request_id));
        if Instant::now().duration_since(due) > LATE && matches!(self.mode, Mode::Open(_)) {
            self.figures.late += 1;
        }
        match sent {
            Ok(_) => Ok(Sent::One),
            Err(error) if error.kind() == ErrorKind::ConnectionRefused => {
                self.figures.answering.refusal();
                Ok(Sent::Over)
            }
            Err(error) => Err(error).context("cannot send a request"),
        }
    }

    /// Takes the datagrams that have arrived, at most [`BATCH`].
    fn receive(&mut self) -> anyhow::Result<Progress> {
        let mut buffer = [0u8; MAX_DATAGRAM_LEN];
        for taken in 0..BATCH {
            let len = match rustix::net::recv(&self.socket, &mut buffer, RecvFlags::DONTWAIT) {
                Ok((_, len)) => len,
                Err(rustix::io::Errno::AGAIN) if taken == 0 => return Ok(Progress::Idle),
                Err(rustix::io::Errno::AGAIN) => break,
                Err(rustix::io::Errno::CONNREFUSED) => {
                    self.figures.answering.refusal();
                    continue;
                }
                Err(rustix::io::Errno::INTR) => continue,
                Err(error) => {
                    return Err(std::io::Error::from(error)).context("cannot receive answers");
                }
            };
            let now = Instant::now();
            let Some((request_id, reply)) = buffer.get(..len).and_then(sort) else {
                continue;
            };
            if let Some(pending) = self.in_flight.answered(request_id) {
                self.figures.answered(pending, reply, now);
            }
        }
        Ok(Progress::Busy)
    }

    /// Gives up the requests due [`ANSWER_DEADLINE`] before `now`.
    fn give_up_expired(&mut self, now: Instant) {
        let Some(before) = now.checked_sub(ANSWER_DEADLINE) else {
            return;
        };
        while let Some(pending) = self.in_flight.expired(before) {
            self.figures.unanswered(pending);
        }
    }

    /// Gives up every request still in flight.
    fn give_up_all(&mut self) {
        while let Some(pending) = self.in_flight.give_up_oldest() {
            self.figures.unanswered(pending);
        }
    }
}

/// What came of the requests: latencies by outcome (microseconds from when each was
/// due), the counts of the rest, and the answering for [`verdict`].
#[derive(Debug)]
struct Figures {
    hits: Histogram<u64>,
    misses: Histogram<u64>,
    echoed: Histogram<u64>,
    busy: u64,
    /// Answers with another code than the one expected.
    wrong: u64,
    unanswered: u64,
    /// Requests of an open loop sent over [`LATE`] after their turn.
    late: u64,
    sent: u64,
    answering: Answering,
}

impl Figures {
    fn new() -> anyhow::Result<Figures> {
        Ok(Figures {
            hits: histogram()?,
            misses: histogram()?,
            echoed: histogram()?,
            busy: 0,
            wrong: 0,
            unanswered: 0,
            late: 0,
            sent: 0,
            // As many unanswered requests in a row as can be in flight.
            answering: Answering::with_room(RING),
        })
    }

    /// `pending` was answered `reply` at `now`.
    fn answered(&mut self, pending: Pending, reply: Reply, now: Instant) {
        self.answering.answered(pending.due);
        let micros = u64::try_from(now.duration_since(pending.due).as_micros()).unwrap_or(u64::MAX);
        match (pending.asked, reply) {
            (Asked::Hit, Reply::Found) => self.hits.saturating_record(micros),
            (Asked::Miss, Reply::NotFound) => self.misses.saturating_record(micros),
            (_, Reply::Echoed) => self.echoed.saturating_record(micros),
            (_, Reply::Busy) => self.busy += 1,
            _ => self.wrong += 1,
        }
    }

    /// `pending` got no answer in time.
    fn unanswered(&mut self, pending: Pending) {
        self.unanswered += 1;
        self.answering.unanswered(pending.due, false);
    }

    /// The answers that were no error: hits, misses and echoes.
    fn good(&self) -> u64 {
        self.hits.len() + self.misses.len() + self.echoed.len()
    }

    fn answers(&self) -> u64 {
        self.good() + self.busy + self.wrong
    }

    /// The 99.9th percentile latency of the answers.
    fn slowest(&self) -> Duration {
        let micros = [&self.hits, &self.misses, &self.echoed]
            .iter()
            .map(|histogram| histogram.value_at_quantile(0.999))
            .max()
            .unwrap_or(0);
        Duration::from_micros(micros)
    }

    /// Prints the figures of a run of `mode` over `handles` handles.
    fn report(
        &self,
        mode: &Mode,
        timing: &Timing,
        handles: u32,
        load: &Load,
        cpu: Option<Duration>,
    ) -> anyhow::Result<()> {
        let verdict = verdict(std::slice::from_ref(&self.answering), self.slowest());
        let stopped = verdict
            .closed
            .and_then(|closed| closed.last_answered)
            .unwrap_or(timing.stopped);
        let seconds = stopped
            .saturating_duration_since(timing.started)
            .as_secs_f64()
            .max(0.001);
        let offered = match mode {
            Mode::Open(pacing) => format!("one sender, {} req/s offered", pacing.rate),
            Mode::Closed(outstanding) => format!("{outstanding} outstanding, closed loop"),
        };
        println!(
            "resolve over UDP: {offered}, {seconds:.1} s, {handles} handles, {}% misses",
            load.miss_percent
        );
        let unit = Unit("requests", "req/s");
        for (name, histogram) in [("hits", &self.hits), ("misses", &self.misses)] {
            println!("{name:<7}{}", line(histogram, seconds, unit));
        }
        if !self.echoed.is_empty() {
            println!("echoed {}", line(&self.echoed, seconds, unit));
        }
        let errors = self.wrong + verdict.errors;
        println!(
            "total  {:>9} requests {:>10.0} req/s, {errors} errors",
            self.good(),
            self.good() as f64 / seconds,
        );
        println!(
            "sent   {:>9} requests: {} answered ({} \"server too busy\", {} wrong), {} unanswered within {} ms",
            self.sent,
            self.answers(),
            self.busy,
            self.wrong,
            self.unanswered,
            ANSWER_DEADLINE.as_millis()
        );
        if let Mode::Open(_) = mode {
            println!(
                "late   {:>9} requests sent over 1 ms after their turn",
                self.late
            );
        }
        if let Some(cpu) = cpu {
            print_cpu(cpu, self.good());
        }
        print_close(&verdict, errors, seconds);
        if self.good() == 0 {
            anyhow::bail!("no request was answered as asked ({errors} errors)");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{
        Body, ErrorResponse, HandleValues, Message, OpFlags, ProtocolVersion, Response,
    };
    use crate::names::Handle;

    #[test]
    fn turns_are_spread_evenly_from_the_start() {
        let start = Instant::now();
        let pacing = Pacing::new(50_000, start);
        let turns: Vec<Duration> = (0..4).map(|n| pacing.turn(n) - start).collect();
        let micros = Duration::from_micros;
        assert_eq!(turns, [micros(0), micros(20), micros(40), micros(60)]);
        // No drift: the millionth turn is exactly 20 s in.
        assert_eq!(pacing.turn(1_000_000) - start, Duration::from_secs(20));
        let thirds = Pacing::new(3, start);
        assert_eq!(thirds.turn(1) - start, Duration::from_nanos(333_333_333));
    }

    #[test]
    fn requests_sent_over_a_millisecond_after_their_turn_are_late() {
        let names = Names::new("T/bench/".into(), 10).unwrap();
        let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
        let started = Instant::now() - Duration::from_millis(50);
        let mut run = Run {
            socket: connect(sink.local_addr().unwrap()).unwrap(),
            hits: Requests::new(&names).unwrap(),
            misses: Requests::new(&names).unwrap(),
            miss_percent: 0,
            // 1000 a second from 50 ms ago: 50 turns passed, all but the last late.
            mode: Mode::Open(Pacing::new(1000, started)),
            in_flight: InFlight::new(),
            figures: Figures::new().unwrap(),
        };
        let now = Instant::now();
        let until = now + Duration::from_secs(1);
        assert_eq!(run.send_due(now, until).unwrap(), Some(Progress::Busy));
        let Figures { sent, late, .. } = run.figures;
        // Turns 0 to 50 ms had come by `now`; those up to 48 ms were over 1 ms ago.
        assert!(
            sent >= 51 && (49..=sent).contains(&late),
            "{sent} sent, {late} late"
        );
        assert_eq!(run.in_flight.count as u64, sent);
        assert_eq!(run.send_due(now, until).unwrap(), Some(Progress::Idle));
        assert_eq!(run.figures.sent, sent, "nothing more was due by `now`");
    }

    /// What a server (or an echo) sends back to the request `request_id`: `code`, or
    /// the request itself when `None`.
    fn reply(request_id: u32, code: Option<ResponseCode>) -> Vec<u8> {
        let handle = Handle::parse("T/1").unwrap();
        let mut request = ResolutionDatagram::new(&handle, &ValueSelection::all(), 0).unwrap();
        let sent = request.with_request_id(request_id).to_vec();
        let Some(code) = code else {
            return sent;
        };
        let request = Message::decode(&sent).unwrap();
        let response = match code {
            ResponseCode::Success => Response::Resolution(HandleValues {
                handle: b"T/1".to_vec(),
                values: vec![],
            }),
            _ => Response::Error(ErrorResponse {
                message: String::new(),
                indexes: None,
            }),
        };
        let header = Header {
            response_code: code,
            flags: OpFlags::J9_DEFAULT,
            ..request.header
        };
        let envelope = Envelope::new(ProtocolVersion::MAX_SUPPORTED, request_id);
        let body = Body::Response {
            digest: None,
            response,
        };
        Message::new(envelope, header, body).encode()
    }

    #[test]
    fn datagrams_are_sorted_by_their_header() {
        let sorted = |code| sort(&reply(7, code));
        assert_eq!(sorted(Some(ResponseCode::Success)), Some((7, Reply::Found)));
        assert_eq!(
            sorted(Some(ResponseCode::HandleNotFound)),
            Some((7, Reply::NotFound))
        );
        assert_eq!(
            sorted(Some(ResponseCode::ServerTooBusy)),
            Some((7, Reply::Busy))
        );
        assert_eq!(sorted(Some(ResponseCode::Error)), Some((7, Reply::Other)));
        assert_eq!(sorted(None), Some((7, Reply::Echoed)));
        let mut unknown_code = reply(7, Some(ResponseCode::Success));
        unknown_code[24..28].copy_from_slice(&900u32.to_be_bytes());
        assert_eq!(sort(&unknown_code), Some((7, Reply::Other)));
        let mut later_piece = reply(7, Some(ResponseCode::Success));
        later_piece[12..16].copy_from_slice(&1u32.to_be_bytes());
        assert_eq!(sort(&later_piece), None);
        assert_eq!(sort(b"short"), None);
    }

    #[test]
    fn answers_are_matched_by_request_id_and_counted_by_what_was_asked() {
        let mut in_flight = InFlight::new();
        let mut figures = Figures::new().unwrap();
        let due = Instant::now();
        let asked = [
            (Asked::Hit, Some(ResponseCode::Success)),
            (Asked::Miss, Some(ResponseCode::HandleNotFound)),
            (Asked::Hit, Some(ResponseCode::HandleNotFound)),
            (Asked::Miss, Some(ResponseCode::ServerTooBusy)),
            (Asked::Hit, None),
            (Asked::Hit, Some(ResponseCode::Success)),
        ];
        let mut datagrams = Vec::new();
        for (what, code) in asked {
            let (request_id, overtaken) = in_flight.send(what, due);
            assert_eq!(overtaken, None);
            figures.sent += 1;
            datagrams.push(reply(request_id, code));
        }
        let unanswered = datagrams.pop().unwrap();
        datagrams.push(datagrams[0].clone()); // a second answer to the first
        datagrams.push(reply(999, Some(ResponseCode::Success))); // never asked
        let now = due + Duration::from_micros(250);
        for datagram in &datagrams {
            let (request_id, reply) = sort(datagram).unwrap();
            if let Some(pending) = in_flight.answered(request_id) {
                figures.answered(pending, reply, now);
            }
        }
        assert_eq!(in_flight.expired(due), None, "not due before `due`");
        let given_up = in_flight.expired(now).unwrap();
        assert_eq!(
            sort(&unanswered).map(|(id, _)| id),
            Some(given_up.request_id)
        );
        figures.unanswered(given_up);
        assert!(in_flight.is_empty());
        assert_eq!(
            [
                figures.hits.len(),
                figures.misses.len(),
                figures.echoed.len()
            ],
            [1, 1, 1]
        );
        assert_eq!(figures.hits.value_at_quantile(0.5), 250);
        assert_eq!([figures.busy, figures.wrong, figures.unanswered], [1, 1, 1]);
        assert_eq!(figures.answers() + figures.unanswered, figures.sent);
    }

    #[test]
    fn a_full_ring_gives_up_its_oldest_request_and_ids_skip_zero() {
        let mut in_flight = InFlight::new();
        let due = Instant::now();
        let first = in_flight.send(Asked::Hit, due).0;
        assert_eq!(first, 1);
        for _ in 1..RING {
            assert_eq!(in_flight.send(Asked::Hit, due).1, None);
        }
        let (_, overtaken) = in_flight.send(Asked::Hit, due);
        assert_eq!(overtaken.map(|pending| pending.request_id), Some(first));
        assert_eq!(in_flight.count, RING);

        let mut wrapping = InFlight::new();
        wrapping.next = MAX_REQUEST_ID;
        wrapping.oldest = MAX_REQUEST_ID;
        let ids = [0; 3].map(|_| wrapping.send(Asked::Miss, due).0);
        assert_eq!(ids, [0x7fff_ffff, 1, 2]);
        for id in ids {
            assert!(wrapping.answered(id).is_some(), "{id}");
        }
        assert!(wrapping.is_empty());
    }
}
