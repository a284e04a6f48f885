//! When a member purges its log: openraft's own purge policy is off
//! (`max_in_snapshot_log_to_keep` is `u64::MAX`), and this driver asks for purges
//! instead (`Raft::trigger().purge_log`), looking once a heartbeat.
//!
//! openraft 0.9 purges a leader's log behind each new snapshot, holding it back only
//! while a replication task is sending the entries concerned; a snapshot being sent or
//! installed holds nothing. A member whose install takes longer than the leader takes
//! to build its next snapshot and purge behind it then needs entries the leader no
//! longer has, and is sent a snapshot again: on a set taking writes, once an install
//! takes minutes, for ever. So on the leader the driver purges only up to the lowest
//! index every member has matched (openraft's replication metrics, the leader's own
//! included); a member that has matched nothing yet (just added, or installing its
//! first snapshot) holds the whole log. After its install the member has matched the
//! snapshot it was sent, whose later entries the leader still has, and catches up from
//! the log. A member gone for good must not keep the log growing: the leader keeps at
//! most [`Keep::for_members`] entries behind its snapshot, and purges past a member
//! still further behind (which is then sent a snapshot again). Every member keeps at
//! least [`Keep::after_snapshot`] entries behind its snapshot; a follower or learner,
//! which sends nothing, keeps just those.
//!
//! The driver only says up to where; openraft purges, never past its snapshot nor a
//! range a replication task is sending. It reads the member's metrics and asks its
//! Raft; it touches no file.

use std::time::Duration;

use openraft::{Raft, RaftMetrics};
use tokio::sync::oneshot;

use crate::replication::machine::Machine;
use crate::replication::{GroupConfig, Node, NodeId};

/// How many log entries behind its snapshot a member keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keep {
    /// Kept by every member, for a member briefly behind.
    pub after_snapshot: u64,
    /// Kept at most by the leader for members that have not matched them yet.
    pub for_members: u64,
}

impl Default for Keep {
    /// The defaults of `[cluster] keep_after_snapshot` and `keep_for_members`.
    fn default() -> Self {
        Keep {
            after_snapshot: 1000,
            for_members: 200_000,
        }
    }
}

/// The purge driver of this node's member of a group.
pub(super) struct Driver<M: Machine> {
    /// The member's Raft, whose metrics the driver reads and which it asks to purge.
    pub raft: Raft<GroupConfig<M>>,
    /// How many entries to keep.
    pub keep: Keep,
    /// How often to look.
    pub tick: Duration,
}

impl<M: Machine> Driver<M> {
    /// Runs the driver until the returned sender is dropped or the Raft stops.
    pub fn start(self) -> oneshot::Sender<()> {
        super::run_until_dropped(self.run())
    }

    async fn run(self) {
        let metrics = self.raft.metrics();
        let mut asked: Option<u64> = None;
        loop {
            tokio::time::sleep(self.tick).await;
            if metrics.has_changed().is_err() {
                return;
            }
            let (upto, purged) = {
                let metrics = metrics.borrow();
                (purge_upto(&metrics, self.keep), purged(&metrics))
            };
            if upto > asked.max(purged) {
                let Some(index) = upto else { continue };
                if self.raft.trigger().purge_log(index).await.is_err() {
                    return;
                }
                asked = upto;
            }
        }
    }
}

/// The index of the last entry this member has purged, if any.
fn purged(metrics: &RaftMetrics<NodeId, Node>) -> Option<u64> {
    metrics.purged.map(|id| id.index)
}

/// The index up to which (inclusive) this member may purge its log now: behind its
/// snapshot, and on the leader behind every member's matched entry.
fn purge_upto(metrics: &RaftMetrics<NodeId, Node>, keep: Keep) -> Option<u64> {
    let snapshot = metrics.snapshot?.index;
    let matched = metrics
        .replication
        .as_ref()
        .map(|members| members.values().map(|matched| matched.map(|id| id.index)));
    upto(snapshot, matched, keep)
}

/// [`purge_upto`] on plain indexes: `snapshot` is the last index of the snapshot,
/// `matched` (on the leader) every member's last matched index, `None` for a member
/// that has matched nothing.
fn upto(
    snapshot: u64,
    matched: Option<impl Iterator<Item = Option<u64>>>,
    keep: Keep,
) -> Option<u64> {
    let behind_snapshot = snapshot.checked_sub(keep.after_snapshot)?;
    let Some(matched) = matched else {
        return Some(behind_snapshot);
    };
    // `None` (a member that matched nothing) is the least.
    let held = match matched.min() {
        None => Some(behind_snapshot),
        Some(lowest) => lowest.map(|lowest| lowest.min(behind_snapshot)),
    };
    let most_kept = keep.for_members.max(keep.after_snapshot);
    held.max(snapshot.checked_sub(most_kept))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEEP: Keep = Keep {
        after_snapshot: 1,
        for_members: 100,
    };

    /// Every member's matched index, as a leader's metrics give them.
    fn leader(matched: &[Option<u64>]) -> Option<impl Iterator<Item = Option<u64>> + '_> {
        Some(matched.iter().copied())
    }

    /// A follower's metrics, which give no member's.
    fn follower() -> Option<std::iter::Empty<Option<u64>>> {
        None
    }

    #[test]
    fn a_follower_keeps_after_snapshot_entries_behind_its_snapshot() {
        assert_eq!(upto(500, follower(), KEEP), Some(499));
        let none_kept = Keep {
            after_snapshot: 0,
            ..KEEP
        };
        assert_eq!(upto(500, follower(), none_kept), Some(500));
        let more_than_the_log = Keep {
            after_snapshot: 600,
            ..KEEP
        };
        let kept = upto(500, follower(), more_than_the_log);
        assert_eq!(kept, None);
    }

    #[test]
    fn a_leader_with_every_member_caught_up_purges_as_a_follower() {
        assert_eq!(upto(500, leader(&[Some(520), Some(530)]), KEEP), Some(499));
    }

    #[test]
    fn a_leader_keeps_what_a_member_has_not_matched() {
        assert_eq!(upto(500, leader(&[Some(530), Some(450)]), KEEP), Some(450));
    }

    #[test]
    fn a_member_that_matched_nothing_holds_the_log_up_to_the_bound() {
        assert_eq!(upto(50, leader(&[Some(60), None]), KEEP), None);
        assert_eq!(upto(500, leader(&[Some(530), None]), KEEP), Some(400));
    }

    #[test]
    fn a_member_far_behind_holds_no_more_than_the_bound() {
        assert_eq!(upto(500, leader(&[Some(530), Some(10)]), KEEP), Some(400));
        let bound_below_after_snapshot = Keep {
            after_snapshot: 200,
            for_members: 100,
        };
        let upto = upto(500, leader(&[Some(10)]), bound_below_after_snapshot);
        assert_eq!(upto, Some(300));
    }
}
