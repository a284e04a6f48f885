//! Planning moves: which slots go where so that every set that stays owns S/N ± 1 of
//! the ring's S slots, moving as few as possible.
//!
//! Pure and deterministic: the same map and the same leaving sets give the same moves.
//! Slots already moving count for their destination and are not planned again.

use std::collections::BTreeMap;

use super::map::ClusterMap;
use crate::replication::SetId;
use crate::storage::Slot;

/// The moves `(slot, from, to)` that balance the ring over every recorded set except
/// `leaving`, whose slots all go to the others. Empty when the ring is balanced (or
/// not made, or no set would stay).
pub fn rebalance(map: &ClusterMap, leaving: &[SetId]) -> Vec<(Slot, SetId, SetId)> {
    let staying: Vec<SetId> = map
        .sets
        .keys()
        .copied()
        .filter(|set| !leaving.contains(set))
        .collect();
    if map.slots.is_empty() || staying.is_empty() {
        return Vec::new();
    }
    // Who will own each slot once the moves under way have ended.
    let owners: Vec<(Slot, SetId)> = (0..map.slot_count())
        .map(Slot)
        .filter_map(|slot| {
            let owner = map.owner(slot)?;
            let bound = map.migrations.get(&slot).map_or(owner, |m| m.to);
            Some((slot, bound))
        })
        .collect();
    let quotas = quotas(map.slot_count(), &staying, &owners);
    let mut held: BTreeMap<SetId, u32> = staying.iter().map(|set| (*set, 0)).collect();
    let mut givers = Vec::new();
    for (slot, owner) in &owners {
        let keep = held
            .get_mut(owner)
            .filter(|count| **count < quotas.get(owner).copied().unwrap_or(0));
        match keep {
            Some(count) => *count += 1,
            None if !map.migrations.contains_key(slot) => givers.push((*slot, *owner)),
            // A slot already moving stays on its way, even past a quota.
            None => {}
        }
    }
    let mut takers = staying.iter().flat_map(|set| {
        let missing = quotas[set].saturating_sub(held[set]);
        std::iter::repeat_n(*set, usize::try_from(missing).unwrap_or(0))
    });
    givers
        .into_iter()
        .filter_map(|(slot, from)| takers.next().map(|to| (slot, from, to)))
        .collect()
}

/// How many slots each staying set should own: S / N, and one more for the first
/// S mod N sets by how many they will hold already (most first, then by id), so that
/// as few slots as possible move.
fn quotas(slot_count: u32, staying: &[SetId], owners: &[(Slot, SetId)]) -> BTreeMap<SetId, u32> {
    let sets = u32::try_from(staying.len()).unwrap_or(u32::MAX).max(1);
    let (base, extra) = (slot_count / sets, slot_count % sets);
    let mut order: Vec<(u32, SetId)> = staying
        .iter()
        .map(|set| {
            let owned = owners.iter().filter(|(_, owner)| owner == set).count();
            (u32::try_from(owned).unwrap_or(u32::MAX), *set)
        })
        .collect();
    order.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    order
        .iter()
        .enumerate()
        .map(|(rank, (_, set))| {
            let plus = u32::from(u32::try_from(rank).unwrap_or(u32::MAX) < extra);
            (*set, base + plus)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::map::{MapCommand, MigrationStep};

    fn map(sets: &[u32], slot_count: u32) -> ClusterMap {
        let mut map = ClusterMap::default();
        for set in sets {
            let record = MapCommand::RecordSet {
                set: SetId(*set),
                members: Vec::new(),
            };
            map.apply(record).unwrap();
        }
        let sets = sets.iter().map(|set| SetId(*set)).collect();
        map.apply(MapCommand::MakeRing { slot_count, sets })
            .unwrap();
        map
    }

    fn after(map: &ClusterMap, moves: &[(Slot, SetId, SetId)]) -> BTreeMap<SetId, u32> {
        let mut next = map.clone();
        for (slot, _, to) in moves {
            next.slots[usize::try_from(slot.0).unwrap()] = *to;
        }
        next.slots_per_set()
    }

    #[test]
    fn a_new_set_takes_its_share_and_nothing_else_moves() {
        let mut map = map(&[1, 2], 256);
        assert!(rebalance(&map, &[]).is_empty(), "balanced already");
        map.apply(MapCommand::RecordSet {
            set: SetId(3),
            members: Vec::new(),
        })
        .unwrap();
        let moves = rebalance(&map, &[]);
        assert_eq!(moves.len(), 85, "a third of the ring, no more");
        assert!(
            moves
                .iter()
                .all(|(_, from, to)| *from != SetId(3) && *to == SetId(3))
        );
        let counts = after(&map, &moves);
        assert!(counts.values().all(|n| (85..=86).contains(n)), "{counts:?}");
        map.apply(MapCommand::PlanMoves { moves }).unwrap();
        assert!(rebalance(&map, &[]).is_empty(), "moves under way count");
    }

    #[test]
    fn a_leaving_set_gives_every_slot_away_evenly() {
        let map = map(&[1, 2, 3], 64);
        let moves = rebalance(&map, &[SetId(2)]);
        assert!(moves.iter().all(|(_, from, _)| *from == SetId(2)));
        let counts = after(&map, &moves);
        assert_eq!(counts[&SetId(2)], 0);
        assert_eq!(counts[&SetId(1)] + counts[&SetId(3)], 64);
        assert!(counts[&SetId(1)].abs_diff(counts[&SetId(3)]) <= 1);
    }

    #[test]
    fn a_slot_on_its_way_is_not_planned_again() {
        let mut map = map(&[1, 2], 8);
        map.apply(MapCommand::RecordSet {
            set: SetId(3),
            members: Vec::new(),
        })
        .unwrap();
        let first = vec![(Slot(0), SetId(1), SetId(3))];
        map.apply(MapCommand::PlanMoves { moves: first }).unwrap();
        let advance = MapCommand::AdvanceMove {
            slot: Slot(0),
            step: MigrationStep::Copying,
            handles: 0,
            bytes: 0,
            pause_micros: 0,
        };
        map.apply(advance).unwrap();
        let moves = rebalance(&map, &[]);
        assert!(moves.iter().all(|(slot, _, _)| *slot != Slot(0)));
        assert_eq!(moves.len(), 1, "{moves:?}");
    }
}
