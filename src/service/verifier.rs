//! Where the costly part of authentication runs: checking a signature or a secret-key
//! answer (PBKDF2 may ask for up to 100,000 iterations) is CPU work that must neither
//! stall the async workers serving resolution nor pile up without bound.
//!
//! Owns [`Verifier`]: each check runs on tokio's blocking pool, at most one fewer than
//! the machine's cores at a time (at least one), so a core is always left for serving
//! resolution. A check that cannot start within [`VERIFY_PATIENCE`] is refused as
//! [`Error::Busy`] (RC_SERVER_TOO_BUSY, HTTP 503), so a flood of expensive answers
//! costs its senders retries, not everyone else's latency.
//!
//! The edges charge each source for the checks its requests cost: [`measure_key_checks`]
//! runs a request's handling and says how long its checks ran.

use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

use super::Error;

/// How long a check waits for a free core before it is refused as busy.
pub const VERIFY_PATIENCE: Duration = Duration::from_secs(2);

tokio::task_local! {
    /// The time key checks ran for the request the current task handles, while
    /// [`measure_key_checks`] measures it.
    static SPENT: Cell<Duration>;
}

/// Runs `work` (the handling of one request) and returns its output with how long the
/// key checks it made ran on the blocking pool (time working, not waiting for a core).
pub async fn measure_key_checks<T>(work: impl Future<Output = T>) -> (T, Duration) {
    let measured = async {
        let output = work.await;
        (output, SPENT.with(Cell::get))
    };
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
    permits: Arc<Semaphore>,
    patience: Duration,
}

impl Verifier {
    /// A verifier running one check fewer at once than the machine has cores, and at
    /// least one.
    pub(super) fn new() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Verifier {
            permits: Arc::new(Semaphore::new(cores.saturating_sub(1).max(1))),
            patience: VERIFY_PATIENCE,
        }
    }

    /// The result of `check`, run on the blocking pool once a core is free; the time
    /// it ran is added to what [`measure_key_checks`] measures, if it does.
    pub(super) async fn run<T: Send + 'static>(
        &self,
        check: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Error> {
        let permit = tokio::time::timeout(self.patience, self.permits.clone().acquire_owned())
            .await
            .map_err(|_elapsed| Error::Busy)?
            .map_err(|_closed| Error::Busy)?;
        let outcome = tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            let result = check();
            drop(permit);
            (result, started.elapsed())
        })
        .await;
        let (result, ran) = outcome.map_err(|_panicked| Error::Busy)?;
        // Outside a measurement there is nothing to add to.
        let _unmeasured = SPENT.try_with(|spent| spent.set(spent.get() + ran));
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_check_waits_for_a_free_core_and_is_refused_after_its_patience() {
        let verifier = Verifier {
            permits: Arc::new(Semaphore::new(1)),
            patience: Duration::from_millis(20),
        };
        assert_eq!(verifier.run(|| 7).await.unwrap(), 7);
        let held = Arc::clone(&verifier.permits).acquire_owned().await.unwrap();
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
        let (output, spent) = measure_key_checks(twice).await;
        assert_eq!(output, "done");
        assert!(spent >= Duration::from_millis(60), "{spent:?}");
        let (_, none) = measure_key_checks(async { 1 }).await;
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
        let ((), spent) = measure_key_checks(proven_then_more).await;
        assert!(spent >= Duration::from_millis(30), "{spent:?}");
        assert!(spent < Duration::from_millis(60), "{spent:?}");
        // Outside a measurement it does nothing.
        forgive_key_checks();
    }
}
