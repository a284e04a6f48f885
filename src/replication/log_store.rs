//! The log store seam: openraft's `RaftLogStorage` on [`EntryLog`].
//!
//! Entries are stored as postcard bytes of [`Entry`] under their log index; the vote,
//! the committed position and the last purged position as postcard bytes in the log's
//! metadata. All disk work runs on tokio's blocking pool. An append is one write and
//! one fsync for all its entries (group commit), and its callback runs only after
//! they are durable; the vote is durable before `save_vote` returns.
//!
//! Two things keep the disk off the path of a write that need not be there: the
//! newest entries are kept in memory ([`LogTail`]), so that replicating and applying
//! them reads no file; and `save_committed` (called before every apply) only notes the
//! position, which the next append writes with its entries. It was a
//! transaction of its own that did not wait for the disk either, so a crash loses no
//! more than before: the committed position on disk may lag, and the entries after
//! it are applied again once a leader says they are committed.
//!
//! Invariant: on disk, the log is never purged past what the group's state machine
//! has applied durably (`last_purged <= last_applied`), whenever the node crashes.
//! openraft 0.9 breaks it on its own: a follower sent a snapshot queues the install on
//! the state machine's task and purges the log up to the snapshot on its main task at
//! once, without waiting for the install; a crash between the two leaves a log purged
//! past the store, whose missing entries no restart can apply (and which a leader
//! elected from that state could not send). So a log opened [beside its state
//! machine](LogStore::open_beside) makes `purge` wait until the state machine has
//! applied the entries it deletes. The wait is on openraft's main task, which runs the
//! log's writes in order and nothing after the purge until it returns: no entry after
//! the snapshot is appended, and no later committed position saved, before the
//! install is durable, so a crash at any moment leaves either the state before the
//! install (the leader sends the snapshot again) or the installed snapshot with its
//! log. Only an install lets openraft purge past the applied state (it purges behind
//! its snapshots otherwise, and those are built from applied state), so the wait is
//! as long as that install; if the state machine stops first (its task failed), the
//! purge fails and the node stops, purging nothing. Deferring the deletion instead
//! and returning at once would not do: openraft would go on appending after the
//! snapshot, and a crash would leave those entries after a hole, or behind entries
//! from an older term that the purge was meant to drop.

use std::fmt::{self, Debug};
use std::io;
use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{ErrorSubject, ErrorVerb, LogState, OptionalSend, RaftLogReader, Vote};
use tokio::sync::watch;

use super::blocking;
use super::durable::{Durable, SYNC_EVERY};
use super::error::Error;
use super::log_tail::LogTail;
use super::machine::Machine;
use super::state_machine::StateMachine;
use super::types::{Entry, GroupConfig, LogId, NodeId, RaftStorageError, from_bytes, to_bytes};
use crate::storage::{EntryLog, StorageError};

/// The most octets of stored entries a leader reads for one AppendEntries (at least
/// one entry, whatever its size): a member catching up gets the log a few MiB at a
/// time, and the leader holds no more than that for it.
pub const REPLICATED_OCTETS: usize = 4 << 20;

/// A group's Raft log and vote, holding entries of `M`; clones share the same file,
/// tail and noted committed position (a clone is the log reader).
pub struct LogStore<M: Machine> {
    log: Arc<EntryLog>,
    tail: Arc<LogTail<M>>,
    /// The encoded committed position noted since the last append wrote one.
    committed: Arc<Mutex<Option<Vec<u8>>>>,
    /// The state machine's durably applied log id, which purges wait for (and hasten);
    /// `None` for a log alone.
    applied: Option<(watch::Receiver<Option<LogId>>, Weak<Durable>)>,
    machine: PhantomData<fn() -> M>,
}

impl<M: Machine> Clone for LogStore<M> {
    fn clone(&self) -> Self {
        LogStore {
            log: Arc::clone(&self.log),
            tail: Arc::clone(&self.tail),
            committed: Arc::clone(&self.committed),
            applied: self.applied.clone(),
            machine: PhantomData,
        }
    }
}

impl<M: Machine> Debug for LogStore<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogStore").field("log", &self.log).finish()
    }
}

type Bounds = (Bound<u64>, Bound<u64>);

impl<M: Machine> LogStore<M> {
    /// Opens (or creates) the log in `data_dir`, alone: it purges whatever it is
    /// asked to at once, as openraft's storage suite checks a log. Blocks on the disk.
    pub fn open(data_dir: &Path) -> Result<LogStore<M>, Error> {
        let log = EntryLog::open_in(data_dir)?;
        Ok(LogStore {
            log: Arc::new(log),
            tail: Arc::default(),
            committed: Arc::default(),
            applied: None,
            machine: PhantomData,
        })
    }

    /// Opens (or creates) the log in `data_dir` of the group whose state machine is
    /// `machine`: a purge waits until `machine` has applied, durably, every entry it
    /// deletes (see the module doc). Blocks on the disk.
    pub fn open_beside(data_dir: &Path, machine: &StateMachine<M>) -> Result<LogStore<M>, Error> {
        let durable = machine.durable();
        let watch = durable.upgrade().map(|durable| durable.watch());
        Ok(LogStore {
            applied: watch.map(|watch| (watch, durable)),
            ..LogStore::open(data_dir)?
        })
    }

    /// Returns once the state machine has applied `upto` durably (at once for a log
    /// alone), asking it to sync what it has applied; fails if the state machine stops
    /// or its syncs fail first.
    async fn applied(&self, upto: LogId) -> Result<(), Error> {
        let Some((applied, durable)) = &self.applied else {
            return Ok(());
        };
        let mut applied = applied.clone();
        let covered = |applied: &Option<LogId>| applied.is_some_and(|id| id.index >= upto.index);
        let unapplied = Error::PurgeUnapplied { index: upto.index };
        let mut said = false;
        loop {
            match durable.upgrade() {
                Some(durable) => durable.hasten()?,
                None => return Err(unapplied),
            }
            let waited = tokio::time::timeout(SYNC_EVERY, applied.wait_for(covered)).await;
            match waited {
                Ok(Ok(_)) => return Ok(()),
                Ok(Err(_closed)) => return Err(unapplied),
                Err(_elapsed) if !said => {
                    said = true;
                    tracing::info!(%upto, "the log purge waits for the state machine to apply it durably (a snapshot install)");
                }
                Err(_elapsed) => {}
            }
        }
    }

    /// The entries in `range`, as many as fit in `octets` of stored entries (at least
    /// one when the range holds any). Those the tail holds whole come from memory: at
    /// most its [`TAIL_OCTETS`](super::log_tail::TAIL_OCTETS), no more than a read
    /// of the file may give.
    async fn entries(&self, range: Bounds, octets: usize) -> Result<Vec<Entry<M>>, Error> {
        if let Some(entries) = tail_read(&self.tail, range) {
            return Ok(entries);
        }
        let log = Arc::clone(&self.log);
        let records = blocking(move || Ok(log.read_range_within(range, octets)?)).await?;
        records
            .iter()
            .map(|(index, bytes)| decode_entry(*index, bytes))
            .collect()
    }

    /// The id of the last entry in the log (or of the last purged one, when a
    /// snapshot covers all of it); `None` for a log that never held an entry.
    pub async fn last_log_id(&self) -> Result<Option<LogId>, Error> {
        Ok(self.state().await?.last_log_id)
    }

    async fn state(&self) -> Result<LogState<GroupConfig<M>>, Error> {
        let log = Arc::clone(&self.log);
        let (last, purged) = blocking(move || Ok((log.last()?, log.last_purged()?))).await?;
        let last_purged_log_id: Option<LogId> =
            decode_opt(purged.as_deref(), "last purged log id")?;
        let last_entry = last
            .map(|(index, bytes)| decode_entry::<M>(index, &bytes).map(|entry| entry.log_id))
            .transpose()?;
        Ok(LogState {
            last_log_id: last_entry.max(last_purged_log_id),
            last_purged_log_id,
        })
    }

    async fn write(
        &self,
        work: impl FnOnce(&EntryLog) -> Result<(), Error> + Send + 'static,
    ) -> Result<(), Error> {
        let log = Arc::clone(&self.log);
        blocking(move || work(&log)).await
    }

    async fn read_meta(
        &self,
        read: impl FnOnce(&EntryLog) -> Result<Option<Vec<u8>>, StorageError> + Send + 'static,
    ) -> Result<Option<Vec<u8>>, Error> {
        let log = Arc::clone(&self.log);
        blocking(move || Ok(read(&log)?)).await
    }
}

/// The entries of `range` from `tail`, if it holds them all.
fn tail_read<M: Machine>(tail: &LogTail<M>, range: Bounds) -> Option<Vec<Entry<M>>> {
    let start = match range.0 {
        Bound::Included(start) => start,
        Bound::Excluded(start) => start.checked_add(1)?,
        Bound::Unbounded => 0,
    };
    let end = match range.1 {
        Bound::Included(last) => Some(last.checked_add(1)?),
        Bound::Excluded(end) => Some(end),
        Bound::Unbounded => None,
    };
    tail.read(start, end)
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn decode_entry<M: Machine>(index: u64, bytes: &[u8]) -> Result<Entry<M>, Error> {
    let entry: Entry<M> = from_bytes(bytes, "log entry")?;
    if entry.log_id.index == index {
        Ok(entry)
    } else {
        Err(Error::MisplacedEntry {
            stored: index,
            found: entry.log_id.index,
        })
    }
}

fn decode_opt<T: serde::de::DeserializeOwned>(
    bytes: Option<&[u8]>,
    what: &'static str,
) -> Result<Option<T>, Error> {
    bytes.map(|bytes| from_bytes(bytes, what)).transpose()
}

fn logs_error(verb: ErrorVerb) -> impl FnOnce(Error) -> RaftStorageError {
    move |error| error.into_raft(ErrorSubject::Logs, verb)
}

fn vote_error(verb: ErrorVerb) -> impl FnOnce(Error) -> RaftStorageError {
    move |error| error.into_raft(ErrorSubject::Vote, verb)
}

impl<M: Machine> RaftLogReader<GroupConfig<M>> for LogStore<M> {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<M>>, RaftStorageError> {
        let bounds = (range.start_bound().cloned(), range.end_bound().cloned());
        self.entries(bounds, usize::MAX)
            .await
            .map_err(logs_error(ErrorVerb::Read))
    }

    /// What a leader sends a member in one AppendEntries: openraft asks for up to
    /// `max_payload_entries` (300), which bulk writes (thousands of handles an entry)
    /// made hundreds of MiB, decoded and then encoded again, for a member catching up.
    async fn limited_get_log_entries(
        &mut self,
        start: u64,
        end: u64,
    ) -> Result<Vec<Entry<M>>, RaftStorageError> {
        let bounds = (Bound::Included(start), Bound::Excluded(end));
        self.entries(bounds, REPLICATED_OCTETS)
            .await
            .map_err(logs_error(ErrorVerb::Read))
    }
}

impl<M: Machine> RaftLogStorage<GroupConfig<M>> for LogStore<M> {
    type LogReader = LogStore<M>;

    async fn get_log_state(&mut self) -> Result<LogState<GroupConfig<M>>, RaftStorageError> {
        self.state().await.map_err(logs_error(ErrorVerb::Read))
    }

    async fn get_log_reader(&mut self) -> LogStore<M> {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), RaftStorageError> {
        let bytes = to_bytes(vote, "vote").map_err(vote_error(ErrorVerb::Write))?;
        self.write(move |log| Ok(log.save_vote(&bytes)?))
            .await
            .map_err(vote_error(ErrorVerb::Write))
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, RaftStorageError> {
        let bytes = self.read_meta(EntryLog::vote).await;
        bytes
            .and_then(|bytes| decode_opt(bytes.as_deref(), "vote"))
            .map_err(vote_error(ErrorVerb::Read))
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), RaftStorageError> {
        let bytes =
            to_bytes(&committed, "committed log id").map_err(logs_error(ErrorVerb::Write))?;
        *lock(&self.committed) = Some(bytes);
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, RaftStorageError> {
        let noted = lock(&self.committed).clone();
        let bytes = match noted {
            Some(noted) => Ok(Some(noted)),
            None => self.read_meta(EntryLog::committed).await,
        };
        bytes
            .and_then(|bytes| decode_opt::<Option<LogId>>(bytes.as_deref(), "committed log id"))
            .map(Option::flatten)
            .map_err(logs_error(ErrorVerb::Read))
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<GroupConfig<M>>,
    ) -> Result<(), RaftStorageError>
    where
        I: IntoIterator<Item = Entry<M>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<Entry<M>> = entries.into_iter().collect();
        let records: Result<Vec<(u64, Vec<u8>)>, Error> = entries
            .iter()
            .map(|entry| Ok((entry.log_id.index, to_bytes(entry, "log entry")?)))
            .collect();
        let lengths: Vec<usize> = records
            .iter()
            .flatten()
            .map(|(_, bytes)| bytes.len())
            .collect();
        let committed = lock(&self.committed).take();
        let written = match records {
            Ok(records) => {
                self.write(move |log| Ok(log.append(records, committed.as_deref())?))
                    .await
            }
            Err(error) => Err(error),
        };
        match written {
            Ok(()) => {
                self.tail
                    .appended(entries.into_iter().zip(lengths).collect());
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(error) => {
                callback.log_io_completed(Err(io::Error::other(error.to_string())));
                Err(error.into_raft(ErrorSubject::Logs, ErrorVerb::Write))
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), RaftStorageError> {
        self.tail.truncating(log_id.index);
        self.write(move |log| Ok(log.truncate_from(log_id.index)?))
            .await
            .map_err(logs_error(ErrorVerb::Delete))
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), RaftStorageError> {
        self.applied(log_id)
            .await
            .map_err(logs_error(ErrorVerb::Delete))?;
        let bytes =
            to_bytes(&log_id, "last purged log id").map_err(logs_error(ErrorVerb::Delete))?;
        self.tail.purging(log_id.index);
        self.write(move |log| Ok(log.purge_upto(log_id.index, &bytes)?))
            .await
            .map_err(logs_error(ErrorVerb::Delete))
    }
}
