//! The state machine seam: openraft's `RaftStateMachine` and `RaftSnapshotBuilder` on
//! a group's [`Store`], for any [`Machine`].
//!
//! One call to `apply` writes into one [`crate::storage::WriteBatch`]: every command of
//! the entries (applied by the machine, each table opened once for them all: an
//! [`OpenBatch`]), then the applied state (last applied log id and membership), and
//! the batch commits with both, so the store and its applied marker never disagree.
//! A member's state machine (named by its group, [`StateMachine::applying_for`]) holds
//! the batch of entries other members proposed open for the next applies and commits
//! them together within a few milliseconds (module `held`); its own commit at once.
//! A commit does not wait for the disk: [`Durable`] syncs applies a little later,
//! many in one fsync, since the log already holds what a crash would make the node
//! apply again. A refused
//! command is a result, replicated like any other; a storage failure is returned to
//! openraft, which stops the node before its replica can diverge.
//!
//! A client entry carries the requests its leader proposed together
//! ([`super::Proposal`]); each is applied on its own, in order, and answered with its
//! own output. A client request is applied at most once: its result is remembered
//! under its [`super::RequestId`] for the next [`RECENT_WINDOW`] log entries, and an entry that
//! proposes the same request again (a forwarded write retried after its connection
//! broke, when the first proposal had reached the log) changes nothing and answers the
//! remembered result. The remembered results are part of the replicated state: they
//! commit with the writes and travel in snapshots, so every replica decides alike.
//!
//! A snapshot is every record of the store plus its meta, and the current snapshot is
//! the store itself: openraft's `build_snapshot` and `get_current_snapshot` (at
//! startup, and to send a member behind) both answer a view of the store from one read
//! transaction ([`StoreImage`]), whose meta is the applied state that transaction
//! records; nothing is written, so a start or a snapshot policy trigger costs a read.
//! The sender streams the view's records into chunks ([`super::network`]). A member
//! receives a snapshot into an unnamed scratch file, then streams its records into one
//! write batch that also sets the applied state, committed durably once: a crash
//! midway leaves the old store and its applied state, never a half-installed store
//! (redb spills the batch to disk, so memory stays bounded), and the log is not purged
//! past the store before that commit ([`super::LogStore::open_beside`]), so nothing
//! else need be kept.
//!
//! An earlier release kept its current snapshot in a file of the group's directory
//! ([`super::SNAPSHOT_FILE`]), saved before each install; opening the state machine
//! installs that file when the store is behind it (a crash during an install), as that
//! release did, and then removes it: the store, durably at or past it, is the current
//! snapshot.
//!
//! A group that stops sets its state machine's [`Stopping`]: a snapshot being installed
//! (minutes of blocking work on a large store, which the process would wait for before
//! it exits) gives up at its next record and leaves the store as it was.
//!
//! The last log id the store has applied durably is published by its [`Durable`]
//! ([`StateMachine::durable`]) once a sync or an install has made it so; the log store
//! purges behind it ([`super::LogStore::open_beside`]).

use std::fs::File;
use std::io::{BufReader, BufWriter, Seek, SeekFrom};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Instant;

use openraft::storage::RaftStateMachine;
use openraft::{EntryPayload, ErrorSubject, ErrorVerb, OptionalSend, RaftSnapshotBuilder};
use serde::{Deserialize, Serialize};

use super::blocking;
use super::durable::{Durable, keep_syncing};
use super::error::Error;
use super::held::{HeldApplies, HeldCommits, keep_committing, may_hold};
use super::log_sync::LogSync;
use super::machine::Machine;
use super::snapshot::{SnapshotReader, open_kept, read_head, remove_kept, scratch_file};
use super::snapshot_data::{SnapshotData, StoreImage};
use super::types::{
    Entry, GroupConfig, LogId, NodeId, Proposal, RaftStorageError, Request, RequestId, Snapshot,
    SnapshotMeta, StoredMembership, from_bytes, to_bytes,
};
use crate::storage::{ImageRecord, OpenBatch, ReadSnapshot, Store, WriteBatch};

/// How many log entries a request's result is remembered for. A write is retried
/// within the replica's patience for a leader (five seconds), and by a client within
/// its few attempts (seconds). A lone writer makes one entry per write (a few
/// hundred a second measured on one set); writes made at once share entries (up to
/// [`super::proposer::MAX_REQUESTS`] each), so the window is longer in time under
/// load, and so are the results it keeps.
pub const RECENT_WINDOW: u64 = 50_000;

/// What the store has applied, kept beside the handles in the same transactions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct AppliedState {
    last_applied: Option<LogId>,
    membership: StoredMembership,
}

impl AppliedState {
    /// The applied state as of `read`; nothing applied yet on a new store.
    fn read(read: &ReadSnapshot) -> Result<AppliedState, Error> {
        match read.applied_state()? {
            Some(bytes) => from_bytes(&bytes, "applied state"),
            None => Ok(AppliedState::default()),
        }
    }
}

/// A group's state machine: its store, applied by `M`, which is its current snapshot.
#[derive(Debug)]
pub struct StateMachine<M> {
    store: Arc<Store>,
    applied: AppliedState,
    /// When applies reach the disk.
    durable: Arc<Durable>,
    /// What of the group's log is on disk: no entry is applied before it is.
    log_sync: Arc<LogSync>,
    /// Whether the task syncing applies runs (started by the first apply, in the
    /// runtime).
    syncing: bool,
    /// The group's directory, where snapshots are received into scratch files.
    dir: PathBuf,
    stopping: Stopping,
    installs: Installs,
    /// The member this state machine applies for, once the group names it: entries
    /// other members proposed are then held together ([`HeldApplies`]).
    member: Option<NodeId>,
    held: Arc<HeldApplies>,
    /// Whether the task committing held applies runs (started with the first held).
    committing: bool,
    machine: PhantomData<fn() -> M>,
}

/// Builds snapshots of a [`StateMachine`]'s store, concurrently with its applies: a
/// view of the store, taken without waiting for them.
#[derive(Debug)]
pub struct SnapshotBuilder<M> {
    store: Arc<Store>,
    /// Committed before the view is taken, so it holds every apply openraft counts.
    held: HeldCommits,
    machine: PhantomData<fn() -> M>,
}

/// Whether a state machine's group has stopped; clones share it.
#[derive(Debug, Clone, Default)]
pub struct Stopping(Arc<AtomicBool>);

impl Stopping {
    /// Makes snapshot installs in progress give up at their next record.
    pub fn stop(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// [`Error::Stopped`] once [`Stopping::stop`] was called.
    fn check(&self) -> Result<(), Error> {
        if self.0.load(Ordering::Relaxed) {
            Err(Error::Stopped)
        } else {
            Ok(())
        }
    }
}

/// How many snapshots a state machine installed, sent by a leader (not the install at
/// open of a snapshot an earlier release kept), and their octets; clones share them.
#[derive(Debug, Clone, Default)]
pub struct Installs(Arc<[AtomicU64; 2]>);

/// Snapshots a member installed, and the octets of snapshot data it received for them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Installed {
    /// Snapshots installed.
    pub count: u64,
    /// Octets of the snapshot data received for them.
    pub octets: u64,
}

impl Installs {
    /// Snapshots installed so far.
    pub fn installed(&self) -> Installed {
        Installed {
            count: self.0[0].load(Ordering::Relaxed),
            octets: self.0[1].load(Ordering::Relaxed),
        }
    }

    fn add(&self, octets: u64) {
        self.0[0].fetch_add(1, Ordering::Relaxed);
        self.0[1].fetch_add(octets, Ordering::Relaxed);
    }
}

impl<M: Machine> StateMachine<M> {
    /// The state machine over `store`, receiving snapshots in `data_dir`; a snapshot
    /// an earlier release kept there ([`super::SNAPSHOT_FILE`]) is installed first
    /// when the store is behind it (a crash during its install), then removed. Blocks
    /// on the disk.
    pub fn open(store: Arc<Store>, data_dir: &Path) -> Result<StateMachine<M>, Error> {
        let stopping = Stopping::default();
        let applied = catch_up_with_kept_snapshot(&store, data_dir, &stopping)?;
        Ok(StateMachine {
            durable: Arc::new(Durable::new(Arc::clone(&store), applied.last_applied)),
            log_sync: Arc::default(),
            syncing: false,
            store,
            applied,
            dir: data_dir.to_owned(),
            stopping,
            installs: Installs::default(),
            member: None,
            held: Arc::default(),
            committing: false,
            machine: PhantomData,
        })
    }

    /// Commits what this state machine holds, when asked: for the group's fresh reads.
    pub fn held_commits(&self) -> HeldCommits {
        HeldCommits::new(&self.held, &self.durable)
    }

    /// This state machine, applying for `member`: it holds the entries other members
    /// proposed and commits them together (module `held`). Without it, every apply
    /// commits at once.
    pub fn applying_for(mut self, member: NodeId) -> StateMachine<M> {
        self.member = Some(member);
        self
    }

    /// What stops this state machine's snapshot installs; the group sets it
    /// once its Raft has stopped.
    pub fn stopping(&self) -> Stopping {
        self.stopping.clone()
    }

    /// How many snapshots this state machine installed; the group reports it.
    pub fn installs(&self) -> Installs {
        self.installs.clone()
    }

    /// When this state machine's applies reach the disk; held weakly, as it goes when
    /// the state machine is dropped (openraft stopped).
    pub fn durable(&self) -> Weak<Durable> {
        Arc::downgrade(&self.durable)
    }

    /// What of the group's log is on disk, as the log opened beside this state
    /// machine tells it ([`super::LogStore::open_beside`]); this state machine applies
    /// no entry before it is durable there.
    pub fn log_sync(&self) -> Arc<LogSync> {
        Arc::clone(&self.log_sync)
    }

    /// Takes `applied` as the state after a durable commit.
    fn applied_durably(&mut self, applied: AppliedState) {
        self.durable.applied_durably(applied.last_applied);
        self.applied = applied;
    }
}

/// The store's applied state, after installing the snapshot an earlier release kept in
/// `data_dir` when it covers more of the log than the store does; that file is
/// removed then, as the store holds at least its state, durably (an install commits
/// durably; a store not behind it is as it is on disk).
fn catch_up_with_kept_snapshot(
    store: &Store,
    data_dir: &Path,
    stopping: &Stopping,
) -> Result<AppliedState, Error> {
    let mut applied = AppliedState::read(&*store.read()?)?;
    if let Some((meta, mut data)) = open_kept(data_dir)? {
        if meta.last_log_id > applied.last_applied {
            tracing::warn!(
                snapshot = %meta,
                store = ?applied.last_applied,
                "the store is behind the snapshot an earlier release kept (a crash during an install): installing it again"
            );
            applied = install(store, &meta, &mut data, stopping)?;
        }
        tracing::info!(snapshot = %meta, "removing the snapshot file an earlier release kept: the store is the current snapshot");
    }
    remove_kept(data_dir)?;
    Ok(applied)
}

/// What one batch of entries did: the applied state after it, and each entry's
/// outputs (one per request of its proposal).
type Applied<M> = (AppliedState, Vec<Vec<<M as Machine>::Output>>);

/// Applies `entries` to `batch`, starting from `applied`, and records the applied
/// state after them in it; the last log id applied.
fn apply_entries<M: Machine>(
    batch: &mut WriteBatch,
    applied: AppliedState,
    entries: Vec<Entry<M>>,
) -> Result<(Applied<M>, Option<LogId>), Error> {
    let (applied, responses) = apply_in::<M>(&mut batch.open(), applied, entries)?;
    batch.set_applied_state(&to_bytes(&applied, "applied state")?)?;
    let last = applied.last_applied;
    Ok(((applied, responses), last))
}

/// Applies `entries` to `batch`, its tables opened once for them all, starting from
/// `applied`.
fn apply_in<M: Machine>(
    batch: &mut OpenBatch<'_>,
    mut applied: AppliedState,
    entries: Vec<Entry<M>>,
) -> Result<Applied<M>, Error> {
    let mut responses = Vec::with_capacity(entries.len());
    for entry in entries {
        applied.last_applied = Some(entry.log_id);
        let response = match entry.payload {
            EntryPayload::Blank => Vec::new(),
            EntryPayload::Normal(Proposal(requests)) => {
                let index = entry.log_id.index;
                batch.forget_results_before(index.saturating_sub(RECENT_WINDOW))?;
                let mut outputs = Vec::with_capacity(requests.len());
                for request in requests.iter() {
                    outputs.push(apply_once::<M>(batch, index, request)?);
                }
                outputs
            }
            EntryPayload::Membership(membership) => {
                applied.membership = StoredMembership::new(Some(entry.log_id), membership);
                Vec::new()
            }
        };
        responses.push(response);
    }
    Ok((applied, responses))
}

/// Applies `request` of the entry at log `index` unless it was applied within the
/// window before it (results of entries before `index - RECENT_WINDOW` are forgotten
/// first); either way, its result. What is forgotten depends on the entry alone,
/// never on how entries were grouped into calls, so every replica decides alike.
fn apply_once<M: Machine>(
    batch: &mut OpenBatch<'_>,
    index: u64,
    request: &Request<M::Command>,
) -> Result<M::Output, Error> {
    let id = request.id.0;
    if let Some(bytes) = batch.recall_result(id)? {
        return from_bytes(&bytes, "remembered result");
    }
    let result = M::apply(batch, &request.command)?;
    if M::settles(&result) {
        batch.remember_result(id, index, &to_bytes(&result, "result")?)?;
    }
    Ok(result)
}

/// The settled output of request `id`, if the store `read` was taken from applied it
/// within the window (see [`Machine::settles`]).
pub fn recall<M: Machine>(read: &ReadSnapshot, id: RequestId) -> Result<Option<M::Output>, Error> {
    let Some(bytes) = read.recall_result(id.0)? else {
        return Ok(None);
    };
    from_bytes(&bytes, "remembered result").map(Some)
}

/// The records of snapshot `data` (read from its start), refused unless its head
/// says it is the snapshot `meta`.
fn records_of<'a>(
    meta: &SnapshotMeta,
    data: &'a mut File,
) -> Result<SnapshotReader<BufReader<&'a mut File>>, Error> {
    data.seek(SeekFrom::Start(0)).map_err(Error::SnapshotData)?;
    let (found, records) = read_head(BufReader::new(data))?;
    if found == *meta {
        Ok(records)
    } else {
        Err(Error::SnapshotMismatch {
            found: Box::new(found),
            expected: Box::new(meta.clone()),
        })
    }
}

/// Replaces the store's contents with snapshot `data` (read from its start), which
/// must be the snapshot `meta`: one batch, committed once, unless the group stops
/// first.
fn install(
    store: &Store,
    meta: &SnapshotMeta,
    data: &mut File,
    stopping: &Stopping,
) -> Result<AppliedState, Error> {
    let mut records = records_of(meta, data)?;
    install_records(store, meta, stopping, |put| {
        while let Some(record) = records.next_record()? {
            put(record)?;
        }
        Ok(())
    })
}

/// Replaces the store's contents with the records of `image` (a view of another
/// store, handed over whole rather than sent), which must be the snapshot `meta`.
fn install_image(
    store: &Store,
    meta: &SnapshotMeta,
    image: &StoreImage,
    stopping: &Stopping,
) -> Result<AppliedState, Error> {
    if image.meta() != meta {
        return Err(Error::SnapshotMismatch {
            found: Box::new(image.meta().clone()),
            expected: Box::new(meta.clone()),
        });
    }
    install_records(store, meta, stopping, |put| image.export(put))
}

/// A sink of snapshot records.
type Put<'a> = dyn FnMut(ImageRecord) -> Result<(), Error> + 'a;

/// Replaces the store's contents with the records `feed` puts, as the snapshot `meta`:
/// one batch, committed durably once, unless the group stops first.
fn install_records(
    store: &Store,
    meta: &SnapshotMeta,
    stopping: &Stopping,
    feed: impl FnOnce(&mut Put<'_>) -> Result<(), Error>,
) -> Result<AppliedState, Error> {
    let applied = AppliedState {
        last_applied: meta.last_log_id,
        membership: meta.last_membership.clone(),
    };
    let started = Instant::now();
    let mut batch = store.write()?;
    let mut import = batch.import()?;
    let mut count = 0u64;
    feed(&mut |record| {
        stopping.check()?;
        import.put(record)?;
        count += 1;
        Ok(())
    })?;
    import.finish()?;
    batch.set_applied_state(&to_bytes(&applied, "applied state")?)?;
    batch.commit()?;
    tracing::info!(
        snapshot = meta.snapshot_id,
        records = count,
        seconds = started.elapsed().as_secs_f64(),
        "installed a snapshot"
    );
    Ok(applied)
}

/// The store as of now, from one read snapshot (writes go on meanwhile), with the
/// applied state that snapshot records as its meta.
fn image_now(store: &Store) -> Result<StoreImage, Error> {
    let read = store.read()?;
    let applied = AppliedState::read(&read)?;
    let meta = SnapshotMeta {
        snapshot_id: snapshot_id(applied.last_applied),
        last_log_id: applied.last_applied,
        last_membership: applied.membership,
    };
    Ok(StoreImage::new(read, meta))
}

/// Snapshot data of the store as of now, from one read snapshot (writes go on
/// meanwhile), in a new unnamed file in `dir` (the snapshot module's scratch files),
/// read from its start: what a backup holds of a replica set. Blocks on the disk.
pub fn snapshot_data_now(store: &Store, dir: &Path) -> Result<(SnapshotMeta, File), Error> {
    let image = image_now(store)?;
    let mut data = image
        .write_to(BufWriter::new(scratch_file(dir)?))?
        .into_inner()
        .map_err(|error| Error::SnapshotData(error.into_error()))?;
    data.seek(SeekFrom::Start(0)).map_err(Error::SnapshotData)?;
    Ok((image.meta().clone(), data))
}

/// A snapshot id: the last log id it covers. Two views at the same log position are
/// the same store (every table a snapshot carries changes only by applies, which
/// record the log id with them), so they are the same snapshot, byte for byte.
fn snapshot_id(last: Option<LogId>) -> String {
    match last {
        Some(last) => format!(
            "{}-{}-{}",
            last.leader_id.term, last.leader_id.node_id, last.index
        ),
        None => "none".to_owned(),
    }
}

fn sm_error(verb: ErrorVerb) -> impl FnOnce(Error) -> RaftStorageError {
    move |error| error.into_raft(ErrorSubject::StateMachine, verb)
}

fn snapshot_error(verb: ErrorVerb) -> impl FnOnce(Error) -> RaftStorageError {
    move |error| error.into_raft(ErrorSubject::Snapshot(None), verb)
}

impl<M: Machine> RaftSnapshotBuilder<GroupConfig<M>> for SnapshotBuilder<M> {
    /// A view of the store: openraft keeps only its meta, as its current snapshot's.
    async fn build_snapshot(&mut self) -> Result<Snapshot<M>, RaftStorageError> {
        Ok(snapshot_of(
            image_off_runtime(&self.store, &self.held).await?,
        ))
    }
}

impl<M: Machine> RaftStateMachine<GroupConfig<M>> for StateMachine<M> {
    type SnapshotBuilder = SnapshotBuilder<M>;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId>, StoredMembership), RaftStorageError> {
        Ok((self.applied.last_applied, self.applied.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Vec<M::Output>>, RaftStorageError>
    where
        I: IntoIterator<Item = Entry<M>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<Entry<M>> = entries.into_iter().collect();
        if entries.is_empty() {
            return Ok(Vec::new());
        }
        if let Some(last) = entries.last() {
            self.log_sync
                .durable_at(last.log_id.index)
                .await
                .map_err(|_| sm_error(ErrorVerb::Write)(Error::LogSync))?;
        }
        if !self.syncing {
            tokio::spawn(keep_syncing(Arc::downgrade(&self.durable)));
            self.syncing = true;
        }
        let hold = self.member.is_some_and(|member| may_hold(&entries, member));
        let count = entries.len();
        let (store, held, durable) = (
            Arc::clone(&self.store),
            Arc::clone(&self.held),
            Arc::clone(&self.durable),
        );
        let applied = self.applied.clone();
        let ((applied, responses), holding) = blocking(move || {
            held.apply(&store, &durable, count, hold, |batch| {
                apply_entries::<M>(batch, applied, entries)
            })
        })
        .await
        .map_err(sm_error(ErrorVerb::Write))?;
        if holding && !self.committing {
            tokio::spawn(keep_committing(
                Arc::downgrade(&self.held),
                Arc::downgrade(&self.durable),
            ));
            self.committing = true;
        }
        self.applied = applied;
        Ok(responses)
    }

    async fn get_snapshot_builder(&mut self) -> SnapshotBuilder<M> {
        SnapshotBuilder {
            store: Arc::clone(&self.store),
            held: self.held_commits(),
            machine: PhantomData,
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<SnapshotData>, RaftStorageError> {
        let dir = self.dir.clone();
        let scratch = blocking(move || scratch_file(&dir))
            .await
            .map_err(snapshot_error(ErrorVerb::Write))?;
        let file = tokio::fs::File::from_std(scratch);
        Ok(Box::new(SnapshotData::Received(file)))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<SnapshotData>,
    ) -> Result<(), RaftStorageError> {
        let store = Arc::clone(&self.store);
        let (meta, stopping) = (meta.clone(), self.stopping.clone());
        let (applied, octets) = match *snapshot {
            SnapshotData::Received(file) => {
                let mut data = file.into_std().await;
                blocking(move || {
                    let octets = data.metadata().map_err(Error::SnapshotData)?.len();
                    Ok((install(&store, &meta, &mut data, &stopping)?, octets))
                })
                .await
            }
            // Handed over whole, not received: no octets.
            SnapshotData::Store(image) => {
                blocking(move || Ok((install_image(&store, &meta, &image, &stopping)?, 0))).await
            }
        }
        .map_err(snapshot_error(ErrorVerb::Write))?;
        self.applied_durably(applied);
        self.installs.add(octets);
        Ok(())
    }

    /// A view of the store as of now, once it has applied anything: at startup
    /// openraft keeps its meta, and to send a snapshot it streams the view.
    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<M>>, RaftStorageError> {
        let image = image_off_runtime(&self.store, &self.held_commits()).await?;
        Ok(image
            .meta()
            .last_log_id
            .is_some()
            .then(|| snapshot_of(image)))
    }
}

/// A view of `store` now ([`image_now`]), taken on the blocking pool.
/// A view of `store` once what `held` holds is committed.
async fn image_off_runtime(
    store: &Arc<Store>,
    held: &HeldCommits,
) -> Result<StoreImage, RaftStorageError> {
    held.commit_now()
        .await
        .map_err(snapshot_error(ErrorVerb::Read))?;
    let store = Arc::clone(store);
    blocking(move || image_now(&store))
        .await
        .map_err(snapshot_error(ErrorVerb::Read))
}

/// `image` as openraft's snapshot.
fn snapshot_of<M: Machine>(image: StoreImage) -> Snapshot<M> {
    Snapshot {
        meta: image.meta().clone(),
        snapshot: Box::new(SnapshotData::Store(image)),
    }
}
