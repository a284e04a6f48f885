//! Where the costly part of authentication runs: checking a signature or a secret-key
//! answer (PBKDF2 may ask for up to 100,000 iterations) is CPU work that must neither
//! stall the async workers serving resolution nor pile up without bound.
//!
//! Owns [`Verifier`]: each check runs on tokio's blocking pool, at most one per core at
//! a time. A check that cannot start within [`VERIFY_PATIENCE`] is refused as
//! [`Error::Busy`] (RC_SERVER_TOO_BUSY, HTTP 503), so a flood of expensive answers
//! costs its senders retries, not everyone else's latency.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

use super::Error;

/// How long a check waits for a free core before it is refused as busy.
pub const VERIFY_PATIENCE: Duration = Duration::from_secs(2);

/// Runs key checks off the async workers, a bounded number at a time.
#[derive(Debug, Clone)]
pub(super) struct Verifier {
    permits: Arc<Semaphore>,
    patience: Duration,
}

impl Verifier {
    /// A verifier running as many checks at once as the machine has cores.
    pub(super) fn new() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Verifier {
            permits: Arc::new(Semaphore::new(cores)),
            patience: VERIFY_PATIENCE,
        }
    }

    /// The result of `check`, run on the blocking pool once a core is free.
    pub(super) async fn run<T: Send + 'static>(
        &self,
        check: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Error> {
        let permit = tokio::time::timeout(self.patience, self.permits.clone().acquire_owned())
            .await
            .map_err(|_elapsed| Error::Busy)?
            .map_err(|_closed| Error::Busy)?;
        let outcome = tokio::task::spawn_blocking(move || {
            let result = check();
            drop(permit);
            result
        })
        .await;
        outcome.map_err(|_panicked| Error::Busy)
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
}
