//! The log store seam: openraft's `RaftLogStorage` on [`EntryLog`].
//!
//! Entries are stored as postcard bytes of [`Entry`] under their log index; the vote,
//! the committed position and the last purged position as postcard bytes in the log's
//! metadata. All disk work runs on tokio's blocking pool. An append is one write and
//! one fsync for all its entries (group commit), and its callback runs only after
//! they are durable, except for a leader's own new entries of requests, whose fsync
//! runs beside the replication that openraft starts once the callback runs (what
//! keeps that safe is in [`LogSync`]); every later write of the log waits for that
//! fsync. The vote is durable before `save_vote` returns.
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
use openraft::{
    EntryPayload, ErrorSubject, ErrorVerb, LogState, OptionalSend, RaftLogReader, Vote,
};
use tokio::sync::watch;

use super::blocking;
use super::durable::{Durable, SYNC_EVERY};
use super::error::Error;
use super::log_sync::LogSync;
use super::log_tail::LogTail;
use super::machine::Machine;
use super::state_machine::StateMachine;
use super::types::{Entry, GroupConfig, LogId, NodeId, RaftStorageError, from_bytes, to_bytes};
use crate::storage::{EntryLog, StorageError};

/// The most octets of stored entries a leader reads for one AppendEntries (at least
/// one entry, whatever its size): a member catching up gets the log a MiB at a time,
/// or less when the calls run slow (the network's send budget), and the leader holds
/// no more than that for it. At 4 MiB, decoding, encoding and sealing one call took
/// longer than openraft's 50 ms for it on a loaded machine.
pub const REPLICATED_OCTETS: usize = 1 << 20;

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
    /// What of the log is on disk (see [`LogSync`]).
    sync: Arc<LogSync>,
    /// This node, whose own new entries go to openraft before their fsync; `None`
    /// for a log alone, whose appends all wait for theirs.
    own: Option<NodeId>,
    /// The vote last saved or read.
    vote: Arc<Mutex<Option<Vote<NodeId>>>>,
    machine: PhantomData<fn() -> M>,
}

impl<M: Machine> Clone for LogStore<M> {
    fn clone(&self) -> Self {
        LogStore {
            log: Arc::clone(&self.log),
            tail: Arc::clone(&self.tail),
            committed: Arc::clone(&self.committed),
            applied: self.applied.clone(),
            sync: Arc::clone(&self.sync),
            own: self.own,
            vote: Arc::clone(&self.vote),
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
        LogStore::open_synced(data_dir, Arc::default())
    }

    /// Opens (or creates) the log in `data_dir` of node `own`'s group whose state
    /// machine is `machine`: a purge waits until `machine` has applied, durably, every
    /// entry it deletes (see the module doc), and `machine` applies no entry before it
    /// is durable here, so this node's own new entries of requests go to openraft as
    /// soon as they are written ([`LogSync`]). Blocks on the disk.
    pub fn open_beside(
        data_dir: &Path,
        machine: &StateMachine<M>,
        own: NodeId,
    ) -> Result<LogStore<M>, Error> {
        let durable = machine.durable();
        let watch = durable.upgrade().map(|durable| durable.watch());
        Ok(LogStore {
            applied: watch.map(|watch| (watch, durable)),
            own: Some(own),
            ..LogStore::open_synced(data_dir, machine.log_sync())?
        })
    }

    /// Opens the log, synced whole (what a killed process wrote may not be on disk
    /// yet), and tells `sync` where it ends.
    fn open_synced(data_dir: &Path, sync: Arc<LogSync>) -> Result<LogStore<M>, Error> {
        let log = EntryLog::open_in(data_dir)?;
        log.sync()?;
        sync.opened(log.last()?.map(|(index, _)| index));
        Ok(LogStore {
            log: Arc::new(log),
            tail: Arc::default(),
            committed: Arc::default(),
            applied: None,
            sync,
            own: None,
            vote: Arc::default(),
            machine: PhantomData,
        })
    }

    /// What of this log is on disk: a leader's network lowers the committed position
    /// it sends to it.
    pub fn sync(&self) -> Arc<LogSync> {
        Arc::clone(&self.sync)
    }

    /// Whether `entries` are this node's own new entries of requests, as their leader
    /// in the current term: those go to openraft before their fsync ([`LogSync`]).
    fn own_requests(&self, entries: &[Entry<M>]) -> bool {
        let Some(own) = self.own else {
            return false;
        };
        let vote = lock(&self.vote);
        let Some(vote) = vote.as_ref().filter(|vote| vote.committed) else {
            return false;
        };
        vote.leader_id.node_id == own
            && entries.iter().all(|entry| {
                entry.log_id.leader_id == vote.leader_id
                    && matches!(entry.payload, EntryPayload::Normal(_))
            })
    }

    /// Waits for the fsync of the last write, if it runs beside openraft: every write
    /// of the log comes after it.
    async fn after_last_sync(&self) -> Result<(), Error> {
        self.sync.all_durable().await.map_err(|_| Error::LogSync)
    }

    /// Syncs what [`EntryLog::append_unsynced`] wrote, up to `last`, on the blocking
    /// pool, and tells the log's [`LogSync`].
    fn sync_in_background(&self, last: u64) {
        let (log, sync) = (Arc::clone(&self.log), Arc::clone(&self.sync));
        tokio::spawn(async move {
            match blocking(move || Ok(log.sync()?)).await {
                Ok(()) => sync.synced(Some(last)),
                Err(error) => {
                    tracing::error!(%error, "syncing the Raft log failed; the group stops");
                    sync.failed();
                }
            }
        });
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
        self.after_last_sync()
            .await
            .map_err(vote_error(ErrorVerb::Write))?;
        self.write(move |log| Ok(log.save_vote(&bytes)?))
            .await
            .map_err(vote_error(ErrorVerb::Write))?;
        *lock(&self.vote) = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, RaftStorageError> {
        let bytes = self.read_meta(EntryLog::vote).await;
        let vote = bytes
            .and_then(|bytes| decode_opt::<Vote<NodeId>>(bytes.as_deref(), "vote"))
            .map_err(vote_error(ErrorVerb::Read))?;
        *lock(&self.vote) = vote;
        Ok(vote)
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
        let waited = self.after_last_sync().await;
        let early = self.own_requests(&entries);
        let last = entries.last().map(|entry| entry.log_id.index);
        let records: Result<Vec<(u64, Vec<u8>)>, Error> = entries
            .iter()
            .map(|entry| Ok((entry.log_id.index, to_bytes(entry, "log entry")?)))
            .collect();
        let lengths: Vec<usize> = records
            .iter()
            .flatten()
            .map(|(_, bytes)| bytes.len())
            .collect();
        let written = match (waited, records) {
            (Ok(()), Ok(records)) => {
                let committed = lock(&self.committed).take();
                self.write(move |log| {
                    let committed = committed.as_deref();
                    if early {
                        Ok(log.append_unsynced(records, committed)?)
                    } else {
                        Ok(log.append(records, committed)?)
                    }
                })
                .await
            }
            (Err(error), _) | (Ok(()), Err(error)) => Err(error),
        };
        match written {
            Ok(()) => {
                self.tail
                    .appended(entries.into_iter().zip(lengths).collect());
                match last {
                    Some(last) if early => {
                        self.sync.written(last);
                        self.sync_in_background(last);
                    }
                    Some(last) => self.sync.synced(Some(last)),
                    None => {}
                }
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
        self.after_last_sync()
            .await
            .map_err(logs_error(ErrorVerb::Delete))?;
        self.tail.truncating(log_id.index);
        self.write(move |log| Ok(log.truncate_from(log_id.index)?))
            .await
            .map_err(logs_error(ErrorVerb::Delete))?;
        self.sync.truncated(log_id.index);
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), RaftStorageError> {
        self.applied(log_id)
            .await
            .map_err(logs_error(ErrorVerb::Delete))?;
        let bytes =
            to_bytes(&log_id, "last purged log id").map_err(logs_error(ErrorVerb::Delete))?;
        self.after_last_sync()
            .await
            .map_err(logs_error(ErrorVerb::Delete))?;
        self.tail.purging(log_id.index);
        self.write(move |log| Ok(log.purge_upto(log_id.index, &bytes)?))
            .await
            .map_err(logs_error(ErrorVerb::Delete))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use openraft::storage::RaftLogStorageExt;
    use openraft::testing::log_id;

    use super::*;
    use crate::replication::{HandleSet, Proposal};
    use crate::storage::Store;

    type Log = LogStore<HandleSet>;

    fn request_entry(term: u64, leader: NodeId, index: u64) -> Entry<HandleSet> {
        Entry {
            log_id: log_id(term, leader, index),
            payload: EntryPayload::Normal(Proposal(Vec::new().into())),
        }
    }

    fn blank_entry(term: u64, leader: NodeId, index: u64) -> Entry<HandleSet> {
        Entry {
            log_id: log_id(term, leader, index),
            payload: EntryPayload::Blank,
        }
    }

    /// Node 1's log beside its state machine, in a temporary directory.
    fn node_one() -> (tempfile::TempDir, Log, StateMachine<HandleSet>) {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(&dir.path().join("handles.redb")).unwrap());
        let machine = StateMachine::open(store, dir.path()).unwrap();
        let log = LogStore::open_beside(dir.path(), &machine, 1).unwrap();
        (dir, log, machine)
    }

    #[tokio::test]
    async fn only_a_leaders_own_entries_of_requests_go_before_their_fsync() {
        let (_dir, mut log, _machine) = node_one();
        let own = [request_entry(2, 1, 1), request_entry(2, 1, 2)];
        assert!(!log.own_requests(&own), "no vote yet");
        log.save_vote(&Vote::new(2, 1)).await.unwrap();
        assert!(!log.own_requests(&own), "a candidate's vote");
        log.save_vote(&Vote::new_committed(2, 1)).await.unwrap();
        assert!(log.own_requests(&own));
        assert!(!log.own_requests(&[request_entry(2, 1, 1), blank_entry(2, 1, 2)]));
        assert!(
            !log.own_requests(&[request_entry(1, 1, 1)]),
            "an older term"
        );

        log.save_vote(&Vote::new_committed(3, 2)).await.unwrap();
        assert!(!log.own_requests(&[request_entry(3, 2, 3)]), "a follower's");

        let dir = tempfile::tempdir().unwrap();
        let mut alone = Log::open(dir.path()).unwrap();
        alone.save_vote(&Vote::new_committed(2, 1)).await.unwrap();
        assert!(!alone.own_requests(&own), "a log alone knows no node");
    }

    #[tokio::test]
    async fn an_early_append_is_durable_before_the_next_write_and_a_follower_append_at_once() {
        let (dir, mut log, _machine) = node_one();
        let sync = log.sync();
        log.save_vote(&Vote::new_committed(2, 1)).await.unwrap();
        log.blocking_append([request_entry(2, 1, 1), request_entry(2, 1, 2)])
            .await
            .unwrap();
        assert_eq!(sync.last_written(), Some(2));
        let synced = tokio::time::timeout(Duration::from_secs(10), sync.all_durable()).await;
        assert_eq!(synced.ok(), Some(Ok(())));
        assert_eq!(sync.durable(), Some(2));

        // The next write waited for that fsync; a follower's append is durable when
        // it returns.
        log.save_vote(&Vote::new_committed(3, 2)).await.unwrap();
        log.blocking_append([request_entry(3, 2, 3)]).await.unwrap();
        assert_eq!(sync.durable(), Some(3));
        log.truncate(log_id(3, 2, 3)).await.unwrap();
        assert_eq!((sync.last_written(), sync.durable()), (Some(2), Some(2)));
        drop(log);

        let reopened = Log::open(dir.path()).unwrap();
        assert_eq!(reopened.sync().durable(), Some(2), "synced whole at open");
    }
}
