//! How much of the log one AppendEntries carries to one member.
//!
//! openraft 0.9 gives an AppendEntries the heartbeat interval (50 ms by default) from
//! the start of its send to its answer, drops it when that runs out, and after a pause
//! sends the same range again. A leader sending a member far behind 4 MiB of entries
//! a call (as it did) read them back from disk, then spent longer than that encoding,
//! sealing and sending them, every time: the member never caught up, and the set went
//! on with one copy fewer than it showed (seen after a restart of a set with a long
//! log: a secondary stayed 794 entries behind for good).
//!
//! A [`SendBudget`], one per member a leader sends to, holds the octets of encoded
//! entries one call may carry. A call takes the longest run of its entries within the
//! budget (at least one entry: [`first_within`]); the connection answers openraft a
//! partial success up to the last entry sent, and openraft sends the rest next. The
//! budget halves (down to [`LEAST_SENT`]) when a call took more than half its time or
//! never finished, and doubles (up to [`REPLICATED_OCTETS`]) when a call whose entries
//! were cut took less than an eighth of it. So the size of a call follows what the
//! machine and the member manage in the time openraft allows.
//!
//! Owns only the arithmetic: no network, no clock of its own (the caller measures).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use openraft::raft::AppendEntriesRequest;
use postcard::ser_flavors::Size;

use crate::replication::log_store::REPLICATED_OCTETS;
use crate::replication::machine::Machine;
use crate::replication::types::{GroupConfig, LogId};

/// The least budget: a call carries at least this many octets of entries, or one
/// entry, whichever is more, however slow the calls before it were.
pub const LEAST_SENT: usize = 64 << 10;

/// The octets of entries the next AppendEntries to one member may carry.
#[derive(Debug)]
pub struct SendBudget {
    octets: AtomicUsize,
}

impl Default for SendBudget {
    fn default() -> Self {
        SendBudget {
            octets: AtomicUsize::new(REPLICATED_OCTETS),
        }
    }
}

impl SendBudget {
    /// What the next call may carry.
    pub fn octets(&self) -> usize {
        self.octets.load(Ordering::Relaxed)
    }

    /// Starts a call; the returned [`Call`] must be told how it ended, or the budget
    /// takes it for a call dropped at its deadline.
    pub fn start(&self) -> Call<'_> {
        Call {
            budget: self,
            told: false,
        }
    }

    fn halve(&self) {
        let octets = (self.octets() / 2).max(LEAST_SENT);
        self.octets.store(octets, Ordering::Relaxed);
    }

    fn double(&self) {
        let octets = self.octets().saturating_mul(2).min(REPLICATED_OCTETS);
        self.octets.store(octets, Ordering::Relaxed);
    }
}

/// One AppendEntries under way; dropped before [`Call::ended`], it was dropped by
/// openraft at its deadline, and the budget halves.
#[derive(Debug)]
pub struct Call<'a> {
    budget: &'a SendBudget,
    told: bool,
}

impl Call<'_> {
    /// The call ended, answered or failed, after `took` of the `allowed` time; `cut`
    /// says it was answered and carried only some of the entries it was given. A call
    /// past half its time (answered late, or failed at the link's own deadline) was too
    /// large; a failure at once (a member down) says nothing of its size.
    pub fn ended(mut self, took: Duration, allowed: Duration, cut: bool) {
        self.told = true;
        if took > allowed / 2 {
            self.budget.halve();
        } else if cut && took < allowed / 8 {
            self.budget.double();
        }
    }
}

impl Drop for Call<'_> {
    fn drop(&mut self) {
        if !self.told {
            self.budget.halve();
        }
    }
}

/// Keeps the longest run of `rpc`'s first entries whose encoding fits `octets` (at
/// least the first entry); the id of the last entry kept when some were left out.
pub fn first_within<M: Machine>(
    mut rpc: AppendEntriesRequest<GroupConfig<M>>,
    octets: usize,
) -> (AppendEntriesRequest<GroupConfig<M>>, Option<LogId>) {
    // The first entry goes whatever its size: one alone (most calls of a set keeping
    // up) needs no measuring.
    if rpc.entries.len() <= 1 {
        return (rpc, None);
    }
    let mut used = 0usize;
    let mut kept = 0;
    for entry in &rpc.entries {
        let size = postcard::serialize_with_flavor(entry, Size::default()).unwrap_or(usize::MAX);
        used = used.saturating_add(size);
        if kept > 0 && used > octets {
            break;
        }
        kept += 1;
    }
    if kept == rpc.entries.len() {
        return (rpc, None);
    }
    rpc.entries.truncate(kept);
    let last = rpc.entries.last().map(|entry| entry.log_id);
    (rpc, last)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use openraft::testing::log_id;
    use openraft::{Entry, EntryPayload, Vote};

    use super::*;
    use crate::names::Handle;
    use crate::replication::types::{Proposal, Request, RequestId};
    use crate::replication::{HandleCommand, HandleSet};
    use crate::storage::ExistingHandle;
    use crate::values::HandleValue;

    const ALLOWED: Duration = Duration::from_millis(50);

    /// A create whose URL is `octets` long.
    fn create(octets: usize) -> Request<HandleCommand> {
        Request {
            id: RequestId(1),
            command: HandleCommand::Create {
                handle: Handle::parse("10.1/x").unwrap(),
                values: vec![HandleValue::new(1, "URL", "x".repeat(octets))],
                existing: ExistingHandle::Refuse,
            },
        }
    }

    /// An AppendEntries of entries 1..=count, each a request of about `octets`.
    fn append(count: u64, octets: usize) -> AppendEntriesRequest<GroupConfig<HandleSet>> {
        let entries = (1..=count)
            .map(|index| Entry {
                log_id: log_id(1, 1, index),
                payload: EntryPayload::Normal(Proposal(Arc::from([create(octets)]))),
            })
            .collect();
        AppendEntriesRequest {
            vote: Vote::new_committed(1, 1),
            prev_log_id: None,
            leader_commit: None,
            entries,
        }
    }

    #[test]
    fn entries_that_fit_go_whole_and_the_others_are_cut_after_the_last_that_fits() {
        let (whole, cut) = first_within(append(4, 1000), 10_000);
        assert_eq!((whole.entries.len(), cut), (4, None));

        let (part, cut) = first_within(append(10, 1000), 3_500);
        assert_eq!(part.entries.len(), 3);
        assert_eq!(cut, Some(log_id(1, 1, 3)));
    }

    #[test]
    fn an_entry_larger_than_the_budget_goes_alone() {
        let (part, cut) = first_within(append(3, 100_000), 1_000);
        assert_eq!(part.entries.len(), 1);
        assert_eq!(cut, Some(log_id(1, 1, 1)));
        let (alone, cut) = first_within(append(1, 100_000), 1_000);
        assert_eq!((alone.entries.len(), cut), (1, None));
    }

    #[test]
    fn a_slow_or_dropped_call_halves_the_budget_down_to_the_least() {
        let budget = SendBudget::default();
        budget.start().ended(ALLOWED * 3 / 4, ALLOWED, false);
        assert_eq!(budget.octets(), REPLICATED_OCTETS / 2);
        drop(budget.start());
        assert_eq!(budget.octets(), REPLICATED_OCTETS / 4);
        for _ in 0..20 {
            drop(budget.start());
        }
        assert_eq!(budget.octets(), LEAST_SENT);
    }

    #[test]
    fn a_quick_cut_call_doubles_it_up_to_the_most_and_only_a_slow_failure_halves_it() {
        let budget = SendBudget::default();
        drop(budget.start());
        drop(budget.start());
        budget.start().ended(Duration::ZERO, ALLOWED, false);
        assert_eq!(budget.octets(), REPLICATED_OCTETS / 4);
        // A failure at the deadline: the call was too slow.
        budget.start().ended(ALLOWED, ALLOWED, false);
        assert_eq!(budget.octets(), REPLICATED_OCTETS / 8);
        budget.start().ended(ALLOWED / 10, ALLOWED, true);
        // Quick but whole: the budget was not what limited it.
        budget.start().ended(ALLOWED / 10, ALLOWED, false);
        assert_eq!(budget.octets(), REPLICATED_OCTETS / 4);
        budget.start().ended(ALLOWED / 10, ALLOWED, true);
        assert_eq!(budget.octets(), REPLICATED_OCTETS / 2);
        // Neither quick nor slow: kept.
        budget.start().ended(ALLOWED / 4, ALLOWED, true);
        assert_eq!(budget.octets(), REPLICATED_OCTETS / 2);
        for _ in 0..5 {
            budget.start().ended(Duration::ZERO, ALLOWED, true);
        }
        assert_eq!(budget.octets(), REPLICATED_OCTETS);
    }
}
