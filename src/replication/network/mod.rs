//! The Raft peer network: how the nodes of a replica set talk to each other.
//!
//! Owns the peer wire protocol: length-prefixed postcard frames ([`frame`], sans-IO),
//! mutual authentication with the cluster secret on every connection ([`ClusterSecret`]),
//! the [`PeerRequest`]/[`PeerResponse`] messages (Raft RPCs, forwarded client writes,
//! read indexes and the admin calls of `hdl cluster`), the secret file,
//! the client side openraft drives ([`Network`], [`NetworkConnection`]) and the server
//! side that answers with the local Raft ([`PeerServer`]).
//!
//! Invariants: every size read from a peer is bounded before anything is allocated (a
//! small bound until the peer is authenticated); nothing but the handshake is read from
//! or sent to a peer that has not proven it knows the secret; a connection that failed
//! once is never reused.

mod auth;
mod client;
pub mod frame;
mod message;
mod secret_file;
mod server;
mod stream;

pub use auth::{ClusterSecret, MIN_SECRET_LEN, SecretError};
pub use client::{Network, NetworkConnection};
pub use message::{ForwardError, PeerRequest, PeerResponse};
pub use secret_file::{SecretFileError, read_or_create_secret_file, read_secret_file};
pub use server::{HANDSHAKE_TIMEOUT, MAX_CONNECTIONS, PeerServer};
pub use stream::PeerError;

#[cfg(test)]
mod tests;
