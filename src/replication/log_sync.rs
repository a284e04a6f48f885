//! How much of a group's log is on this node's disk, for a leader that replicates its
//! own new entries while their fsync runs.
//!
//! openraft 0.9 waits for a leader's append to be flushed before it sends the entries
//! to the followers, so a write waited for two fsyncs one after the other (the
//! leader's, then a follower's). A leader's own new entries of plain requests are now
//! handed to openraft as soon as they are written, and their fsync runs beside the
//! replication ([`super::LogStore`]). openraft then counts the leader's copy in a
//! quorum before it is durable, so its "committed" may run ahead of what a quorum
//! holds on disk. Three things keep that from mattering; this type tracks what they
//! wait for (the highest index durable on this node):
//! 1. **The leader applies nothing its own disk lacks.** The state machine waits until
//!    an entry is durable here before applying it ([`LogSync::durable_at`]); a write is
//!    answered only once applied, so an answered write is on the leader's disk and on
//!    a follower's (which flushes before it acknowledges, as before).
//! 2. **Followers learn no commit the leader's disk lacks.** Each AppendEntries
//!    carries the leader's committed position lowered to its durable one
//!    ([`LogSync::durable`]), so no follower applies, or serves a read of, an entry
//!    that a crash of the leader could still take from the log of every member but
//!    one. An entry so lost was never applied anywhere and may be dropped, as any
//!    entry not committed may.
//! 3. **Only plain requests go early.** Membership changes and a new leader's blank
//!    entry are flushed before openraft hears of them, so no configuration is taken as
//!    committed on a copy that is not durable.
//!
//! At most one such fsync runs at a time: every later log write waits for it first
//! ([`LogSync::all_durable`]), so what a machine crash can cut from the log is still
//! only the last write, and a committed position written with an append never names
//! an entry that is not durable. Owns no file: the log store writes and syncs.

use tokio::sync::watch;

/// The durable part of one group's log on this node; shared by the log store, the
/// state machine and the group's network.
#[derive(Debug)]
pub struct LogSync {
    state: watch::Sender<Synced>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Synced {
    /// Whether a log follows this (a state machine alone waits for nothing).
    following: bool,
    /// The highest index written to the log.
    written: Option<u64>,
    /// The highest index known to be on disk, with everything before it.
    durable: Option<u64>,
    /// Whether an fsync failed: nothing written since can be trusted, and the group
    /// stops.
    failed: bool,
}

/// An fsync of the log failed: the group stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("an fsync of the Raft log failed")]
pub struct SyncFailed;

impl Default for LogSync {
    fn default() -> Self {
        let nothing = Synced {
            following: false,
            written: None,
            durable: None,
            failed: false,
        };
        LogSync {
            state: watch::Sender::new(nothing),
        }
    }
}

impl LogSync {
    /// The log is open, durable up to and including `last` (its last entry).
    pub fn opened(&self, last: Option<u64>) {
        self.state.send_modify(|state| {
            state.following = true;
            state.written = last;
            state.durable = last;
        });
    }

    /// The log was written and synced whole, ending at `last`: after an append that
    /// waited for its fsync, or the one that ran beside openraft.
    pub fn synced(&self, last: Option<u64>) {
        self.state.send_modify(|state| {
            state.written = last;
            state.durable = last;
        });
    }

    /// Every entry from `index` on was deleted, durably: what is left is on disk.
    pub fn truncated(&self, index: u64) {
        self.state.send_modify(|state| {
            state.written = state.written.min(index.checked_sub(1));
            state.durable = state.written;
        });
    }

    /// Entries up to `last` were written; their fsync is still to come
    /// ([`LogSync::synced`] or [`LogSync::failed`] follows).
    pub fn written(&self, last: u64) {
        self.state.send_modify(|state| state.written = Some(last));
    }

    /// An fsync failed.
    pub fn failed(&self) {
        self.state.send_modify(|state| state.failed = true);
    }

    /// The highest index durable here; `None` when none is, or a sync failed.
    pub fn durable(&self) -> Option<u64> {
        let state = *self.state.borrow();
        if state.failed { None } else { state.durable }
    }

    /// The last written index of the log ([`LogSync::written`] or
    /// [`LogSync::synced`]).
    pub fn last_written(&self) -> Option<u64> {
        self.state.borrow().written
    }

    /// Returns once everything written is durable (at once when it is).
    pub async fn all_durable(&self) -> Result<(), SyncFailed> {
        self.wait(|state| state.written <= state.durable).await
    }

    /// Returns once the entry at `index` is durable (at once when no log follows this).
    pub async fn durable_at(&self, index: u64) -> Result<(), SyncFailed> {
        self.wait(|state| !state.following || state.durable >= Some(index))
            .await
    }

    async fn wait(&self, done: impl Fn(&Synced) -> bool) -> Result<(), SyncFailed> {
        let mut state = self.state.subscribe();
        // The sender lives as long as `self`, so the wait cannot end closed.
        let reached = state
            .wait_for(|state| state.failed || done(state))
            .await
            .map_err(|_closed| SyncFailed)?;
        if reached.failed {
            Err(SyncFailed)
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    async fn finishes<F: Future>(future: F) -> Option<F::Output> {
        tokio::time::timeout(Duration::from_millis(200), future)
            .await
            .ok()
    }

    #[tokio::test]
    async fn a_state_machine_without_a_log_waits_for_nothing() {
        let sync = LogSync::default();
        assert_eq!(finishes(sync.durable_at(7)).await, Some(Ok(())));
    }

    #[tokio::test]
    async fn an_entry_written_is_waited_for_until_its_sync() {
        let sync = Arc::new(LogSync::default());
        sync.opened(Some(4));
        assert_eq!(sync.durable(), Some(4));
        sync.written(6);
        assert_eq!(sync.durable(), Some(4), "written is not durable");
        assert_eq!(finishes(sync.durable_at(4)).await, Some(Ok(())));
        assert_eq!(finishes(sync.durable_at(5)).await, None);
        assert_eq!(finishes(sync.all_durable()).await, None);

        let waiting = tokio::spawn({
            let sync = Arc::clone(&sync);
            async move { sync.durable_at(6).await }
        });
        sync.synced(Some(6));
        assert_eq!(finishes(waiting).await.map(Result::unwrap), Some(Ok(())));
        assert_eq!(finishes(sync.all_durable()).await, Some(Ok(())));
    }

    #[tokio::test]
    async fn a_failed_sync_fails_every_wait_and_hides_the_durable_index() {
        let sync = LogSync::default();
        sync.opened(None);
        sync.written(0);
        sync.failed();
        assert_eq!(sync.durable(), None);
        assert_eq!(finishes(sync.durable_at(0)).await, Some(Err(SyncFailed)));
        assert_eq!(finishes(sync.all_durable()).await, Some(Err(SyncFailed)));
    }

    #[tokio::test]
    async fn a_truncation_lowers_what_is_written_and_durable() {
        let sync = LogSync::default();
        sync.opened(Some(9));
        sync.truncated(6);
        assert_eq!((sync.last_written(), sync.durable()), (Some(5), Some(5)));
        assert_eq!(finishes(sync.durable_at(6)).await, None);
        sync.truncated(8);
        assert_eq!(
            sync.last_written(),
            Some(5),
            "past the end: nothing deleted"
        );
        sync.truncated(0);
        assert_eq!((sync.last_written(), sync.durable()), (None, None));
    }
}
