//! Membership and status calls of a group (a replica set or the metadata group), as the `hdl cluster` command sends
//! them over the peer protocol and as the node that receives them carries them out.
//!
//! Membership changes need the leader: a node that is not the leader answers
//! [`ForwardError::NotLeader`] with the leader's addresses, and the caller asks again
//! there. Each change names one member and is applied by the leader to its own
//! current membership as openraft's incremental changes ([`ChangeMembers`]: add a
//! node, add a voter, remove a voter or a node; openraft goes through a joint
//! configuration for voter changes), never as a whole membership the caller computed
//! from a view that may be stale: two changes made at once both take effect. A change
//! that finds another one still uncommitted waits for it (bounded) and tries again.
//! [`AdminRequest::Status`] is answered by every node about itself.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use openraft::error::{ChangeMembershipError, ClientWriteError, RaftError};
use openraft::{ChangeMembers, Raft, RaftMetrics, ServerState};
use serde::{Deserialize, Serialize};

use super::held::HeldCommits;
use super::machine::Machine;
use super::network::ForwardError;
use super::types::{GroupConfig, Node, NodeId};

/// A membership or status call.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum AdminRequest {
    /// Form a new replica set of the receiving node alone (it must have an empty log).
    Init,
    /// Add a non-voting member (a member already is left as it is) and wait until it
    /// has caught up with the leader's log.
    AddLearner {
        /// The new member's id.
        id: NodeId,
        /// Its addresses.
        node: Node,
    },
    /// Make a member a voter, besides the voters the leader has (a voter already is
    /// left as it is).
    AddVoter {
        /// The member's id; it must already be a member.
        id: NodeId,
    },
    /// Remove a member (voter or learner) from the set; nothing for a node that is
    /// not a member.
    Remove {
        /// The member's id.
        id: NodeId,
    },
    /// The receiving node's own view of itself and of the set.
    Status,
}

/// The answer to an [`AdminRequest`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum AdminAnswer {
    /// The change is committed.
    Done,
    /// The answer to [`AdminRequest::Status`] (boxed: it is far larger than `Done`).
    Status(Box<MemberStatus>),
}

/// What a node says about itself and the set it belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberStatus {
    /// Its node id.
    pub id: NodeId,
    /// Its operating-system process id.
    pub pid: u32,
    /// Its role.
    pub role: Role,
    /// The leader it knows of.
    pub leader: Option<NodeId>,
    /// Its own addresses.
    pub node: Node,
    /// The index of the last log entry it applied to its store. Answered to a peer,
    /// it is committed there, so the member's reads see it: what the member held
    /// uncommitted is committed first (module `held`). [`super::Group::status`],
    /// read in the node itself, may count an apply held a few milliseconds more.
    pub applied: Option<u64>,
    /// The index of the last entry in its log.
    pub last_log: Option<u64>,
    /// The Raft term it is in.
    pub term: u64,
    /// On the primary, every other member's lag: log entries it has not received yet.
    /// Empty on other members.
    pub lag: Vec<(NodeId, u64)>,
    /// Every member of the set as this node knows it, by id.
    pub members: Vec<Member>,
}

/// One member of a replica set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// Its node id.
    pub id: NodeId,
    /// Its addresses.
    pub node: Node,
    /// Whether it votes (a secondary or the primary) or not (a learner).
    pub voter: bool,
}

/// A node's role in its replica set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    /// The Raft leader: it applies administration.
    Primary,
    /// A voter that follows the primary.
    Secondary,
    /// A non-voting member.
    Learner,
    /// A voter campaigning to become the primary.
    Candidate,
    /// A node that belongs to no replica set yet.
    Unjoined,
    /// A node whose Raft has stopped.
    Stopped,
}

impl Role {
    /// The role's name as the CLI shows it.
    pub fn name(self) -> &'static str {
        match self {
            Role::Primary => "primary",
            Role::Secondary => "secondary",
            Role::Learner => "learner",
            Role::Candidate => "candidate",
            Role::Unjoined => "unjoined",
            Role::Stopped => "stopped",
        }
    }
}

/// Carries out `request` on the node of `raft`, whose own addresses are `me` and
/// whose applies held uncommitted `held` commits.
pub(super) async fn carry_out<M: Machine>(
    raft: &Raft<GroupConfig<M>>,
    held: &HeldCommits,
    me: &Node,
    request: AdminRequest,
) -> Result<AdminAnswer, ForwardError> {
    match request {
        AdminRequest::Init => {
            let id = raft.metrics().borrow().id;
            raft.initialize(BTreeMap::from([(id, me.clone())])).await?;
        }
        AdminRequest::AddLearner { id, node } => {
            once_committed(move || raft.add_learner(id, node.clone(), true)).await?;
        }
        AdminRequest::AddVoter { id } => {
            let ids = BTreeSet::from([id]);
            once_committed(move || {
                raft.change_membership(ChangeMembers::AddVoterIds(ids.clone()), true)
            })
            .await?;
        }
        AdminRequest::Remove { id } => {
            once_committed(move || async move {
                let Some(member) = members(raft).into_iter().find(|m| m.id == id) else {
                    return Ok(None);
                };
                let ids = BTreeSet::from([id]);
                let change = if member.voter {
                    ChangeMembers::RemoveVoters(ids)
                } else {
                    ChangeMembers::RemoveNodes(ids)
                };
                raft.change_membership(change, false).await.map(Some)
            })
            .await?;
        }
        AdminRequest::Status => {
            // openraft counts an apply held uncommitted (module `held`): a member that
            // says it applied an entry must let its reads see it.
            if let Err(error) = held.commit_now().await {
                tracing::warn!(%error, "committing held applies for a status failed");
            }
            return Ok(AdminAnswer::Status(Box::new(status(raft, me))));
        }
    }
    Ok(AdminAnswer::Done)
}

/// How long a membership change waits for an earlier one to commit.
const CHANGE_PATIENCE: Duration = Duration::from_secs(10);

/// How often a membership change tries again while an earlier one is uncommitted.
const CHANGE_RETRY: Duration = Duration::from_millis(20);

/// Makes a membership change with `change`, made again while openraft refuses it
/// because an earlier change is not committed yet (two `hdl cluster` commands at
/// once), for at most [`CHANGE_PATIENCE`]. `change` reads the membership afresh each
/// time.
async fn once_committed<T, F>(
    mut change: impl FnMut() -> F,
) -> Result<T, RaftError<NodeId, ClientWriteError<NodeId, Node>>>
where
    F: Future<Output = Result<T, RaftError<NodeId, ClientWriteError<NodeId, Node>>>>,
{
    let deadline = tokio::time::Instant::now() + CHANGE_PATIENCE;
    loop {
        match change().await {
            Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(
                ChangeMembershipError::InProgress(_),
            ))) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(CHANGE_RETRY).await;
            }
            done => return done,
        }
    }
}

/// Every member of the set in the node's latest membership, by id.
pub(super) fn members<M: Machine>(raft: &Raft<GroupConfig<M>>) -> Vec<Member> {
    let metrics = raft.metrics();
    let metrics = metrics.borrow();
    let membership = &metrics.membership_config;
    let voters: BTreeSet<NodeId> = membership.voter_ids().collect();
    membership
        .nodes()
        .map(|(id, node)| Member {
            id: *id,
            node: node.clone(),
            voter: voters.contains(id),
        })
        .collect()
}

/// The node's status from its Raft metrics.
pub(super) fn status<M: Machine>(raft: &Raft<GroupConfig<M>>, me: &Node) -> MemberStatus {
    let members = members(raft);
    let metrics = raft.metrics().borrow().clone();
    let voter = members.iter().any(|m| m.id == metrics.id && m.voter);
    let role = match metrics.state {
        ServerState::Leader => Role::Primary,
        ServerState::Candidate => Role::Candidate,
        ServerState::Shutdown => Role::Stopped,
        ServerState::Follower if voter => Role::Secondary,
        ServerState::Follower | ServerState::Learner if members.is_empty() => Role::Unjoined,
        ServerState::Follower | ServerState::Learner => Role::Learner,
    };
    MemberStatus {
        id: metrics.id,
        pid: std::process::id(),
        role,
        leader: metrics.current_leader,
        node: me.clone(),
        applied: metrics.last_applied.map(|log_id| log_id.index),
        last_log: metrics.last_log_index,
        term: metrics.current_term,
        lag: replication_lag(&metrics),
        members,
    }
}

/// On the primary, how far each other member's matched log is behind its own.
fn replication_lag(metrics: &RaftMetrics<NodeId, Node>) -> Vec<(NodeId, u64)> {
    let last = metrics.last_log_index.unwrap_or(0);
    let Some(replication) = &metrics.replication else {
        return Vec::new();
    };
    replication
        .iter()
        .filter(|(id, _)| **id != metrics.id)
        .map(|(id, matched)| (*id, last.saturating_sub(matched.map_or(0, |m| m.index))))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use openraft::{CommittedLeaderId, LogId};

    use super::*;

    #[test]
    fn lag_is_each_other_members_distance_from_the_primarys_log() {
        let mut metrics = RaftMetrics::<NodeId, Node>::new_initial(1);
        assert!(replication_lag(&metrics).is_empty(), "not primary: no lag");
        let log_id = |index| Some(LogId::new(CommittedLeaderId::new(3, 1), index));
        metrics.last_log_index = Some(40);
        metrics.replication = Some(BTreeMap::from([
            (1, log_id(40)),
            (2, log_id(38)),
            (3, None),
        ]));
        assert_eq!(replication_lag(&metrics), [(2, 2), (3, 40)]);
    }
}
