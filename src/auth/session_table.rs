//! The one bounded, expiring table both protocol edges keep their sessions in: the
//! Handle protocol's (digest §3.8, keys and counters) and the REST API's
//! (`/api/sessions`, nonces). Each edge has its own entry type and rules; the table
//! owns what they share.
//!
//! Owns [`SessionTable`], [`SessionEntry`] and [`TableRefusal`]. Pure bookkeeping:
//! the clock is passed in, keys are chosen by the caller.
//!
//! Invariants: the table never holds more than its capacity; an entry lives no longer
//! than the table's lifetime (nor than the shorter one it was opened with) and an
//! expired entry is refused and dropped when it is looked up; a full table first
//! purges expired entries, then drops the oldest entry nobody has authenticated in
//! (so anonymous sessions cannot crowd out authenticated clients), and refuses a new
//! entry only when every entry is authenticated.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

use thiserror::Error;

/// What a table needs to know of an entry.
pub trait SessionEntry {
    /// Whether someone authenticated in this session: such an entry is never dropped
    /// to make room.
    fn authenticated(&self) -> bool;
}

/// Why a session could not be opened or found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum TableRefusal {
    /// No entry has this key (never opened, closed or dropped).
    #[error("no such session")]
    Unknown,
    /// The entry outlived its lifetime (it is dropped now).
    #[error("the session has expired")]
    Expired,
    /// Every slot holds a live, authenticated entry.
    #[error("{capacity} sessions are open")]
    Full {
        /// The table's capacity.
        capacity: usize,
    },
}

#[derive(Debug)]
struct Slot<E> {
    entry: E,
    opened_at: Instant,
    expires_at: Instant,
}

/// At most `capacity` sessions by key, each living at most `lifetime`.
#[derive(Debug)]
pub struct SessionTable<K, E> {
    slots: HashMap<K, Slot<E>>,
    capacity: usize,
    lifetime: Duration,
}

impl<K: Hash + Eq + Clone, E: SessionEntry> SessionTable<K, E> {
    /// An empty table of at most `capacity` entries living at most `lifetime`.
    pub fn new(capacity: usize, lifetime: Duration) -> Self {
        SessionTable {
            slots: HashMap::new(),
            capacity,
            lifetime,
        }
    }

    /// The table's capacity.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// How many entries are held (expired ones included until purged).
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether the table holds nothing.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Whether `key` is taken (by a live or an expired entry).
    pub fn contains(&self, key: &K) -> bool {
        self.slots.contains_key(key)
    }

    /// Opens `entry` under `key` at `now`, living the shorter of the table's lifetime
    /// and `lifetime` (`None`: the table's), after making room if the table is full.
    /// An entry already under `key` is replaced: callers pick a key not taken.
    pub fn open(
        &mut self,
        key: K,
        entry: E,
        lifetime: Option<Duration>,
        now: Instant,
    ) -> Result<(), TableRefusal> {
        self.make_room(now)?;
        let lifetime = lifetime.map_or(self.lifetime, |asked| asked.min(self.lifetime));
        let slot = Slot {
            entry,
            opened_at: now,
            expires_at: now + lifetime,
        };
        self.slots.insert(key, slot);
        Ok(())
    }

    /// The live entry under `key` at `now`; an expired one is dropped and refused.
    pub fn get_mut(&mut self, key: &K, now: Instant) -> Result<&mut E, TableRefusal> {
        let expired = self.slots.get(key).map(|slot| slot.expires_at <= now);
        match expired {
            None => Err(TableRefusal::Unknown),
            Some(true) => {
                self.slots.remove(key);
                Err(TableRefusal::Expired)
            }
            Some(false) => self
                .slots
                .get_mut(key)
                .map(|slot| &mut slot.entry)
                .ok_or(TableRefusal::Unknown),
        }
    }

    /// Closes the entry under `key`; whether a live one was there.
    pub fn close(&mut self, key: &K, now: Instant) -> bool {
        self.get_mut(key, now).is_ok() && self.slots.remove(key).is_some()
    }

    /// Frees a slot when the table is full: expired entries first, then the oldest
    /// unauthenticated one.
    fn make_room(&mut self, now: Instant) -> Result<(), TableRefusal> {
        if self.slots.len() < self.capacity {
            return Ok(());
        }
        self.slots.retain(|_, slot| slot.expires_at > now);
        if self.slots.len() < self.capacity {
            return Ok(());
        }
        let oldest = self
            .slots
            .iter()
            .filter(|(_, slot)| !slot.entry.authenticated())
            .min_by_key(|(_, slot)| slot.opened_at)
            .map(|(key, _)| key.clone());
        match oldest {
            Some(key) => {
                self.slots.remove(&key);
                Ok(())
            }
            None => Err(TableRefusal::Full {
                capacity: self.capacity,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIFETIME: Duration = Duration::from_secs(60);

    /// An entry: authenticated or not.
    struct Entry(bool);

    impl SessionEntry for Entry {
        fn authenticated(&self) -> bool {
            self.0
        }
    }

    #[test]
    fn entries_live_the_shorter_lifetime_and_expired_ones_are_dropped() {
        let now = Instant::now();
        let mut table = SessionTable::new(4, LIFETIME);
        table
            .open(1, Entry(true), Some(Duration::from_secs(10)), now)
            .unwrap();
        table
            .open(2, Entry(true), Some(Duration::MAX), now)
            .unwrap();
        assert!(table.get_mut(&1, now + Duration::from_secs(9)).is_ok());
        let late = now + Duration::from_secs(10);
        assert_eq!(table.get_mut(&1, late).err(), Some(TableRefusal::Expired));
        assert_eq!(table.get_mut(&1, now).err(), Some(TableRefusal::Unknown));
        assert!(
            table
                .get_mut(&2, now + LIFETIME - Duration::from_secs(1))
                .is_ok()
        );
        assert_eq!(
            table.get_mut(&2, now + LIFETIME).err(),
            Some(TableRefusal::Expired)
        );
        assert!(table.is_empty());
    }

    #[test]
    fn a_full_table_purges_then_drops_the_oldest_unauthenticated_then_refuses() {
        let now = Instant::now();
        let second = Duration::from_secs(1);
        let mut table = SessionTable::new(3, LIFETIME);
        table.open("short", Entry(true), Some(second), now).unwrap();
        table.open("old", Entry(false), None, now).unwrap();
        table
            .open("young", Entry(false), None, now + second)
            .unwrap();
        let later = now + 2 * second;
        table.open("a", Entry(true), None, later).unwrap();
        assert!(!table.contains(&"short"), "the expired entry went first");
        assert_eq!(table.len(), 3);
        table.open("b", Entry(true), None, later).unwrap();
        assert!(!table.contains(&"old"), "then the oldest unauthenticated");
        assert!(table.contains(&"young"));
        table.open("c", Entry(true), None, later).unwrap();
        assert!(!table.contains(&"young"));
        assert_eq!(
            table.open("d", Entry(false), None, later),
            Err(TableRefusal::Full { capacity: 3 })
        );
        assert_eq!(table.len(), 3);
        assert!(table.close(&"a", later));
        assert!(!table.close(&"a", later));
        table.open("d", Entry(false), None, later).unwrap();
    }
}
