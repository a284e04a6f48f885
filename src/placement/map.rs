//! The cluster map: which replica sets the cluster has and who their members are,
//! versioned by an epoch that every change bumps (`DESIGN.md` §3).
//!
//! Pure: the map, the commands that change it and their deterministic application.
//! The metadata group replicates the commands ([`super::MapMachine`]); the slots of the
//! ring will join the map here.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::replication::admin::Member;
use crate::replication::{NodeId, SetId};

/// The cluster as the metadata group knows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterMap {
    /// Bumped by every change; 0 for a map nothing was recorded in.
    pub epoch: u64,
    /// Every replica set, by id.
    pub sets: BTreeMap<SetId, SetRecord>,
}

/// One replica set in the map.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetRecord {
    /// Its members as its own group last reported them, by node id.
    pub members: BTreeMap<NodeId, Member>,
}

/// One change to the map, as the metadata group's log carries it.
///
/// A log format: variants are never changed or removed; a new form of a change is a
/// new variant appended after these.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MapCommand {
    /// Records the members of a replica set (adding the set if it is new), after its
    /// own group changed membership.
    RecordSet {
        /// The set.
        set: SetId,
        /// Its members now.
        members: Vec<Member>,
    },
}

/// What applying a [`MapCommand`] did: the map's epoch afterwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapChanged {
    /// The epoch after the command; unchanged when the command changed nothing.
    pub epoch: u64,
}

impl ClusterMap {
    /// Applies `command`; the epoch moves only when the map changes.
    pub fn apply(&mut self, command: MapCommand) -> MapChanged {
        match command {
            MapCommand::RecordSet { set, members } => {
                let members = members.into_iter().map(|m| (m.id, m)).collect();
                let record = SetRecord { members };
                if self.sets.get(&set) != Some(&record) {
                    self.sets.insert(set, record);
                    self.epoch += 1;
                }
            }
        }
        MapChanged { epoch: self.epoch }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replication::Node;

    fn member(id: NodeId, voter: bool) -> Member {
        Member {
            id,
            node: Node::default(),
            voter,
        }
    }

    #[test]
    fn a_change_bumps_the_epoch_and_a_repeat_does_not() {
        let mut map = ClusterMap::default();
        let record = |members| MapCommand::RecordSet {
            set: SetId(1),
            members,
        };
        assert_eq!(map.apply(record(vec![member(1, true)])).epoch, 1);
        assert_eq!(map.apply(record(vec![member(1, true)])).epoch, 1);
        let two = vec![member(1, true), member(2, false)];
        assert_eq!(map.apply(record(two)).epoch, 2);
        assert_eq!(map.sets[&SetId(1)].members.len(), 2);
        assert!(!map.sets[&SetId(1)].members[&2].voter);
        let other = MapCommand::RecordSet {
            set: SetId(2),
            members: vec![member(4, true)],
        };
        assert_eq!(map.apply(other).epoch, 3);
        assert_eq!(map.sets.len(), 2);
    }
}
