//! Calls only the leader can answer (client writes, read indexes), made from any
//! member: carried out locally on the leader, forwarded over the peer network
//! otherwise, and retried (within a bound) while the set has no reachable leader.

use std::time::Duration;

use tokio::time::Instant;

use super::error::GroupError;
use super::{Group, LEADER_PATIENCE};
use crate::replication::machine::Machine;
use crate::replication::network::{ForwardError, GroupConnection, PeerError};
use crate::replication::{Node, NodeId, Request};

/// How long to wait for news of a leader before trying again.
const RETRY_STEP: Duration = Duration::from_millis(100);

/// A call for the leader of a group of `M`, carried out locally or sent to it.
pub(super) trait LeaderCall<M: Machine> {
    /// What the leader answers.
    type Output;

    /// Carries the call out on `group`'s member on this node, which believes it is the
    /// leader.
    async fn local(&self, group: &Group<M>) -> Result<Self::Output, ForwardError>;

    /// Sends the call to the leader over `connection`.
    async fn remote(
        &self,
        connection: &GroupConnection<M>,
        timeout: Duration,
    ) -> Result<Result<Self::Output, ForwardError>, PeerError>;
}

/// A client write.
pub(super) struct Write<M: Machine>(pub(super) Request<M::Command>);

impl<M: Machine> LeaderCall<M> for Write<M> {
    type Output = M::Output;

    async fn local(&self, group: &Group<M>) -> Result<M::Output, ForwardError> {
        group.inner.proposer.propose(self.0.clone()).await
    }

    async fn remote(
        &self,
        connection: &GroupConnection<M>,
        timeout: Duration,
    ) -> Result<Result<Self::Output, ForwardError>, PeerError> {
        connection.forward(self.0.clone(), timeout).await
    }
}

/// The index a linearizable read must wait for.
pub(super) struct ReadIndex;

impl<M: Machine> LeaderCall<M> for ReadIndex {
    type Output = Option<u64>;

    async fn local(&self, group: &Group<M>) -> Result<Option<u64>, ForwardError> {
        let read = group.inner.raft.ensure_linearizable().await?;
        Ok(read.map(|log_id| log_id.index))
    }

    async fn remote(
        &self,
        connection: &GroupConnection<M>,
        timeout: Duration,
    ) -> Result<Result<Option<u64>, ForwardError>, PeerError> {
        connection.read_index(timeout).await
    }
}

/// Who to ask next.
enum Target {
    Me,
    Other(NodeId, Node),
    Unknown,
}

/// What one attempt came to.
enum Attempt<T> {
    Answered(T),
    /// Worth another try, perhaps at the leader this hint names.
    Retry(GroupError, Option<(NodeId, Node)>),
    Failed(GroupError),
}

impl<M: Machine> Group<M> {
    /// Carries `call` out at the leader, waiting for one for at most
    /// [`LEADER_PATIENCE`].
    pub(super) async fn at_leader<C: LeaderCall<M>>(
        &self,
        call: &C,
    ) -> Result<C::Output, GroupError> {
        let deadline = Instant::now() + LEADER_PATIENCE;
        let mut hint = None;
        loop {
            let target = match hint.take() {
                Some((id, node)) => Target::Other(id, node),
                None => self.believed_leader(),
            };
            let tried = match &target {
                Target::Me => Some(self.inner.id),
                Target::Other(id, _) => Some(*id),
                Target::Unknown => None,
            };
            let (error, next) = match self.attempt(call, target, deadline).await {
                Attempt::Answered(answer) => return Ok(answer),
                Attempt::Failed(error) => return Err(error),
                Attempt::Retry(error, next) => (error, next),
            };
            if Instant::now() >= deadline {
                let last = Some(Box::new(error));
                let waited = LEADER_PATIENCE;
                return Err(GroupError::NoLeader { waited, last });
            }
            hint = next.filter(|(id, _)| *id != self.inner.id);
            if hint.is_none() {
                // Waits at most a step: no news only means asking again.
                let step = RETRY_STEP.min(deadline.saturating_duration_since(Instant::now()));
                let _news = tokio::time::timeout(step, self.leader_other_than(tried)).await;
            }
        }
    }

    async fn attempt<C: LeaderCall<M>>(
        &self,
        call: &C,
        target: Target,
        deadline: Instant,
    ) -> Attempt<C::Output> {
        let left = deadline.saturating_duration_since(Instant::now());
        match target {
            Target::Unknown => {
                let error = GroupError::NoLeader {
                    waited: LEADER_PATIENCE,
                    last: None,
                };
                Attempt::Retry(error, None)
            }
            Target::Me => match tokio::time::timeout(left, call.local(self)).await {
                Ok(answer) => classify(answer),
                Err(_elapsed) => Attempt::Failed(no_answer(left)),
            },
            Target::Other(id, node) => {
                let connection = self.inner.network.connection(id, &node);
                // A leader that died unseen (its host gone, no connection refused)
                // is given up at the election, not at the deadline. The retry is
                // safe: it carries the same request id, and the state machine
                // answers a request it applied once.
                let answer = tokio::select! {
                    answer = call.remote(&connection, left) => answer,
                    () = self.leader_other_than(Some(id)) => {
                        return Attempt::Retry(no_answer(left), None);
                    }
                };
                match answer {
                    // The remote leader stopping is news of an election, not our failure.
                    Ok(Err(ForwardError::Fatal(fatal))) => {
                        Attempt::Retry(GroupError::Stopped(fatal), None)
                    }
                    Ok(answer) => classify(answer),
                    Err(error) => Attempt::Retry(error.into(), None),
                }
            }
        }
    }

    /// The leader this node's Raft currently knows of.
    fn believed_leader(&self) -> Target {
        let metrics = self.inner.raft.metrics();
        let metrics = metrics.borrow();
        match metrics.current_leader {
            Some(id) if id == self.inner.id => Target::Me,
            Some(id) => match metrics.membership_config.membership().get_node(&id) {
                Some(node) => Target::Other(id, node.clone()),
                None => Target::Unknown,
            },
            None => Target::Unknown,
        }
    }

    /// Returns once this node knows of a leader other than `tried` (of any leader for
    /// `None`); never once the group has stopped, when the caller's own call ends with
    /// that news.
    async fn leader_other_than(&self, tried: Option<NodeId>) {
        let mut metrics = self.inner.raft.metrics();
        let replaced = |m: &openraft::RaftMetrics<NodeId, Node>| {
            m.current_leader.is_some() && m.current_leader != tried
        };
        if metrics.wait_for(replaced).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

fn no_answer(waited: Duration) -> GroupError {
    GroupError::NoLeader { waited, last: None }
}

fn classify<T>(answer: Result<T, ForwardError>) -> Attempt<T> {
    match answer {
        Ok(answer) => Attempt::Answered(answer),
        Err(ForwardError::NotLeader {
            leader_id,
            leader_node,
        }) => {
            let hint = leader_id.zip(leader_node);
            let error = GroupError::Refused(ForwardError::NotLeader {
                leader_id,
                leader_node: None,
            });
            Attempt::Retry(error, hint)
        }
        Err(error @ ForwardError::QuorumNotEnough(_)) => {
            Attempt::Retry(GroupError::Refused(error), None)
        }
        Err(ForwardError::Fatal(fatal)) => Attempt::Failed(GroupError::Stopped(fatal)),
        Err(error) => Attempt::Failed(GroupError::Refused(error)),
    }
}
