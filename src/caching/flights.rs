//! Coalescing: one upstream request per key at a time, however many ask for it.
//!
//! Owns [`Flights`]: the requests under way by key, each a spawned task whose outcome
//! every asker of that key waits for. The task runs to its end even when the asker
//! who started it goes away, so the others still get their answer. At most `limit`
//! keys are under way at once; an asker beyond that is told so
//! ([`FlightError::TooMany`]) rather than queued. Knows nothing of what is fetched.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use thiserror::Error;
use tokio::sync::watch;

/// Why no outcome came.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum FlightError {
    /// `limit` keys are under way already.
    #[error("{limit} requests are under way already")]
    TooMany {
        /// The bound.
        limit: usize,
    },
    /// The task ended without an outcome (it panicked).
    #[error("the request ended without an answer")]
    Lost,
}

/// How an asker got its outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Joined {
    /// It found the outcome at once (the `ready` check).
    Ready,
    /// It started the request.
    Started,
    /// It waited for a request another asker had started.
    Waited,
}

/// Requests under way by key.
#[derive(Debug)]
pub struct Flights<K, T> {
    pending: Arc<Mutex<HashMap<K, watch::Receiver<Option<T>>>>>,
    limit: usize,
}

impl<K, T> Flights<K, T>
where
    K: Eq + Hash + Clone + Send + 'static,
    T: Clone + Send + Sync + 'static,
{
    /// No request under way; at most `limit` at once (at least one).
    pub fn new(limit: usize) -> Self {
        Flights {
            pending: Arc::default(),
            limit: limit.max(1),
        }
    }

    /// Keys under way now.
    pub fn len(&self) -> usize {
        self.pending().len()
    }

    /// Whether none is under way.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The outcome for `key`: what `ready` finds (checked while no request for `key`
    /// can start or end, so an outcome stored by a request that just ended is seen),
    /// else that of the request under way for `key`, else that of `fetch`, started
    /// now in a task of its own.
    pub async fn join<F>(
        &self,
        key: K,
        ready: impl FnOnce() -> Option<T>,
        fetch: F,
    ) -> Result<(T, Joined), FlightError>
    where
        F: Future<Output = T> + Send + 'static,
    {
        let (mut outcome, joined) = {
            let mut pending = self.pending();
            if let Some(found) = ready() {
                return Ok((found, Joined::Ready));
            }
            match pending.get(&key) {
                Some(under_way) => (under_way.clone(), Joined::Waited),
                None if pending.len() >= self.limit => {
                    return Err(FlightError::TooMany { limit: self.limit });
                }
                None => {
                    let (tell, told) = watch::channel(None);
                    pending.insert(key.clone(), told.clone());
                    let done = Forget {
                        pending: Arc::clone(&self.pending),
                        key: Some(key),
                    };
                    tokio::spawn(async move {
                        let value = fetch.await;
                        drop(done);
                        tell.send_replace(Some(value));
                    });
                    (told, Joined::Started)
                }
            }
        };
        let value = outcome
            .wait_for(Option::is_some)
            .await
            .map_err(|_| FlightError::Lost)?
            .clone();
        value.map(|value| (value, joined)).ok_or(FlightError::Lost)
    }

    fn pending(&self) -> MutexGuard<'_, HashMap<K, watch::Receiver<Option<T>>>> {
        lock(&self.pending)
    }
}

/// Removes its key from the requests under way when dropped: when the request ends,
/// or if its task panicked.
struct Forget<K: Eq + Hash, T> {
    pending: Arc<Mutex<HashMap<K, watch::Receiver<Option<T>>>>>,
    key: Option<K>,
}

impl<K: Eq + Hash, T> Drop for Forget<K, T> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            lock(&self.pending).remove(&key);
        }
    }
}

fn lock<K, T>(
    pending: &Mutex<HashMap<K, watch::Receiver<Option<T>>>>,
) -> MutexGuard<'_, HashMap<K, watch::Receiver<Option<T>>>> {
    pending.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use tokio::sync::Notify;

    use super::*;

    #[tokio::test]
    async fn concurrent_askers_of_one_key_share_one_request() {
        let flights: Arc<Flights<&str, u32>> = Arc::new(Flights::new(8));
        let fetched = Arc::new(AtomicUsize::new(0));
        let release = Arc::new(Notify::new());
        let askers: Vec<_> = (0..100)
            .map(|_| {
                let (flights, fetched, release) = (
                    Arc::clone(&flights),
                    Arc::clone(&fetched),
                    Arc::clone(&release),
                );
                tokio::spawn(async move {
                    let fetch = async move {
                        fetched.fetch_add(1, Ordering::SeqCst);
                        release.notified().await;
                        7
                    };
                    flights.join("A/x", || None, fetch).await
                })
            })
            .collect();
        // Every asker has joined once the one request is under way and they wait.
        for _ in 0..1000 {
            if fetched.load(Ordering::SeqCst) == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        release.notify_one();
        let mut started = 0;
        for asker in askers {
            let (value, joined) = asker.await.unwrap().unwrap();
            assert_eq!(value, 7);
            started += usize::from(joined == Joined::Started);
        }
        assert_eq!(fetched.load(Ordering::SeqCst), 1, "one upstream request");
        assert_eq!(started, 1);
        assert!(flights.is_empty(), "the finished request is forgotten");
    }

    #[tokio::test]
    async fn a_ready_outcome_starts_nothing_and_the_bound_refuses_more_keys() {
        let flights: Flights<u32, u32> = Flights::new(1);
        let ready = flights.join(1, || Some(5), async { unreachable!() });
        assert_eq!(ready.await, Ok((5, Joined::Ready)));
        let release = Arc::new(Notify::new());
        let waiting = Arc::clone(&release);
        let first = flights.join(1, || None, async move {
            waiting.notified().await;
            1
        });
        tokio::pin!(first);
        // Polled once, the first request is under way.
        assert!(futures_poll_once(first.as_mut()).await.is_none());
        let second = flights.join(2, || None, async { 2 }).await;
        assert_eq!(second, Err(FlightError::TooMany { limit: 1 }));
        release.notify_one();
        assert_eq!(first.await, Ok((1, Joined::Started)));
        assert_eq!(
            flights.join(2, || None, async { 2 }).await,
            Ok((2, Joined::Started))
        );
    }

    #[tokio::test]
    async fn a_request_outlives_the_asker_who_started_it() {
        let flights: Arc<Flights<u32, u32>> = Arc::new(Flights::new(4));
        let release = Arc::new(Notify::new());
        let waiting = Arc::clone(&release);
        let mut first = Box::pin(flights.join(1, || None, async move {
            waiting.notified().await;
            9
        }));
        assert!(futures_poll_once(first.as_mut()).await.is_none());
        drop(first); // The asker who started the request goes away.
        let second = flights.join(1, || None, async { unreachable!() });
        tokio::pin!(second);
        assert!(futures_poll_once(second.as_mut()).await.is_none());
        release.notify_one();
        assert_eq!(second.await, Ok((9, Joined::Waited)));
    }

    /// Polls `future` once: its output if it is ready then.
    async fn futures_poll_once<F: Future + Unpin>(mut future: F) -> Option<F::Output> {
        std::future::poll_fn(|context| {
            std::task::Poll::Ready(match std::pin::Pin::new(&mut future).poll(context) {
                std::task::Poll::Ready(output) => Some(output),
                std::task::Poll::Pending => None,
            })
        })
        .await
    }
}
