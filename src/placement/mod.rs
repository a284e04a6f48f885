//! Placement: where handles live in a cluster — the cluster map (its replica sets and
//! their members, versioned by an epoch) and the metadata group that replicates it.
//!
//! Owns [`ClusterMap`] and its commands (pure, [`map`]), the metadata group's machine
//! ([`MapMachine`]), [`MapGroup`], this node's member of the metadata group (which
//! follows the replica set's membership into the map), and [`ClusterAdmin`], the
//! membership changes `hdl cluster` makes to a set and the metadata group together
//! (the first set's members vote in the metadata group, other sets' are its
//! learners). Depends on [`crate::replication`] (the group it runs on) and
//! [`crate::storage`] (the group's store holds the map as one document); knows nothing
//! of handles' wire forms, the service or the edges.

mod admin;
mod machine;
pub mod map;
mod mover;
mod plan;

use std::path::Path;
use std::sync::Arc;

pub use admin::{
    ClusterAdmin, FIRST_SET, FIRST_SET_GROUP, MEMBER_GROUPS, MembershipError, Via, Vote,
};
pub use machine::MapMachine;
pub use map::{
    ClusterMap, MapChanged, MapCommand, MapRefusal, MapResult, Migration, MigrationStep,
    MovedTotals, SetRecord,
};
pub use mover::{MoveError, Mover, PAGE_LEN, SetAccess, SlotCommand};
pub use plan::rebalance;

use crate::replication::{Group, GroupError, GroupHost, GroupId, GroupSettings, HandleSet, SetId};
use crate::storage::{IndexedTypes, Kept, StorageError, Store};

/// How long [`MapGroup::follow`] waits before it checks a set again without news.
pub const FOLLOW_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

/// The file, in the metadata group's directory, that holds its store.
pub const MAP_STORE_FILE: &str = "map.redb";

/// This node's member of the metadata group.
#[derive(Debug, Clone)]
pub struct MapGroup {
    group: Group<MapMachine>,
    store: Arc<Store>,
    /// Every request routes by the map, and decoding it cost as much as the rest of
    /// a resolution: it is decoded once per change.
    decoded: Arc<Kept<ClusterMap>>,
}

impl MapGroup {
    /// Opens the metadata group's store and log in `dir` and starts its Raft on `host`.
    pub async fn start(
        settings: &GroupSettings,
        dir: &Path,
        host: GroupHost,
    ) -> Result<MapGroup, GroupError> {
        let path = dir.join(MAP_STORE_FILE);
        let cache = settings.caches.map;
        let store = tokio::task::spawn_blocking(move || {
            Store::open_with(&path, cache, IndexedTypes::default())
        })
        .await?
        .map_err(|error| GroupError::Storage(error.into()))?;
        let store = Arc::new(store);
        let group = Group::start(settings, GroupId::Map, Arc::clone(&store), dir, host).await?;
        Ok(MapGroup {
            group,
            store,
            decoded: Arc::default(),
        })
    }

    /// The map as this member has applied it (it may trail the group's leader).
    pub fn map(&self) -> Result<Arc<ClusterMap>, StorageError> {
        self.decoded.get(&*self.store.read()?, machine::read_map)
    }

    /// Has the metadata group apply `command`; returns once it is committed and
    /// applied, with the map's epoch, or why the map refused it.
    pub async fn change(&self, command: MapCommand) -> Result<MapResult, GroupError> {
        self.group.client_write(command).await
    }

    /// Keeps the map's record of replica set `id` equal to the membership of `set`,
    /// this node's member of it: whenever this node leads the set and the map (as
    /// applied here) records other members, it records the current ones. Runs until
    /// the set stops; a failed write is tried again at the next change or after
    /// [`FOLLOW_RETRY`].
    pub async fn follow(&self, id: SetId, set: Group<HandleSet>) {
        let mut news = set.watch_members();
        loop {
            if let Err(error) = self.record_if_changed(id, &set).await {
                tracing::warn!(%error, set = id.0, "cannot record the set's members in the cluster map");
            }
            if let Ok(false) = tokio::time::timeout(FOLLOW_RETRY, news.changed()).await {
                return;
            }
        }
    }

    async fn record_if_changed(&self, id: SetId, set: &Group<HandleSet>) -> Result<(), GroupError> {
        let (members, leader) = set.members();
        if leader != Some(set.status().id) {
            return Ok(());
        }
        let map = self
            .map()
            .map_err(|error| GroupError::Storage(error.into()))?;
        let recorded = map
            .sets
            .get(&id)
            .map(|record| record.members.values().cloned().collect::<Vec<_>>());
        if recorded.as_ref() != Some(&members) {
            let command = MapCommand::RecordSet { set: id, members };
            if let Ok(changed) = self.change(command).await? {
                tracing::info!(
                    set = id.0,
                    epoch = changed.epoch,
                    "recorded the set's members in the cluster map"
                );
            }
        }
        Ok(())
    }

    /// Plans the moves that balance the ring over every set but `leaving` (see
    /// [`rebalance`]) from the map as applied here; how many it planned. The map
    /// refuses a plan made from a stale map (a slot no longer its planned source's),
    /// and the call can simply be made again. Answers how many moves it planned and the
    /// map's epoch with them: a member whose map is older has not seen the plan yet.
    pub async fn plan_rebalance(&self, leaving: &[SetId]) -> Result<(usize, u64), MoveError> {
        let map = self
            .map()
            .map_err(|error| MoveError::Map(error.to_string()))?;
        let moves = rebalance(&map, leaving);
        let planned = moves.len();
        if planned == 0 {
            return Ok((0, map.epoch));
        }
        match self.change(MapCommand::PlanMoves { moves }).await? {
            Ok(changed) => Ok((planned, changed.epoch)),
            Err(refusal) => Err(MoveError::Map(refusal.to_string())),
        }
    }

    /// The metadata group itself (status, membership, shutdown).
    pub fn group(&self) -> &Group<MapMachine> {
        &self.group
    }
}
