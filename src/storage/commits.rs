//! The store's current snapshot, shared by every reader until the next commit.
//!
//! Opening a read transaction and its tables costs more than the lookup a resolution
//! makes, so readers share one snapshot as long as no batch commits. A count of
//! commits tells when: it is even between commits and odd while one becomes visible
//! (redb commits one write transaction at a time), so a snapshot opened while the same
//! even count was read before and after is exactly the store at that count. Each
//! commit drops the shared snapshot, so none outlives the store's next change by more
//! than the reads still using it (an open read transaction keeps redb from reusing the
//! pages later commits free).
//!
//! [`Kept`] keeps a value decoded from a snapshot for as long as that snapshot is
//! current.
//!
//! A [`CommitWatch`] installed on the store ([`super::Store::watch`]) is told what each
//! commit may change ([`Changed`]: the folded keys of the handle records it wrote or
//! deleted, or everything) before the commit starts and again once it is visible to
//! every read begun after that ([`Commits::around`]), so that something kept from
//! earlier reads (the UDP edge's answers) is dropped before it could differ from the
//! store. A batch notes its changes as it writes ([`Changes`]); what it cannot name
//! handle by handle (slot states and slicing, documents such as the cluster map,
//! whole-store imports, bulk puts, slot deletions) counts as everything.

use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};

use redb::{Database, ReadableDatabase};

use super::recent::RecentIndex;
use super::{ReadSnapshot, StorageError};

/// Past this many handles a batch's changes count as everything: a replica applying
/// a long run of entries in one batch keeps no unbounded list.
const MOST_NAMED_HANDLES: usize = 1024;

/// What one commit may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Changed<'a> {
    /// The handle records of these folded keys (written or deleted), nothing else a
    /// resolution reads.
    Handles(&'a [String]),
    /// Anything: every kept answer must go.
    Everything,
}

/// Told of every commit of a store it is installed on ([`super::Store::watch`]).
pub trait CommitWatch: Send + Sync + Debug {
    /// Before a commit that may change `changed` starts.
    fn before_commit(&self, changed: Changed<'_>);
    /// Once that commit (or its failure) is over: every read begun from now on sees it.
    fn after_commit(&self, changed: Changed<'_>);
}

/// The changes a batch made so far, as a [`CommitWatch`] is told them.
#[derive(Debug, Default)]
pub(super) struct Changes {
    handles: Vec<String>,
    everything: bool,
}

impl Changes {
    /// Notes a write or deletion of the handle record of folded `key`.
    pub(super) fn handle(&mut self, key: &str) {
        if self.everything {
            return;
        }
        if self.handles.len() >= MOST_NAMED_HANDLES {
            self.everything();
        } else {
            self.handles.push(key.to_owned());
        }
    }

    /// Notes a change that is not one handle's.
    pub(super) fn everything(&mut self) {
        self.everything = true;
        self.handles = Vec::new();
    }

    fn changed(&self) -> Changed<'_> {
        if self.everything {
            Changed::Everything
        } else {
            Changed::Handles(&self.handles)
        }
    }
}

/// The commit count of one store, its current snapshot and its watch, shared by its
/// batches.
#[derive(Debug, Default)]
pub(super) struct Commits {
    count: AtomicU64,
    current: Mutex<Option<Arc<ReadSnapshot>>>,
    watch: RwLock<Option<Arc<dyn CommitWatch>>>,
}

impl Commits {
    /// Runs `commit` with the count odd, then drops the shared snapshot; the watch is
    /// told `changes` before and after (nothing when a batch changed nothing).
    pub(super) fn around<T>(&self, changes: &Changes, commit: impl FnOnce() -> T) -> T {
        let watch = self
            .watch
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let changed = changes.changed();
        let watch = watch.filter(|_| changed != Changed::Handles(&[]));
        if let Some(watch) = &watch {
            watch.before_commit(changed);
        }
        self.count.fetch_add(1, Ordering::SeqCst);
        let committed = commit();
        self.count.fetch_add(1, Ordering::SeqCst);
        self.current().take();
        if let Some(watch) = &watch {
            watch.after_commit(changed);
        }
        committed
    }

    /// Tells `watch` of every commit from now on.
    pub(super) fn watch(&self, watch: Arc<dyn CommitWatch>) {
        *self.watch.write().unwrap_or_else(PoisonError::into_inner) = Some(watch);
    }

    /// The snapshot of the store as of now: the shared one when no batch committed
    /// since it was opened, else a new one (shared from now on when no commit ran
    /// while it was opened).
    pub(super) fn snapshot(
        &self,
        db: &Database,
        recent: &Arc<RecentIndex>,
    ) -> Result<Arc<ReadSnapshot>, StorageError> {
        let before = self.count.load(Ordering::SeqCst);
        if let Some(current) = self
            .current()
            .as_ref()
            .filter(|s| s.version == Some(before))
        {
            return Ok(Arc::clone(current));
        }
        let txn = db.begin_read()?;
        let still = self.count.load(Ordering::SeqCst) == before && before.is_multiple_of(2);
        let snapshot = Arc::new(ReadSnapshot::new(
            txn,
            still.then_some(before),
            Arc::clone(recent),
        ));
        if still {
            let mut current = self.current();
            if self.count.load(Ordering::SeqCst) == before {
                *current = Some(Arc::clone(&snapshot));
            }
        }
        Ok(snapshot)
    }

    fn current(&self) -> MutexGuard<'_, Option<Arc<ReadSnapshot>>> {
        self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A value decoded from a store's snapshot, kept while that snapshot is current: for
/// what every request reads and seldom changes (the cluster map).
#[derive(Debug, Default)]
pub struct Kept<T> {
    kept: Mutex<Option<(u64, Arc<T>)>>,
}

impl<T> Kept<T> {
    /// The value `decode` makes of `snapshot`: the one kept when it was decoded from
    /// the same store version, else decoded now (and kept when `snapshot` is shared).
    pub fn get(
        &self,
        snapshot: &ReadSnapshot,
        decode: impl FnOnce(&ReadSnapshot) -> Result<T, StorageError>,
    ) -> Result<Arc<T>, StorageError> {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if let (Some((at, value)), Some(version)) = (kept.as_ref(), snapshot.version)
            && *at == version
        {
            return Ok(Arc::clone(value));
        }
        let value = Arc::new(decode(snapshot)?);
        if let Some(version) = snapshot.version {
            *kept = Some((version, Arc::clone(&value)));
        }
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{ExistingHandle, Slot, SlotState, Store};
    use super::*;
    use crate::names::Handle;
    use crate::values::HandleValue;

    /// What a watch was told, in order: `true` for before, with the change.
    #[derive(Debug, Default)]
    struct Told(Mutex<Vec<(bool, Option<Vec<String>>)>>);

    impl Told {
        fn note(&self, before: bool, changed: Changed<'_>) {
            let changed = match changed {
                Changed::Handles(keys) => Some(keys.to_vec()),
                Changed::Everything => None,
            };
            self.0.lock().unwrap().push((before, changed));
        }

        fn take(&self) -> Vec<(bool, Option<Vec<String>>)> {
            std::mem::take(&mut *self.0.lock().unwrap())
        }
    }

    impl CommitWatch for Told {
        fn before_commit(&self, changed: Changed<'_>) {
            self.note(true, changed);
        }

        fn after_commit(&self, changed: Changed<'_>) {
            self.note(false, changed);
        }
    }

    #[test]
    fn a_watch_is_told_each_commits_handles_or_everything_before_and_after() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.redb")).unwrap();
        let told = Arc::new(Told::default());
        store.watch(told.clone());
        let handle = Handle::parse("10.1000/Mixed").unwrap();
        let url = HandleValue::new(1, "URL", "https://example.org/");
        let mut batch = store.write().unwrap();
        batch
            .create(&handle, vec![url.clone()], ExistingHandle::Refuse)
            .unwrap();
        batch.commit().unwrap();
        let keys = Some(vec!["10.1000/MIXED".to_owned()]);
        assert_eq!(told.take(), [(true, keys.clone()), (false, keys)]);

        // A write the store cannot name handle by handle is everything.
        let mut batch = store.write().unwrap();
        batch
            .set_slot_state(Slot(3), Some(SlotState::Owned))
            .unwrap();
        batch.delete(&handle).unwrap();
        batch.commit().unwrap();
        assert_eq!(told.take(), [(true, None), (false, None)]);

        // A commit that changes no answer tells nothing.
        let mut batch = store.write().unwrap();
        batch.set_applied_state(b"state").unwrap();
        batch.commit().unwrap();
        assert!(told.take().is_empty());
    }
}
