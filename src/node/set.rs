//! This node's replica set: which one it belongs to, starting it, and what runs beside
//! it.
//!
//! Owns [`SetHost`]. A node belongs to the set whose directory its data directory
//! holds (`groups/set-<k>/`, [`super::groups::find_set`]); `[cluster] bootstrap` on a
//! node that has none forms set 1. A node that belongs to no set runs only the
//! metadata group until `hdl cluster` asks it to join set k ([`SetHost::join`], the
//! node call `JoinSet`): that starts the group `Set(k)` waiting to be formed or
//! joined. Once the set's group runs, the host builds its [`Service`] and publishes
//! the [`LocalSet`] on a watch channel (`None` until then), and starts two tasks: the
//! metadata group following the set's membership into the cluster map
//! ([`MapGroup::follow`]), and the slicer, which, while this node leads its set and
//! the map has a ring, cuts a store that was never sliced (`Slice::Whole`) to the
//! slots the ring gives the set (`HandleCommand::MakeSlice`). Slicing deletes nothing:
//! with one set every slot is the set's, so a store that held every handle keeps
//! answering every one of them.
//!
//! A set whose directory `hdl restore` made is finished before it serves
//! ([`super::restore::settle`]): its node must form it alone.
//!
//! Invariants: a node starts at most one set, and joining another is refused; every
//! task ends when its group stops, or is aborted by [`SetHost::stop`].

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::groups::{self, GroupsError};
use super::restore::{self, SettleError};
use crate::config::Config;
use crate::placement::{FIRST_SET, FOLLOW_RETRY, MapCommand, MapGroup, MapResult};
use crate::replication::{Bootstrap, GroupError, GroupHost, GroupSettings, HandleCommand, SetId};
use crate::resolver::Resolver;
use crate::routing::LocalSet;
use crate::service::site::MemberKeys;
use crate::service::{AuthPolicy, RecordSource, Service, Unserved};
use crate::storage::{IndexedTypes, Slice, Slot};

/// How many times a node that formed set 1 alone looks for the set in the map before
/// it gives up making the ring (one look per change of the map, or per
/// [`FOLLOW_RETRY`]).
const RING_LOOKS: usize = 120;

/// Why a node did not join a replica set.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    /// The node belongs to another set already.
    #[error("this node belongs to replica set {0} already")]
    OtherSet(u32),
    /// The set's group could not start.
    #[error(transparent)]
    Groups(#[from] GroupsError),
    /// The set was restored from a backup and its restore could not be finished.
    #[error(transparent)]
    Restore(#[from] SettleError),
}

/// Starts this node's replica set and holds what runs beside it.
#[derive(Debug)]
pub struct SetHost {
    settings: GroupSettings,
    data_dir: PathBuf,
    host: GroupHost,
    map: MapGroup,
    config: Config,
    policy: AuthPolicy,
    /// Where the service reads the records authorisation needs (other sets' through
    /// the router's forwarder).
    records: Arc<dyn RecordSource>,
    local: watch::Sender<Option<LocalSet>>,
    joining: tokio::sync::Mutex<()>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    /// The members' server keys, for the service's HS_SITE.
    member_keys: Arc<MemberKeys>,
}

impl SetHost {
    /// The host of the node configured by `config` (with `policy`), whose groups run
    /// on `host` and whose member of the metadata group is `map`. No set runs yet.
    pub fn new(
        config: &Config,
        policy: AuthPolicy,
        host: GroupHost,
        map: MapGroup,
        records: Arc<dyn RecordSource>,
    ) -> SetHost {
        SetHost {
            records,
            settings: groups::settings(config),
            data_dir: config.data_dir.clone(),
            host,
            map,
            config: config.clone(),
            policy,
            local: watch::Sender::new(None),
            joining: tokio::sync::Mutex::new(()),
            tasks: Mutex::new(Vec::new()),
            member_keys: Arc::default(),
        }
    }

    /// This host, whose set's service describes its members with the keys `keys`
    /// holds.
    pub fn with_member_keys(self, keys: Arc<MemberKeys>) -> SetHost {
        SetHost {
            member_keys: keys,
            ..self
        }
    }

    /// This node's member of the metadata group.
    pub fn map(&self) -> &MapGroup {
        &self.map
    }

    /// This node's set, if it belongs to one.
    pub fn local(&self) -> Option<LocalSet> {
        self.local.borrow().clone()
    }

    /// Watches this node's set: `None` until it belongs to one.
    pub fn subscribe(&self) -> watch::Receiver<Option<LocalSet>> {
        self.local.subscribe()
    }

    /// Starts the set the data directory holds; with `[cluster] bootstrap`, a node
    /// that holds none forms set 1 alone, and a node of set 1 makes the ring if the
    /// cluster has none.
    pub async fn start_own(&self) -> Result<(), JoinError> {
        let bootstrap = self.config.cluster.bootstrap;
        let found = groups::find_set(&self.data_dir)?;
        let Some(set) = found.or(bootstrap.then_some(FIRST_SET)) else {
            return Ok(());
        };
        let forms = bootstrap && set == FIRST_SET;
        let how = if forms {
            Bootstrap::Alone
        } else {
            Bootstrap::Wait
        };
        self.start(set, how).await?;
        if forms {
            let (map, slot_count) = (self.map.clone(), self.config.cluster.slot_count);
            self.spawn(async move { ring_of_first_set(map, slot_count).await });
        }
        Ok(())
    }

    /// Joins replica set `set`: starts its group, waiting to be formed or added as a
    /// member. Nothing to do when the node belongs to `set` already; refused when it
    /// belongs to another.
    pub async fn join(&self, set: SetId) -> Result<(), JoinError> {
        self.start(set, Bootstrap::Wait).await
    }

    async fn start(&self, set: SetId, bootstrap: Bootstrap) -> Result<(), JoinError> {
        let _one_at_a_time = self.joining.lock().await;
        if let Some(local) = self.local() {
            if local.id == set {
                return Ok(());
            }
            return Err(JoinError::OtherSet(local.id.0));
        }
        let restored = restore::unsettled(&self.data_dir, set);
        if restored && bootstrap != Bootstrap::Alone {
            let path = self.data_dir.clone();
            return Err(SettleError::NeedsBootstrap { path }.into());
        }
        let settings = GroupSettings {
            bootstrap,
            ..self.settings.clone()
        };
        let indexed = IndexedTypes::new(&self.config.search.indexed_types);
        let (group, store) =
            groups::start_set(&settings, &self.data_dir, set, &self.host, indexed).await?;
        if restored {
            // Before anything else runs beside the set, and before the node serves.
            restore::settle(&group, &self.data_dir, set).await?;
        }
        let mut service = Service::new(
            Arc::clone(&store),
            group.clone(),
            self.policy.clone(),
            self.config.site.clone(),
        )
        .with_records(Arc::clone(&self.records))
        .with_member_keys(Arc::clone(&self.member_keys))
        .with_max_handle_octets(self.config.handle.max_handle_octets)
        .with_unserved(if self.config.resolver.refuses_unserved() {
            Unserved::Refuse
        } else {
            Unserved::NotFound
        });
        if !self.config.resolver.ghr.is_empty() {
            service = service.with_resolver(Resolver::new(self.config.resolver.ghr.clone()));
        }
        let local = LocalSet {
            id: set,
            group,
            store,
            service,
        };
        let (map, follows) = (self.map.clone(), local.group.clone());
        self.spawn(async move { map.follow(set, follows).await });
        let (map, slices) = (self.map.clone(), local.clone());
        self.spawn(async move { slice_to_ring(map, slices).await });
        tracing::info!(set = set.0, "started replica set");
        self.local.send_replace(Some(local));
        Ok(())
    }

    fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        tasks.push(tokio::spawn(task));
    }

    /// Has the metadata group make the ring: `slot_count` slots shared by every set the
    /// map records.
    pub async fn make_ring(&self, slot_count: u32) -> Result<MapResult, GroupError> {
        make_ring(&self.map, slot_count).await
    }

    /// Stops the tasks beside the set, then the set's group (its Raft; it stops
    /// answering its peer calls). The metadata group is the caller's.
    pub async fn stop(&self) -> Result<(), GroupError> {
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(PoisonError::into_inner));
        for task in tasks {
            task.abort();
        }
        match self.local() {
            Some(local) => local.group.shutdown().await,
            None => Ok(()),
        }
    }
}

/// Has the metadata group make a ring of `slot_count` slots over every set `map`
/// records (as applied here).
async fn make_ring(map: &MapGroup, slot_count: u32) -> Result<MapResult, GroupError> {
    let recorded = map
        .map()
        .map_err(|error| GroupError::Storage(error.into()))?;
    let sets = recorded.sets.keys().copied().collect();
    map.change(MapCommand::MakeRing { slot_count, sets }).await
}

/// On a node that formed set 1 alone: once the map records set 1 and has no ring,
/// makes a ring of the set alone (bounded: [`RING_LOOKS`] looks).
async fn ring_of_first_set(map: MapGroup, slot_count: u32) {
    let mut news = map.group().watch();
    for _ in 0..RING_LOOKS {
        match map.map() {
            Ok(current) if !current.slots.is_empty() => return,
            Ok(current) if current.sets.contains_key(&FIRST_SET) => {
                match make_ring(&map, slot_count).await {
                    Ok(Ok(changed)) => {
                        tracing::info!(slot_count, epoch = changed.epoch, "made the ring");
                        return;
                    }
                    Ok(Err(refused)) => {
                        tracing::warn!(%refused, "the cluster map refused the ring");
                        return;
                    }
                    Err(error) => tracing::warn!(%error, "cannot make the ring yet"),
                }
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "cannot read the cluster map"),
        }
        if let Ok(false) = tokio::time::timeout(FOLLOW_RETRY, news.changed()).await {
            return;
        }
    }
    tracing::warn!("gave up making the ring: the cluster map never recorded set 1");
}

/// Slices the store of `local` to the ring once the map has one, proposing it while
/// this node leads the set; ends once the store is sliced or the set stops. Tries
/// again at every change of the set or the map, or after [`FOLLOW_RETRY`].
async fn slice_to_ring(map: MapGroup, local: LocalSet) {
    let mut set_news = local.group.watch();
    let mut map_news = map.group().watch();
    loop {
        match slice_if_led(&map, &local).await {
            Ok(true) => return,
            Ok(false) => {}
            Err(error) => {
                tracing::warn!(%error, set = local.id.0, "cannot slice the store to the ring yet");
            }
        }
        tokio::select! {
            alive = set_news.changed() => if !alive { return },
            alive = map_news.changed() => if !alive { return },
            () = tokio::time::sleep(FOLLOW_RETRY) => {}
        }
    }
}

/// Whether the store is sliced, after proposing the slice if it is not, this node
/// leads the set and the map has a ring.
async fn slice_if_led(map: &MapGroup, local: &LocalSet) -> Result<bool, GroupError> {
    let storage = |error: crate::storage::StorageError| GroupError::Storage(error.into());
    let read = local.store.read().map_err(storage)?;
    if read.slice().map_err(storage)? != Slice::Whole {
        return Ok(true);
    }
    let (_, leader) = local.group.members();
    if leader != Some(local.group.status().id) {
        return Ok(false);
    }
    let ring = map.map().map_err(storage)?;
    let slot_count = ring.slot_count();
    if slot_count == 0 {
        return Ok(false);
    }
    let owned: Vec<Slot> = (0..slot_count)
        .map(Slot)
        .filter(|slot| ring.owner(*slot) == Some(local.id))
        .collect();
    let held = read.handle_count().map_err(storage)?;
    if held > 0 && owned.len() < ring.slots.len() {
        tracing::warn!(
            held,
            set = local.id.0,
            "the store held handles before the ring; those in other sets' slots are no longer answered here"
        );
    }
    let owns = owned.len();
    let command = HandleCommand::MakeSlice { slot_count, owned };
    match local.group.client_write(command).await? {
        Ok(_) => tracing::info!(
            set = local.id.0,
            slot_count,
            owns,
            "sliced the store to the ring"
        ),
        Err(refused) => tracing::warn!(%refused, set = local.id.0, "the set refused the slice"),
    }
    Ok(true)
}
