//! The Raft peer network: how the nodes of a replica set talk to each other.
//!
//! Two layers. The link carries opaque bytes: one authenticated, multiplexed TCP
//! connection per peer ([`Links`] on the calling side, [`serve`] and its [`Dispatch`]
//! seam on the answering side), opened with a mutual handshake on the cluster secret
//! ([`ClusterSecret`]) in plain frames ([`frame`]), then every frame sealed with
//! per-connection, per-direction keys and numbered ([`seal`], sans-IO). The typed layer
//! above it: the [`PeerRequest`]/[`PeerResponse`] messages (Raft RPCs, forwarded client
//! writes, read indexes and the admin calls of `hdl cluster`) as postcard bodies, the
//! client side openraft drives ([`Network`], [`NetworkConnection`]) and the dispatcher
//! that answers with the local Raft ([`PeerServer`]). Also the secret file.
//!
//! Invariants: every size read from a peer is bounded before anything is allocated (a
//! small bound until the peer is authenticated); nothing but the handshake is read from
//! or sent to a peer that has not proven it knows the secret; no frame after the
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
mod server;
mod stream;

pub use auth::{ClusterSecret, MIN_SECRET_LEN, SecretError};
pub use client::{Network, NetworkConnection};
pub use link::{LinkSettings, Links, MAX_PENDING_CALLS, PROBE_TIMEOUT};
pub use listener::{
    Dispatch, DispatchFuture, HANDSHAKE_TIMEOUT, MAX_CONNECTIONS, MAX_IN_FLIGHT, serve,
};
pub use message::{ForwardError, PeerRequest, PeerResponse};
pub use secret_file::{SecretFileError, read_or_create_secret_file, read_secret_file};
pub use server::PeerServer;
pub use stream::PeerError;

#[cfg(test)]
mod link_tests;
#[cfg(test)]
mod tests;
