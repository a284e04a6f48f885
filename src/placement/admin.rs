//! Membership of a cluster's groups as `hdl cluster` changes it. Every node is a
//! member of the metadata group and of one replica set: the members of the first set
//! are the metadata group's voters, the members of every other set its learners (so
//! every node has the cluster map). A change to a set's membership is made to the set
//! and to the metadata group, each only where it is not made yet (a change cut short
//! is finished by running it again).
//!
//! A node takes part in a set only once its set's group runs on it: the node call
//! that starts it (`JoinSet`) belongs to the node, a layer above this one, so the
//! caller sends it before asking for the changes here.

use std::net::SocketAddr;
use std::time::Duration;

use crate::replication::admin::{AdminRequest, MemberStatus, Role};
use crate::replication::{AdminClient, GroupError, GroupId, Node, NodeId, SetId};

/// The replica set a new cluster starts with.
pub const FIRST_SET: SetId = SetId(1);

/// The group of the first replica set.
pub const FIRST_SET_GROUP: GroupId = GroupId::Set(FIRST_SET);

/// The groups whose membership `hdl cluster` changes together for the first set, the
/// set first.
pub const MEMBER_GROUPS: [GroupId; 2] = [FIRST_SET_GROUP, GroupId::Map];

/// Whether a new member votes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vote {
    /// A voter (a secondary) once it has caught up.
    Voter,
    /// A learner: it follows the log but does not vote.
    Learner,
}

/// The members a membership change goes through: one of the set (or the set's node
/// itself when it is the first) and one of the metadata group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Via {
    /// A member of the replica set.
    pub set: SocketAddr,
    /// A member of the metadata group.
    pub map: SocketAddr,
}

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

    /// Forms the first set and the metadata group of the node at `peer`, each that it
    /// belongs to none of yet, of that node alone, and waits until each has a leader;
    /// whether anything was formed.
    pub async fn init(&self, peer: SocketAddr) -> Result<bool, MembershipError> {
        self.form_groups(peer, &MEMBER_GROUPS).await
    }

    /// Forms replica set `set` of the node at `nodes[0]` alone (the first set: and the
    /// metadata group) where not formed yet, and adds every other node as a voter; a
    /// node of a set other than the first is added to the metadata group (through a
    /// member of it at `map`) as a learner. Each node must run the set's group
    /// (the node call `JoinSet`). Whether the set was formed now.
    pub async fn form_set(
        &self,
        set: SetId,
        map: SocketAddr,
        nodes: &[(NodeId, Node)],
    ) -> Result<bool, MembershipError> {
        let Some((first_id, first)) = nodes.first() else {
            return Ok(false);
        };
        let formed = if set == FIRST_SET {
            self.init(first.peer).await?
        } else {
            let formed = self.form_groups(first.peer, &[GroupId::Set(set)]).await?;
            self.join_group(GroupId::Map, map, *first_id, first, Vote::Learner)
                .await?;
            formed
        };
        let via = Via {
            set: first.peer,
            map,
        };
        for (id, node) in &nodes[1..] {
            self.join(set, via, *id, node, Vote::Voter).await?;
        }
        Ok(formed)
    }

    async fn form_groups(
        &self,
        peer: SocketAddr,
        groups: &[GroupId],
    ) -> Result<bool, MembershipError> {
        let mut formed = false;
        for &group in groups {
            if self.status(peer, group).await?.role == Role::Unjoined {
                self.call(peer, group, &AdminRequest::Init).await?;
                formed = true;
            }
            self.await_leader(peer, group).await?;
        }
        Ok(formed)
    }

    /// Adds node `id` at `node` to replica set `set` (through `via.set`) and to the
    /// metadata group (through `via.map`): to each as a learner that has caught up,
    /// then with [`Vote::Voter`] as a voter of the set, and of the metadata group only
    /// for the first set (the members of other sets are its learners).
    pub async fn join(
        &self,
        set: SetId,
        via: Via,
        id: NodeId,
        node: &Node,
        vote: Vote,
    ) -> Result<(), MembershipError> {
        if u32::try_from(id).map_or(true, |id| id == 0) {
            return Err(MembershipError::NodeIdOutOfRange(id));
        }
        self.join_group(GroupId::Set(set), via.set, id, node, vote)
            .await?;
        let map_vote = if set == FIRST_SET {
            vote
        } else {
            Vote::Learner
        };
        self.join_group(GroupId::Map, via.map, id, node, map_vote)
            .await
    }

    /// Adds node `id` at `node` to `group` through its member at `via`: as a learner
    /// that has caught up, then with [`Vote::Voter`] as a voter. Each step is one
    /// change the leader makes to its own membership (nothing for a member that has
    /// it already), so no member's view, stale or not, decides the outcome.
    async fn join_group(
        &self,
        group: GroupId,
        via: SocketAddr,
        id: NodeId,
        node: &Node,
        vote: Vote,
    ) -> Result<(), MembershipError> {
        let request = AdminRequest::AddLearner {
            id,
            node: node.clone(),
        };
        self.call(via, group, &request).await?;
        if vote == Vote::Voter {
            self.call(via, group, &AdminRequest::AddVoter { id })
                .await?;
        }
        Ok(())
    }

    /// Takes node `id` out of every group that has it, through the member at `via`
    /// (the leader of each decides whether it has it).
    pub async fn remove(&self, via: SocketAddr, id: NodeId) -> Result<(), MembershipError> {
        for group in MEMBER_GROUPS {
            self.call(via, group, &AdminRequest::Remove { id }).await?;
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
