//! The cluster map: the ring of hash slots, which replica set owns each slot, which
//! sets the cluster has and who their members are, and the slots migrating between
//! sets, versioned by an epoch that every change bumps (`DESIGN.md` §3).
//!
//! Pure: the map, the commands that change it and their deterministic application.
//! The metadata group replicates the commands ([`super::MapMachine`]). A command that
//! does not fit the map as it is (a set that owns slots removed, a slot moved by a
//! set that does not own it) changes nothing and says why ([`MapRefusal`]).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::replication::admin::Member;
use crate::replication::{NodeId, SetId};
use crate::storage::Slot;

/// The cluster as the metadata group knows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterMap {
    /// Bumped by every change; 0 for a map nothing was recorded in.
    pub epoch: u64,
    /// Every replica set, by id.
    pub sets: BTreeMap<SetId, SetRecord>,
    /// The owner of every slot, slot `i` at index `i`; empty until the ring is made
    /// ([`MapCommand::MakeRing`]). Its length is the cluster's slot count, a power of
    /// two, fixed for the cluster's life.
    pub slots: Vec<SetId>,
    /// The slots moving between sets, by slot.
    pub migrations: BTreeMap<Slot, Migration>,
    /// What the moves that ended have moved, all told.
    pub moved: MovedTotals,
    /// Sets taken out ([`MapCommand::RemoveSet`]): never recorded again (a member of
    /// one still following its group must not bring it back).
    pub removed: BTreeSet<SetId>,
}

/// What ended moves moved, all told (a rolled-back move counts nothing).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MovedTotals {
    /// Slots that changed hands.
    pub slots: u64,
    /// Handles copied.
    pub handles: u64,
    /// Bytes of handle records copied.
    pub bytes: u64,
    /// The longest time writes to one slot were held, in microseconds.
    pub longest_pause_micros: u64,
}

/// One replica set in the map.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetRecord {
    /// Its members as its own group last reported them, by node id.
    pub members: BTreeMap<NodeId, Member>,
}

/// A slot on its way from one set to another.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Migration {
    /// The set that owns the slot until the flip.
    pub from: SetId,
    /// The set that owns it after.
    pub to: SetId,
    /// How far the move has come.
    pub step: MigrationStep,
    /// Handles copied to `to` so far.
    pub handles: u64,
    /// Bytes of handle records copied to `to` so far.
    pub bytes: u64,
    /// How long writes to the slot were held (from the freeze to the flip), in
    /// microseconds; 0 before the flip.
    pub pause_micros: u64,
}

/// The steps of a slot's move, in order (`DESIGN.md` §3, "Resharding a slot").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum MigrationStep {
    /// Decided; nothing done yet.
    Planned,
    /// The source journals the slot's changes; the destination copies and catches up.
    Copying,
    /// The source holds new writes to the slot while the destination takes the last
    /// changes.
    Frozen,
    /// The destination owns the slot; the source still has to drop its copy.
    Flipped,
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
    /// Makes the ring: `slot_count` slots (a power of two) spread evenly over `sets`,
    /// in contiguous runs, each set in the order given. Only once.
    MakeRing {
        /// How many slots the ring has.
        slot_count: u32,
        /// The sets that share them; each must be recorded.
        sets: Vec<SetId>,
    },
    /// Plans moves of slots between sets; each slot must be owned by its `from` and not
    /// moving already, and `to` must be a recorded set.
    PlanMoves {
        /// `(slot, from, to)`.
        moves: Vec<(Slot, SetId, SetId)>,
    },
    /// Records that a move reached `step` (forward only) with so much copied; reaching
    /// [`MigrationStep::Flipped`] makes `to` the slot's owner.
    AdvanceMove {
        /// The slot.
        slot: Slot,
        /// The step reached.
        step: MigrationStep,
        /// Handles copied so far.
        handles: u64,
        /// Bytes copied so far.
        bytes: u64,
        /// How long writes were held, in microseconds (at the flip).
        pause_micros: u64,
    },
    /// Ends a move: after the flip, once the source dropped its copy; before the flip,
    /// a rollback (the slot stays with its source).
    EndMove {
        /// The slot.
        slot: Slot,
    },
    /// Removes a replica set that owns no slot and takes part in no move.
    RemoveSet {
        /// The set.
        set: SetId,
    },
}

/// What applying a [`MapCommand`] did: the map's epoch afterwards, or why nothing
/// changed.
pub type MapResult = Result<MapChanged, MapRefusal>;

/// A command that changed the map (or would not have changed it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapChanged {
    /// The epoch after the command; unchanged when the command changed nothing.
    pub epoch: u64,
}

/// Why a map command changed nothing.
#[derive(Debug, Clone, PartialEq, Eq, Error, Serialize, Deserialize)]
pub enum MapRefusal {
    /// The ring is made already, or the command needs a ring that is not made yet.
    #[error("the ring is {}", if *.0 { "made already" } else { "not made yet" })]
    Ring(bool),
    /// A slot count that is not a power of two from 1 to 65536.
    #[error("{0} slots: the count must be a power of two from 1 to 65536")]
    SlotCount(u32),
    /// The command names a set the map does not record.
    #[error("no replica set {0} in the map")]
    UnknownSet(u32),
    /// The command names a slot outside the ring.
    #[error("no slot {0} in the ring")]
    UnknownSlot(u32),
    /// A move names a source that does not own the slot, or a slot that moves already.
    #[error("slot {slot} cannot move from set {from}: it is owned by set {owner} or moving")]
    NotMovable {
        /// The slot.
        slot: u32,
        /// The source named.
        from: u32,
        /// The slot's owner.
        owner: u32,
    },
    /// A step backwards, or a step for a slot that is not moving.
    #[error("slot {slot} is not at a step before {step:?}")]
    Step {
        /// The slot.
        slot: u32,
        /// The step asked for.
        step: MigrationStep,
    },
    /// A set that still owns slots or takes part in a move.
    #[error("replica set {0} still owns slots or takes part in a move")]
    SetInUse(u32),
}

/// The most slots a ring may have: slot numbers are 16 bits wide in HS_SITE sizes.
pub const MAX_SLOTS: u32 = 1 << 16;

impl ClusterMap {
    /// Applies `command`; the epoch moves only when the map changes.
    pub fn apply(&mut self, command: MapCommand) -> MapResult {
        let before = self.clone();
        match command {
            MapCommand::RecordSet { set, members } => self.record_set(set, members),
            MapCommand::MakeRing { slot_count, sets } => self.make_ring(slot_count, &sets)?,
            MapCommand::PlanMoves { moves } => self.plan_moves(&moves)?,
            MapCommand::AdvanceMove {
                slot,
                step,
                handles,
                bytes,
                pause_micros,
            } => self.advance(slot, step, (handles, bytes, pause_micros))?,
            MapCommand::EndMove { slot } => self.end_move(slot),
            MapCommand::RemoveSet { set } => self.remove_set(set)?,
        }
        if *self != before {
            self.epoch = before.epoch + 1;
        }
        Ok(MapChanged { epoch: self.epoch })
    }

    /// How many slots the ring has (0 before it is made).
    pub fn slot_count(&self) -> u32 {
        u32::try_from(self.slots.len()).unwrap_or(u32::MAX)
    }

    /// The set that owns `slot`, if the ring has it.
    pub fn owner(&self, slot: Slot) -> Option<SetId> {
        self.slots.get(usize::try_from(slot.0).ok()?).copied()
    }

    /// How many slots each recorded set owns (0 for a set without any).
    pub fn slots_per_set(&self) -> BTreeMap<SetId, u32> {
        let mut counts: BTreeMap<SetId, u32> = self.sets.keys().map(|set| (*set, 0)).collect();
        for owner in &self.slots {
            *counts.entry(*owner).or_default() += 1;
        }
        counts
    }

    fn record_set(&mut self, set: SetId, members: Vec<Member>) {
        if self.removed.contains(&set) {
            return;
        }
        let members = members.into_iter().map(|m| (m.id, m)).collect();
        self.sets.insert(set, SetRecord { members });
    }

    fn make_ring(&mut self, slot_count: u32, sets: &[SetId]) -> Result<(), MapRefusal> {
        if !self.slots.is_empty() {
            return Err(MapRefusal::Ring(true));
        }
        if !slot_count.is_power_of_two() || slot_count > MAX_SLOTS {
            return Err(MapRefusal::SlotCount(slot_count));
        }
        if let Some(unknown) = sets.iter().find(|set| !self.sets.contains_key(set)) {
            return Err(MapRefusal::UnknownSet(unknown.0));
        }
        let Some(&first) = sets.first() else {
            return Err(MapRefusal::UnknownSet(0));
        };
        let count = u64::from(slot_count);
        let share = |index: usize| u64::try_from(index).unwrap_or(u64::MAX) * count;
        let parts = u64::try_from(sets.len()).unwrap_or(1);
        self.slots = (0..count)
            .map(|slot| {
                let at = sets.iter().enumerate().position(|(index, _)| {
                    // Set `index` owns the slots from index*S/N up to (index+1)*S/N.
                    slot < share(index + 1) / parts
                });
                at.map_or(first, |index| sets[index])
            })
            .collect();
        Ok(())
    }

    fn plan_moves(&mut self, moves: &[(Slot, SetId, SetId)]) -> Result<(), MapRefusal> {
        if self.slots.is_empty() {
            return Err(MapRefusal::Ring(false));
        }
        for (slot, from, to) in moves {
            let owner = self.owner(*slot).ok_or(MapRefusal::UnknownSlot(slot.0))?;
            if !self.sets.contains_key(to) {
                return Err(MapRefusal::UnknownSet(to.0));
            }
            if owner != *from || self.migrations.contains_key(slot) || from == to {
                return Err(MapRefusal::NotMovable {
                    slot: slot.0,
                    from: from.0,
                    owner: owner.0,
                });
            }
        }
        for (slot, from, to) in moves {
            let migration = Migration {
                from: *from,
                to: *to,
                step: MigrationStep::Planned,
                handles: 0,
                bytes: 0,
                pause_micros: 0,
            };
            self.migrations.insert(*slot, migration);
        }
        Ok(())
    }

    fn advance(
        &mut self,
        slot: Slot,
        step: MigrationStep,
        (handles, bytes, pause_micros): (u64, u64, u64),
    ) -> Result<(), MapRefusal> {
        let refused = MapRefusal::Step { slot: slot.0, step };
        let migration = self.migrations.get_mut(&slot).ok_or(refused.clone())?;
        if step < migration.step {
            return Err(refused);
        }
        migration.step = step;
        migration.handles = handles;
        migration.bytes = bytes;
        migration.pause_micros = pause_micros;
        if step == MigrationStep::Flipped {
            let to = migration.to;
            if let Some(owner) = self
                .slots
                .get_mut(usize::try_from(slot.0).unwrap_or(usize::MAX))
            {
                *owner = to;
            }
        }
        Ok(())
    }

    /// Ends the move of `slot`; a move past its flip adds to the totals.
    fn end_move(&mut self, slot: Slot) {
        let Some(migration) = self.migrations.remove(&slot) else {
            return;
        };
        if migration.step == MigrationStep::Flipped {
            let moved = &mut self.moved;
            moved.slots += 1;
            moved.handles += migration.handles;
            moved.bytes += migration.bytes;
            moved.longest_pause_micros = moved.longest_pause_micros.max(migration.pause_micros);
        }
    }

    fn remove_set(&mut self, set: SetId) -> Result<(), MapRefusal> {
        if !self.sets.contains_key(&set) {
            return Err(MapRefusal::UnknownSet(set.0));
        }
        let owns = self.slots.contains(&set);
        let moves = self
            .migrations
            .values()
            .any(|m| m.from == set || m.to == set);
        if owns || moves {
            return Err(MapRefusal::SetInUse(set.0));
        }
        self.sets.remove(&set);
        self.removed.insert(set);
        Ok(())
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

    fn record(set: u32) -> MapCommand {
        MapCommand::RecordSet {
            set: SetId(set),
            members: vec![member(u64::from(set), true)],
        }
    }

    fn ring(sets: &[u32], slot_count: u32) -> ClusterMap {
        let mut map = ClusterMap::default();
        for set in sets {
            map.apply(record(*set)).unwrap();
        }
        let sets = sets.iter().map(|set| SetId(*set)).collect();
        map.apply(MapCommand::MakeRing { slot_count, sets })
            .unwrap();
        map
    }

    #[test]
    fn a_change_bumps_the_epoch_and_a_repeat_does_not() {
        let mut map = ClusterMap::default();
        let record = |members| MapCommand::RecordSet {
            set: SetId(1),
            members,
        };
        assert_eq!(map.apply(record(vec![member(1, true)])).unwrap().epoch, 1);
        assert_eq!(map.apply(record(vec![member(1, true)])).unwrap().epoch, 1);
        let two = vec![member(1, true), member(2, false)];
        assert_eq!(map.apply(record(two)).unwrap().epoch, 2);
        assert_eq!(map.sets[&SetId(1)].members.len(), 2);
        assert!(!map.sets[&SetId(1)].members[&2].voter);
        let other = MapCommand::RecordSet {
            set: SetId(2),
            members: vec![member(4, true)],
        };
        assert_eq!(map.apply(other).unwrap().epoch, 3);
        assert_eq!(map.sets.len(), 2);
    }

    #[test]
    fn the_ring_is_made_once_and_shared_evenly() {
        let map = ring(&[1, 2, 3], 256);
        let counts = map.slots_per_set();
        assert_eq!(counts.values().sum::<u32>(), 256);
        assert!(counts.values().all(|n| (85..=86).contains(n)), "{counts:?}");
        assert_eq!(map.owner(Slot(0)), Some(SetId(1)));
        assert_eq!(map.owner(Slot(255)), Some(SetId(3)));
        let mut again = map.clone();
        let remake = MapCommand::MakeRing {
            slot_count: 256,
            sets: vec![SetId(1)],
        };
        assert_eq!(again.apply(remake), Err(MapRefusal::Ring(true)));
        assert_eq!(again, map);
        let mut empty = ClusterMap::default();
        empty.apply(record(1)).unwrap();
        let odd = MapCommand::MakeRing {
            slot_count: 100,
            sets: vec![SetId(1)],
        };
        assert_eq!(empty.apply(odd), Err(MapRefusal::SlotCount(100)));
        let unknown = MapCommand::MakeRing {
            slot_count: 64,
            sets: vec![SetId(9)],
        };
        assert_eq!(empty.apply(unknown), Err(MapRefusal::UnknownSet(9)));
    }

    #[test]
    fn a_move_flips_its_slot_and_ends() {
        let mut map = ring(&[1, 2], 8);
        map.apply(record(3)).unwrap();
        let plan = MapCommand::PlanMoves {
            moves: vec![(Slot(0), SetId(1), SetId(3))],
        };
        map.apply(plan.clone()).unwrap();
        assert!(matches!(
            map.apply(plan),
            Err(MapRefusal::NotMovable { .. })
        ));
        let advance = |step| MapCommand::AdvanceMove {
            slot: Slot(0),
            step,
            handles: 5,
            bytes: 500,
            pause_micros: 40,
        };
        map.apply(advance(MigrationStep::Copying)).unwrap();
        map.apply(advance(MigrationStep::Frozen)).unwrap();
        assert_eq!(
            map.apply(advance(MigrationStep::Copying)),
            Err(MapRefusal::Step {
                slot: 0,
                step: MigrationStep::Copying
            })
        );
        assert_eq!(map.owner(Slot(0)), Some(SetId(1)));
        let epoch = map.apply(advance(MigrationStep::Flipped)).unwrap().epoch;
        assert_eq!(map.owner(Slot(0)), Some(SetId(3)));
        assert_eq!(map.migrations[&Slot(0)].handles, 5);
        assert!(
            map.apply(MapCommand::EndMove { slot: Slot(0) })
                .unwrap()
                .epoch
                > epoch
        );
        assert!(map.migrations.is_empty());
    }

    #[test]
    fn a_set_is_removed_only_once_it_owns_nothing() {
        let mut map = ring(&[1, 2], 4);
        map.apply(record(3)).unwrap();
        assert_eq!(
            map.apply(MapCommand::RemoveSet { set: SetId(2) }),
            Err(MapRefusal::SetInUse(2))
        );
        map.apply(MapCommand::RemoveSet { set: SetId(3) }).unwrap();
        assert!(!map.sets.contains_key(&SetId(3)));
        // A member still following its group cannot bring the set back.
        let epoch = map.epoch;
        map.apply(record(3)).unwrap();
        assert!(!map.sets.contains_key(&SetId(3)));
        assert_eq!(map.epoch, epoch);
    }
}
