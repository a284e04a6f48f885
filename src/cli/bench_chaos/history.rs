//! The history of a chaos run and what is checked of it: every operation on a handle
//! with its invocation and its response placed in one global order, checked for
//! linearizability handle by handle with stateright's `LinearizabilityTester`, and
//! the acknowledged writes the members' final values lost.
//!
//! Each handle is a register whose value is the id of the write that last set its URL
//! value, or nothing while the handle does not exist; handles are independent, so
//! each is checked alone (linearizability is compositional), which keeps every search
//! small. An operation is invoked and answered by a *process*: a client that does one
//! thing at a time. An operation whose outcome is unknown (a timeout, "server too
//! busy", a connection cut after the request went out) may take effect at any time
//! after its invocation or never: it stays in flight for good, so its process is
//! retired and the client goes on as a new one, as Jepsen does. An operation that
//! surely never reached a server (the connection was refused) is left out.
//!
//! The tester searches the orders depth first without memory, and an operation in
//! flight for good may go anywhere after its invocation: a handful of them on one
//! handle make the search explode. So a modify of unknown outcome whose value no read
//! saw is left out first, which changes no verdict: a modify changes only the value
//! (it needs the handle to exist and keeps it existing), so leaving out one whose
//! value nobody read changes no answer in any order, and one in flight may always be
//! left unplaced.
//!
//! Pure: no sockets, no clock. Positions come from [`Clock`], which the workload
//! ticks right before sending a request and right after its answer, so an operation
//! answered before another was invoked comes first in the order, as in real time.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};

use stateright::semantics::{ConsistencyTester, LinearizabilityTester, SequentialSpec};

/// The id of one write: the URL value it sets is [`url_of`] it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WriteId(pub u64);

/// A client doing one operation at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProcessId(pub u64);

/// The number of a handle of the run (see `workload::handle_name`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key(pub u64);

/// An operation on one handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// Create the handle with its URL value set by this write (refused if it exists).
    Create(WriteId),
    /// Replace its URL value with this write's (refused if it does not exist).
    Modify(WriteId),
    /// Resolve its URL value.
    Read,
}

/// The answer to an [`Op`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ret {
    /// The create was carried out.
    Created,
    /// The create was refused: the handle exists.
    AlreadyExists,
    /// The modify was carried out.
    Modified,
    /// The handle does not exist (a modify refused, or a read).
    NotFound,
    /// A read found this value.
    Value(Observed),
}

/// A URL value as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Observed {
    /// The value a write of this run set.
    Write(WriteId),
    /// A value no write of this run could have set.
    Foreign,
}

/// The URL value write `id` sets.
pub fn url_of(id: WriteId) -> String {
    format!("https://example.org/chaos/{}", id.0)
}

/// What a URL value read back says about the write that set it.
pub fn observed(url: &[u8]) -> Observed {
    std::str::from_utf8(url)
        .ok()
        .and_then(|url| url.strip_prefix("https://example.org/chaos/"))
        .and_then(|id| id.parse().ok())
        .map_or(Observed::Foreign, |id| Observed::Write(WriteId(id)))
}

/// How an operation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Answered at this position with this.
    Returned {
        /// Its position in the run's order.
        at: u64,
        /// The answer.
        ret: Ret,
    },
    /// No usable answer: it may or may not have taken effect.
    Unknown,
}

/// One operation of the history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// Who invoked it.
    pub process: ProcessId,
    /// The member (index) it was sent to, for the report.
    pub member: usize,
    /// On which handle.
    pub key: Key,
    /// What.
    pub op: Op,
    /// Its position in the run's order when it was sent.
    pub invoked: u64,
    /// How it ended.
    pub outcome: Outcome,
}

impl Record {
    /// The write it makes, if it writes.
    fn write(&self) -> Option<WriteId> {
        match self.op {
            Op::Create(id) | Op::Modify(id) => Some(id),
            Op::Read => None,
        }
    }

    /// Where it was answered, if it was carried out as a write.
    fn acknowledged_at(&self) -> Option<u64> {
        match self.outcome {
            Outcome::Returned {
                at,
                ret: Ret::Created | Ret::Modified,
            } => Some(at),
            _ => None,
        }
    }
}

/// The run's order: hands out increasing positions, shared by every client.
#[derive(Debug, Default)]
pub struct Clock(AtomicU64);

impl Clock {
    /// The next position.
    pub fn tick(&self) -> u64 {
        self.0.fetch_add(1, Ordering::SeqCst)
    }
}

/// The sequential specification of one handle: the write that set its URL value,
/// `None` while it does not exist.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
struct HandleRegister(Option<WriteId>);

impl SequentialSpec for HandleRegister {
    type Op = Op;
    type Ret = Ret;

    fn invoke(&mut self, op: &Op) -> Ret {
        match (*op, self.0) {
            (Op::Create(id), None) => {
                self.0 = Some(id);
                Ret::Created
            }
            (Op::Create(_), Some(_)) => Ret::AlreadyExists,
            (Op::Modify(id), Some(_)) => {
                self.0 = Some(id);
                Ret::Modified
            }
            (Op::Modify(_) | Op::Read, None) => Ret::NotFound,
            (Op::Read, Some(id)) => Ret::Value(Observed::Write(id)),
        }
    }
}

/// The handles whose history is not linearizable, and the size of what was checked.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Handles checked.
    pub handles: usize,
    /// Operations checked.
    pub operations: usize,
    /// The handles whose history no order explains.
    pub violations: Vec<Key>,
}

/// Checks each handle's history for linearizability.
pub fn check(records: &[Record]) -> Verdict {
    let by_key = by_key(&without_unseen_modifies(records));
    let violations = by_key
        .iter()
        .filter(|(_, records)| !linearizable(records))
        .map(|(key, _)| *key)
        .collect();
    Verdict {
        handles: by_key.len(),
        operations: records.len(),
        violations,
    }
}

/// `records` less the modifies of unknown outcome whose value no read returned.
fn without_unseen_modifies(records: &[Record]) -> Vec<Record> {
    let seen: HashSet<WriteId> = records
        .iter()
        .filter_map(|record| match record.outcome {
            Outcome::Returned {
                ret: Ret::Value(Observed::Write(id)),
                ..
            } => Some(id),
            _ => None,
        })
        .collect();
    let unseen_modify = |record: &Record| match (record.op, record.outcome) {
        (Op::Modify(id), Outcome::Unknown) => !seen.contains(&id),
        _ => false,
    };
    records
        .iter()
        .filter(|r| !unseen_modify(r))
        .copied()
        .collect()
}

fn by_key(records: &[Record]) -> BTreeMap<Key, Vec<Record>> {
    let mut by_key: BTreeMap<Key, Vec<Record>> = BTreeMap::new();
    for record in records {
        by_key.entry(record.key).or_default().push(*record);
    }
    by_key
}

/// An invocation or a return, at its position.
enum Event {
    Invoke(ProcessId, Op),
    Return(ProcessId, Ret),
}

/// Whether one handle's operations have a linearization. A malformed history (a
/// process with two operations in flight) counts as not linearizable.
fn linearizable(records: &[Record]) -> bool {
    let mut events: Vec<(u64, Event)> = Vec::with_capacity(records.len() * 2);
    for record in records {
        events.push((record.invoked, Event::Invoke(record.process, record.op)));
        if let Outcome::Returned { at, ret } = record.outcome {
            events.push((at, Event::Return(record.process, ret)));
        }
    }
    events.sort_unstable_by_key(|(at, _)| *at);
    let mut tester = LinearizabilityTester::new(HandleRegister::default());
    for (_, event) in events {
        let fed = match event {
            Event::Invoke(process, op) => tester.on_invoke(process, op).map(drop),
            Event::Return(process, ret) => tester.on_return(process, ret).map(drop),
        };
        if fed.is_err() {
            return false;
        }
    }
    tester.is_consistent()
}

/// An acknowledged write that a member's final value says was lost.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct LostWrite {
    /// The handle.
    pub key: Key,
    /// The write.
    pub write: WriteId,
    /// The member (index) that lost it.
    pub member: usize,
}

/// A member's value of a handle once every member has caught up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FinalValue {
    /// The member (index).
    pub member: usize,
    /// The handle.
    pub key: Key,
    /// What it holds: [`Ret::NotFound`] or [`Ret::Value`].
    pub value: Ret,
}

/// The acknowledged writes that the final values lost: every acknowledged write of a
/// handle a member does not hold, and every acknowledged write sent after the write
/// whose value a member holds had been acknowledged (it must have replaced it; nothing
/// deletes a handle). A final value set by a write of unknown outcome proves nothing:
/// that write may have landed last.
pub fn lost_writes(records: &[Record], finals: &[FinalValue]) -> BTreeSet<LostWrite> {
    let by_key = by_key(records);
    let acknowledged_at: HashMap<WriteId, u64> = records
        .iter()
        .filter_map(|r| Some((r.write()?, r.acknowledged_at()?)))
        .collect();
    let mut lost = BTreeSet::new();
    for last in finals {
        let Some(history) = by_key.get(&last.key) else {
            continue;
        };
        let overwritten_before = match last.value {
            Ret::NotFound => None,
            Ret::Value(Observed::Write(id)) => match acknowledged_at.get(&id) {
                Some(at) => Some(*at),
                None => continue,
            },
            _ => continue,
        };
        for record in history {
            let (Some(write), Some(_)) = (record.write(), record.acknowledged_at()) else {
                continue;
            };
            if overwritten_before.is_none_or(|at| record.invoked > at) {
                lost.insert(LostWrite {
                    key: last.key,
                    write,
                    member: last.member,
                });
            }
        }
    }
    lost
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: Key = Key(7);

    /// A history built in order: each call takes the next positions.
    #[derive(Default)]
    struct Builder {
        records: Vec<Record>,
        next: u64,
    }

    impl Builder {
        fn tick(&mut self) -> u64 {
            self.next += 1;
            self.next
        }

        /// `process` invokes `op`; its index in the records.
        fn invoke(&mut self, process: u64, op: Op) -> usize {
            let invoked = self.tick();
            self.records.push(Record {
                process: ProcessId(process),
                member: 0,
                key: KEY,
                op,
                invoked,
                outcome: Outcome::Unknown,
            });
            self.records.len() - 1
        }

        fn answer(&mut self, index: usize, ret: Ret) {
            let at = self.tick();
            self.records[index].outcome = Outcome::Returned { at, ret };
        }

        fn call(&mut self, process: u64, op: Op, ret: Ret) {
            let index = self.invoke(process, op);
            self.answer(index, ret);
        }
    }

    fn value(id: u64) -> Ret {
        Ret::Value(Observed::Write(WriteId(id)))
    }

    fn linearizable_history(records: &[Record]) -> bool {
        check(records).violations.is_empty()
    }

    #[test]
    fn sequential_writes_and_reads_are_linearizable() {
        let mut h = Builder::default();
        h.call(1, Op::Read, Ret::NotFound);
        h.call(1, Op::Modify(WriteId(1)), Ret::NotFound);
        h.call(1, Op::Create(WriteId(2)), Ret::Created);
        h.call(2, Op::Create(WriteId(3)), Ret::AlreadyExists);
        h.call(2, Op::Modify(WriteId(4)), Ret::Modified);
        h.call(3, Op::Read, value(4));
        assert_eq!(
            check(&h.records),
            Verdict {
                handles: 1,
                operations: 6,
                violations: Vec::new()
            }
        );
    }

    #[test]
    fn a_stale_read_after_an_acknowledged_write_is_a_violation() {
        let mut h = Builder::default();
        h.call(1, Op::Create(WriteId(1)), Ret::Created);
        h.call(1, Op::Modify(WriteId(2)), Ret::Modified);
        h.call(2, Op::Read, value(1));
        assert_eq!(check(&h.records).violations, [KEY]);
    }

    #[test]
    fn a_read_during_a_write_may_see_either_value() {
        for seen in [1, 2] {
            let mut h = Builder::default();
            h.call(1, Op::Create(WriteId(1)), Ret::Created);
            let write = h.invoke(1, Op::Modify(WriteId(2)));
            h.call(2, Op::Read, value(seen));
            h.answer(write, Ret::Modified);
            h.call(2, Op::Read, value(2));
            assert!(linearizable_history(&h.records), "saw {seen}");
        }
    }

    #[test]
    fn a_write_of_unknown_outcome_may_land_late_or_never() {
        for later in [1, 2] {
            let mut h = Builder::default();
            h.call(1, Op::Create(WriteId(1)), Ret::Created);
            h.invoke(1, Op::Modify(WriteId(2)));
            h.call(2, Op::Read, value(1));
            h.call(3, Op::Read, value(later));
            assert!(linearizable_history(&h.records), "then {later}");
        }
    }

    #[test]
    fn a_write_of_unknown_outcome_does_not_come_back_once_overwritten() {
        let mut h = Builder::default();
        h.call(1, Op::Create(WriteId(1)), Ret::Created);
        h.invoke(1, Op::Modify(WriteId(2)));
        h.call(2, Op::Read, value(2));
        h.call(3, Op::Modify(WriteId(3)), Ret::Modified);
        h.call(2, Op::Read, value(2));
        assert_eq!(check(&h.records).violations, [KEY]);
    }

    #[test]
    fn a_refused_create_of_a_handle_nobody_created_is_a_violation() {
        // What a client that re-sends a create its first try had carried out would see.
        let mut h = Builder::default();
        h.call(1, Op::Create(WriteId(1)), Ret::AlreadyExists);
        assert_eq!(check(&h.records).violations, [KEY]);
    }

    #[test]
    fn a_value_no_write_set_is_a_violation() {
        let mut h = Builder::default();
        h.call(1, Op::Create(WriteId(1)), Ret::Created);
        h.call(2, Op::Read, Ret::Value(Observed::Foreign));
        assert_eq!(check(&h.records).violations, [KEY]);
    }

    #[test]
    fn unseen_modifies_of_unknown_outcome_are_left_out_and_seen_ones_kept() {
        let mut h = Builder::default();
        h.call(1, Op::Create(WriteId(1)), Ret::Created);
        for id in 2..40 {
            h.invoke(id, Op::Modify(WriteId(id)));
        }
        h.invoke(40, Op::Create(WriteId(40)));
        h.call(41, Op::Read, value(39));
        h.call(41, Op::Modify(WriteId(42)), Ret::Modified);
        h.call(41, Op::Read, value(42));
        let kept = without_unseen_modifies(&h.records);
        let ops: Vec<Op> = kept.iter().map(|r| r.op).collect();
        assert_eq!(
            ops,
            [
                Op::Create(WriteId(1)),
                Op::Modify(WriteId(39)),
                Op::Create(WriteId(40)),
                Op::Read,
                Op::Modify(WriteId(42)),
                Op::Read
            ]
        );
        assert_eq!(check(&h.records).operations, h.records.len());
        assert!(check(&h.records).violations.is_empty());
    }

    #[test]
    fn urls_name_their_write() {
        assert_eq!(
            observed(url_of(WriteId(42)).as_bytes()),
            Observed::Write(WriteId(42))
        );
        assert_eq!(observed(b"https://example.org/other"), Observed::Foreign);
        assert_eq!(observed(&[0xff]), Observed::Foreign);
    }

    fn final_value(member: usize, value: Ret) -> FinalValue {
        FinalValue {
            member,
            key: KEY,
            value,
        }
    }

    #[test]
    fn a_member_without_the_handle_lost_every_acknowledged_write() {
        let mut h = Builder::default();
        h.call(1, Op::Create(WriteId(1)), Ret::Created);
        h.call(1, Op::Modify(WriteId(2)), Ret::Modified);
        h.invoke(1, Op::Modify(WriteId(3)));
        let lost = lost_writes(
            &h.records,
            &[final_value(0, value(3)), final_value(1, Ret::NotFound)],
        );
        let writes: Vec<(WriteId, usize)> = lost.iter().map(|l| (l.write, l.member)).collect();
        assert_eq!(writes, [(WriteId(1), 1), (WriteId(2), 1)]);
    }

    #[test]
    fn a_member_holding_an_overwritten_value_lost_the_writes_after_it() {
        let mut h = Builder::default();
        h.call(1, Op::Create(WriteId(1)), Ret::Created);
        h.call(1, Op::Modify(WriteId(2)), Ret::Modified);
        let concurrent = h.invoke(2, Op::Modify(WriteId(3)));
        h.call(1, Op::Modify(WriteId(4)), Ret::Modified);
        h.answer(concurrent, Ret::Modified);
        let finals = [
            final_value(0, value(1)),
            final_value(1, value(3)),
            final_value(2, value(4)),
        ];
        let lost = lost_writes(&h.records, &finals);
        let writes: Vec<(WriteId, usize)> = lost.iter().map(|l| (l.write, l.member)).collect();
        // Member 1 may hold 3: it was sent before 4 was acknowledged.
        assert_eq!(
            writes,
            [(WriteId(2), 0), (WriteId(3), 0), (WriteId(4), 0)],
            "{lost:?}"
        );
    }
}
