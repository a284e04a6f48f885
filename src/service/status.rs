//! What a node says about itself and its replica set on `/status` and `/metrics`: a
//! view the edges read without knowing the replication layer.

use std::net::SocketAddr;

use crate::replication::Installed;
use crate::replication::admin::MemberStatus;

pub use crate::replication::admin::Role;

/// A node's view of itself and the replica set it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// Its role in the set.
    pub role: Role,
    /// The primary it knows of (a node id).
    pub primary: Option<u64>,
    /// The index of the last log entry it applied.
    pub applied: Option<u64>,
    /// The index of the last entry in its log.
    pub last_log: Option<u64>,
    /// The Raft term it is in.
    pub term: u64,
    /// On the primary, every other member's lag (node id, entries not received yet).
    pub lag: Vec<(u64, u64)>,
    /// Snapshots it installed, sent by its primary, since it started.
    pub snapshots_installed: u64,
    /// The octets of snapshot data it received for them.
    pub snapshot_octets_installed: u64,
    /// Every member of the set as this node knows it, by id.
    pub members: Vec<StatusMember>,
}

impl Status {
    /// The status of a node in no replica set (not joined yet, or a caching resolver).
    pub fn unjoined() -> Status {
        Status {
            role: Role::Unjoined,
            primary: None,
            applied: None,
            last_log: None,
            term: 0,
            lag: Vec::new(),
            snapshots_installed: 0,
            snapshot_octets_installed: 0,
            members: Vec::new(),
        }
    }
}

/// One member of the replica set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusMember {
    /// Its node id.
    pub id: u64,
    /// Whether it votes (the primary or a secondary) or not (a learner).
    pub voter: bool,
    /// Its Handle protocol address.
    pub handle: SocketAddr,
    /// Its peer address.
    pub peer: SocketAddr,
    /// Its HTTP address, if it serves HTTP.
    pub http: Option<SocketAddr>,
}

impl Status {
    /// What `status` says, with the snapshots the member installed.
    pub fn of(status: MemberStatus, installed: Installed) -> Self {
        Status {
            role: status.role,
            primary: status.leader,
            applied: status.applied,
            last_log: status.last_log,
            term: status.term,
            lag: status.lag,
            snapshots_installed: installed.count,
            snapshot_octets_installed: installed.octets,
            members: status
                .members
                .into_iter()
                .map(|member| StatusMember {
                    id: member.id,
                    voter: member.voter,
                    handle: member.node.handle,
                    peer: member.node.peer,
                    http: member.node.http,
                })
                .collect(),
        }
    }
}
