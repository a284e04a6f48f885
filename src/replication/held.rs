//! Applies held together: a member commits the entries other members proposed in one
//! redb transaction for several, rather than one for each.
//!
//! A redb commit costs a member about 125 µs of CPU however little it holds (its table
//! roots, checksums and page bookkeeping; measured on a lone writer's set), and a
//! follower applies each entry as it learns it is committed: one at a time under a
//! lone writer, on a machine whose cores the leader's own path needs. Nobody waits for
//! a follower's apply: the writer waits for the leader's, and a follower's reads are
//! behind the leader's anyway. So the state machine of a member ([`HeldApplies`])
//! keeps the transaction of such an entry open and applies the next ones into it,
//! committing once it holds [`AT_MOST`] entries or [`WAIT`] after its first (a task,
//! [`keep_committing`]), and at once when an entry must be: one this member proposed
//! (its writer waits for the answer, and its reads must see it), a membership change,
//! or a leader's first entry of its term (so a new leader's store holds every entry
//! before the ones it proposes).
//!
//! openraft counts a held entry as applied. Whoever must see every entry it counts
//! commits what is held first ([`HeldCommits`]): a fresh read waiting for a read index,
//! and a snapshot's view. A crash loses what is held, as it loses an unsynced commit:
//! the log holds it and the member applies it again. Must not: report a held apply to
//! [`Durable`] before its commit. A redb file has one writer at a time, so a sync or a
//! snapshot install waits for the held transaction's commit, at most [`WAIT`].

use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use openraft::EntryPayload;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::blocking;
use super::durable::Durable;
use super::error::Error;
use super::machine::Machine;
use super::types::{Entry, LogId, NodeId};
use crate::storage::{Store, WriteBatch};

/// How long an apply may be held before its commit.
pub const WAIT: Duration = Duration::from_millis(5);
/// Most entries held in one transaction.
pub const AT_MOST: usize = 64;
/// How often the committing task looks whether its state machine is gone, when
/// nothing is held.
const IDLE_CHECK: Duration = Duration::from_secs(1);

/// The applies a member holds uncommitted, shared by its state machine and the task
/// committing them ([`keep_committing`]).
#[derive(Debug, Default)]
pub struct HeldApplies {
    held: Mutex<Option<Held>>,
    /// Wakes the committing task when a transaction starts being held.
    started: Arc<Notify>,
    /// Why a commit of the task failed, once one has.
    failed: Mutex<Option<String>>,
}

/// An open transaction of applies.
struct Held {
    batch: WriteBatch,
    entries: usize,
    since: Instant,
    /// The last log id applied in it.
    last: Option<LogId>,
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Held")
            .field("entries", &self.entries)
            .field("last", &self.last)
            .finish_non_exhaustive()
    }
}

/// Whether `entries` may be held by member `me`: each is a client entry another
/// member proposed.
pub fn may_hold<M: Machine>(entries: &[Entry<M>], me: NodeId) -> bool {
    entries.iter().all(|entry| {
        entry.log_id.leader_id.node_id != me && matches!(entry.payload, EntryPayload::Normal(_))
    })
}

impl HeldApplies {
    /// Runs `apply` in the held transaction (or a new one of `store`), which then
    /// holds `entries` more entries applied up to `last`; commits it unless `hold` and
    /// it may wait longer. Whether it is held after. Blocks on the store.
    pub fn apply<T>(
        &self,
        store: &Store,
        durable: &Durable,
        entries: usize,
        hold: bool,
        apply: impl FnOnce(&mut WriteBatch) -> Result<(T, Option<LogId>), Error>,
    ) -> Result<(T, bool), Error> {
        if let Some(reason) = lock(&self.failed).clone() {
            return Err(Error::HeldCommit(reason));
        }
        let mut held = lock(&self.held);
        let mut open = match held.take() {
            Some(open) => open,
            None => Held {
                batch: store.write()?,
                entries: 0,
                since: Instant::now(),
                last: None,
            },
        };
        let (output, last) = apply(&mut open.batch)?;
        open.entries += entries;
        open.last = last;
        if hold && open.entries < AT_MOST && open.since.elapsed() < WAIT {
            let started = open.entries == entries;
            *held = Some(open);
            if started {
                self.started.notify_one();
            }
            return Ok((output, true));
        }
        open.commit(durable)?;
        Ok((output, false))
    }

    /// Commits the held transaction, if one is held. Blocks on the store.
    fn commit_held(&self, durable: &Durable) -> Result<(), Error> {
        match lock(&self.held).take() {
            Some(open) => open.commit(durable),
            None => Ok(()),
        }
    }

    /// When the held transaction is due, if one is held.
    fn due(&self) -> Option<Instant> {
        lock(&self.held).as_ref().map(|open| open.since + WAIT)
    }

    /// Commits the held transaction if it is due. Blocks on the store.
    fn commit_due(&self, durable: &Durable) -> Result<(), Error> {
        let mut held = lock(&self.held);
        match held.take() {
            Some(open) if open.since.elapsed() >= WAIT => open.commit(durable),
            kept => {
                *held = kept;
                Ok(())
            }
        }
    }
}

impl Held {
    fn commit(self, durable: &Durable) -> Result<(), Error> {
        self.batch.commit_unsynced()?;
        durable.applied_unsynced(self.last)
    }
}

/// Commits what a member holds when asked, for those who must see every apply
/// openraft counts; clones share it. Holds its state machine weakly.
#[derive(Debug, Clone)]
pub struct HeldCommits {
    held: Weak<HeldApplies>,
    durable: Weak<Durable>,
}

impl HeldCommits {
    /// Commits of `held`, reported to `durable`.
    pub fn new(held: &Arc<HeldApplies>, durable: &Arc<Durable>) -> HeldCommits {
        HeldCommits {
            held: Arc::downgrade(held),
            durable: Arc::downgrade(durable),
        }
    }

    /// Returns once every apply made before the call is committed (at once when
    /// nothing is held, or the state machine is gone).
    pub async fn commit_now(&self) -> Result<(), Error> {
        let (Some(held), Some(durable)) = (self.held.upgrade(), self.durable.upgrade()) else {
            return Ok(());
        };
        if lock(&held.held).is_none() {
            return Ok(());
        }
        blocking(move || held.commit_held(&durable)).await
    }
}

/// Commits what `held` holds once it is due, until the state machine is dropped or a
/// commit fails (the state machine's next apply reports it).
pub async fn keep_committing(held: Weak<HeldApplies>, durable: Weak<Durable>) {
    let Some(started) = held.upgrade().map(|strong| Arc::clone(&strong.started)) else {
        return;
    };
    loop {
        // A timeout only means nothing started being held.
        let _started = tokio::time::timeout(IDLE_CHECK, started.notified()).await;
        while let Some(due) = next_due(&held) {
            tokio::time::sleep_until(due).await;
            let (Some(strong), Some(durable)) = (held.upgrade(), durable.upgrade()) else {
                return;
            };
            let committing = Arc::clone(&strong);
            if let Err(error) = blocking(move || committing.commit_due(&durable)).await {
                tracing::error!(%error, "committing held applies failed: the group stops at its next apply");
                *lock(&strong.failed) = Some(error.to_string());
                return;
            }
        }
        if held.strong_count() == 0 {
            return;
        }
    }
}

/// When what `held` holds is due, if it holds any; no strong reference is kept, so
/// a state machine dropped meanwhile drops (aborts) what it held.
fn next_due(held: &Weak<HeldApplies>) -> Option<Instant> {
    held.upgrade()?.due()
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
