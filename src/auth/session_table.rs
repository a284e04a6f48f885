//! The one bounded, expiring table both protocol edges keep their sessions in: the
//! Handle protocol's (digest §3.8, keys and counters) and the REST API's
//! (`/api/sessions`, nonces). Each edge has its own entry type and rules; the table
//! owns what they share.
//!
//! Owns [`SessionTable`], [`SessionEntry`] and [`TableRefusal`]. Pure bookkeeping:
//! the clock is passed in, keys are chosen by the caller.
//!
//! Invariants: the table never holds more than its capacity; an entry lives no longer
//! than the table's lifetime (nor than the shorter one it was opened with), and one
//! nobody has authenticated in no longer than [`UNAUTHENTICATED_LIFETIME`]; an
//! expired entry is refused and dropped when it is looked up; one source address
//! holds at most [`UNAUTHENTICATED_PER_SOURCE`] entries nobody has authenticated in
//! (its oldest goes to make room for its next); a full table first purges expired
//! entries, then drops the oldest entry nobody has authenticated in (so anonymous
//! sessions cannot crowd out authenticated clients), and refuses a new entry only
//! when every entry is authenticated.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::net::IpAddr;
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

/// How long an entry lives while nobody has authenticated in it: real clients
/// authenticate right after their setup (the reference tools in their first
/// administrative request).
pub const UNAUTHENTICATED_LIFETIME: Duration = Duration::from_secs(60);

/// Entries nobody has authenticated in that one source address may hold.
pub const UNAUTHENTICATED_PER_SOURCE: usize = 16;

#[derive(Debug)]
struct Slot<E> {
    entry: E,
    source: IpAddr,
    opened_at: Instant,
    expires_at: Instant,
}

impl<E: SessionEntry> Slot<E> {
    fn expired(&self, now: Instant) -> bool {
        self.expires_at <= now
            || (!self.entry.authenticated() && self.opened_at + UNAUTHENTICATED_LIFETIME <= now)
    }
}

/// At most `capacity` sessions by key, each living at most `lifetime`.
#[derive(Debug)]
pub struct SessionTable<K, E> {
    slots: HashMap<K, Slot<E>>,
    /// The keys of each source's entries, oldest first.
    sources: HashMap<IpAddr, VecDeque<K>>,
    capacity: usize,
    lifetime: Duration,
}

impl<K: Hash + Eq + Clone, E: SessionEntry> SessionTable<K, E> {
    /// An empty table of at most `capacity` entries living at most `lifetime`.
    pub fn new(capacity: usize, lifetime: Duration) -> Self {
        SessionTable {
            slots: HashMap::new(),
            sources: HashMap::new(),
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

    /// Opens `entry` under `key` at `now`, from `source`, living the shorter of the
    /// table's lifetime and `lifetime` (`None`: the table's), after making room: the
    /// source's oldest unauthenticated entry goes when it holds its share of them,
    /// then a full table is purged. An entry already under `key` is replaced: callers
    /// pick a key not taken.
    pub fn open(
        &mut self,
        key: K,
        entry: E,
        source: IpAddr,
        lifetime: Option<Duration>,
        now: Instant,
    ) -> Result<(), TableRefusal> {
        self.make_room_for(source, now);
        self.make_room(now)?;
        let lifetime = lifetime.map_or(self.lifetime, |asked| asked.min(self.lifetime));
        let slot = Slot {
            entry,
            source,
            opened_at: now,
            expires_at: now + lifetime,
        };
        self.remove(&key);
        self.slots.insert(key.clone(), slot);
        self.sources.entry(source).or_default().push_back(key);
        Ok(())
    }

    /// The live entry under `key` at `now`; an expired one is dropped and refused.
    pub fn get_mut(&mut self, key: &K, now: Instant) -> Result<&mut E, TableRefusal> {
        let expired = self.slots.get(key).map(|slot| slot.expired(now));
        match expired {
            None => Err(TableRefusal::Unknown),
            Some(true) => {
                self.remove(key);
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
        self.get_mut(key, now).is_ok() && self.remove(key)
    }

    /// Takes the entry under `key` out of the table and its source's list.
    fn remove(&mut self, key: &K) -> bool {
        let Some(slot) = self.slots.remove(key) else {
            return false;
        };
        if let Some(keys) = self.sources.get_mut(&slot.source) {
            keys.retain(|held| held != key);
            if keys.is_empty() {
                self.sources.remove(&slot.source);
            }
        }
        true
    }

    /// Drops `source`'s oldest unauthenticated entries while it holds its share of
    /// them.
    fn make_room_for(&mut self, source: IpAddr, now: Instant) {
        let Some(keys) = self.sources.get(&source) else {
            return;
        };
        let unauthenticated: Vec<K> = keys
            .iter()
            .filter(|key| {
                self.slots
                    .get(*key)
                    .is_some_and(|slot| !slot.entry.authenticated() || slot.expired(now))
            })
            .cloned()
            .collect();
        let excess = (unauthenticated.len() + 1).saturating_sub(UNAUTHENTICATED_PER_SOURCE);
        for key in unauthenticated.iter().take(excess) {
            self.remove(key);
        }
    }

    /// Frees a slot when the table is full: expired entries first, then the oldest
    /// unauthenticated one.
    fn make_room(&mut self, now: Instant) -> Result<(), TableRefusal> {
        if self.slots.len() < self.capacity {
            return Ok(());
        }
        let expired: Vec<K> = self
            .slots
            .iter()
            .filter(|(_, slot)| slot.expired(now))
            .map(|(key, _)| key.clone())
            .collect();
        for key in &expired {
            self.remove(key);
        }
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
                self.remove(&key);
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

    const LIFETIME: Duration = Duration::from_secs(600);
    const HERE: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

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
            .open(1, Entry(true), HERE, Some(Duration::from_secs(10)), now)
            .unwrap();
        table
            .open(2, Entry(true), HERE, Some(Duration::MAX), now)
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
        table
            .open("short", Entry(true), HERE, Some(second), now)
            .unwrap();
        table.open("old", Entry(false), HERE, None, now).unwrap();
        table
            .open("young", Entry(false), HERE, None, now + second)
            .unwrap();
        let later = now + 2 * second;
        table.open("a", Entry(true), HERE, None, later).unwrap();
        assert!(!table.contains(&"short"), "the expired entry went first");
        assert_eq!(table.len(), 3);
        table.open("b", Entry(true), HERE, None, later).unwrap();
        assert!(!table.contains(&"old"), "then the oldest unauthenticated");
        assert!(table.contains(&"young"));
        table.open("c", Entry(true), HERE, None, later).unwrap();
        assert!(!table.contains(&"young"));
        assert_eq!(
            table.open("d", Entry(false), HERE, None, later),
            Err(TableRefusal::Full { capacity: 3 })
        );
        assert_eq!(table.len(), 3);
        assert!(table.close(&"a", later));
        assert!(!table.close(&"a", later));
        table.open("d", Entry(false), HERE, None, later).unwrap();
    }

    #[test]
    fn unauthenticated_entries_are_short_lived_and_bounded_per_source() {
        let now = Instant::now();
        let mut table = SessionTable::new(1000, LIFETIME);
        table.open(0, Entry(true), HERE, None, now).unwrap();
        for key in 1..=100 {
            table.open(key, Entry(false), HERE, None, now).unwrap();
        }
        assert_eq!(table.len(), 1 + UNAUTHENTICATED_PER_SOURCE);
        assert!(
            table.contains(&0),
            "an authenticated entry is never made room with"
        );
        assert!(
            table.contains(&100) && !table.contains(&1),
            "the oldest went"
        );
        let elsewhere = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 1));
        table.open(200, Entry(false), elsewhere, None, now).unwrap();
        assert!(table.contains(&100), "another source leaves them be");

        let late = now + UNAUTHENTICATED_LIFETIME;
        assert_eq!(table.get_mut(&100, late).err(), Some(TableRefusal::Expired));
        assert!(
            table.get_mut(&0, late).is_ok(),
            "authenticated: the full lifetime"
        );
    }
}
