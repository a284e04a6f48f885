//! Telling, in `hdl bench resolve`, the errors of a server from its going away.
//!
//! When the server is stopped under load (SIGTERM: it drains, then its ports close),
//! some requests get no answer: those sent after it stopped taking them. They are no
//! errors of the server. A request it took and never answered is one. From the
//! client's side the two differ only in time: the server answered a request started
//! after one it took. So a request that got no answer (a timeout, a reset, a refusal)
//! counts as an error when some resolver got an answer to a request started later,
//! and as "after the close" otherwise. Only a refusal (the port is closed: a refused
//! TCP connect, an ICMP port-unreachable over UDP) says the server is gone; without
//! one, every unanswered request is an error as before.
//!
//! A request is timed from before the client builds it, not from the moment it leaves:
//! a resolver delayed between the two (its thread preempted, other tasks run first)
//! sends it later than a request started after it. So "started later" means later by
//! a margin, the slowest answers' latency (99.9th percentile, at least
//! [`MIN_MARGIN`]): within it, an unanswered request counts as at the close.
//!
//! Bounded: each resolver keeps the starts of at most [`MAX_TRAILING`] unanswered
//! requests since its last answer (a load of many requests in flight chooses its own
//! room, [`Answering::with_room`]); older ones are errors (the server had long stopped
//! answering it while others still had answers, or it is not closing).

use std::collections::VecDeque;
use std::io::ErrorKind;
use std::time::{Duration, Instant};

use crate::client::{AttemptError, ClientError};

/// Unanswered requests of one resolver kept since its last answer.
const MAX_TRAILING: usize = 64;

/// The least margin by which an answered request must have started after an
/// unanswered one for the latter to be an error.
pub(super) const MIN_MARGIN: Duration = Duration::from_millis(10);

/// What one resolver saw of the server's answering, for [`verdict`].
#[derive(Debug)]
pub(super) struct Answering {
    /// The start of the latest request the server answered (with anything).
    last_answered: Option<Instant>,
    /// The starts of the requests unanswered since, oldest first.
    trailing: VecDeque<Instant>,
    /// How many of them are kept.
    room: usize,
    /// Unanswered requests followed by an answer (or pushed out of `trailing`).
    unanswered_then_answered: u64,
    /// Whether a request was refused: the server's port is closed.
    refused: bool,
}

impl Default for Answering {
    fn default() -> Self {
        Answering::with_room(MAX_TRAILING)
    }
}

impl Answering {
    /// Keeps at most `room` unanswered requests since the last answer (at least one).
    pub(super) fn with_room(room: usize) -> Answering {
        Answering {
            last_answered: None,
            trailing: VecDeque::new(),
            room: room.max(1),
            unanswered_then_answered: 0,
            refused: false,
        }
    }

    /// A request started at `started` was answered.
    pub(super) fn answered(&mut self, started: Instant) {
        self.unanswered_then_answered += self.trailing.len() as u64;
        self.trailing.clear();
        self.last_answered = self.last_answered.max(Some(started));
    }

    /// A request started at `started` got no answer; `refused` when the port was closed.
    pub(super) fn unanswered(&mut self, started: Instant, refused: bool) {
        if self.trailing.len() == self.room {
            self.trailing.pop_front();
            self.unanswered_then_answered += 1;
        }
        self.trailing.push_back(started);
        self.refused |= refused;
    }

    /// The server's port refused a datagram (an ICMP port unreachable, reported on the
    /// next receive, so tied to no one request).
    pub(super) fn refusal(&mut self) {
        self.refused = true;
    }

    /// Whether the server refused a request of this resolver.
    pub(super) fn refused(&self) -> bool {
        self.refused
    }
}

/// Whether `error` means the server gave no answer at all (timed out, reset, closed,
/// refused), and whether it refused. `None` when it answered, if wrongly.
pub(super) fn no_answer(error: &ClientError) -> Option<bool> {
    let ClientError::NoAnswer { last, .. } = error else {
        return None;
    };
    match last.as_ref() {
        AttemptError::Io { source, .. } => Some(source.kind() == ErrorKind::ConnectionRefused),
        AttemptError::Timeout { .. } | AttemptError::Closed { .. } => Some(false),
        _ => None,
    }
}

/// The requests without an answer, over every resolver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Verdict {
    /// Unanswered requests that are errors: all of them unless the server closed.
    pub errors: u64,
    /// How the server closed, when a request was refused.
    pub closed: Option<Closed>,
}

/// The server's close, as the resolvers saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Closed {
    /// The start of the last request it answered, if any.
    pub last_answered: Option<Instant>,
    /// Requests unanswered that started after it, or within `margin` before it.
    pub unanswered_after: u64,
    /// The margin applied.
    pub margin: Duration,
}

/// Sorts every unanswered request of `resolvers` into errors and "after the close",
/// with a margin of `slowest` (the slowest answers' latency, at least [`MIN_MARGIN`]).
pub(super) fn verdict(resolvers: &[Answering], slowest: Duration) -> Verdict {
    let followed: u64 = resolvers.iter().map(|r| r.unanswered_then_answered).sum();
    let trailing = resolvers.iter().flat_map(|r| r.trailing.iter());
    if !resolvers.iter().any(Answering::refused) {
        return Verdict {
            errors: followed + trailing.count() as u64,
            closed: None,
        };
    }
    let margin = slowest.max(MIN_MARGIN);
    let last_answered = resolvers.iter().filter_map(|r| r.last_answered).max();
    let (mut before, mut after) = (0, 0);
    for started in trailing {
        match last_answered {
            Some(last) if *started + margin <= last => before += 1,
            _ => after += 1,
        }
    }
    Verdict {
        errors: followed + before,
        closed: Some(Closed {
            last_answered,
            unanswered_after: after,
            margin,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(base: Instant, millis: u64) -> Instant {
        base + Duration::from_millis(millis)
    }

    #[test]
    fn without_a_refusal_every_unanswered_request_is_an_error() {
        let base = Instant::now();
        let mut one = Answering::default();
        one.unanswered(at(base, 1), false);
        one.answered(at(base, 2));
        one.unanswered(at(base, 3), false);
        let verdict = verdict(&[one, Answering::default()], Duration::ZERO);
        assert_eq!(verdict.errors, 2);
        assert_eq!(verdict.closed, None);
    }

    #[test]
    fn unanswered_requests_started_well_before_a_later_answer_are_errors_the_rest_after() {
        let base = Instant::now();
        let mut slow = Answering::default();
        slow.answered(at(base, 1));
        slow.unanswered(at(base, 50), false); // taken, never answered: an error
        slow.unanswered(at(base, 95), false); // within the margin: at the close
        let mut fast = Answering::default();
        fast.answered(at(base, 100)); // the server still answered after them
        fast.unanswered(at(base, 101), false);
        fast.unanswered(at(base, 102), true);
        slow.unanswered(at(base, 103), true);
        let verdict = verdict(&[slow, fast], Duration::from_millis(20));
        assert_eq!(verdict.errors, 1);
        let closed = verdict.closed.unwrap();
        assert_eq!(closed.last_answered, Some(at(base, 100)));
        assert_eq!(closed.unanswered_after, 4);
        assert_eq!(closed.margin, Duration::from_millis(20));
    }

    #[test]
    fn the_margin_is_at_least_the_minimum() {
        let base = Instant::now();
        let mut one = Answering::default();
        one.unanswered(at(base, 0), false);
        one.unanswered(at(base, 1), true);
        let mut other = Answering::default();
        other.answered(at(base, 5));
        let verdict = verdict(&[one, other], Duration::ZERO);
        assert_eq!(verdict.errors, 0);
        assert_eq!(verdict.closed.unwrap().margin, MIN_MARGIN);
    }

    #[test]
    fn a_server_closed_before_any_answer_has_no_errors() {
        let base = Instant::now();
        let mut one = Answering::default();
        one.unanswered(at(base, 1), true);
        let verdict = verdict(&[one], Duration::ZERO);
        assert_eq!(verdict.errors, 0);
        assert_eq!(verdict.closed.unwrap().last_answered, None);
        assert_eq!(verdict.closed.unwrap().unanswered_after, 1);
    }

    #[test]
    fn trailing_requests_are_bounded_and_the_oldest_count_as_errors() {
        let base = Instant::now();
        let mut one = Answering::default();
        let count = MAX_TRAILING as u64 + 10;
        for n in 0..count {
            one.unanswered(at(base, n), n + 1 == count);
        }
        assert_eq!(one.trailing.len(), MAX_TRAILING);
        assert_eq!(verdict(&[one], Duration::ZERO).errors, 10);
    }
}
