//! Where the costly part of authentication runs: checking a signature or a secret-key
//! answer (PBKDF2 may ask for up to 100,000 iterations) is CPU work that must neither
//! stall the async workers serving resolution nor pile up without bound.
//!
//! Owns [`Verifier`]: each check runs on tokio's blocking pool, at most one fewer than
//! the machine's cores at a time (at least one), so a core is always left for serving
//! resolution. Checks waiting for a core wait in one queue per source address, and the
//! queues take turns ([`Turns`]): a source flooding checks makes another source's check
//! wait for at most one of its own, not for all it sent. A check that cannot start
//! within [`VERIFY_PATIENCE`] is refused as [`Error::Busy`] (RC_SERVER_TOO_BUSY, HTTP
//! 503), so a flood of expensive answers costs its senders retries, not everyone
//! else's latency. The queues are as long as the edges let requests be in flight.
//!
//! The edges charge each source for the checks its requests cost: [`measure_key_checks`]
//! runs a request's handling for a source and says how long its checks ran.

use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::Error;

/// How long a check waits for a free core before it is refused as busy.
pub const VERIFY_PATIENCE: Duration = Duration::from_secs(2);

tokio::task_local! {
    /// The time key checks ran for the request the current task handles, while
    /// [`measure_key_checks`] measures it.
    static SPENT: Cell<Duration>;
    /// The address the request the current task handles came from, while
    /// [`measure_key_checks`] measures it: the queue its checks wait in.
    static SOURCE: IpAddr;
}

/// Runs `work` (the handling of one request from `source`) and returns its output with
/// how long the key checks it made ran on the blocking pool (time working, not waiting
/// for a core). Its checks wait for a core in `source`'s queue.
pub async fn measure_key_checks<T>(source: IpAddr, work: impl Future<Output = T>) -> (T, Duration) {
    let measured = async {
        let output = work.await;
        (output, SPENT.with(Cell::get))
    };
    let measured = SOURCE.scope(source, measured);
    SPENT.scope(Cell::new(Duration::ZERO), measured).await
}

/// Forgets the key-check time measured so far for the current request: its caller
/// has just proven to be an administrator, whose checks are not the anonymous
/// source's to pay for (checks made after this are measured again).
pub fn forgive_key_checks() {
    // Outside a measurement there is nothing to forget.
    let _ = SPENT.try_with(|spent| spent.set(Duration::ZERO));
}

/// Runs key checks off the async workers, a bounded number at a time.
#[derive(Debug, Clone)]
pub(super) struct Verifier {
    turns: Arc<Mutex<Turns>>,
    patience: Duration,
}

impl Verifier {
    /// A verifier running one check fewer at once than the machine has cores, and at
    /// least one.
    pub(super) fn new() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Verifier::with_cores(cores.saturating_sub(1).max(1), VERIFY_PATIENCE)
    }

    fn with_cores(cores: usize, patience: Duration) -> Self {
        Verifier {
            turns: Arc::new(Mutex::new(Turns {
                free: cores,
                ..Turns::default()
            })),
            patience,
        }
    }

    /// The result of `check`, run on the blocking pool once a core is free; the time
    /// it ran is added to what [`measure_key_checks`] measures, if it does.
    pub(super) async fn run<T: Send + 'static>(
        &self,
        check: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Error> {
        let core = self.core().await?;
        let outcome = tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            let result = check();
            drop(core);
            (result, started.elapsed())
        })
        .await;
        let (result, ran) = outcome.map_err(|_panicked| Error::Busy)?;
        // Outside a measurement there is nothing to add to.
        let _unmeasured = SPENT.try_with(|spent| spent.set(spent.get() + ran));
        Ok(result)
    }

    /// A free core, at once or in the current source's turn within the patience.
    async fn core(&self) -> Result<Core, Error> {
        let source = SOURCE.try_with(|source| *source).ok();
        let queued = lock(&self.turns).take_or_queue(source);
        let Err(turn) = queued else {
            return Ok(Core(Arc::clone(&self.turns)));
        };
        let mut waiting = Waiting {
            turn,
            turns: Arc::clone(&self.turns),
            served: false,
        };
        match tokio::time::timeout(self.patience, &mut waiting.turn).await {
            Ok(Ok(())) => {
                waiting.served = true;
                Ok(Core(Arc::clone(&self.turns)))
            }
            // Given up, or the verifier is gone (it never drops a waiting sender).
            Ok(Err(_)) | Err(_) => Err(Error::Busy),
        }
    }
}

/// The cores free for checks and the checks waiting for one: a queue for each source
/// (`None`: a check made outside a request's measurement), served in turn.
#[derive(Debug, Default)]
struct Turns {
    free: usize,
    /// The sources with checks waiting, in the order their next is served.
    order: VecDeque<Option<IpAddr>>,
    waiting: HashMap<Option<IpAddr>, VecDeque<oneshot::Sender<()>>>,
}

impl Turns {
    /// Takes a free core, or queues a check of `source`: its turn comes through the
    /// receiver.
    fn take_or_queue(&mut self, source: Option<IpAddr>) -> Result<(), oneshot::Receiver<()>> {
        if self.free > 0 {
            self.free -= 1;
            return Ok(());
        }
        let (turn, waits) = oneshot::channel();
        // A source is in `order` exactly while it has a queue.
        let queue = self.waiting.entry(source).or_insert_with(|| {
            self.order.push_back(source);
            VecDeque::new()
        });
        // Checks that gave up waiting hold no place in it.
        queue.retain(|turn| !turn.is_closed());
        queue.push_back(turn);
        Err(waits)
    }

    /// Hands a core just freed to the next waiting check, in turn, or keeps it free.
    fn give_back(&mut self) {
        while let Some(source) = self.order.pop_front() {
            let Some(queue) = self.waiting.get_mut(&source) else {
                continue;
            };
            // A check that gave up waiting has dropped its receiver: the next one.
            let served = std::iter::from_fn(|| queue.pop_front()).any(|turn| turn.send(()).is_ok());
            if queue.is_empty() {
                self.waiting.remove(&source);
            } else {
                self.order.push_back(source);
            }
            if served {
                return;
            }
        }
        self.free += 1;
    }
}

/// A core a check runs on; given back when dropped.
struct Core(Arc<Mutex<Turns>>);

impl Drop for Core {
    fn drop(&mut self) {
        lock(&self.0).give_back();
    }
}

/// A check waiting for its turn. One that goes (given up, or its request dropped) after
/// its turn came gives the core back.
struct Waiting {
    turn: oneshot::Receiver<()>,
    turns: Arc<Mutex<Turns>>,
    /// Whether its turn came and its check took the core.
    served: bool,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if !self.served {
            self.turn.close();
            if self.turn.try_recv().is_ok() {
                lock(&self.turns).give_back();
            }
        }
    }
}

fn lock(turns: &Mutex<Turns>) -> MutexGuard<'_, Turns> {
    turns.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

    #[tokio::test]
    async fn sources_take_turns_so_a_flood_of_checks_makes_another_wait_for_one() {
        let verifier = Verifier::with_cores(1, Duration::from_secs(10));
        let ran = Arc::new(Mutex::new(Vec::new()));
        let held = verifier.core().await.unwrap();
        let check = |source: IpAddr, name: &'static str| {
            let (verifier, ran) = (verifier.clone(), Arc::clone(&ran));
            tokio::spawn(measure_key_checks(source, async move {
                let ran = Arc::clone(&ran);
                verifier
                    .run(move || ran.lock().unwrap().push(name))
                    .await
                    .unwrap();
            }))
        };
        let flooder = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
        let mut checks = Vec::new();
        for name in ["flood 1", "flood 2", "flood 3", "flood 4"] {
            checks.push(check(flooder, name));
            tokio::task::yield_now().await;
        }
        checks.push(check(LOOPBACK, "other"));
        // Every check queued before the core is given back.
        while lock(&verifier.turns)
            .waiting
            .values()
            .map(VecDeque::len)
            .sum::<usize>()
            < 5
        {
            tokio::task::yield_now().await;
        }
        drop(held);
        for check in checks {
            check.await.unwrap();
        }
        let order = ran.lock().unwrap().clone();
        assert_eq!(order, ["flood 1", "other", "flood 2", "flood 3", "flood 4"]);
        assert_eq!(lock(&verifier.turns).free, 1, "the core is free again");
    }

    #[tokio::test]
    async fn a_check_that_gives_up_waiting_leaves_the_core_to_the_next() {
        let verifier = Verifier::with_cores(1, Duration::from_millis(20));
        let held = verifier.core().await.unwrap();
        assert!(matches!(verifier.run(|| 1).await, Err(Error::Busy)));
        drop(held);
        assert_eq!(
            lock(&verifier.turns).free,
            1,
            "the gone waiter took nothing"
        );
        assert_eq!(verifier.run(|| 2).await.unwrap(), 2);
    }

    #[tokio::test]
    async fn a_check_waits_for_a_free_core_and_is_refused_after_its_patience() {
        let verifier = Verifier::with_cores(1, Duration::from_millis(20));
        assert_eq!(verifier.run(|| 7).await.unwrap(), 7);
        let held = verifier.core().await.unwrap();
        let refused = verifier.run(|| 8).await;
        assert!(matches!(refused, Err(Error::Busy)));
        drop(held);
        assert_eq!(verifier.run(|| 9).await.unwrap(), 9);
    }

    #[tokio::test]
    async fn the_time_checks_ran_is_measured_for_the_request_that_made_them() {
        let verifier = Verifier::new();
        let nap = || std::thread::sleep(Duration::from_millis(30));
        let twice = async {
            verifier.run(nap).await.unwrap();
            verifier.run(nap).await.unwrap();
            "done"
        };
        let (output, spent) = measure_key_checks(LOOPBACK, twice).await;
        assert_eq!(output, "done");
        assert!(spent >= Duration::from_millis(60), "{spent:?}");
        let (_, none) = measure_key_checks(LOOPBACK, async { 1 }).await;
        assert_eq!(none, Duration::ZERO);
        verifier.run(nap).await.unwrap();
    }

    #[tokio::test]
    async fn checks_made_before_the_caller_proved_itself_are_forgiven() {
        let verifier = Verifier::new();
        let nap = || std::thread::sleep(Duration::from_millis(30));
        let proven_then_more = async {
            verifier.run(nap).await.unwrap();
            forgive_key_checks();
            verifier.run(nap).await.unwrap();
        };
        let ((), spent) = measure_key_checks(LOOPBACK, proven_then_more).await;
        assert!(spent >= Duration::from_millis(30), "{spent:?}");
        assert!(spent < Duration::from_millis(60), "{spent:?}");
        // Outside a measurement it does nothing.
        forgive_key_checks();
    }
}
