//! The peer network: how nodes talk to each other, for every group they share.
//!
//! Two layers. The link carries opaque bytes: one authenticated, multiplexed TCP
//! connection per peer ([`Links`] on the calling side, [`serve`] and its [`Dispatch`]
//! seam on the answering side), opened with a mutual handshake on the cluster secret
//! ([`ClusterSecret`]) in plain frames ([`frame`]), then every frame sealed with
//! per-connection, per-direction keys and numbered ([`seal`], sans-IO). The typed layer
//! above it: every request names its [`Destination`] (a group, a group's member for an
//! admin call, or the node itself) before its body, so one connection to a peer carries
//! the calls of every group a node belongs to ([`GroupCall`]: Raft RPCs, forwarded
//! client writes, read indexes, a stopping leader's hand-off). The calling side of one
//! group is [`GroupNetwork`]; the answering side is the node's [`Registry`] of
//! [`Endpoint`]s ([`GroupEndpoint`] for a group's Raft), which is the link's
//! [`Dispatch`]. Also the secret file.
//!
//! Invariants: every size read from a peer is bounded before anything is allocated (a
//! small bound until the peer is authenticated); nothing but the handshake is read from
//! or sent to a peer that has not proven it knows the secret, and connections that
//! have not are bounded in time, in all and per source address ([`PeerLimits`]), never
//! at the expense of one that has; no frame after the
//! handshake is acted on before its tag is checked, and one that fails drops the
//! connection; a connection that failed once is never reused; every queue is bounded.

mod auth;
mod client;
pub mod frame;
mod link;
mod listener;
mod message;
pub mod seal;
mod secret_file;
mod send_budget;
mod server;
mod snapshot_send;
mod strangers;
mod stream;

pub use auth::{ClusterSecret, MIN_SECRET_LEN, SecretError};
pub use client::{GroupConnection, GroupNetwork, admin_call, node_call};
pub use link::{LinkSettings, Links, MAX_PENDING_CALLS, PROBE_TIMEOUT};
pub use listener::{
    Dispatch, DispatchFuture, HANDSHAKE_TIMEOUT, MAX_IN_FLIGHT, MAX_PEERS, MAX_STRANGERS,
    PeerLimits, STRANGERS_PER_SOURCE, serve,
};
pub use message::{Destination, ForwardError, GroupAnswer, GroupCall, Reply, TakeOverRefused};
pub use secret_file::{SecretFileError, read_or_create_secret_file, read_secret_file};
pub use server::{Endpoint, EndpointAnswer, GroupEndpoint, Registry};
pub use stream::PeerError;

#[cfg(test)]
mod link_tests;
#[cfg(test)]
mod tests;
