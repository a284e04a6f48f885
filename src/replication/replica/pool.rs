//! Idle peer connections for calls forwarded to the leader, kept per peer, so that a
//! secondary's forwarded writes and read indexes do not each pay a TCP connect and
//! the mutual HMAC handshake.
//!
//! Owns [`ForwardPool`]. A connection is taken out for one call and given back only
//! after the call succeeded; one whose peer changed address is dropped. At most
//! [`MAX_IDLE_PER_PEER`] idle connections are kept per peer.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use crate::replication::network::{Network, NetworkConnection};
use crate::replication::{Node, NodeId};

/// The most idle connections kept for one peer.
pub(super) const MAX_IDLE_PER_PEER: usize = 64;

/// Idle connections to the peers, by node id.
#[derive(Debug, Default)]
pub(super) struct ForwardPool {
    idle: Mutex<HashMap<NodeId, Vec<NetworkConnection>>>,
}

impl ForwardPool {
    /// An idle connection to `id` at `node`, or a new one (connecting on first use).
    pub(super) fn take(&self, network: &Network, id: NodeId, node: &Node) -> NetworkConnection {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        let reusable = idle.get_mut(&id).and_then(|connections| {
            connections.retain(|connection| connection.node() == node);
            connections.pop()
        });
        reusable.unwrap_or_else(|| network.connection(id, node))
    }

    /// Keeps `connection` to `id`, which just served a call, for the next one.
    pub(super) fn give_back(&self, id: NodeId, connection: NetworkConnection) {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        let connections = idle.entry(id).or_default();
        if connections.len() < MAX_IDLE_PER_PEER {
            connections.push(connection);
        }
    }
}
