//! Bounds on guessing secret keys: the failed secret checks an edge has seen, per
//! source address and per key (identity), in a fixed window. A source or key past its
//! budget is refused before anything is checked until its window ends, so one
//! datagram or request no longer tests one guess without limit; the edge logs when a
//! budget runs out.
//!
//! Owns [`Guesses`]. Pure bookkeeping: the clock is passed in. Bounded: at most
//! [`MAX_TRACKED`] sources and as many keys are remembered (expired windows are
//! dropped first; beyond that a new one is not tracked, but the per-key budget still
//! holds for the keys already seen).

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// How long a budget lasts.
pub const WINDOW: Duration = Duration::from_secs(60);
/// Failed checks one source address may make in a window.
pub const PER_SOURCE: u32 = 10;
/// Failed checks of one key, from any source, in a window.
pub const PER_KEY: u32 = 30;
/// Sources, and keys, remembered at once.
pub const MAX_TRACKED: usize = 10_000;

/// Failures of one source or key in the window that started at `since`.
#[derive(Debug, Clone, Copy)]
struct Window {
    since: Instant,
    failures: u32,
}

/// Failures counted by some key, each in its own window.
#[derive(Debug)]
struct Counts<K> {
    windows: HashMap<K, Window>,
    budget: u32,
}

impl<K: Eq + Hash + Clone> Counts<K> {
    fn new(budget: u32) -> Self {
        Counts {
            windows: HashMap::new(),
            budget,
        }
    }

    fn exhausted(&self, key: &K, now: Instant) -> bool {
        self.windows.get(key).is_some_and(|w| {
            now.saturating_duration_since(w.since) < WINDOW && w.failures >= self.budget
        })
    }

    /// Counts one failure; whether this one used up the budget.
    fn fail(&mut self, key: &K, now: Instant) -> bool {
        if !self.windows.contains_key(key) && self.windows.len() >= MAX_TRACKED {
            self.windows
                .retain(|_, w| now.saturating_duration_since(w.since) < WINDOW);
            if self.windows.len() >= MAX_TRACKED {
                return false;
            }
        }
        let window = self.windows.entry(key.clone()).or_insert(Window {
            since: now,
            failures: 0,
        });
        if now.saturating_duration_since(window.since) >= WINDOW {
            *window = Window {
                since: now,
                failures: 0,
            };
        }
        window.failures += 1;
        window.failures == self.budget
    }
}

/// Why a secret check is refused before it is made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TooManyGuesses {
    /// The source address failed too often.
    #[error("too many failed secret checks from this address; try again in a minute")]
    Source,
    /// The key was failed too often.
    #[error("too many failed checks of this secret key; try again in a minute")]
    Key,
}

/// Which budget a failure used up, for the edge to log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exhausted {
    /// Neither.
    Neither,
    /// The source's.
    Source,
    /// The key's.
    Key,
}

/// The failed secret checks of one edge, keyed by `K` (an identity).
#[derive(Debug)]
pub struct Guesses<K> {
    sources: Counts<IpAddr>,
    keys: Counts<K>,
}

impl<K: Eq + Hash + Clone> Default for Guesses<K> {
    fn default() -> Self {
        Guesses {
            sources: Counts::new(PER_SOURCE),
            keys: Counts::new(PER_KEY),
        }
    }
}

impl<K: Eq + Hash + Clone> Guesses<K> {
    /// Whether a check of `key` from `source` may be made at `now`.
    pub fn admit(&self, source: IpAddr, key: &K, now: Instant) -> Result<(), TooManyGuesses> {
        if self.sources.exhausted(&source, now) {
            return Err(TooManyGuesses::Source);
        }
        if self.keys.exhausted(key, now) {
            return Err(TooManyGuesses::Key);
        }
        Ok(())
    }

    /// Counts a failed check of `key` from `source`.
    pub fn failed(&mut self, source: IpAddr, key: &K, now: Instant) -> Exhausted {
        let source_out = self.sources.fail(&source, now);
        let key_out = self.keys.fail(key, now);
        match (source_out, key_out) {
            (true, _) => Exhausted::Source,
            (false, true) => Exhausted::Key,
            (false, false) => Exhausted::Neither,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(n: u8) -> IpAddr {
        IpAddr::from([192, 0, 2, n])
    }

    #[test]
    fn a_source_past_its_budget_waits_for_its_window() {
        let now = Instant::now();
        let mut guesses = Guesses::default();
        for n in 1..PER_SOURCE {
            assert!(guesses.admit(address(1), &"k", now).is_ok());
            assert_eq!(
                guesses.failed(address(1), &"k", now),
                Exhausted::Neither,
                "{n}"
            );
        }
        assert_eq!(guesses.failed(address(1), &"k", now), Exhausted::Source);
        assert_eq!(
            guesses.admit(address(1), &"k", now),
            Err(TooManyGuesses::Source)
        );
        assert!(
            guesses.admit(address(2), &"k", now).is_ok(),
            "others still may"
        );
        assert!(guesses.admit(address(1), &"k", now + WINDOW).is_ok());
    }

    #[test]
    fn a_key_failed_from_many_sources_is_refused_to_all() {
        let now = Instant::now();
        let mut guesses = Guesses::default();
        let mut exhausted = Exhausted::Neither;
        for n in 0..u8::try_from(PER_KEY).unwrap() {
            exhausted = guesses.failed(address(n), &"k", now);
        }
        assert_eq!(exhausted, Exhausted::Key);
        assert_eq!(
            guesses.admit(address(200), &"k", now),
            Err(TooManyGuesses::Key)
        );
        assert!(guesses.admit(address(200), &"other", now).is_ok());
    }

    #[test]
    fn tracking_is_bounded() {
        let now = Instant::now();
        let mut guesses = Guesses::default();
        for n in 0..u32::try_from(MAX_TRACKED + 100).unwrap() {
            guesses.failed(IpAddr::from(n.to_be_bytes()), &n, now);
        }
        assert!(guesses.sources.windows.len() <= MAX_TRACKED);
        assert!(guesses.keys.windows.len() <= MAX_TRACKED);
    }
}
