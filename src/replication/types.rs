//! The types every group shares: node and group identity, node addresses, what a log
//! entry carries and what applying it returns, and the openraft type configuration of a
//! group, generic over its [`Machine`].
//!
//! Every type here crosses the network or the disk in postcard form (`to_bytes`,
//! `from_bytes`); their serde shape is part of the log and snapshot formats.

use std::cmp::Ordering;
use std::fmt;
use std::marker::PhantomData;
use std::net::{Ipv4Addr, SocketAddr};

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::error::Error;
use super::machine::Machine;

/// A node's id, the same in every group it belongs to.
pub type NodeId = u64;

/// Names one Raft group of a cluster; every peer frame carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum GroupId {
    /// The metadata group: it holds the cluster map.
    Map,
    /// A replica set holding handles.
    Set(SetId),
}

impl GroupId {
    /// The directory, under a node's data directory, that holds this group's files.
    pub fn dir_name(self) -> String {
        match self {
            GroupId::Map => "map".to_owned(),
            GroupId::Set(set) => format!("set-{}", set.0),
        }
    }
}

impl fmt::Display for GroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GroupId::Map => f.write_str("the metadata group"),
            GroupId::Set(set) => write!(f, "replica set {}", set.0),
        }
    }
}

/// A replica set's id within its cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SetId(pub u32);

/// The openraft type configuration of a group whose state machine is `M`:
/// [`Proposal`]s of `M`'s commands in the log, answered with one output of `M` per
/// request, [`Node`] addresses in the membership.
pub struct GroupConfig<M>(PhantomData<fn() -> M>);

/// A log entry of a group of `M`.
pub type Entry<M> = openraft::Entry<GroupConfig<M>>;
/// A position in the log: leader term and node, and index.
pub type LogId = openraft::LogId<NodeId>;
/// A membership with the log position that introduced it.
pub type StoredMembership = openraft::StoredMembership<NodeId, Node>;
/// What a snapshot covers: last log position, membership and id.
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, Node>;
/// A snapshot of a group of `M`, with its data.
pub type Snapshot<M> = openraft::Snapshot<GroupConfig<M>>;
/// The error every storage seam returns to openraft; it stops the node.
pub type RaftStorageError = openraft::StorageError<NodeId>;

impl<M: Machine> openraft::RaftTypeConfig for GroupConfig<M> {
    type D = Proposal<M::Command>;
    /// One output per request of the entry's [`Proposal`]; none for an entry without
    /// one (a new leader's blank entry, a membership change).
    type R = Vec<M::Output>;
    type NodeId = NodeId;
    type Node = Node;
    type Entry = openraft::Entry<Self>;
    type SnapshotData = super::snapshot_data::SnapshotData;
    type AsyncRuntime = openraft::TokioRuntime;
    type Responder = openraft::impls::OneshotResponder<Self>;
}

// openraft asks its type configuration for the traits of a marker type; `M` itself
// need not have them, so they are written out rather than derived.
impl<M> fmt::Debug for GroupConfig<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("GroupConfig")
    }
}
impl<M> Clone for GroupConfig<M> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<M> Copy for GroupConfig<M> {}
impl<M> Default for GroupConfig<M> {
    fn default() -> Self {
        GroupConfig(PhantomData)
    }
}
impl<M> PartialEq for GroupConfig<M> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl<M> Eq for GroupConfig<M> {}
impl<M> PartialOrd for GroupConfig<M> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<M> Ord for GroupConfig<M> {
    fn cmp(&self, _: &Self) -> Ordering {
        Ordering::Equal
    }
}

/// Identifies one client request, so that a response (or a retried request) can be
/// matched to it; the proposing node chooses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RequestId(pub u64);

/// A client write as it is replicated: one command of the group's machine and the
/// request it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request<C> {
    /// The client request this command serves.
    pub id: RequestId,
    /// The change to apply.
    pub command: C,
}

/// What a client log entry carries: the client requests the leader proposed
/// together ([`super::proposer`]), applied in order, each on its own.
///
/// Shared: openraft reads an entry back from the log's in-memory tail for every
/// follower it is sent to and once more to apply it, and each read is a copy; so a
/// copy counts a reference rather than copying every request (a bulk import's entry
/// holds thousands of handles). Encoded as the list it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposal<C>(pub Arc<[Request<C>]>);

/// The addresses of a node, as recorded in a group's membership.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    /// Where it serves the Handle protocol (TCP and UDP).
    pub handle: SocketAddr,
    /// Where it takes Raft RPCs and forwarded requests from other nodes.
    pub peer: SocketAddr,
    /// Where it serves HTTP, if it does.
    pub http: Option<SocketAddr>,
}

/// openraft needs a default node; it is never contacted: every address is `0.0.0.0:0`.
impl Default for Node {
    fn default() -> Self {
        let nowhere = SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0));
        Node {
            handle: nowhere,
            peer: nowhere,
            http: None,
        }
    }
}

/// The postcard bytes of `value`; `what` names it in the error.
pub(super) fn to_bytes<T: Serialize>(value: &T, what: &'static str) -> Result<Vec<u8>, Error> {
    postcard::to_stdvec(value).map_err(|source| Error::Encode { what, source })
}

/// Reads postcard bytes written by [`to_bytes`]; trailing bytes are an error.
pub(super) fn from_bytes<T: DeserializeOwned>(
    bytes: &[u8],
    what: &'static str,
) -> Result<T, Error> {
    let (value, rest) =
        postcard::take_from_bytes(bytes).map_err(|source| Error::Decode { what, source })?;
    if rest.is_empty() {
        Ok(value)
    } else {
        Err(Error::TrailingBytes {
            what,
            count: rest.len(),
        })
    }
}
