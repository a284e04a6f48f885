//! Resolutions handed to reader threads while the store is read from the disk.
//!
//! The receiving loop answers a resolution itself ([`super::ready_at_once`]): the store
//! read is synchronous, and from memory it costs microseconds, less than any hand-off.
//! A store larger than memory turns some of those reads into disk reads of
//! milliseconds, and neither redb nor the kernel says beforehand which (redb cannot be
//! asked; a non-blocking read in a storage backend would latch its I/O failure and
//! poison the store). Answered in the loop, they would be read one at a time, and
//! every datagram behind them would wait, though the disk serves many reads at once
//! far better than one.
//!
//! So the loop times each answer it gives (two clock reads), and an answer slower than
//! the threshold (`[handle] udp_slow_answer_micros`) that the thread mostly spent
//! waiting, not preempted ([`mostly_waited`]: a loop preempted on a busy machine is as
//! slow, and would only pay the hand-off), says the loop was blocked. Which it was is
//! known only by reading the thread's run delay before and after the answer, too dear
//! for every answer: after a slow answer, the thread's next one is measured so
//! ([`AnswerClock`]), and decides. For
//! [`SLOW_WINDOW`] after the last slow answer, resolutions are handed to reader
//! threads of this module's own, at most `[handle] udp_disk_readers`, each reading the
//! store and sending its answer from there (the same future the loop would have polled, polled
//! once on the thread, and given to a task when it must wait, as the loop does), so
//! many disk reads are in flight and the loop keeps receiving. When every reader is
//! busy, the loop answers in place as before: nothing queues beyond the readers. A
//! reader's slow answer prolongs the window too, so it lasts as long as reads do reach
//! the disk. Outside the window the loop pays one atomic load, two clock reads and a
//! thread-local read an answer, and two reads of its `schedstat` around the answer after
//! a slow one.
//!
//! Owns the window and the reader threads; it never touches the socket, the request or
//! the room a resolution holds in flight (which the answer carries, so the drain
//! waits for handed-off answers as for any other).

use std::cell::Cell;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::runtime::Handle;
use tokio::sync::Semaphore;
use tracing::warn;

use super::ready_at_once;

/// How long after the last slow answer resolutions are still handed off.
pub(super) const SLOW_WINDOW: Duration = Duration::from_secs(1);

/// One resolution for a reader thread to answer.
type Job = Box<dyn FnOnce() + Send>;

/// Whether answers were recently slow, and the reader threads.
///
/// The threads are the module's own, started one at a time as the answers waiting for
/// one outnumber them and never more than the readers configured (tokio's blocking
/// pool would start a thread for every hand-off that finds none idle, up to 512). A
/// place ([`Semaphore`] permit) is taken before a resolution is queued and given back
/// once its thread has polled it, so the queue never holds more than the readers.
#[derive(Debug)]
pub(super) struct HandOff {
    /// One permit per reader place.
    places: Arc<Semaphore>,
    most: usize,
    pace: Arc<Pace>,
    jobs: Sender<Job>,
    queue: Arc<Mutex<Receiver<Job>>>,
    /// Threads started so far.
    threads: usize,
    runtime: Handle,
}

/// When answers were last slow, shared by the loop and the readers.
#[derive(Debug)]
struct Pace {
    /// An answer taking this long or longer is slow.
    threshold: Duration,
    /// The clock's origin for `slow_until`.
    epoch: Instant,
    /// Nanoseconds after `epoch` until which resolutions are handed off.
    slow_until: AtomicU64,
}

/// When an answer on this thread began, and the thread's run delay then, read only
/// when its last slow answer is not explained yet ([`UNEXPLAINED`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct AnswerClock {
    started: Instant,
    /// `None`: not read; `Some(None)`: `schedstat` cannot be read here.
    run_delay: Option<Option<u64>>,
}

impl AnswerClock {
    /// Starts timing an answer on this thread.
    pub(super) fn start() -> Self {
        AnswerClock {
            run_delay: UNEXPLAINED.get().then(run_delay_now),
            started: Instant::now(),
        }
    }

    /// When the answer began.
    pub(super) fn started(&self) -> Instant {
        self.started
    }
}

impl Pace {
    /// Notes an answer timed by `clock` that ended at `finished`. A slow one opens the
    /// window if its thread mostly waited during it, not preempted ([`mostly_waited`]);
    /// a slow one whose run delay was not read only has the thread's next answer
    /// measured. A zero threshold counts every answer.
    fn timed(&self, clock: AnswerClock, finished: Instant) {
        let took = finished.saturating_duration_since(clock.started);
        let waited = if took < self.threshold {
            false
        } else if self.threshold.is_zero() {
            true
        } else {
            match clock.run_delay {
                None => {
                    UNEXPLAINED.set(true);
                    return;
                }
                Some(before) => mostly_waited(before, took),
            }
        };
        UNEXPLAINED.set(false);
        if waited {
            let until = self.nanos(finished + SLOW_WINDOW);
            self.slow_until.fetch_max(until, Ordering::Relaxed);
        }
    }

    /// Whether answers were slow within [`SLOW_WINDOW`] before `now`.
    fn slow_at(&self, now: Instant) -> bool {
        self.nanos(now) < self.slow_until.load(Ordering::Relaxed)
    }

    fn nanos(&self, at: Instant) -> u64 {
        let since = at.saturating_duration_since(self.epoch).as_nanos();
        u64::try_from(since).unwrap_or(u64::MAX)
    }
}

impl HandOff {
    /// At most `readers` reader threads (none: never hand off), whose answers' tasks
    /// go to `runtime`; an answer of `threshold` or longer is slow.
    pub(super) fn new(readers: usize, threshold: Duration, runtime: Handle) -> Self {
        let (jobs, queue) = channel();
        HandOff {
            places: Arc::new(Semaphore::new(readers)),
            most: readers,
            pace: Arc::new(Pace {
                threshold,
                epoch: Instant::now(),
                slow_until: AtomicU64::new(0),
            }),
            jobs,
            queue: Arc::new(Mutex::new(queue)),
            threads: 0,
            runtime,
        }
    }

    /// Hands `answering`, a resolution arriving at `now`, to a reader thread, which
    /// polls it once (timing it) and gives it to a task if it must wait; only while
    /// answers were recently slow and a reader is free. Otherwise gives it back, to
    /// be answered in the loop.
    pub(super) fn hand<F>(&mut self, now: Instant, answering: Pin<Box<F>>) -> Option<Pin<Box<F>>>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        if !self.pace.slow_at(now) {
            return Some(answering);
        }
        let Ok(place) = Arc::clone(&self.places).try_acquire_owned() else {
            return Some(answering);
        };
        if !self.enough_threads() {
            return Some(answering);
        }
        let pace = Arc::clone(&self.pace);
        let mut answering = answering;
        let job: Job = Box::new(move || {
            let clock = AnswerClock::start();
            let finished = ready_at_once(&mut answering);
            pace.timed(clock, Instant::now());
            drop(place);
            if !finished {
                tokio::spawn(answering);
            }
        });
        // The threads hold the receiving end as long as this holds the sending one.
        let _ = self.jobs.send(job);
        None
    }

    /// Notes an answer the loop gave, timed by `clock`, that ended at `finished`.
    pub(super) fn timed(&self, clock: AnswerClock, finished: Instant) {
        self.pace.timed(clock, finished);
    }

    /// Starts a thread when the places taken (this one's included) outnumber them;
    /// whether there is one for the job (a thread that cannot be started is logged).
    fn enough_threads(&mut self) -> bool {
        let taken = self.most - self.places.available_permits();
        if self.threads >= taken {
            return true;
        }
        let queue = Arc::clone(&self.queue);
        let runtime = self.runtime.clone();
        let started = std::thread::Builder::new()
            .name("hdl-udp-reader".into())
            .spawn(move || read(&queue, &runtime));
        match started {
            Ok(_) => self.threads += 1,
            Err(error) => warn!(%error, "cannot start a UDP reader thread"),
        }
        self.threads > 0
    }
}

thread_local! {
    /// Whether this thread's last answer was slow and its run delay was not read
    /// around it: its next answer is measured, so that one slow answer's cause is
    /// known at the cost of two reads of `schedstat`, and only after a slow answer.
    static UNEXPLAINED: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread, which just took `took` over an answer and whose run delay
/// was `before` at its start, spent most of it waiting (on the disk, most likely)
/// rather than preempted, waiting for a core: a loop preempted on a busy machine is
/// slow too, and handing off would not help it. Its run delay (time runnable but not
/// running) over the answer under half of `took` means it waited for the rest. Where
/// `schedstat` cannot be read, every slow answer counts.
fn mostly_waited(before: Option<u64>, took: Duration) -> bool {
    match (before, run_delay_now()) {
        (Some(before), Some(now)) => Duration::from_nanos(now.saturating_sub(before)) < took / 2,
        _ => true,
    }
}

/// This thread's run delay so far, in nanoseconds, from `/proc/thread-self/schedstat`.
fn run_delay_now() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    run_delay(&text)
}

/// The run delay, in nanoseconds, of a `schedstat` line (CPU time, run delay, slices).
fn run_delay(schedstat: &str) -> Option<u64> {
    schedstat.split_whitespace().nth(1)?.parse().ok()
}

/// A reader thread: answers the jobs queued until the [`HandOff`] is dropped.
fn read(queue: &Mutex<Receiver<Job>>, runtime: &Handle) {
    // Answers that must wait are given to tasks, spawned from here.
    let _entered = runtime.enter();
    loop {
        let job = match queue.lock() {
            Ok(queue) => queue.recv(),
            Err(_) => return,
        };
        let Ok(job) = job else {
            return;
        };
        // An answer that panics (it must not) loses its answer, not the thread.
        let _ = catch_unwind(AssertUnwindSafe(job));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc::sync_channel;

    use super::*;

    const THRESHOLD: Duration = Duration::from_millis(1);

    fn hand_off(readers: usize, threshold: Duration) -> HandOff {
        HandOff::new(readers, threshold, Handle::current())
    }

    /// An answer that ends at once.
    fn done() -> Pin<Box<impl Future<Output = ()> + Send + 'static>> {
        Box::pin(async {})
    }

    /// A clock started at `at` whose run delay was read, as unreadable: a slow answer
    /// timed by it counts.
    fn measured(at: Instant) -> AnswerClock {
        AnswerClock {
            started: at,
            run_delay: Some(None),
        }
    }

    #[tokio::test]
    async fn a_slow_answer_not_measured_has_the_next_one_measured() {
        let hand_off = hand_off(4, THRESHOLD);
        let start = Instant::now();
        let unmeasured = AnswerClock {
            started: start,
            run_delay: None,
        };
        hand_off.timed(unmeasured, start + THRESHOLD);
        assert!(
            !hand_off.pace.slow_at(start + THRESHOLD),
            "cause unknown yet"
        );
        let clock = AnswerClock::start();
        assert!(clock.run_delay.is_some(), "the next answer is measured");
        // Slower by far than any run delay the thread gathers meanwhile.
        let end = clock.started + Duration::from_secs(3600);
        hand_off.timed(clock, end);
        assert!(hand_off.pace.slow_at(end), "it mostly waited");
        let next = AnswerClock::start();
        assert!(
            next.run_delay.is_none(),
            "explained: the next is not measured"
        );
    }

    #[tokio::test]
    async fn resolutions_are_handed_off_only_within_the_window_after_a_slow_answer() {
        let mut hand_off = hand_off(4, THRESHOLD);
        let start = Instant::now();
        assert!(
            hand_off.hand(start, done()).is_some(),
            "nothing was slow yet"
        );

        hand_off.timed(measured(start), start + THRESHOLD / 2);
        assert!(hand_off.hand(start + THRESHOLD, done()).is_some(), "fast");

        let slow_end = start + THRESHOLD;
        hand_off.timed(measured(start), slow_end);
        assert!(hand_off.hand(slow_end, done()).is_none());
        assert!(hand_off.hand(slow_end + SLOW_WINDOW / 2, done()).is_none());
        assert!(hand_off.hand(slow_end + SLOW_WINDOW, done()).is_some());

        // An earlier slow answer reported late does not shorten the window.
        let later = slow_end + SLOW_WINDOW / 2;
        hand_off.timed(measured(later), later + THRESHOLD);
        hand_off.timed(measured(start), slow_end);
        assert!(hand_off.hand(slow_end + SLOW_WINDOW, done()).is_none());
    }

    #[tokio::test]
    async fn the_readers_are_bounded_and_their_places_come_back() {
        let mut hand_off = hand_off(2, Duration::ZERO);
        let now = Instant::now();
        hand_off.timed(measured(now), now);
        // Two answers that each hold their reader until told to end.
        let (release, released) = sync_channel::<()>(0);
        let released = Arc::new(Mutex::new(released));
        let (polled, polls) = sync_channel::<()>(2);
        for _ in 0..2 {
            let (released, polled) = (Arc::clone(&released), polled.clone());
            let blocking = Box::pin(async move {
                let _ = polled.send(());
                let _ = released.lock().map(|released| released.recv());
            });
            assert!(hand_off.hand(now, blocking).is_none(), "a free reader");
        }
        for _ in 0..2 {
            polls.recv().expect("each reader polls its answer");
        }
        assert!(
            hand_off.hand(now, done()).is_some(),
            "both readers are busy"
        );
        assert_eq!(hand_off.threads, 2);

        for _ in 0..2 {
            release.send(()).expect("a reader waits");
        }
        // Bounded wait for the places to come back (no timing asserted).
        for _ in 0..1000 {
            if hand_off.places.available_permits() == 2 {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(hand_off.hand(now, done()).is_none(), "the places came back");
        // However many are handed at once, no more threads than readers.
        for _ in 0..100 {
            let _ = hand_off.hand(now, done());
        }
        assert_eq!(hand_off.threads, 2);
    }

    #[test]
    fn the_run_delay_is_the_second_field_of_schedstat() {
        assert_eq!(run_delay("3307045 250 12\n"), Some(250));
        assert_eq!(run_delay("3307045\n"), None);
        let own = std::fs::read_to_string("/proc/thread-self/schedstat");
        if let Ok(own) = own {
            assert!(run_delay(&own).is_some(), "{own}");
        }
    }

    #[tokio::test]
    async fn no_readers_never_hands_off() {
        let mut hand_off = hand_off(0, Duration::ZERO);
        let now = Instant::now();
        hand_off.timed(measured(now), now);
        assert!(hand_off.hand(now, done()).is_some());
        assert_eq!(hand_off.threads, 0);
    }
}
