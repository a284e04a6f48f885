//! Replication of a replica set's admin writes with openraft (0.9, storage v2).
//!
//! Owns the seams between openraft and the rest of hdl:
//! - command types ([`types`]): [`Request`] in the log, [`Response`] from applying it,
//!   [`Node`] addresses, and the [`TypeConfig`] binding them;
//! - the log store ([`LogStore`]): the Raft log and vote in `raft-log.redb`;
//! - the state machine ([`StateMachine`], [`SnapshotBuilder`]): applies commands to the
//!   handle [`crate::storage::Store`] and builds and installs snapshots;
//! - the peer network ([`network`]): authenticated TCP between the nodes for Raft RPCs
//!   forwarded writes, read indexes and admin calls;
//! - the application API ([`Replica`]): a running member of a replica set, which writes
//!   through the leader and reads fresh on demand, and [`AdminClient`] with the
//!   membership calls ([`admin`]) of `hdl cluster`.
//!
//! The only module that imports openraft. Depends on [`crate::storage`] (which stays
//! library-agnostic: it stores the bytes this module encodes with postcard) and, through
//! the commands, on [`crate::names`] and [`crate::values`]. Invariants: an applied
//! entry and the applied marker commit in one transaction; an append is acknowledged
//! only once durable; a storage failure stops the node, a refusal is a result.

pub mod admin;
mod error;
mod log_store;
pub mod network;
mod replica;
mod snapshot;
mod state_machine;
pub mod types;

pub use error::Error;
pub use log_store::{LOG_FILE, LogStore};
#[cfg(test)]
pub(crate) use replica::start_alone;
pub use replica::{
    AdminClient, Bootstrap, LEADER_PATIENCE, PublicAddresses, Replica, ReplicaError,
    ReplicaSettings,
};
pub use snapshot::SNAPSHOT_FILE;
pub use state_machine::{SnapshotBuilder, StateMachine};
pub use types::{Node, NodeId, Request, RequestId, Response, TypeConfig};

/// Runs blocking disk work (redb commits fsync) on tokio's blocking pool.
async fn blocking<T, F>(work: F) -> Result<T, Error>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, Error> + Send + 'static,
{
    tokio::task::spawn_blocking(work).await?
}

#[cfg(test)]
mod tests;
