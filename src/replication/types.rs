//! The command types: what the replicated log carries and what applying it returns, the
//! node identity, and the openraft type configuration that binds them.
//!
//! Every type here crosses the network or the disk in postcard form (`to_bytes`,
//! `from_bytes`); their serde shape is part of the log and snapshot formats.

use std::io::Cursor;
use std::net::{Ipv4Addr, SocketAddr};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::error::Error;
use crate::storage::{Command, CommandResult};

/// A node's id within its replica set.
pub type NodeId = u64;

openraft::declare_raft_types!(
    /// The openraft type configuration of a replica set: [`Request`] in the log,
    /// [`Response`] out of the state machine, [`Node`] addresses in the membership.
    pub TypeConfig:
        D = Request,
        R = Response,
        NodeId = NodeId,
        Node = Node,
        SnapshotData = Cursor<Vec<u8>>,
);

/// A log entry of this configuration.
pub type Entry = openraft::Entry<TypeConfig>;
/// A position in the log: leader term and node, and index.
pub type LogId = openraft::LogId<NodeId>;
/// A membership with the log position that introduced it.
pub type StoredMembership = openraft::StoredMembership<NodeId, Node>;
/// What a snapshot covers: last log position, membership and id.
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, Node>;
/// A snapshot with its data.
pub type Snapshot = openraft::Snapshot<TypeConfig>;
/// The error every storage seam returns to openraft; it stops the node.
pub type RaftStorageError = openraft::StorageError<NodeId>;

/// Identifies one client request, so that a response (or a retried request) can be
/// matched to it; the proposing node chooses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RequestId(pub u64);

/// A client write as it is replicated: one store command and the request it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// The client request this command serves.
    pub id: RequestId,
    /// The change to apply.
    pub command: Command,
}

/// What applying one log entry produced, the same on every replica.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// A client command was applied or deterministically refused.
    Command(CommandResult),
    /// The entry carried no command (a new leader's blank entry or a membership change).
    NoCommand,
}

/// The addresses of a node, as recorded in the replica set's membership.
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
