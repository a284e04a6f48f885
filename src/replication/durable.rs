//! When the applied state reaches the disk: a group's state machine commits its
//! applies without waiting for the disk, and [`Durable`] makes them durable a little
//! later, in one fsync for many.
//!
//! The log is what makes a write durable: an entry is acknowledged only once a quorum
//! has it on disk, and a node that crashes applies again, from its log, whatever its
//! store lost. So an apply need not wait for its own fsync, which was one of the two
//! on every write's path at every member. What must hold is the log store's invariant
//! (`last_purged <= durably applied`): the log may drop only entries the store has on
//! disk. So the durably applied log id is published apart from the applied one
//! ([`Durable::watch`]), and a purge that waits for it asks for a sync at once
//! ([`Durable::hasten`]); otherwise a task ([`keep_syncing`]) syncs at most
//! [`SYNC_EVERY`] after an apply.
//!
//! Installing a snapshot commits durably, making every earlier apply durable with it.
//! A failed sync stops the group: the next apply reports it to openraft.
//! Must not: publish a log id as durable before a sync that began after its commit.

use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::{Notify, watch};

use super::blocking;
use super::error::Error;
use super::types::LogId;
use crate::storage::Store;

/// How long an apply may stay unsynced when nothing asks for it sooner. A sync
/// writes every page the applies since the last one dirtied, fsyncs, and records
/// redb's allocator state (quick repair): at 50 ms it was the largest item of a
/// member's CPU under a write load (15-21 % in `perf`), as the same B-tree leaves
/// were written and synced again twenty times a second. Longer only means more of
/// the log to apply again after a crash (the log holds it until the sync: purges
/// wait for it, and ask for it at once).
pub const SYNC_EVERY: Duration = Duration::from_secs(1);

/// The durability of one state machine's applies; the state machine holds the only
/// strong reference, so the watch closes when openraft drops it.
#[derive(Debug)]
pub struct Durable {
    store: Arc<Store>,
    /// The last log id applied by a commit that no sync has covered yet.
    unsynced: Mutex<Option<LogId>>,
    /// The last log id applied durably.
    durable: watch::Sender<Option<LogId>>,
    /// Wakes the sync task before its time (shared with it, which holds the rest only
    /// while it syncs).
    wanted: Arc<Notify>,
    /// Why a sync failed, once one has.
    failed: Mutex<Option<String>>,
}

impl Durable {
    /// The durability of applies to `store`, durable up to `applied` now. Nothing is
    /// synced until [`keep_syncing`] runs for it.
    pub fn new(store: Arc<Store>, applied: Option<LogId>) -> Durable {
        Durable {
            store,
            unsynced: Mutex::new(None),
            durable: watch::Sender::new(applied),
            wanted: Arc::new(Notify::new()),
            failed: Mutex::new(None),
        }
    }

    /// Watches the last log id applied durably.
    pub fn watch(&self) -> watch::Receiver<Option<LogId>> {
        self.durable.subscribe()
    }

    /// Asks for every apply so far to be made durable now rather than later; an
    /// error if a sync has failed (nothing will be made durable any more).
    pub fn hasten(&self) -> Result<(), Error> {
        self.still_syncing()?;
        self.wanted.notify_one();
        Ok(())
    }

    /// Records that a commit not yet synced applied the log up to `id`; an error if
    /// an earlier sync failed (the group must stop).
    pub fn applied_unsynced(&self, id: Option<LogId>) -> Result<(), Error> {
        self.still_syncing()?;
        *lock(&self.unsynced) = id;
        Ok(())
    }

    /// An error naming the failed sync, once one has failed.
    fn still_syncing(&self) -> Result<(), Error> {
        match lock(&self.failed).clone() {
            Some(reason) => Err(Error::Sync(reason)),
            None => Ok(()),
        }
    }

    /// Records that a durable commit applied the log up to `id` (and so made every
    /// earlier commit durable too).
    pub fn applied_durably(&self, id: Option<LogId>) {
        *lock(&self.unsynced) = None;
        self.publish(id);
    }

    /// Makes durable whatever was applied unsynced before the call. Blocks on the disk.
    fn sync(&self) -> Result<(), Error> {
        let Some(id) = *lock(&self.unsynced) else {
            return Ok(());
        };
        self.store.sync()?;
        let mut unsynced = lock(&self.unsynced);
        if *unsynced == Some(id) {
            *unsynced = None;
        }
        drop(unsynced);
        self.publish(Some(id));
        Ok(())
    }

    /// Publishes `id` as durable unless a later one already is.
    fn publish(&self, id: Option<LogId>) {
        self.durable.send_if_modified(|durable| {
            let newer = id > *durable;
            if newer {
                *durable = id;
            }
            newer
        });
    }
}

/// Syncs every [`SYNC_EVERY`], or at once when asked, until the state machine is
/// dropped or a sync fails.
pub async fn keep_syncing(durable: Weak<Durable>) {
    let Some(wanted) = durable.upgrade().map(|strong| Arc::clone(&strong.wanted)) else {
        return;
    };
    loop {
        // A timeout only means no one asked sooner.
        let _asked = tokio::time::timeout(SYNC_EVERY, wanted.notified()).await;
        let Some(strong) = durable.upgrade() else {
            return;
        };
        let syncing = Arc::clone(&strong);
        if let Err(error) = blocking(move || syncing.sync()).await {
            tracing::error!(%error, "syncing the applied state failed: the group stops at its next apply");
            *lock(&strong.failed) = Some(error.to_string());
            return;
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
