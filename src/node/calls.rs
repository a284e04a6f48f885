//! Calls to a node itself, not to one of its groups, over the peer port: what the
//! `hdl cluster` command asks of a node as a whole.
//!
//! Owns [`NodeCall`], [`NodeAnswer`], the [`NodeEndpoint`] that answers them and
//! [`call_node`], the command's side. A call and its answer are postcard bytes after
//! the peer frame's destination; only peers that proved the cluster secret reach here.

use std::net::SocketAddr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::moves::{MoveAnswer, MoveCall, answer_move};
use crate::placement::{ClusterMap, MapCommand, MapGroup};
use crate::replication::network::frame::{self, FrameError};
use crate::replication::network::{Endpoint, EndpointAnswer};
use crate::replication::{AdminClient, Group, GroupError, HandleSet, NodeId, SetId};
use crate::service::Service;
use crate::service::bootstrap::BootstrapAdmin;
use crate::storage::Store;

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
    /// The answer to a [`NodeCall::Move`].
    Moved(MoveAnswer),
    /// How many moves a [`NodeCall::Rebalance`] planned.
    Planned {
        /// The moves planned.
        moves: usize,
    },
    /// The map's epoch after a change.
    MapChanged {
        /// The epoch.
        epoch: u64,
    },
    /// The node could not carry the call out.
    Failed(String),
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

/// Answers node calls with this node's service, replica set and metadata group.
#[derive(Debug)]
pub struct NodeEndpoint {
    service: Service,
    set: (SetId, Group<HandleSet>, Arc<Store>),
    map: MapGroup,
}

impl NodeEndpoint {
    /// The endpoint of the node running `service` over its member `set` of a replica
    /// set (its id, group and store) and `map`.
    pub fn new(
        service: Service,
        set: (SetId, Group<HandleSet>, Arc<Store>),
        map: MapGroup,
    ) -> NodeEndpoint {
        NodeEndpoint { service, set, map }
    }

    async fn carry_out(&self, call: NodeCall) -> NodeAnswer {
        match call {
            NodeCall::Bootstrap { admin, prefixes } => {
                match self.service.bootstrap(&admin, &prefixes).await {
                    Ok(created) => NodeAnswer::Bootstrapped {
                        created: created.iter().map(|h| h.as_str().to_owned()).collect(),
                    },
                    Err(error) => NodeAnswer::Failed(error.to_string()),
                }
            }
            NodeCall::ClusterMap => match self.map.map() {
                Ok(map) => NodeAnswer::ClusterMap(map),
                Err(error) => NodeAnswer::Failed(error.to_string()),
            },
            NodeCall::Move(call) => {
                let (id, group, store) = &self.set;
                NodeAnswer::Moved(answer_move(*id, group, store, call).await)
            }
            NodeCall::Rebalance { leaving } => match self.map.plan_rebalance(&leaving).await {
                Ok(moves) => NodeAnswer::Planned { moves },
                Err(error) => NodeAnswer::Failed(error.to_string()),
            },
            NodeCall::RemoveSet { set } => {
                match self.map.change(MapCommand::RemoveSet { set }).await {
                    Ok(Ok(changed)) => NodeAnswer::MapChanged {
                        epoch: changed.epoch,
                    },
                    Ok(Err(refusal)) => NodeAnswer::Failed(refusal.to_string()),
                    Err(error) => NodeAnswer::Failed(error.to_string()),
                }
            }
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
