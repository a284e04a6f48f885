//! A planned stop's hand-off: before it stops, the leader of a group makes an
//! up-to-date voter the leader, so that the group never waits out a lease for an
//! election.
//!
//! openraft 0.9 has no leadership transfer; this is one, in steps bounded by one
//! deadline. The leader holds its proposer (the entries in flight are applied, new
//! writes queue), so its log stays still; it picks a voter whose replication has
//! matched its last log id; it waits out its own lease (openraft refuses every vote
//! within `election_timeout_max` of the voter's own vote changing, and nothing renews
//! a leader's after its election: this only waits for a leader elected moments ago);
//! it asks the voter to take over ([`GroupCall::TakeOver`](crate::replication::network::GroupCall)),
//! which stands at once; its own vote and the voter's make a quorum of three. Once it
//! hears of the new leader it lets the held writes go: this node no longer leads, so
//! they are refused with the new leader's name and sent there. A step that runs out of
//! time ends the hand-off with the reason; the caller then stops without one, and the
//! others elect once the lease runs out, as after a crash.
//!
//! Reads the group's Raft and metrics; changes nothing but the proposer's hold and,
//! at the voter, its Raft's vote.

use std::time::Duration;

use openraft::{RaftMetrics, ServerState};
use tokio::time::{Instant, timeout_at};

use super::Group;
use super::error::HandOffError;
use crate::replication::machine::Machine;
use crate::replication::types::LogId;
use crate::replication::{Node, NodeId};

/// A node's view of its group, as openraft reports it.
type Metrics = RaftMetrics<NodeId, Node>;

/// What a hand-off came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandOff {
    /// This node did not lead the group: there was nothing to hand over.
    NotLeader,
    /// This node is the group's only voter: there is nobody to hand it to, and nothing
    /// to wait for.
    NoOtherVoter,
    /// Node `to` leads the group now, elected at this node's request.
    HandedTo(NodeId),
}

/// The voter picked to take over, and the leader's last log id it holds.
struct Successor {
    id: NodeId,
    node: Node,
    last_log: Option<LogId>,
}

impl<M: Machine> Group<M> {
    /// Hands this node's leadership of the group to an up-to-date voter, within
    /// `within` (see the module's steps). [`HandOff::NotLeader`] when this node does
    /// not lead the group (or stops leading it meanwhile).
    pub async fn hand_off(&self, within: Duration) -> Result<HandOff, HandOffError> {
        let deadline = Instant::now() + within;
        let alone = {
            let metrics = self.inner.raft.metrics();
            let metrics = metrics.borrow();
            if metrics.state != ServerState::Leader {
                return Ok(HandOff::NotLeader);
            }
            let membership = metrics.membership_config.membership();
            membership.voter_ids().all(|id| id == metrics.id)
        };
        if alone {
            return Ok(HandOff::NoOtherVoter);
        }
        let hold = timeout_at(deadline, self.inner.proposer.hold())
            .await
            .map_err(|_| HandOffError::Busy(within))?;
        let Some(successor) = self.caught_up_voter(deadline, within).await? else {
            return Ok(HandOff::NotLeader);
        };
        self.outlast_own_lease(deadline).await?;
        let to = successor.id;
        let connection = self.inner.network.connection(to, &successor.node);
        let left = deadline.saturating_duration_since(Instant::now());
        match connection.take_over(successor.last_log, left).await {
            Ok(Ok(())) => {}
            Ok(Err(refused)) => return Err(HandOffError::Refused { to, refused }),
            Err(error) => return Err(HandOffError::Unreachable { to, error }),
        }
        let leader = self.await_other_leader(deadline, to, within).await?;
        drop(hold);
        Ok(HandOff::HandedTo(leader))
    }

    /// Waits (until `deadline`) for a voter other than this node whose log matches
    /// this node's last entry; `None` once this node no longer leads.
    async fn caught_up_voter(
        &self,
        deadline: Instant,
        within: Duration,
    ) -> Result<Option<Successor>, HandOffError> {
        let settled = |m: &Metrics| m.state != ServerState::Leader || successor(m).is_some();
        let metrics = self
            .metrics_until(deadline, settled, "a voter caught up with the leader")
            .await
            .ok_or(HandOffError::NoneCaughtUp(within))?;
        if metrics.state != ServerState::Leader {
            return Ok(None);
        }
        Ok(successor(&metrics))
    }

    /// Waits until this node's Raft grants votes again: past its own lease, which
    /// started when it was elected (bounded by `deadline`).
    async fn outlast_own_lease(&self, deadline: Instant) -> Result<(), HandOffError> {
        let raft = &self.inner.raft;
        let lease = Duration::from_millis(raft.config().election_timeout_max);
        let since = raft
            .with_raft_state(|state| state.vote_last_modified())
            .await
            .map_err(HandOffError::Stopped)?;
        let Some(since) = since else { return Ok(()) };
        // openraft refuses while `now <= since + lease`.
        let granting = since + lease + Duration::from_millis(1);
        if granting > deadline {
            return Err(HandOffError::LeaseOutlasts(lease));
        }
        tokio::time::sleep_until(granting).await;
        Ok(())
    }

    /// Waits until this node knows of a leader other than itself (the one asked to
    /// take over, `to`, unless another won), bounded by `deadline`.
    async fn await_other_leader(
        &self,
        deadline: Instant,
        to: NodeId,
        within: Duration,
    ) -> Result<NodeId, HandOffError> {
        let other = |m: &Metrics| m.current_leader.is_some_and(|l| l != m.id);
        let metrics = self
            .metrics_until(deadline, other, "another member leads")
            .await
            .ok_or(HandOffError::NotElected { to, waited: within })?;
        Ok(metrics.current_leader.unwrap_or(to))
    }

    /// This node's metrics once `settled` holds of them, or `None` at `deadline`.
    async fn metrics_until(
        &self,
        deadline: Instant,
        settled: impl Fn(&Metrics) -> bool + Send,
        what: &str,
    ) -> Option<Metrics> {
        let left = deadline.saturating_duration_since(Instant::now());
        let wait = self.inner.raft.wait(Some(left));
        wait.metrics(settled, what).await.ok()
    }
}

/// The voter (other than the leader whose `metrics` these are) whose replication has
/// matched the leader's last log entry, the lowest id first.
fn successor(metrics: &Metrics) -> Option<Successor> {
    let replication = metrics.replication.as_ref()?;
    let membership = metrics.membership_config.membership();
    let last = metrics.last_log_index;
    membership
        .voter_ids()
        .filter(|id| *id != metrics.id)
        .find_map(|id| {
            let matched = replication.get(&id).copied().flatten();
            let node = membership.get_node(&id)?.clone();
            (matched.map(|log_id| log_id.index) == last).then_some(Successor {
                id,
                node,
                last_log: matched,
            })
        })
}
