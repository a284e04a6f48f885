//! The answers a caching resolver holds: by [`CacheKey`] (folded handle and the value
//! selection asked for), each until its expiry, within a bound in bytes, the least
//! recently used dropped first.
//!
//! Owns [`AnswerCache`], [`CacheKey`], [`Answer`] and the size an entry is counted
//! at ([`entry_size`]): its key's and values' octets, each heap block's allocator
//! rounding and header, and the fixed parts of the maps' slots. Pure: the caller
//! gives the time and holds the lock.

use std::collections::{BTreeMap, HashMap};
use std::mem::size_of;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::names::Handle;
use crate::service::HandleRecord;
use crate::values::{HandleValue, ValueReference, ValueSelection};

/// What one resolution asked for: the handle (folded, as handles compare) and the
/// selection (indexes sorted, types folded and sorted, repeats dropped), so that
/// spellings of one request share an entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CacheKey {
    handle: String,
    indexes: Vec<u32>,
    types: Vec<String>,
}

impl CacheKey {
    /// The key of a resolution of `handle` picking `selection`.
    pub fn new(handle: &Handle, selection: &ValueSelection) -> Self {
        let mut indexes: Vec<u32> = selection.indexes.iter().map(|index| index.0).collect();
        indexes.sort_unstable();
        indexes.dedup();
        let mut types: Vec<String> = selection
            .types
            .iter()
            .map(|name| name.to_ascii_uppercase())
            .collect();
        types.sort_unstable();
        types.dedup();
        CacheKey {
            handle: handle.key().to_owned(),
            indexes,
            types,
        }
    }

    /// Bytes the key takes: itself and its heap blocks.
    fn size(&self) -> usize {
        size_of::<CacheKey>()
            + heap_block(self.handle.len())
            + heap_block(self.indexes.len() * size_of::<u32>())
            + heap_block(self.types.len() * size_of::<String>())
            + self
                .types
                .iter()
                .map(|t| heap_block(t.len()))
                .sum::<usize>()
    }
}

/// What the handle's service answered, as the cache keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The values picked (shared: a hit copies them out once, for its reply).
    Values(Arc<HandleRecord>),
    /// No such handle (or no service for its prefix).
    HandleNotFound,
    /// The handle has no value the selection picks.
    ValuesNotFound,
}

impl Answer {
    /// Whether it says something is missing.
    pub fn is_negative(&self) -> bool {
        !matches!(self, Answer::Values(_))
    }

    /// Bytes its values take (none for a negative answer).
    fn size(&self) -> usize {
        match self {
            Answer::Values(record) => {
                size_of::<HandleRecord>()
                    + heap_block(record.display.len())
                    + heap_block(record.values.len() * size_of::<HandleValue>())
                    + record.values.iter().map(value_heap).sum::<usize>()
            }
            Answer::HandleNotFound | Answer::ValuesNotFound => 0,
        }
    }
}

/// The heap blocks one value holds beyond its own slot in the list.
fn value_heap(value: &HandleValue) -> usize {
    heap_block(value.value_type.len())
        + heap_block(value.data.len())
        + heap_block(value.references.len() * size_of::<ValueReference>())
        + value
            .references
            .iter()
            .map(|r| heap_block(r.handle.len()))
            .sum::<usize>()
}

/// Bytes the allocator takes for a block of `len` octets: nothing for an empty one,
/// else the length rounded up to 16 plus a 16-octet header (glibc's malloc).
fn heap_block(len: usize) -> usize {
    if len == 0 {
        0
    } else {
        len.next_multiple_of(16) + 16
    }
}

/// Bytes an entry of `key` holding `answer` is counted at: the key (held once, shared
/// by both maps), the answer, and each map's slot (the hash map's at its least load,
/// 7/16 just after it doubled, with its control octet, so that the count is never
/// below what the map holds; the recency map's at half-full nodes).
pub fn entry_size(key: &CacheKey, answer: &Answer) -> usize {
    let hash_slot = (size_of::<(Arc<CacheKey>, Entry)>() + 1) * 16 / 7;
    let recency_slot = size_of::<(u64, Arc<CacheKey>)>() * 2;
    let shared_key = 2 * size_of::<usize>() + 16;
    hash_slot + recency_slot + shared_key + key.size() + answer.size()
}

#[derive(Debug)]
struct Entry {
    answer: Answer,
    expires: Instant,
    size: usize,
    used: u64,
}

/// What an insertion did to the cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Inserted {
    /// Whether the answer was kept (not when its TTL is zero or it alone is larger
    /// than the bound).
    pub kept: bool,
    /// Least recently used entries dropped to make room.
    pub evicted: usize,
}

/// Answers by key until they expire, at most `max_bytes` of them by [`entry_size`].
#[derive(Debug)]
pub struct AnswerCache {
    entries: HashMap<Arc<CacheKey>, Entry>,
    /// Keys by last use, oldest first.
    recency: BTreeMap<u64, Arc<CacheKey>>,
    clock: u64,
    bytes: usize,
    max_bytes: usize,
}

impl AnswerCache {
    /// An empty cache holding at most `max_bytes`.
    pub fn new(max_bytes: usize) -> Self {
        AnswerCache {
            entries: HashMap::new(),
            recency: BTreeMap::new(),
            clock: 0,
            bytes: 0,
            max_bytes,
        }
    }

    /// Bytes held now.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Entries held now, expired ones not yet met included.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The answer for `key` if held and not expired at `now`, marked as just used;
    /// an expired one is dropped.
    pub fn get(&mut self, key: &CacheKey, now: Instant) -> Option<Answer> {
        let entry = self.entries.get(key)?;
        if entry.expires <= now {
            self.remove(key);
            return None;
        }
        self.clock += 1;
        let (used, clock) = (entry.used, self.clock);
        if let Some(shared) = self.recency.remove(&used) {
            self.recency.insert(clock, shared);
        }
        let entry = self.entries.get_mut(key)?;
        entry.used = clock;
        Some(entry.answer.clone())
    }

    /// Holds `answer` for `key` until `now + ttl`, replacing what was held for it and
    /// dropping the least recently used entries until it fits.
    pub fn insert(
        &mut self,
        key: CacheKey,
        answer: Answer,
        ttl: Duration,
        now: Instant,
    ) -> Inserted {
        self.remove(&key);
        let size = entry_size(&key, &answer);
        if ttl.is_zero() || size > self.max_bytes {
            return Inserted::default();
        }
        let mut evicted = 0;
        while self.bytes + size > self.max_bytes {
            let Some((_, oldest)) = self.recency.pop_first() else {
                break;
            };
            if let Some(dropped) = self.entries.remove(&oldest) {
                self.bytes -= dropped.size;
                evicted += 1;
            }
        }
        self.clock += 1;
        let key = Arc::new(key);
        self.recency.insert(self.clock, Arc::clone(&key));
        let entry = Entry {
            answer,
            expires: now + ttl,
            size,
            used: self.clock,
        };
        self.entries.insert(key, entry);
        self.bytes += size;
        Inserted {
            kept: true,
            evicted,
        }
    }

    fn remove(&mut self, key: &CacheKey) {
        if let Some(entry) = self.entries.remove(key) {
            self.recency.remove(&entry.used);
            self.bytes -= entry.size;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> CacheKey {
        CacheKey::new(&Handle::parse(name).unwrap(), &ValueSelection::default())
    }

    fn values(url: &str) -> Answer {
        Answer::Values(Arc::new(HandleRecord {
            display: "A/x".into(),
            values: vec![HandleValue::new(1, "URL", url)],
        }))
    }

    const TTL: Duration = Duration::from_secs(60);

    #[test]
    fn spellings_of_one_request_share_a_key() {
        let handle = Handle::parse("ab/C").unwrap();
        let picked = ValueSelection {
            indexes: vec![crate::values::ValueIndex(2), crate::values::ValueIndex(1)],
            types: vec!["url".into(), "EMAIL".into(), "URL".into()],
        };
        let same = ValueSelection {
            indexes: vec![crate::values::ValueIndex(1), crate::values::ValueIndex(2)],
            types: vec!["Email".into(), "url".into()],
        };
        let other = Handle::parse("AB/c").unwrap();
        assert_eq!(
            CacheKey::new(&handle, &picked),
            CacheKey::new(&other, &same)
        );
        assert_ne!(
            CacheKey::new(&handle, &picked),
            CacheKey::new(&handle, &ValueSelection::default())
        );
    }

    #[test]
    fn the_size_counts_keys_and_values() {
        let small = entry_size(&key("A/x"), &values("https://e.org/"));
        let long_url = format!("https://e.org/{}", "p".repeat(1000));
        let large = entry_size(&key("A/x"), &values(&long_url));
        assert!(large >= small + 1000, "{small} {large}");
        let long_key = key(&format!("A/{}", "k".repeat(500)));
        assert!(entry_size(&long_key, &Answer::HandleNotFound) >= 500);
        assert!(entry_size(&key("A/x"), &Answer::HandleNotFound) < small);
    }

    #[test]
    fn the_bound_in_bytes_drops_the_least_recently_used() {
        let now = Instant::now();
        let one = entry_size(&key("A/1"), &values("https://e.org/1"));
        let mut cache = AnswerCache::new(3 * one + one / 2);
        for n in 1..=3 {
            let inserted = cache.insert(
                key(&format!("A/{n}")),
                values(&format!("https://e.org/{n}")),
                TTL,
                now,
            );
            assert_eq!(
                inserted,
                Inserted {
                    kept: true,
                    evicted: 0
                }
            );
        }
        assert_eq!(cache.bytes(), 3 * one);
        assert!(
            cache.get(&key("A/1"), now).is_some(),
            "A/1 is now the latest used"
        );
        let inserted = cache.insert(key("A/4"), values("https://e.org/4"), TTL, now);
        assert_eq!(
            inserted,
            Inserted {
                kept: true,
                evicted: 1
            }
        );
        assert!(
            cache.get(&key("A/2"), now).is_none(),
            "the least recently used went"
        );
        for kept in ["A/1", "A/3", "A/4"] {
            assert!(cache.get(&key(kept), now).is_some(), "{kept}");
        }
        assert_eq!((cache.len(), cache.bytes()), (3, 3 * one));
        let huge = values(&"x".repeat(4 * one));
        let refused = cache.insert(key("A/5"), huge, TTL, now);
        assert_eq!(
            refused,
            Inserted::default(),
            "larger than the bound: not kept"
        );
        assert_eq!(cache.len(), 3);
    }

    #[test]
    fn an_answer_lasts_its_ttl_and_is_replaced_in_place() {
        let now = Instant::now();
        let mut cache = AnswerCache::new(1 << 20);
        cache.insert(
            key("A/x"),
            values("https://old/"),
            Duration::from_secs(2),
            now,
        );
        let before = now + Duration::from_millis(1999);
        assert_eq!(cache.get(&key("a/X"), before), Some(values("https://old/")));
        assert_eq!(cache.get(&key("A/x"), now + Duration::from_secs(2)), None);
        assert!(
            cache.is_empty() && cache.bytes() == 0,
            "an expired entry is dropped"
        );
        cache.insert(key("A/x"), values("https://old/"), TTL, now);
        cache.insert(key("A/x"), Answer::HandleNotFound, TTL, now);
        assert_eq!(cache.get(&key("A/x"), now), Some(Answer::HandleNotFound));
        assert_eq!(
            cache.bytes(),
            entry_size(&key("A/x"), &Answer::HandleNotFound)
        );
        let zero = cache.insert(key("A/y"), values("https://y/"), Duration::ZERO, now);
        assert!(!zero.kept, "a zero TTL is not cached");
    }
}
