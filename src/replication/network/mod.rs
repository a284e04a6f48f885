//! The peer network: how nodes talk to each other, for every group they share.
//!
//! Owns the peer wire protocol: length-prefixed postcard frames ([`frame`], sans-IO),
//! mutual authentication with the cluster secret on every connection ([`ClusterSecret`]),
//! the secret file, the transport of opaque requests between authenticated peers
//! ([`Links`] on the calling side, [`serve`] on the answering side), and the messages
//! on it: every request names its [`Destination`] (a group, or the node itself) before
//! its body, so one connection to a peer carries the calls of every group ([`GroupCall`]:
//! Raft RPCs, forwarded client writes, read indexes, the admin calls of `hdl cluster`).
//! The calling side of one group is [`GroupNetwork`]; the answering side is the node's
//! [`Registry`] of [`Endpoint`]s ([`GroupEndpoint`] for a group's Raft).
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
mod transport;

pub use auth::{ClusterSecret, MIN_SECRET_LEN, SecretError};
pub use client::{GroupConnection, GroupNetwork, admin_call, node_call};
pub use message::{Destination, ForwardError, GroupAnswer, GroupCall, Reply};
pub use secret_file::{SecretFileError, read_or_create_secret_file, read_secret_file};
pub use server::{Endpoint, EndpointAnswer, GroupEndpoint, Registry};
pub use stream::PeerError;
pub use transport::{Dispatch, HANDSHAKE_TIMEOUT, Links, MAX_CONNECTIONS, serve};

#[cfg(test)]
mod tests;
