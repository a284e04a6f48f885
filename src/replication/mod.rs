//! Replication with openraft (0.9, storage v2): one process is a member of several
//! Raft groups — its replica set, whose machine holds handles, and the metadata group,
//! whose machine (in [`crate::placement`]) holds the cluster map — over one peer port.
//!
//! Owns the seams between openraft and the rest of hdl, generic over the [`Machine`] a
//! group drives:
//! - the machine seam ([`Machine`]): what a group's log carries and how an entry is
//!   applied to a [`crate::storage::WriteBatch`]; [`HandleSet`] is the replica set's,
//!   with its versioned log command [`HandleCommand`];
//! - shared types ([`types`]): [`GroupId`], [`Proposal`]s of [`Request`]s in the log,
//!   [`Node`] addresses, and [`GroupConfig`], the openraft type configuration of a
//!   group of a machine;
//! - the proposer ([`proposer`]): the leader's group commit, many client writes in
//!   one log entry;
//! - the log store ([`LogStore`]): the Raft log and vote in `raft-log/`;
//! - the write guard ([`guard`]): what an authorisation decision read, checked again
//!   when its write is applied;
//! - the state machine ([`StateMachine`], [`SnapshotBuilder`]): applies entries to the
//!   group's [`crate::storage::Store`] through its machine (synced to disk a little
//!   later, many applies at once: [`durable`]), remembers results so a
//!   request applies once, and serves its store as the current snapshot
//!   ([`snapshot_data`]) and installs snapshots;
//! - the backup file ([`backup`]): replica sets' snapshot data under a header and a
//!   checksum, written by `hdl backup` and read by `hdl restore`;
//! - the peer network ([`network`]): authenticated TCP between the nodes, one
//!   connection per peer carrying every group's Raft RPCs, forwarded writes, read
//!   indexes and admin calls;
//! - the application API ([`Group`]): a running member of a group, which writes through
//!   the leader and reads fresh on demand, and [`AdminClient`] with the membership
//!   calls ([`admin`]) of `hdl cluster`.
//!
//! Each group keeps its files in a directory of its own. The only module that imports
//! openraft. Depends on [`crate::storage`] (which stays
//! library-agnostic: it stores the bytes this module encodes with postcard) and, through
//! the commands, on [`crate::names`] and [`crate::values`]. Invariants: an applied
//! entry and the applied marker commit in one transaction; an append is acknowledged
//! only once durable; a storage failure stops the node, a refusal is a result.

pub mod admin;
pub mod backup;
mod contact;
mod durable;
mod error;
mod group;
pub mod guard;
mod handle_set;
mod held;
mod log_store;
mod log_sync;
mod log_tail;
mod machine;
pub mod network;
mod proposer;
mod snapshot;
pub mod snapshot_data;
mod state_machine;
pub mod types;

pub use crate::storage::slot_of;
pub use error::Error;
pub use group::{
    AdminClient, Bootstrap, Group, GroupError, GroupHost, GroupSettings, GroupWatch, HandOff,
    HandOffError, Keep, LEADER_PATIENCE,
};
pub use group::{alone_settings, start_alone, test_host};
pub use handle_set::{HandleCommand, HandleResult, HandleSet};
pub use log_store::LogStore;
pub use machine::Machine;
pub use snapshot::SNAPSHOT_FILE;
pub use state_machine::{
    Installed, RECENT_WINDOW, SnapshotBuilder, StateMachine, recall, snapshot_data_now,
};
pub use types::{GroupConfig, GroupId, Node, NodeId, Proposal, Request, RequestId, SetId};

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
