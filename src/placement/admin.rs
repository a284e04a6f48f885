//! Membership of a cluster's groups as `hdl cluster` changes it: the first replica set
//! and the metadata group have the same members, so every change is made to both,
//! each only where it is not made yet (a change cut short is finished by running it
//! again).

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use crate::replication::admin::{AdminRequest, Member, MemberStatus, Role};
use crate::replication::{AdminClient, GroupError, GroupId, Node, NodeId, SetId};

/// The replica set a new cluster starts with.
pub const FIRST_SET: SetId = SetId(1);

/// The group of the first replica set.
pub const FIRST_SET_GROUP: GroupId = GroupId::Set(FIRST_SET);

/// The groups whose membership `hdl cluster` changes together, the set first.
pub const MEMBER_GROUPS: [GroupId; 2] = [FIRST_SET_GROUP, GroupId::Map];

/// How often, and how many times, a new group is asked whether it has a leader.
const LEADER_POLL: Duration = Duration::from_millis(100);
const LEADER_POLLS: usize = 100;

/// Why a membership change could not be made.
#[derive(Debug, thiserror::Error)]
pub enum MembershipError {
    /// A node id outside 1..=u32::MAX (HS_SITE server ids are 32 bits).
    #[error("node id {0} is out of range: it must be 1 to 4294967295")]
    NodeIdOutOfRange(NodeId),
    /// A group did not elect a leader in time.
    #[error("{group} at {peer} elected no primary")]
    NoLeader {
        /// The group.
        group: GroupId,
        /// The node asked.
        peer: SocketAddr,
    },
    /// A call to a group failed.
    #[error("{group}: {source}")]
    Group {
        /// The group.
        group: GroupId,
        /// What failed.
        source: GroupError,
    },
}

/// Changes the membership of the cluster's groups through its nodes' peer ports.
#[derive(Debug, Clone)]
pub struct ClusterAdmin {
    client: AdminClient,
}

impl ClusterAdmin {
    /// Membership calls made with `client`.
    pub fn new(client: AdminClient) -> ClusterAdmin {
        ClusterAdmin { client }
    }

    /// The admin client underneath, for status and node calls.
    pub fn client(&self) -> &AdminClient {
        &self.client
    }

    /// What the node at `peer` says about itself in `group`.
    pub async fn status(
        &self,
        peer: SocketAddr,
        group: GroupId,
    ) -> Result<MemberStatus, MembershipError> {
        let status = self.client.status(peer, group).await;
        status.map_err(|source| MembershipError::Group { group, source })
    }

    /// Forms each group of the node at `peer` that it belongs to none of yet, of that
    /// node alone, and waits until each has a leader; whether anything was formed.
    pub async fn init(&self, peer: SocketAddr) -> Result<bool, MembershipError> {
        let mut formed = false;
        for group in MEMBER_GROUPS {
            if self.status(peer, group).await?.role == Role::Unjoined {
                self.call(peer, group, &AdminRequest::Init).await?;
                formed = true;
            }
            self.await_leader(peer, group).await?;
        }
        Ok(formed)
    }

    /// Adds node `id` at `node` to every group through the member at `via`: as a
    /// learner that has caught up, then with `voter` as a voter.
    pub async fn join(
        &self,
        via: SocketAddr,
        id: NodeId,
        node: &Node,
        voter: bool,
    ) -> Result<(), MembershipError> {
        if u32::try_from(id).map_or(true, |id| id == 0) {
            return Err(MembershipError::NodeIdOutOfRange(id));
        }
        for group in MEMBER_GROUPS {
            let members = self.status(via, group).await?.members;
            let found = members.iter().find(|member| member.id == id);
            if found.is_none() {
                let request = AdminRequest::AddLearner {
                    id,
                    node: node.clone(),
                };
                self.call(via, group, &request).await?;
            }
            if voter && !found.is_some_and(|member| member.voter) {
                let mut voters: BTreeSet<NodeId> = voter_ids(&members).collect();
                voters.insert(id);
                let request = AdminRequest::ChangeMembership { voters };
                self.call(via, group, &request).await?;
            }
        }
        Ok(())
    }

    /// Takes node `id` out of every group that has it, through the member at `via`.
    pub async fn remove(&self, via: SocketAddr, id: NodeId) -> Result<(), MembershipError> {
        for group in MEMBER_GROUPS {
            let members = self.status(via, group).await?.members;
            if members.iter().any(|member| member.id == id) {
                self.call(via, group, &AdminRequest::Remove { id }).await?;
            }
        }
        Ok(())
    }

    /// Waits (bounded) until the node at `peer` knows a leader of `group`; its id.
    pub async fn await_leader(
        &self,
        peer: SocketAddr,
        group: GroupId,
    ) -> Result<NodeId, MembershipError> {
        for _ in 0..LEADER_POLLS {
            if let Some(leader) = self.status(peer, group).await?.leader {
                return Ok(leader);
            }
            tokio::time::sleep(LEADER_POLL).await;
        }
        Err(MembershipError::NoLeader { group, peer })
    }

    async fn call(
        &self,
        peer: SocketAddr,
        group: GroupId,
        request: &AdminRequest,
    ) -> Result<(), MembershipError> {
        let answer = self.client.call(peer, group, request).await;
        answer
            .map(|_| ())
            .map_err(|source| MembershipError::Group { group, source })
    }
}

fn voter_ids(members: &[Member]) -> impl Iterator<Item = NodeId> + '_ {
    members.iter().filter(|m| m.voter).map(|m| m.id)
}
