//! Calls to a node itself, not to one of its groups, over the peer port: what the
//! `hdl cluster` command asks of a node as a whole.
//!
//! Owns [`NodeCall`], [`NodeAnswer`], the [`NodeEndpoint`] that answers them and
//! [`call_node`], the command's side. A call and its answer are postcard bytes after
//! the peer frame's destination; only peers that proved the cluster secret reach here.
//! A call that needs the node's replica set, made to a node that belongs to none yet,
//! is answered [`NodeAnswer::Failed`] saying so.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::backup::{BackupAnswer, BackupCall, BackupDesk};
use super::bulk::{BulkAnswer, BulkCall, BulkDesk};
use super::moves::{MoveAnswer, MoveCall, answer_move};
use super::set::SetHost;
use crate::placement::{ClusterMap, MapCommand, MapRefusal};
use crate::replication::network::frame::{self, FrameError};
use crate::replication::network::{Endpoint, EndpointAnswer};
use crate::replication::{AdminClient, GroupError, NodeId, SetId};
use crate::routing::{ForwardAnswer, ForwardCall, answer_forwarded};
use crate::service::bootstrap::BootstrapAdmin;
use crate::storage::Slice;

/// What a node that belongs to no replica set answers a call that needs one.
const NO_SET: &str = "this node belongs to no replica set yet (hdl cluster init, add-secondary or add-set makes it a member of one)";

/// What a node is asked as a whole.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum NodeCall {
    /// Create the bootstrap administrator's prefix handle `0.NA/<prefix>` for each of
    /// `prefixes` that does not exist yet, through the service's one write path.
    Bootstrap {
        /// The administrator's key.
        admin: BootstrapAdmin,
        /// The prefixes it administers.
        prefixes: Vec<String>,
    },
    /// The cluster map as the node has applied it.
    ClusterMap,
    /// Join replica set `set`: start its group, waiting to be formed or added as a
    /// member. Nothing to do for a node of `set`; refused for a node of another set.
    JoinSet {
        /// The set.
        set: SetId,
    },
    /// Make the ring, if the cluster has none: `slot_count` slots (a power of two)
    /// shared evenly by every set the node's cluster map records.
    MakeRing {
        /// How many slots.
        slot_count: u32,
    },
    /// Which replica set the node belongs to and what its store holds.
    SetInfo,
    /// A step of a slot move, for the node's replica set.
    Move(MoveCall),
    /// Plan the slot moves that balance the ring over every set but `leaving`, whose
    /// slots all go to the others.
    Rebalance {
        /// Sets to empty.
        leaving: Vec<SetId>,
    },
    /// Take a set that owns no slot out of the cluster map.
    RemoveSet {
        /// The set.
        set: SetId,
    },
    /// A handle call routed to this node's replica set, answered by its own service.
    Forward(ForwardCall),
    /// The node's server key (the public half), which signs its certified answers.
    ServerKey,
    /// A call of `hdl import` or `hdl export` (module [`super::bulk`]). After the
    /// others, so the variants before it keep their postcard tags.
    Bulk(BulkCall),
    /// A call of `hdl backup` (module [`super::backup`]). Last, for the same reason.
    Backup(BackupCall),
}

/// The answer to a [`NodeCall`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum NodeAnswer {
    /// The prefix handles the bootstrap created (those that existed are left alone).
    Bootstrapped {
        /// The handles created.
        created: Vec<String>,
    },
    /// The node's cluster map.
    ClusterMap(ClusterMap),
    /// The node belongs to this set (it joined now, or had before).
    Joined {
        /// The set.
        set: SetId,
    },
    /// The ring the cluster has (made now or before) and the map's epoch.
    Ring {
        /// The ring's slot count.
        slot_count: u32,
        /// The map's epoch.
        epoch: u64,
    },
    /// The node's replica set and its store.
    SetInfo(SetInfo),
    /// The answer to a [`NodeCall::Move`].
    Moved(MoveAnswer),
    /// How many moves a [`NodeCall::Rebalance`] planned.
    Planned {
        /// The moves planned.
        moves: usize,
        /// The map's epoch with the plan in it.
        epoch: u64,
    },
    /// The map's epoch after a change.
    MapChanged {
        /// The epoch.
        epoch: u64,
    },
    /// The answer to a forwarded handle call.
    Forwarded(ForwardAnswer),
    /// The node could not carry the call out.
    Failed(String),
    /// The node's server key, HS_PUBKEY data (digest §6.5). Appended, so the
    /// variants before it keep their postcard tags.
    ServerKey(Vec<u8>),
    /// The answer to a [`NodeCall::Bulk`]. Appended, for the same reason.
    Bulk(BulkAnswer),
    /// The answer to a [`NodeCall::Backup`]. Last, for the same reason.
    Backup(BackupAnswer),
}

/// A node's replica set and what its store holds, as [`NodeCall::SetInfo`] answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetInfo {
    /// The set it belongs to; `None` for none yet.
    pub set: Option<SetId>,
    /// The slot count of the ring its store is sliced to; `None` while the store was
    /// never sliced (it holds every handle), or without a set.
    pub sliced: Option<u32>,
    /// How many handles its store holds.
    pub handles: u64,
}

/// Why a node call got no answer.
#[derive(Debug, Error)]
pub enum NodeCallError {
    /// The peer link failed or the node takes no node calls.
    #[error(transparent)]
    Peer(Box<GroupError>),
    /// The call could not be written or its answer read.
    #[error("unreadable node call or answer: {0}")]
    Unreadable(FrameError),
}

/// Sends `call` to the node at `peer` with `client`.
pub async fn call_node(
    client: &AdminClient,
    peer: SocketAddr,
    call: &NodeCall,
) -> Result<NodeAnswer, NodeCallError> {
    let body = postcard::to_stdvec(call)
        .map_err(|error| NodeCallError::Unreadable(FrameError::Encode(error)))?;
    let answer = client
        .node_call(peer, &body)
        .await
        .map_err(|error| NodeCallError::Peer(Box::new(error)))?;
    frame::decode(&answer).map_err(NodeCallError::Unreadable)
}

/// Answers node calls with this node's replica set and metadata group.
#[derive(Debug)]
pub struct NodeEndpoint {
    sets: Arc<SetHost>,
    server_key: Vec<u8>,
    bulk: BulkDesk,
    backups: BackupDesk,
}

impl NodeEndpoint {
    /// The endpoint of the node whose set and metadata group `sets` holds, whose
    /// server key is `server_key` (HS_PUBKEY data) and whose data directory is
    /// `data_dir`.
    pub fn new(sets: Arc<SetHost>, server_key: Vec<u8>, data_dir: PathBuf) -> NodeEndpoint {
        NodeEndpoint {
            sets,
            server_key,
            bulk: BulkDesk::default(),
            backups: BackupDesk::new(data_dir),
        }
    }

    async fn carry_out(&self, call: NodeCall) -> NodeAnswer {
        match call {
            NodeCall::Bootstrap { admin, prefixes } => {
                let Some(local) = self.sets.local() else {
                    return NodeAnswer::Failed(NO_SET.to_owned());
                };
                match local.service.bootstrap(&admin, &prefixes).await {
                    Ok(created) => NodeAnswer::Bootstrapped {
                        created: created.iter().map(|h| h.as_str().to_owned()).collect(),
                    },
                    Err(error) => NodeAnswer::Failed(error.to_string()),
                }
            }
            NodeCall::ClusterMap => match self.sets.map().map() {
                Ok(map) => NodeAnswer::ClusterMap(Arc::unwrap_or_clone(map)),
                Err(error) => NodeAnswer::Failed(error.to_string()),
            },
            NodeCall::JoinSet { set } => match self.sets.join(set).await {
                Ok(()) => NodeAnswer::Joined { set },
                Err(error) => NodeAnswer::Failed(error.to_string()),
            },
            NodeCall::MakeRing { slot_count } => self.make_ring(slot_count).await,
            NodeCall::SetInfo => self.set_info(),
            NodeCall::Move(call) => match self.sets.local() {
                Some(local) => {
                    let answer = answer_move(local.id, &local.group, &local.store, call);
                    NodeAnswer::Moved(answer.await)
                }
                None => NodeAnswer::Failed(NO_SET.to_owned()),
            },
            NodeCall::Rebalance { leaving } => {
                match self.sets.map().plan_rebalance(&leaving).await {
                    Ok((moves, epoch)) => NodeAnswer::Planned { moves, epoch },
                    Err(error) => NodeAnswer::Failed(error.to_string()),
                }
            }
            NodeCall::RemoveSet { set } => self.remove_set(set).await,
            NodeCall::Forward(call) => match self.sets.local() {
                Some(local) => NodeAnswer::Forwarded(answer_forwarded(&local.service, call).await),
                None => NodeAnswer::Failed(NO_SET.to_owned()),
            },
            NodeCall::ServerKey => NodeAnswer::ServerKey(self.server_key.clone()),
            NodeCall::Bulk(call) => {
                NodeAnswer::Bulk(self.bulk.answer(self.sets.local(), call).await)
            }
            NodeCall::Backup(call) => {
                let answer = self
                    .backups
                    .answer(self.sets.local(), self.sets.map(), call);
                NodeAnswer::Backup(answer.await)
            }
        }
    }

    async fn remove_set(&self, set: SetId) -> NodeAnswer {
        match self.sets.map().change(MapCommand::RemoveSet { set }).await {
            Ok(Ok(changed)) => NodeAnswer::MapChanged {
                epoch: changed.epoch,
            },
            Ok(Err(refusal)) => NodeAnswer::Failed(refusal.to_string()),
            Err(error) => NodeAnswer::Failed(error.to_string()),
        }
    }

    async fn make_ring(&self, slot_count: u32) -> NodeAnswer {
        match self.sets.make_ring(slot_count).await {
            Ok(Ok(changed)) => NodeAnswer::Ring {
                slot_count,
                epoch: changed.epoch,
            },
            // Made before: answer the ring there is (as applied here).
            Ok(Err(MapRefusal::Ring(true))) => match self.sets.map().map() {
                Ok(map) if map.slot_count() > 0 => NodeAnswer::Ring {
                    slot_count: map.slot_count(),
                    epoch: map.epoch,
                },
                Ok(_) => NodeAnswer::Failed(MapRefusal::Ring(true).to_string()),
                Err(error) => NodeAnswer::Failed(error.to_string()),
            },
            Ok(Err(refusal)) => NodeAnswer::Failed(refusal.to_string()),
            Err(error) => NodeAnswer::Failed(error.to_string()),
        }
    }

    fn set_info(&self) -> NodeAnswer {
        let Some(local) = self.sets.local() else {
            let none = SetInfo {
                set: None,
                sliced: None,
                handles: 0,
            };
            return NodeAnswer::SetInfo(none);
        };
        let read = local.store.read();
        let info = read.and_then(|read| Ok((read.slice()?, read.handle_count()?)));
        match info {
            Ok((slice, handles)) => NodeAnswer::SetInfo(SetInfo {
                set: Some(local.id),
                sliced: match slice {
                    Slice::Whole => None,
                    Slice::Ring(count) => Some(count),
                },
                handles,
            }),
            Err(error) => NodeAnswer::Failed(error.to_string()),
        }
    }
}

impl Endpoint for NodeEndpoint {
    fn answer<'a>(&'a self, _from: NodeId, body: &'a [u8]) -> EndpointAnswer<'a> {
        Box::pin(async move {
            let call: NodeCall = frame::decode(body).map_err(|error| error.to_string())?;
            let answer = self.carry_out(call).await;
            postcard::to_stdvec(&answer).map_err(|error| error.to_string())
        })
    }

    fn admin<'a>(&'a self, _body: &'a [u8]) -> EndpointAnswer<'a> {
        Box::pin(async { Err("a node takes no group admin calls".to_owned()) })
    }
}
