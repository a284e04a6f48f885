//! When this node last heard from its group's leader, and what it tells a member that
//! asks whether to stand for election ([`Standing`]).
//!
//! The peer server stamps a [`LeaderContact`] whenever a leader's append, snapshot or
//! a granted vote reaches the node; the election driver (`group::election`) reads it
//! to tell whether the leader went silent. This module only keeps time: it neither
//! reads the network nor drives Raft.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use openraft::LogId;
use serde::{Deserialize, Serialize};

use super::NodeId;

/// The last time a leader (or a candidate this node voted for) reached this node.
#[derive(Debug)]
pub struct LeaderContact {
    last: Mutex<Instant>,
    lease: Duration,
}

impl LeaderContact {
    /// A contact first stamped now: a node that has just started gives a leader one
    /// `lease` to reach it before it calls the leader silent.
    pub fn new(lease: Duration) -> LeaderContact {
        LeaderContact {
            last: Mutex::new(Instant::now()),
            lease,
        }
    }

    /// Records that a leader (or a candidate granted this node's vote) reached it now.
    pub fn heard(&self) {
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }

    /// How long since the last contact.
    pub fn silent_for(&self) -> Duration {
        self.last
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .elapsed()
    }

    /// Whether a leader reached this node within the lease: while it did, this node's
    /// Raft refuses to vote for anyone else.
    pub fn hears_leader(&self) -> bool {
        self.silent_for() < self.lease
    }

    /// The leader lease this contact measures silence against.
    pub fn lease(&self) -> Duration {
        self.lease
    }
}

/// What a member answers a canvass: whether it still hears a leader, and how far its
/// log reaches (the candidate with the furthest log is the one a quorum can elect).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Standing {
    /// It is the leader, or a leader reached it within the lease.
    pub hears_leader: bool,
    /// The id of the last entry in its log.
    pub last_log: Option<LogId<NodeId>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_contact_hears_a_leader_within_its_lease_only() {
        let fresh = LeaderContact::new(Duration::from_secs(3600));
        assert!(fresh.hears_leader());
        let lapsed = LeaderContact::new(Duration::ZERO);
        assert!(!lapsed.hears_leader());
    }

    #[test]
    fn hearing_a_leader_restarts_the_silence() {
        let contact = LeaderContact::new(Duration::from_secs(3600));
        std::thread::sleep(Duration::from_millis(20));
        let before = contact.silent_for();
        contact.heard();
        assert!(contact.silent_for() < before);
    }
}
