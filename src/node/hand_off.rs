//! A planned stop's first step: the node hands the leadership of every group it leads
//! (its replica set, the metadata group) to an up-to-date member, each within
//! [`HAND_OFF_DEADLINE`], before its edges drain; the groups' members then never
//! wait out a lease for an election. What each hand-off came to is reported, for
//! `hdl serve` to print; one that failed leaves the node to stop without it.
//!
//! Reads the node's groups through [`SetHost`] and [`MapGroup`]; stops nothing.

use std::fmt;
use std::time::Duration;

use tokio::time::Instant;

use super::SetHost;
use crate::placement::MapGroup;
use crate::replication::{Group, GroupId, HandOff, HandOffError, Machine};

/// How long each group's hand-off may take before the node stops without it.
pub const HAND_OFF_DEADLINE: Duration = Duration::from_secs(2);

/// What a stopping node did with its leadership of one group.
#[derive(Debug)]
pub struct HandOffReport {
    /// The group.
    pub group: GroupId,
    /// What came of it.
    pub outcome: Result<HandOff, HandOffError>,
    /// How long it took.
    pub took: Duration,
}

impl HandOffReport {
    /// Whether this node led the group with other voters, so that there was something
    /// to say.
    pub fn led(&self) -> bool {
        !matches!(self.outcome, Ok(HandOff::NotLeader | HandOff::NoOtherVoter))
    }
}

/// `handed the primary of replica set 1 to node 2 in 31 ms`, or why not.
impl fmt::Display for HandOffReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (group, took) = (self.group, self.took.as_millis());
        match &self.outcome {
            Ok(HandOff::HandedTo(to)) => {
                write!(f, "handed the primary of {group} to node {to} in {took} ms")
            }
            Ok(HandOff::NotLeader) => write!(f, "was not the primary of {group}"),
            Ok(HandOff::NoOtherVoter) => write!(f, "was the only voter of {group}"),
            Err(error) => write!(
                f,
                "could not hand off the primary of {group} ({error}); stopping without: the others elect once its lease runs out"
            ),
        }
    }
}

/// Hands off every group this node leads, all at once.
pub async fn hand_off_all(sets: &SetHost, map: &MapGroup) -> Vec<HandOffReport> {
    let set = async {
        match sets.local() {
            Some(local) => Some(hand_off(&local.group).await),
            None => None,
        }
    };
    let (map, set) = tokio::join!(hand_off(map.group()), set);
    std::iter::once(map).chain(set).collect()
}

async fn hand_off<M: Machine>(group: &Group<M>) -> HandOffReport {
    let began = Instant::now();
    let outcome = group.hand_off(HAND_OFF_DEADLINE).await;
    HandOffReport {
        group: group.id(),
        outcome,
        took: began.elapsed(),
    }
}
