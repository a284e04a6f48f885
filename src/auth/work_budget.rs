//! How much key-check work (signature checks, secret-key answers, session key
//! exchanges) each anonymous source may make this server do: a budget of check time
//! per source address, refilled at [`REFILL_PER_SECOND`] up to [`BURST`]. A source
//! whose budget is spent is refused "server too busy" before any check runs, until
//! it has refilled; every other source, and resolution, goes on as before (the
//! service's verifier also leaves one core free of checks). Each edge (the Handle
//! protocol, HTTP) keeps one.
//!
//! Owns [`WorkBudget`]. Pure bookkeeping: the clock is passed in, the time charged is
//! measured by the caller. Bounded: at most [`MAX_SOURCES`] sources are tracked;
//! when the table is full, sources whose budget has refilled are dropped first (they
//! are as a new source would be), and beyond that a new source is not tracked, the
//! verifier's own bound still holding for it.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// The most check time a source may spend at once, from a full budget.
pub const BURST: Duration = Duration::from_secs(2);

/// Check time given back to a source for every second that passes: a quarter of a
/// core, so one source alone can never keep the checks busy.
pub const REFILL_PER_SECOND: Duration = Duration::from_millis(250);

/// Sources tracked at once.
pub const MAX_SOURCES: usize = 10_000;

/// One source's budget as of `at`, in microseconds (negative once overspent: a
/// check is charged after it ran).
#[derive(Debug, Clone, Copy)]
struct Account {
    balance_us: i64,
    at: Instant,
    /// Whether it ran out since it was last full: said once per running out.
    ran_out: bool,
}

impl Account {
    fn full(now: Instant) -> Account {
        Account {
            balance_us: micros(BURST),
            at: now,
            ran_out: false,
        }
    }

    /// The budget at `now`: refilled for the time since it was last seen.
    fn refilled(self, now: Instant) -> Account {
        let elapsed = now.saturating_duration_since(self.at);
        let refill = elapsed.as_micros() * REFILL_PER_SECOND.as_micros() / 1_000_000;
        let refill = i64::try_from(refill).unwrap_or(i64::MAX);
        let balance_us = self.balance_us.saturating_add(refill).min(micros(BURST));
        Account {
            balance_us,
            at: now,
            ran_out: self.ran_out && balance_us < micros(BURST),
        }
    }

    fn is_full(self) -> bool {
        self.balance_us >= micros(BURST)
    }
}

fn micros(duration: Duration) -> i64 {
    i64::try_from(duration.as_micros()).unwrap_or(i64::MAX)
}

/// The key-check budgets of the anonymous sources one node has seen.
#[derive(Debug, Default)]
pub struct WorkBudget {
    accounts: HashMap<IpAddr, Account>,
}

impl WorkBudget {
    /// Whether `source` may have a check made for it at `now`.
    pub fn admits(&self, source: IpAddr, now: Instant) -> bool {
        self.accounts
            .get(&source)
            .is_none_or(|account| account.refilled(now).balance_us > 0)
    }

    /// Charges `source` for `spent` of check time at `now`; whether this charge spent
    /// its budget, for the first time since it was last full (for the edge to log
    /// once, not at every refill a flood uses up).
    pub fn charge(&mut self, source: IpAddr, spent: Duration, now: Instant) -> bool {
        if spent.is_zero() {
            return false;
        }
        if !self.accounts.contains_key(&source) && self.accounts.len() >= MAX_SOURCES {
            self.accounts
                .retain(|_, account| !account.refilled(now).is_full());
            if self.accounts.len() >= MAX_SOURCES {
                return false;
            }
        }
        let account = self
            .accounts
            .entry(source)
            .or_insert_with(|| Account::full(now));
        let before = account.refilled(now);
        let balance_us = before.balance_us.saturating_sub(micros(spent));
        let runs_out = balance_us <= 0 && !before.ran_out;
        *account = Account {
            balance_us,
            ran_out: before.ran_out || runs_out,
            ..before
        };
        runs_out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(n: u32) -> IpAddr {
        IpAddr::from(n.to_be_bytes())
    }

    #[test]
    fn a_source_that_spent_its_budget_waits_until_it_refills() {
        let now = Instant::now();
        let mut budget = WorkBudget::default();
        let check = Duration::from_millis(100);
        let mut spent_at = None;
        for n in 1..=40 {
            assert!(budget.admits(address(1), now), "check {n}");
            if budget.charge(address(1), check, now) {
                spent_at = Some(n);
                break;
            }
        }
        assert_eq!(spent_at, Some(20), "2 s of 100 ms checks");
        assert!(!budget.admits(address(1), now));
        assert!(
            budget.admits(address(2), now),
            "another source is not held up"
        );
        // A check admitted with the budget just above nothing overdraws it: another
        // 100 ms, which comes back in 400 ms.
        let later = now + Duration::from_millis(1);
        assert!(budget.admits(address(1), later));
        assert!(!budget.charge(address(1), check, later), "said once");
        assert!(!budget.admits(address(1), now + Duration::from_millis(300)));
        assert!(budget.admits(address(1), now + Duration::from_millis(500)));
        assert!(budget.admits(address(1), now + BURST * 10));
    }

    #[test]
    fn free_work_costs_nothing_and_the_table_stays_bounded() {
        let now = Instant::now();
        let mut budget = WorkBudget::default();
        assert!(!budget.charge(address(1), Duration::ZERO, now));
        assert!(budget.accounts.is_empty());
        let count = u32::try_from(MAX_SOURCES + 100).unwrap();
        for n in 0..count {
            budget.charge(address(n), Duration::from_secs(3), now);
        }
        assert_eq!(budget.accounts.len(), MAX_SOURCES);
        // Once the first have refilled, they make room for new sources.
        let later = now + BURST * 20;
        assert!(budget.charge(address(count), Duration::from_secs(3), later));
        assert_eq!(budget.accounts.len(), 1);
        assert!(!budget.admits(address(count), later));
    }
}
