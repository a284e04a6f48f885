//! Routing: which replica set answers a handle, and this node's own set.
//!
//! Owns [`LocalSet`], what the node publishes once it belongs to a replica set (a
//! `tokio::sync::watch` of `Option<LocalSet>`: `None` until then). Depends on
//! [`crate::storage`], [`crate::replication`] and [`crate::service`]; knows nothing of
//! the node, sockets or the edges.

use std::sync::Arc;

use crate::replication::{Group, HandleSet, SetId};
use crate::service::Service;
use crate::storage::Store;

/// This node's replica set, once it belongs to one.
#[derive(Debug, Clone)]
pub struct LocalSet {
    /// The set's id.
    pub id: SetId,
    /// This node's member of the set's group.
    pub group: Group<HandleSet>,
    /// The store the set's machine applies to.
    pub store: Arc<Store>,
    /// The service answering from that store and writing through that group.
    pub service: Service,
}
