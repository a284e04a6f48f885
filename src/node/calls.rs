//! Calls to a node itself, not to one of its groups, over the peer port: what the
//! `hdl cluster` command asks of a node as a whole.
//!
//! Owns [`NodeCall`], [`NodeAnswer`], the [`NodeEndpoint`] that answers them and
//! [`call_node`], the command's side. A call and its answer are postcard bytes after
//! the peer frame's destination; only peers that proved the cluster secret reach here.

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::placement::{ClusterMap, MapGroup};
use crate::replication::network::frame::{self, FrameError};
use crate::replication::network::{Endpoint, EndpointAnswer};
use crate::replication::{AdminClient, GroupError, NodeId};
use crate::routing::{ForwardAnswer, ForwardCall, answer_forwarded};
use crate::service::Service;
use crate::service::bootstrap::BootstrapAdmin;

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
    /// A handle call routed to this node's replica set, answered by its own service.
    Forward(ForwardCall),
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
    /// The answer to a forwarded handle call.
    Forwarded(ForwardAnswer),
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

/// Answers node calls with this node's service and metadata group.
#[derive(Debug)]
pub struct NodeEndpoint {
    service: Service,
    map: MapGroup,
}

impl NodeEndpoint {
    /// The endpoint of the node running `service` and `map`.
    pub fn new(service: Service, map: MapGroup) -> NodeEndpoint {
        NodeEndpoint { service, map }
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
            NodeCall::Forward(call) => {
                NodeAnswer::Forwarded(answer_forwarded(&self.service, call).await)
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
