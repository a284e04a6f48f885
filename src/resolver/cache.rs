//! The service information a [`super::Resolver`] has learnt, kept for its TTL.
//!
//! Owns [`ServiceCache`]: by folded prefix, the sites of the prefix's service and when
//! they expire (the shortest TTL of the values they came from, counted from when they
//! were fetched). Bounded at [`ServiceCache::capacity`] entries: a new entry first
//! drops the expired ones, then the one expiring soonest. Pure: the caller gives the
//! time, so tests need no clock.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::clock::unix_now;
use crate::values::{HandleValue, SiteInfo, Ttl};

/// How many prefixes a resolver remembers the service of, by default.
pub const DEFAULT_CAPACITY: usize = 1024;

/// The longest a service is remembered, whatever the TTLs say (a day, J9's default TTL).
pub const MAX_TTL: Duration = Duration::from_secs(86_400);

/// Sites of prefixes' services, by folded prefix, until they expire.
#[derive(Debug)]
pub struct ServiceCache {
    entries: Mutex<HashMap<String, Entry>>,
    capacity: usize,
}

#[derive(Debug, Clone)]
struct Entry {
    sites: Vec<SiteInfo>,
    expires: Instant,
}

impl Default for ServiceCache {
    fn default() -> Self {
        ServiceCache::with_capacity(DEFAULT_CAPACITY)
    }
}

impl ServiceCache {
    /// A cache of at most `capacity` prefixes (at least one).
    pub fn with_capacity(capacity: usize) -> Self {
        ServiceCache {
            entries: Mutex::default(),
            capacity: capacity.max(1),
        }
    }

    /// The most prefixes it holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// How many prefixes it holds now, expired ones included.
    pub fn len(&self) -> usize {
        self.entries().len()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The sites of `prefix` (folded) if known and not expired at `now`.
    pub fn get(&self, prefix: &str, now: Instant) -> Option<Vec<SiteInfo>> {
        let mut entries = self.entries();
        match entries.get(prefix) {
            Some(entry) if entry.expires > now => Some(entry.sites.clone()),
            Some(_) => {
                entries.remove(prefix);
                None
            }
            None => None,
        }
    }

    /// Remembers `sites` for `prefix` (folded) until `now + ttl`; nothing for a zero TTL.
    pub fn insert(&self, prefix: &str, sites: Vec<SiteInfo>, ttl: Duration, now: Instant) {
        if ttl.is_zero() {
            return;
        }
        let mut entries = self.entries();
        if !entries.contains_key(prefix) && entries.len() >= self.capacity {
            entries.retain(|_, entry| entry.expires > now);
            if entries.len() >= self.capacity
                && let Some(soonest) = entries
                    .iter()
                    .min_by_key(|(_, entry)| entry.expires)
                    .map(|(key, _)| key.clone())
            {
                entries.remove(&soonest);
            }
        }
        let expires = now + ttl.min(MAX_TTL);
        entries.insert(prefix.to_owned(), Entry { sites, expires });
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// How long `values` may be cached: the shortest of their TTLs (relative ones from
/// now, absolute ones until their time), at most [`MAX_TTL`].
pub fn shortest_ttl<'a>(values: impl IntoIterator<Item = &'a HandleValue>) -> Duration {
    let now = unix_now();
    values
        .into_iter()
        .map(|value| match value.ttl {
            Ttl::Relative(seconds) => Duration::from_secs(u64::from(seconds)),
            Ttl::Absolute(at) => Duration::from_secs(u64::from(at.saturating_sub(now))),
        })
        .min()
        .unwrap_or(MAX_TTL)
        .min(MAX_TTL)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::values::{HashOption, SiteFlags};

    fn site(serial: u16) -> SiteInfo {
        SiteInfo {
            data_format_version: SiteInfo::DATA_FORMAT_VERSION,
            protocol_major: 2,
            protocol_minor: 11,
            serial_number: serial,
            flags: SiteFlags::PRIMARY,
            hash_option: HashOption::ByHandle,
            hash_filter: String::new(),
            attributes: Vec::new(),
            servers: Vec::new(),
        }
    }

    #[test]
    fn an_entry_is_served_until_its_ttl_runs_out() {
        let cache = ServiceCache::default();
        let start = Instant::now();
        cache.insert("10.5555", vec![site(1)], Duration::from_secs(2), start);
        let before = start + Duration::from_millis(1999);
        assert_eq!(cache.get("10.5555", before).unwrap()[0].serial_number, 1);
        assert!(
            cache
                .get("10.5555", start + Duration::from_secs(2))
                .is_none()
        );
        assert!(cache.is_empty(), "an expired entry is dropped when met");
        cache.insert("10.5555", vec![site(2)], Duration::ZERO, start);
        assert!(cache.is_empty(), "a zero TTL is not cached");
    }

    #[test]
    fn a_full_cache_drops_the_expired_then_the_soonest_to_expire() {
        let cache = ServiceCache::with_capacity(3);
        let now = Instant::now();
        let secs = Duration::from_secs;
        cache.insert("a", vec![site(1)], secs(1), now);
        cache.insert("b", vec![site(2)], secs(30), now);
        cache.insert("c", vec![site(3)], secs(20), now);
        let later = now + secs(5);
        cache.insert("d", vec![site(4)], secs(60), later);
        assert_eq!(cache.len(), 3);
        assert!(
            cache.get("a", later).is_none(),
            "the expired one went first"
        );
        cache.insert("e", vec![site(5)], secs(60), later);
        assert_eq!(cache.len(), 3);
        assert!(
            cache.get("c", later).is_none(),
            "then the one expiring soonest"
        );
        for kept in ["b", "d", "e"] {
            assert!(cache.get(kept, later).is_some(), "{kept}");
        }
        cache.insert("b", vec![site(6)], secs(60), later);
        assert_eq!(cache.len(), 3, "replacing an entry drops nothing");
        assert_eq!(cache.get("b", later).unwrap()[0].serial_number, 6);
    }

    #[test]
    fn the_shortest_ttl_decides() {
        let with_ttl = |ttl| HandleValue {
            ttl,
            ..HandleValue::new(1, "HS_SITE", vec![])
        };
        let values = [with_ttl(Ttl::Relative(300)), with_ttl(Ttl::Relative(2))];
        assert_eq!(shortest_ttl(&values), Duration::from_secs(2));
        let past = [with_ttl(Ttl::Absolute(1))];
        assert_eq!(shortest_ttl(&past), Duration::ZERO);
        let long = [with_ttl(Ttl::Relative(u32::MAX))];
        assert_eq!(shortest_ttl(&long), MAX_TTL);
        assert_eq!(shortest_ttl(&[]), MAX_TTL);
    }
}
