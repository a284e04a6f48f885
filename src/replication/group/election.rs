//! When a member stands for election: openraft's own election timer is off, and this
//! driver decides instead, with pre-vote semantics.
//!
//! Every heartbeat, a voter that has not heard its leader for a lease canvasses the
//! other voters ([`GroupCall::Canvass`](crate::replication::network::GroupCall)): if a
//! quorum, itself included, no longer hears a leader and no such member has a further
//! log (equal logs: the lower node id goes first), it stands at once. So the member a
//! quorum can elect stands as soon as the leases run out, alone — no split vote, no
//! refused candidate carrying a longer timeout into the next election, and a member
//! that restarts (or is cut off alone) never raises the term over a working leader.
//! When the canvass cannot settle it (the furthest member never wins, answers are lost)
//! a member silent for [`FALLBACK_LEASES`] leases stands anyway, as plain Raft would.
//! After standing, a member waits a random back-off in the election timeout range
//! before it may stand again.
//!
//! The driver only decides when to call an election; the votes, terms and safety stay
//! openraft's. It reads the leader contact the peer server stamps and the last id in
//! the log, and asks peers through the group's network; it writes nothing.

use std::cmp::Reverse;
use std::sync::Arc;
use std::time::Duration;

use openraft::{Raft, ServerState};
use tokio::sync::oneshot;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::replication::contact::{LeaderContact, Standing};
use crate::replication::machine::Machine;
use crate::replication::network::GroupNetwork;
use crate::replication::types::LogId;
use crate::replication::{GroupConfig, LogStore, Node, NodeId};

/// Leases of silence after which a member stands even if the canvass named another.
pub const FALLBACK_LEASES: u32 = 4;

/// How the driver paces itself (from the group's settings).
#[derive(Debug, Clone, Copy)]
pub(super) struct Pace {
    /// How often it looks at the leader contact; a canvass waits at most twice this.
    pub tick: Duration,
    /// The least back-off after standing, in milliseconds.
    pub backoff_min_ms: u64,
    /// The greatest back-off after standing, in milliseconds.
    pub backoff_max_ms: u64,
}

impl Pace {
    /// A tick per heartbeat; the back-off spans the election timeouts.
    pub fn of(settings: &super::GroupSettings) -> Pace {
        Pace {
            tick: Duration::from_millis(settings.heartbeat_ms),
            backoff_min_ms: settings.election_min_ms,
            backoff_max_ms: settings.election_max_ms,
        }
    }
}

/// The election driver of this node's member of a group.
pub(super) struct Driver<M: Machine> {
    /// The member's Raft, which the driver asks to stand.
    pub raft: Raft<GroupConfig<M>>,
    /// Its log, read for how far it reaches.
    pub log: LogStore<M>,
    /// The group's network, to canvass the other voters.
    pub network: GroupNetwork<M>,
    /// When a leader last reached the member.
    pub contact: Arc<LeaderContact>,
    /// How often to look, and the back-off after standing.
    pub pace: Pace,
    /// This node's id.
    pub id: NodeId,
}

/// The other voters of the group, as this node knows them, and how many voters it has.
struct View {
    others: Vec<(NodeId, Node)>,
    voters: usize,
}

impl<M: Machine> Driver<M> {
    /// Runs the driver until the returned sender is dropped or the Raft stops.
    pub fn start(self) -> oneshot::Sender<()> {
        super::run_until_dropped(self.run())
    }

    async fn run(self) {
        let metrics = self.raft.metrics();
        let mut quiet_until = Instant::now();
        loop {
            tokio::time::sleep(self.pace.tick).await;
            if metrics.has_changed().is_err() {
                return;
            }
            if Instant::now() < quiet_until || self.contact.hears_leader() {
                continue;
            }
            let Some(view) = self.view() else { continue };
            if self.should_stand(&view).await {
                if self.raft.trigger().elect().await.is_err() {
                    return;
                }
                quiet_until = Instant::now() + self.backoff();
            }
        }
    }

    /// The voters besides this one, or `None` when this node is the leader or no voter.
    fn view(&self) -> Option<View> {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow();
        if metrics.state == ServerState::Leader || metrics.running_state.is_err() {
            return None;
        }
        let membership = metrics.membership_config.membership();
        let voters: Vec<NodeId> = membership.voter_ids().collect();
        if !voters.contains(&self.id) {
            return None;
        }
        let others = voters.iter().filter(|v| **v != self.id);
        let others = others.filter_map(|v| Some((*v, membership.get_node(v)?.clone())));
        Some(View {
            others: others.collect(),
            voters: voters.len(),
        })
    }

    /// Whether this node should stand now (see [`stands`]).
    async fn should_stand(&self, view: &View) -> bool {
        let standings = self.canvass(&view.others).await;
        let silent: Vec<(NodeId, Standing)> = standings
            .into_iter()
            .filter(|(_, standing)| !standing.hears_leader)
            .collect();
        let Ok(mine) = self.log.last_log_id().await else {
            return false;
        };
        let long_silence = self.contact.silent_for() >= self.contact.lease() * FALLBACK_LEASES;
        stands((self.id, mine), view.voters, &silent, long_silence)
    }

    /// The standings of the members in `others` that answered within two ticks.
    async fn canvass(&self, others: &[(NodeId, Node)]) -> Vec<(NodeId, Standing)> {
        let wait = self.pace.tick * 2;
        let mut asks = JoinSet::new();
        for (id, node) in others {
            let (id, connection) = (*id, self.network.connection(*id, node));
            asks.spawn(async move { (id, connection.canvass(wait).await) });
        }
        let mut standings = Vec::with_capacity(others.len());
        while let Some(answer) = asks.join_next().await {
            if let Ok((id, Ok(standing))) = answer {
                standings.push((id, standing));
            }
        }
        standings
    }

    /// A random wait in the back-off range.
    fn backoff(&self) -> Duration {
        let (least, most) = (self.pace.backoff_min_ms, self.pace.backoff_max_ms);
        let spread = most.saturating_sub(least).saturating_add(1);
        Duration::from_millis(least.saturating_add(rand::random::<u64>() % spread))
    }
}

/// Whether member `me` (its id and last log id), which no longer hears a leader,
/// stands for election in a group of `voters`, given the other members that answered
/// its canvass without hearing one either (`silent`): only when a quorum, itself
/// included, is silent, and then if no silent member is a better candidate (a further
/// log, or the same log and a lower id) or the silence has lasted `long_silence`.
fn stands(
    me: (NodeId, Option<LogId>),
    voters: usize,
    silent: &[(NodeId, Standing)],
    long_silence: bool,
) -> bool {
    let quorum = voters / 2 + 1;
    if silent.len() + 1 < quorum {
        return false;
    }
    let (id, mine) = me;
    long_silence
        || silent
            .iter()
            .all(|(other, standing)| (mine, Reverse(id)) > (standing.last_log, Reverse(*other)))
}

#[cfg(test)]
mod tests {
    use openraft::CommittedLeaderId;

    use super::*;

    fn log_id(term: u64, index: u64) -> Option<LogId> {
        Some(LogId::new(CommittedLeaderId::new(term, 0), index))
    }

    fn silent(id: NodeId, last_log: Option<LogId>) -> (NodeId, Standing) {
        let standing = Standing {
            hears_leader: false,
            last_log,
        };
        (id, standing)
    }

    #[test]
    fn the_member_with_the_furthest_log_stands_and_the_others_wait() {
        let behind = silent(3, log_id(2, 40));
        assert!(stands((2, log_id(2, 41)), 3, &[behind], false));
        let ahead = silent(2, log_id(2, 41));
        assert!(!stands((3, log_id(2, 40)), 3, &[ahead], false));
        // A later term outranks a longer log, as in Raft's up-to-date check.
        let newer = silent(2, log_id(3, 10));
        assert!(!stands((3, log_id(2, 40)), 3, &[newer], false));
    }

    #[test]
    fn equal_logs_let_the_lower_id_stand() {
        assert!(stands(
            (1, log_id(2, 7)),
            3,
            &[silent(2, log_id(2, 7))],
            false
        ));
        assert!(!stands(
            (2, log_id(2, 7)),
            3,
            &[silent(1, log_id(2, 7))],
            false
        ));
    }

    #[test]
    fn nobody_stands_without_a_silent_quorum() {
        // Alone in a set of three: the others still hear the leader, or are gone.
        assert!(!stands((1, log_id(2, 7)), 3, &[], false));
        assert!(!stands((1, log_id(2, 7)), 3, &[], true));
        // Two silent of five is no quorum either.
        assert!(!stands((1, log_id(2, 7)), 5, &[silent(2, None)], true));
        // A lone voter is its own quorum.
        assert!(stands((1, log_id(2, 7)), 1, &[], false));
    }

    #[test]
    fn a_long_silence_lets_a_worse_candidate_stand_with_a_silent_quorum() {
        let ahead = silent(2, log_id(2, 41));
        assert!(stands((3, log_id(2, 40)), 3, &[ahead], true));
    }
}
