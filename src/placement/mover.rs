//! Moving slots between replica sets, online (`DESIGN.md` §3, "Resharding a slot").
//!
//! Owns [`Mover`], which carries out the moves the cluster map plans, and the
//! [`SetAccess`] seam it reaches the sets through (the node implements it over the
//! peer link). It runs on every node and acts only on the node that leads the
//! metadata group; every step is idempotent and recorded in the map, so a new leader
//! (after a crash of any node) resumes each move from its step.
//!
//! A move of slot `s` from set A to set B:
//! 1. **Planned → Copying**: A starts exporting `s` (journals every change to it from
//!    now on), B starts importing it (empty, answering for it to nobody).
//! 2. **Copying → Frozen**: every record of `s` is copied from A to B through B's log,
//!    then A's journal is replayed onto B (each changed handle's current record, or its
//!    removal) until little is left; then A freezes `s` (holds its writes).
//! 3. **Frozen → Flipped**: the rest of the journal goes to B (A takes no more writes),
//!    B owns `s`, and the map makes B its owner: held writes go to B. The time from
//!    the freeze to the flip is the slot's write pause.
//! 4. **Flipped → ended**: A drops its copy of `s`; the move ends.
//!
//! Reads are answered throughout: by A until the flip (its copy is complete and, once
//! frozen, current), by B after (a member of B that has not applied the end of the
//! import yet says so, and the router asks again).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use thiserror::Error;
use tokio::time::Instant;

use super::MapGroup;
use super::map::{ClusterMap, MapCommand, Migration, MigrationStep};
use crate::names::Handle;
use crate::replication::{GroupError, HandleCommand, SetId};
use crate::storage::{JournalRecord, Slot, StoredRecord};
use crate::values::HandleValue;

/// Records copied per page and per log entry at the destination.
pub const PAGE_LEN: usize = 500;

/// A journal shorter than this after a catch-up round is replayed with the slot frozen.
const FREEZE_BELOW: usize = 200;

/// Catch-up rounds before the slot is frozen whatever is left.
const MAX_ROUNDS: usize = 8;

/// How long the mover waits for news before looking at the map again.
const TICK: Duration = Duration::from_millis(500);

/// What the mover asks of a set.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum SlotCommand {
    /// Start exporting the slot.
    BeginExport(Slot),
    /// Hold the slot's writes.
    Freeze(Slot),
    /// Take the slot back (a rolled-back move).
    Thaw(Slot),
    /// Give the slot up.
    Drop(Slot),
    /// Start importing the slot.
    BeginImport(Slot),
    /// Write copied records of the slot.
    Put {
        /// The slot.
        slot: Slot,
        /// Whole handles.
        records: Vec<(Handle, Vec<HandleValue>)>,
        /// Handles removed at the source.
        removed: Vec<Handle>,
    },
    /// Own the imported slot.
    Accept(Slot),
}

impl From<SlotCommand> for HandleCommand {
    /// The set's log command for a mover's command: the one place slot commands become
    /// log entries.
    fn from(command: SlotCommand) -> HandleCommand {
        match command {
            SlotCommand::BeginExport(slot) => HandleCommand::BeginExport { slot },
            SlotCommand::Freeze(slot) => HandleCommand::FreezeSlot { slot },
            SlotCommand::Thaw(slot) => HandleCommand::ThawSlot { slot },
            SlotCommand::Drop(slot) => HandleCommand::DropSlot { slot },
            SlotCommand::BeginImport(slot) => HandleCommand::BeginImport { slot },
            SlotCommand::Put {
                slot,
                records,
                removed,
            } => HandleCommand::PutRecords {
                slot,
                records,
                removed,
            },
            SlotCommand::Accept(slot) => HandleCommand::AcceptSlot { slot },
        }
    }
}

/// Why a step of a move did not happen; the mover tries again later.
#[derive(Debug, Error)]
pub enum MoveError {
    /// No member of the set could be reached or carried the call out.
    #[error("replica set {set}: {reason}")]
    Set {
        /// The set.
        set: u32,
        /// Why.
        reason: String,
    },
    /// The metadata group could not record the step.
    #[error("the cluster map: {0}")]
    Map(String),
    /// A record from the source could not be read.
    #[error("a copied record is corrupt: {0}")]
    Record(String),
}

impl From<GroupError> for MoveError {
    fn from(error: GroupError) -> Self {
        MoveError::Map(error.to_string())
    }
}

/// How the mover reaches the replica sets; the node implements it over the peer link.
#[async_trait]
pub trait SetAccess: Send + Sync {
    /// Has `set` apply `command` through its log; returns once it is applied by its
    /// primary.
    async fn apply(&self, set: SetId, command: SlotCommand) -> Result<(), MoveError>;

    /// Up to `limit` records of `slot` held by `set` after the folded key `after`, in
    /// key order, read once `set` has applied every write acknowledged before.
    async fn page(
        &self,
        set: SetId,
        slot: Slot,
        after: Option<String>,
        limit: usize,
    ) -> Result<Vec<StoredRecord>, MoveError>;

    /// Up to `limit` entries of `slot`'s journal at `set` after sequence `after`, each
    /// with the changed handle's current record, read as [`SetAccess::page`] reads.
    async fn journal(
        &self,
        set: SetId,
        slot: Slot,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<JournalRecord>, MoveError>;
}

/// Carries out the moves of the cluster map.
pub struct Mover<A> {
    map: MapGroup,
    sets: A,
}

impl<A: SetAccess> Mover<A> {
    /// A mover over the metadata group `map`, reaching the sets through `sets`.
    pub fn new(map: MapGroup, sets: A) -> Mover<A> {
        Mover { map, sets }
    }

    /// Drives the map's moves while this node leads the metadata group, until the
    /// group stops. A failed step is tried again at the next news or tick.
    pub async fn run(&self) {
        let mut news = self.map.group().watch();
        loop {
            if self.leads()
                && let Err(error) = self.step_all().await
            {
                tracing::warn!(%error, "a slot move is held up; trying again");
            }
            if let Ok(false) = tokio::time::timeout(TICK, news.changed()).await {
                return;
            }
        }
    }

    fn leads(&self) -> bool {
        let (_, leader) = self.map.group().members();
        leader == Some(self.map.group().status().id)
    }

    /// Takes every move of the map as far as it goes now, one after another.
    async fn step_all(&self) -> Result<(), MoveError> {
        let map = self.read_map()?;
        for (slot, migration) in &map.migrations {
            self.finish(*slot, migration.clone()).await?;
        }
        Ok(())
    }

    fn read_map(&self) -> Result<Arc<ClusterMap>, MoveError> {
        self.map
            .map()
            .map_err(|error| MoveError::Map(error.to_string()))
    }

    /// Takes the move of `slot` from its recorded step to its end.
    async fn finish(&self, slot: Slot, migration: Migration) -> Result<(), MoveError> {
        let mut moved = Copied {
            handles: migration.handles,
            bytes: migration.bytes,
        };
        let (from, to) = (migration.from, migration.to);
        let mut step = migration.step;
        let mut pause_micros = migration.pause_micros;
        let mut frozen_at = None;
        // How far `from`'s journal has been replayed onto `to` by this call: a new
        // leader resuming a move replays it from its start, which repeats nothing
        // wrong (each entry writes the handle's current record).
        let mut journal_read = None;
        loop {
            step = match step {
                MigrationStep::Planned => {
                    self.sets
                        .apply(from, SlotCommand::BeginExport(slot))
                        .await?;
                    self.sets.apply(to, SlotCommand::BeginImport(slot)).await?;
                    moved = Copied::default();
                    MigrationStep::Copying
                }
                MigrationStep::Copying => {
                    moved = self.copy(slot, from, to).await?;
                    let rounds = Some(FREEZE_BELOW);
                    self.catch_up(slot, (from, to), &mut journal_read, rounds)
                        .await?;
                    frozen_at = Some(Instant::now());
                    self.sets.apply(from, SlotCommand::Freeze(slot)).await?;
                    MigrationStep::Frozen
                }
                MigrationStep::Frozen => {
                    let frozen = frozen_at.unwrap_or_else(Instant::now);
                    self.catch_up(slot, (from, to), &mut journal_read, None)
                        .await?;
                    self.sets.apply(to, SlotCommand::Accept(slot)).await?;
                    let flip = self.advance(slot, MigrationStep::Flipped, moved, 0);
                    flip.await?;
                    pause_micros = micros(frozen.elapsed());
                    MigrationStep::Flipped
                }
                MigrationStep::Flipped => {
                    self.sets.apply(from, SlotCommand::Drop(slot)).await?;
                    self.advance(slot, MigrationStep::Flipped, moved, pause_micros)
                        .await?;
                    self.change(MapCommand::EndMove { slot }).await?;
                    tracing::info!(slot = slot.0, from = from.0, to = to.0, "slot moved");
                    return Ok(());
                }
            };
            if step != MigrationStep::Flipped {
                self.advance(slot, step, moved, 0).await?;
            }
        }
    }

    /// Copies every record of `slot` from `from` to `to`, page by page.
    async fn copy(&self, slot: Slot, from: SetId, to: SetId) -> Result<Copied, MoveError> {
        let mut copied = Copied::default();
        let mut after = None;
        loop {
            let page = self.sets.page(from, slot, after.clone(), PAGE_LEN).await?;
            let Some((last, _)) = page.last() else {
                return Ok(copied);
            };
            after = Some(last.clone());
            let full = page.len() == PAGE_LEN;
            let records = decode_records(&page, &mut copied)?;
            let put = SlotCommand::Put {
                slot,
                records,
                removed: Vec::new(),
            };
            self.sets.apply(to, put).await?;
            if !full {
                return Ok(copied);
            }
        }
    }

    /// Replays `from`'s journal of `slot` onto `to`, after the entry `after` (which it
    /// moves on), in rounds; with `until`, stops after a round that replayed fewer
    /// entries than that (or after [`MAX_ROUNDS`]); without, goes to the journal's end.
    async fn catch_up(
        &self,
        slot: Slot,
        (from, to): (SetId, SetId),
        after: &mut Option<u64>,
        until: Option<usize>,
    ) -> Result<(), MoveError> {
        for round in 0.. {
            let mut replayed = 0;
            loop {
                let entries = self.sets.journal(from, slot, *after, PAGE_LEN).await?;
                let Some((last, _, _)) = entries.last() else {
                    break;
                };
                *after = Some(*last);
                replayed += entries.len();
                self.replay(slot, to, &entries).await?;
                if entries.len() < PAGE_LEN {
                    break;
                }
            }
            let small = until.is_some_and(|until| replayed < until);
            if until.is_none() || small || round + 1 >= MAX_ROUNDS {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Writes the current records of the handles `entries` name onto `to`.
    async fn replay(
        &self,
        slot: Slot,
        to: SetId,
        entries: &[JournalRecord],
    ) -> Result<(), MoveError> {
        let mut records = Vec::new();
        let mut removed = Vec::new();
        for (_, key, record) in entries {
            match record {
                Some(bytes) => records.push(decode_record(key, bytes)?),
                None => {
                    removed.push(Handle::parse(key).map_err(|e| MoveError::Record(e.to_string()))?)
                }
            }
        }
        let put = SlotCommand::Put {
            slot,
            records,
            removed,
        };
        self.sets.apply(to, put).await
    }

    async fn advance(
        &self,
        slot: Slot,
        step: MigrationStep,
        moved: Copied,
        pause_micros: u64,
    ) -> Result<(), MoveError> {
        let command = MapCommand::AdvanceMove {
            slot,
            step,
            handles: moved.handles,
            bytes: moved.bytes,
            pause_micros,
        };
        self.change(command).await
    }

    async fn change(&self, command: MapCommand) -> Result<(), MoveError> {
        match self.map.change(command).await? {
            Ok(_) => Ok(()),
            Err(refusal) => Err(MoveError::Map(refusal.to_string())),
        }
    }
}

/// What a move copied.
#[derive(Debug, Clone, Copy, Default)]
struct Copied {
    handles: u64,
    bytes: u64,
}

fn micros(elapsed: Duration) -> u64 {
    u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX)
}

fn decode_records(
    page: &[StoredRecord],
    copied: &mut Copied,
) -> Result<Vec<(Handle, Vec<HandleValue>)>, MoveError> {
    page.iter()
        .map(|(key, bytes)| {
            copied.handles += 1;
            copied.bytes += u64::try_from(bytes.len()).unwrap_or(u64::MAX);
            decode_record(key, bytes)
        })
        .collect()
}

/// A stored record as the handle and values to write at the destination.
fn decode_record(key: &str, bytes: &[u8]) -> Result<(Handle, Vec<HandleValue>), MoveError> {
    let record = crate::storage::HandleRecord::decode(key, bytes)
        .map_err(|error| MoveError::Record(format!("{key}: {error}")))?;
    let handle = Handle::parse(&record.display)
        .map_err(|error| MoveError::Record(format!("{key}: {error}")))?;
    Ok((handle, record.values))
}

#[cfg(test)]
#[path = "mover_tests.rs"]
mod tests;
