//! Draining the Handle protocol listeners on shutdown.
//!
//! Owns the signal that the accept and receive loops and every TCP connection watch:
//! [`Start::begin`] sends the drain's deadline to every [`Draining`]. On it the loops
//! stop taking new work (the TCP listener is closed after the connections the kernel
//! already queued are taken, the UDP socket is read no more after the datagrams
//! already queued are taken) and wait for the work in flight, counted by the permits
//! of the semaphores that bound it, until the deadline. A TCP connection finishes the
//! request it is reading or answering and is then closed; one idle between requests is
//! closed at once.
//!
//! Costs one atomic load per UDP datagram beyond the permit every request already
//! holds; a TCP connection watches the signal while it is open.

use std::future::Future;
use std::pin::pin;
use std::time::Duration;

use tokio::sync::{Semaphore, watch};
use tokio::time::Instant;

/// Starts the drain; dropping it starts it too, with a deadline already passed.
#[derive(Debug)]
pub struct Start(watch::Sender<Option<Instant>>);

/// What the loops and connections watch: the drain's deadline, once it has begun.
#[derive(Debug, Clone)]
pub struct Draining(watch::Receiver<Option<Instant>>);

/// A new signal, not started.
pub fn channel() -> (Start, Draining) {
    let (start, draining) = watch::channel(None);
    (Start(start), Draining(draining))
}

impl Start {
    /// Begins the drain, to end `drain` from now; returns that deadline.
    pub fn begin(&self, drain: Duration) -> Instant {
        let deadline = Instant::now() + drain;
        self.0.send_replace(Some(deadline));
        deadline
    }
}

impl Draining {
    /// Whether the drain has begun (or its [`Start`] is gone): one atomic load, as
    /// this receiver never marks the value seen and the value is sent once.
    pub fn has_started(&self) -> bool {
        self.0.has_changed().unwrap_or(true)
    }

    /// Resolves with the deadline once the drain begins (at once, with the present
    /// moment, when its [`Start`] is gone).
    pub async fn started(&self) -> Instant {
        let mut watching = self.0.clone();
        match watching.wait_for(Option::is_some).await {
            Ok(deadline) => deadline.unwrap_or_else(Instant::now),
            Err(_gone) => Instant::now(),
        }
    }

    /// Runs `work` to its end, or, once the drain has begun, until its deadline:
    /// `None` when the deadline cut it short.
    pub async fn bound<T>(self, work: impl Future<Output = T>) -> Option<T> {
        let mut work = pin!(work);
        let deadline = tokio::select! {
            biased;
            done = &mut work => return Some(done),
            deadline = self.started() => deadline,
        };
        tokio::time::timeout_at(deadline, work).await.ok()
    }
}

/// Waits until all `total` permits of `slots` are free again (the work holding them is
/// done) or `deadline` passes; returns how many were still held.
pub async fn settled(slots: &Semaphore, total: u32, deadline: Instant) -> usize {
    match tokio::time::timeout_at(deadline, slots.acquire_many(total)).await {
        Ok(_all) => 0,
        Err(_elapsed) => (total as usize).saturating_sub(slots.available_permits()),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    const SHORT: Duration = Duration::from_millis(50);
    const LONG: Duration = Duration::from_secs(60);

    #[tokio::test]
    async fn work_runs_to_its_end_until_the_drain_then_to_the_deadline() {
        let (start, draining) = channel();
        assert!(!draining.has_started());
        let bounded = tokio::spawn(draining.clone().bound(tokio::time::sleep(LONG)));
        let quick = tokio::spawn(draining.clone().bound(async { 7 }));
        assert_eq!(quick.await.unwrap(), Some(7));
        let deadline = start.begin(SHORT);
        assert!(draining.has_started());
        assert_eq!(bounded.await.unwrap(), None, "cut at the deadline");
        assert!(Instant::now() >= deadline);
        assert!(Instant::now() < deadline + LONG / 2);
    }

    #[tokio::test]
    async fn a_dropped_start_ends_the_drain_at_once() {
        let (start, draining) = channel();
        drop(start);
        assert!(draining.has_started());
        let before = Instant::now();
        assert!(draining.started().await >= before);
        let forever = std::future::pending::<()>();
        assert_eq!(draining.bound(forever).await, None);
        assert!(before.elapsed() < LONG / 2);
    }

    #[tokio::test]
    async fn settled_waits_for_every_permit_or_the_deadline() {
        let slots = Arc::new(Semaphore::new(4));
        let held = Arc::clone(&slots).acquire_many_owned(2).await.unwrap();
        let release = tokio::spawn(async move {
            tokio::time::sleep(SHORT).await;
            drop(held);
        });
        let deadline = Instant::now() + LONG;
        assert_eq!(settled(&slots, 4, deadline).await, 0);
        assert!(Instant::now() < deadline);
        release.await.unwrap();

        let _stuck = Arc::clone(&slots).acquire_owned().await.unwrap();
        let deadline = Instant::now() + SHORT;
        assert_eq!(settled(&slots, 4, deadline).await, 1);
        assert!(Instant::now() >= deadline);
    }
}
