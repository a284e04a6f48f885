//! Slot moves between replica sets, the node's part: the [`SetAccess`] the mover
//! reaches the sets through (node calls over the peer link to a member of each set)
//! and the answers a node gives those calls with its own set.
//!
//! Owns [`MoveCall`] and [`MoveAnswer`] (carried in [`NodeCall::Move`] and
//! [`NodeAnswer::Moved`]), [`PeerSets`] and [`answer_move`]. A set is reached through
//! the members the cluster map records for it, in turn: a write goes through the
//! member's group (which forwards it to its primary), a read waits until the member
//! has applied every write acknowledged before (a read index), so a page or a journal
//! read at any member is as current as at the primary.

use std::net::SocketAddr;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::calls::{NodeAnswer, NodeCall, call_node};
use crate::placement::{MapGroup, MoveError, SetAccess, SlotCommand};
use crate::replication::{AdminClient, Group, HandleSet, SetId};
use crate::storage::{JournalRecord, ReadSnapshot, Slot, StorageError, Store, StoredRecord};

/// The most records a page or journal read may ask for: a stranger holding the
/// cluster secret still cannot make a node read without bound.
const MAX_PAGE: usize = 5_000;

/// What the mover asks of a set's member.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum MoveCall {
    /// Apply a slot command through the set's log.
    Apply {
        /// The set the caller means (a member of another set refuses).
        set: SetId,
        /// The command.
        command: SlotCommand,
    },
    /// A page of a slot's records after a folded key.
    Page {
        /// The set.
        set: SetId,
        /// The slot.
        slot: Slot,
        /// The last key of the page before.
        after: Option<String>,
        /// How many records at most.
        limit: usize,
    },
    /// Entries of a slot's journal after a sequence number, with current records.
    Journal {
        /// The set.
        set: SetId,
        /// The slot.
        slot: Slot,
        /// The last sequence number read before.
        after: Option<u64>,
        /// How many entries at most.
        limit: usize,
    },
}

/// A member's answer to a [`MoveCall`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum MoveAnswer {
    /// The command is applied.
    Applied,
    /// The records asked for.
    Page(Vec<StoredRecord>),
    /// The journal entries asked for.
    Journal(Vec<JournalRecord>),
    /// Why the call was not carried out.
    Failed(String),
}

impl MoveCall {
    fn set(&self) -> SetId {
        match self {
            MoveCall::Apply { set, .. }
            | MoveCall::Page { set, .. }
            | MoveCall::Journal { set, .. } => *set,
        }
    }
}

/// Answers `call` with this node's member `group` of set `id`, over `store`.
pub async fn answer_move(
    id: SetId,
    group: &Group<HandleSet>,
    store: &Store,
    call: MoveCall,
) -> MoveAnswer {
    if call.set() != id {
        return MoveAnswer::Failed(format!("this node is a member of replica set {}", id.0));
    }
    let answer = match call {
        MoveCall::Apply { command, .. } => match group.client_write(command.into()).await {
            Ok(Ok(_)) => Ok(MoveAnswer::Applied),
            Ok(Err(refusal)) => Err(refusal.to_string()),
            Err(error) => Err(error.to_string()),
        },
        MoveCall::Page {
            slot, after, limit, ..
        } => {
            read_fresh(group, store, |read| {
                read.slot_page(slot, after.as_deref(), limit.min(MAX_PAGE))
                    .map(MoveAnswer::Page)
            })
            .await
        }
        MoveCall::Journal {
            slot, after, limit, ..
        } => {
            read_fresh(group, store, |read| {
                read.journal_records(slot, after, limit.min(MAX_PAGE))
                    .map(MoveAnswer::Journal)
            })
            .await
        }
    };
    answer.unwrap_or_else(MoveAnswer::Failed)
}

/// `read` over `store` once it holds every write `group` acknowledged before.
async fn read_fresh(
    group: &Group<HandleSet>,
    store: &Store,
    read: impl FnOnce(&ReadSnapshot) -> Result<MoveAnswer, StorageError>,
) -> Result<MoveAnswer, String> {
    group.ensure_fresh_read().await.map_err(|e| e.to_string())?;
    let snapshot = store.read().map_err(|e| e.to_string())?;
    read(&snapshot).map_err(|e| e.to_string())
}

/// The sets as the mover reaches them: through the members the cluster map records.
#[derive(Debug, Clone)]
pub struct PeerSets {
    client: AdminClient,
    map: MapGroup,
}

impl PeerSets {
    /// Sets reached with `client` at the members `map` records.
    pub fn new(client: AdminClient, map: MapGroup) -> PeerSets {
        PeerSets { client, map }
    }

    /// The peer addresses of `set`'s members, as the map records them.
    fn members(&self, set: SetId) -> Result<Vec<SocketAddr>, MoveError> {
        let map = self.map.map().map_err(|e| MoveError::Map(e.to_string()))?;
        let record = map.sets.get(&set).ok_or_else(|| MoveError::Set {
            set: set.0,
            reason: "not in the cluster map".into(),
        })?;
        Ok(record.members.values().map(|m| m.node.peer).collect())
    }

    /// Sends `call` to each member of its set in turn until one carries it out.
    async fn ask(&self, call: MoveCall) -> Result<MoveAnswer, MoveError> {
        let set = call.set();
        let mut reason = String::from("it has no members");
        for peer in self.members(set)? {
            let answer = call_node(&self.client, peer, &NodeCall::Move(call.clone())).await;
            match answer {
                Ok(NodeAnswer::Moved(MoveAnswer::Failed(failed))) => reason = failed,
                Ok(NodeAnswer::Moved(answer)) => return Ok(answer),
                Ok(other) => reason = format!("unexpected answer {other:?}"),
                Err(error) => reason = format!("{peer}: {error}"),
            }
        }
        Err(MoveError::Set { set: set.0, reason })
    }
}

fn unexpected(set: SetId, answer: &MoveAnswer) -> MoveError {
    MoveError::Set {
        set: set.0,
        reason: format!("unexpected answer {answer:?}"),
    }
}

#[async_trait]
impl SetAccess for PeerSets {
    async fn apply(&self, set: SetId, command: SlotCommand) -> Result<(), MoveError> {
        match self.ask(MoveCall::Apply { set, command }).await? {
            MoveAnswer::Applied => Ok(()),
            other => Err(unexpected(set, &other)),
        }
    }

    async fn page(
        &self,
        set: SetId,
        slot: Slot,
        after: Option<String>,
        limit: usize,
    ) -> Result<Vec<StoredRecord>, MoveError> {
        let call = MoveCall::Page {
            set,
            slot,
            after,
            limit,
        };
        match self.ask(call).await? {
            MoveAnswer::Page(records) => Ok(records),
            other => Err(unexpected(set, &other)),
        }
    }

    async fn journal(
        &self,
        set: SetId,
        slot: Slot,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<JournalRecord>, MoveError> {
        let call = MoveCall::Journal {
            set,
            slot,
            after,
            limit,
        };
        match self.ask(call).await? {
            MoveAnswer::Journal(entries) => Ok(entries),
            other => Err(unexpected(set, &other)),
        }
    }
}
