//! Routing: which replica set answers a handle, and getting the request there
//! (`DESIGN.md` §3, "Routing").
//!
//! Owns [`Router`], the [`Handler`](crate::service::Handler) a node's edges answer with: a handle whose slot this
//! node's set owns goes to its own [`Service`]; any other is forwarded to a member of
//! the set that owns the slot in the cluster map ([`Forwarder`]: reads to the member of
//! this node's rank first, then the others; writes to any member, whose group forwards
//! them to its primary). Listing, counting and searching ask every set and merge. Owns the
//! forwarding wire ([`ForwardCall`], [`ForwardAnswer`], [`answer_forwarded`]), the
//! [`Peers`] seam the node implements to carry it, this node's [`LocalSet`], and the
//! [`RecordSource`](crate::service::RecordSource) the service reads other sets' records
//! through.
//!
//! A node never answers "not found" for a slot it does not answer for: a
//! [`Error::NotHere`](crate::service::Error::NotHere) (from its own store, or from the node asked) re-reads the map and
//! routes again, with a short backoff, for at most [`REROUTE_PATIENCE`]; then, or when
//! no member of the owner set can be reached, the answer is
//! [`Error::Unavailable`](crate::service::Error::Unavailable)
//! (RC 3, HTTP 503). Every forward is counted in `/metrics`.
//!
//! Depends on [`crate::service`] (the local service, its errors and types),
//! [`crate::placement`] (the map), [`crate::replication`] (slots, sets, groups),
//! [`crate::storage`], [`crate::names`], [`crate::values`], [`crate::config`] and
//! [`crate::metrics`]; never on `node` (which implements [`Peers`]) nor the edges.

mod forward;
mod merge;
mod router;
#[cfg(test)]
mod tests;
mod wire;

use std::net::SocketAddr;
use std::sync::Arc;

use async_trait::async_trait;
use thiserror::Error;

use crate::replication::{Group, HandleSet, SetId};
use crate::service::Service;
use crate::storage::Store;

pub use forward::{Forwarder, REROUTE_PATIENCE};
pub use router::Router;
pub use wire::{Answer, Failure, ForwardAnswer, ForwardCall, MAX_PAGE, answer_forwarded};

/// This node's replica set, once it belongs to one.
#[derive(Debug, Clone)]
pub struct LocalSet {
    /// The set's id.
    pub id: SetId,
    /// This node's member of the set's group.
    pub group: Group<HandleSet>,
    /// The store the set's machine applies to.
    pub store: Arc<Store>,
    /// The service over that store and group.
    pub service: Service,
}

/// Sends forwarded calls to other nodes of the cluster: the node implements it over
/// the peer link (authenticated by the cluster secret).
#[async_trait]
pub trait Peers: Send + Sync + std::fmt::Debug {
    /// Sends `call` to the node whose peer address is `peer`; its answer.
    async fn forward(
        &self,
        peer: SocketAddr,
        call: ForwardCall,
    ) -> Result<ForwardAnswer, ForwardError>;
}

/// Why a forwarded call got no answer.
#[derive(Debug, Error)]
pub enum ForwardError {
    /// The node could not be reached, or the link failed.
    #[error("node at {peer} unreachable: {source}")]
    Unreachable {
        /// Its peer address.
        peer: SocketAddr,
        /// Why.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The node answered something other than an answer to the call.
    #[error("node at {peer} did not answer the forwarded call: {reason}")]
    NotAnswered {
        /// Its peer address.
        peer: SocketAddr,
        /// What it said.
        reason: String,
    },
}
