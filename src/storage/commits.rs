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

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use redb::{Database, ReadableDatabase};

use super::{ReadSnapshot, StorageError};

/// The commit count of one store and its current snapshot, shared by its batches.
#[derive(Debug, Default)]
pub(super) struct Commits {
    count: AtomicU64,
    current: Mutex<Option<Arc<ReadSnapshot>>>,
}

impl Commits {
    /// Runs `commit` with the count odd, then drops the shared snapshot.
    pub(super) fn around<T>(&self, commit: impl FnOnce() -> T) -> T {
        self.count.fetch_add(1, Ordering::SeqCst);
        let committed = commit();
        self.count.fetch_add(1, Ordering::SeqCst);
        self.current().take();
        committed
    }

    /// The snapshot of the store as of now: the shared one when no batch committed
    /// since it was opened, else a new one (shared from now on when no commit ran
    /// while it was opened).
    pub(super) fn snapshot(&self, db: &Database) -> Result<Arc<ReadSnapshot>, StorageError> {
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
        let snapshot = Arc::new(ReadSnapshot::new(txn, still.then_some(before)));
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
