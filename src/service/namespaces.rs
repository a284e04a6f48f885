//! The parsed HS_NAMESPACE values (and cited templates) of recent derivations, so
//! that a template-derived resolution does not parse XML and compile expressions each
//! time.
//!
//! Owns [`NamespaceCache`]: parsed namespaces by the exact octets of the value they
//! were parsed from (a changed value is another key; nothing is ever stale), at most
//! [`MAX_CACHED_NAMESPACES`] entries and [`MAX_CACHED_NAMESPACE_OCTETS`] octets in
//! all, the least recently used dropped first. An entry is counted at twice its XML
//! (the key, and the rules parsed from it) and its compiled expressions at their
//! bound ([`Namespace::expression_octets`]). Anyone allowed to write a prefix handle
//! can grow it, hence both bounds. A value that does not parse is not kept (writes
//! refuse such values, so they are rare). Pure: no store, no network.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::values::namespace::{Namespace, NamespaceError};

/// The most parsed namespaces kept.
pub const MAX_CACHED_NAMESPACES: usize = 1024;
/// The most octets kept, in all, each namespace counted by [`counted_octets`]: room
/// for 64 namespaces of two expressions at their bound, or for 256 with none at
/// 64 KiB of XML (the most one may take).
pub const MAX_CACHED_NAMESPACE_OCTETS: usize = 64 * 1024 * 1024;

/// The octets a namespace parsed from `xml` is counted at (see the module docs).
fn counted_octets(xml: &[u8], namespace: &Namespace) -> usize {
    2 * xml.len() + namespace.expression_octets()
}

/// Parsed namespaces by their XML, bounded (see the module docs).
#[derive(Debug, Default)]
pub struct NamespaceCache {
    entries: Mutex<Entries>,
}

#[derive(Debug, Default)]
struct Entries {
    by_xml: HashMap<Box<[u8]>, Entry>,
    /// The octets of XML held.
    octets: usize,
    /// Counts uses: an entry's `used` is the count at its last use.
    uses: u64,
}

#[derive(Debug)]
struct Entry {
    namespace: Arc<Namespace>,
    /// Its [`counted_octets`].
    octets: usize,
    used: u64,
}

impl NamespaceCache {
    /// `xml` parsed: kept from an earlier parse of the same octets, or parsed now
    /// and kept.
    pub fn parsed(&self, xml: &[u8]) -> Result<Arc<Namespace>, NamespaceError> {
        if let Some(namespace) = self.entries().get(xml) {
            return Ok(namespace);
        }
        let namespace = Arc::new(Namespace::parse(xml)?);
        self.entries().insert(xml, Arc::clone(&namespace));
        Ok(namespace)
    }

    fn entries(&self) -> MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Entries {
    fn get(&mut self, xml: &[u8]) -> Option<Arc<Namespace>> {
        self.uses += 1;
        let entry = self.by_xml.get_mut(xml)?;
        entry.used = self.uses;
        Some(Arc::clone(&entry.namespace))
    }

    fn insert(&mut self, xml: &[u8], namespace: Arc<Namespace>) {
        let octets = counted_octets(xml, &namespace);
        if octets > MAX_CACHED_NAMESPACE_OCTETS || self.by_xml.contains_key(xml) {
            return;
        }
        while self.by_xml.len() >= MAX_CACHED_NAMESPACES
            || self.octets + octets > MAX_CACHED_NAMESPACE_OCTETS
        {
            self.drop_least_recently_used();
        }
        self.uses += 1;
        self.octets += octets;
        let entry = Entry {
            namespace,
            octets,
            used: self.uses,
        };
        self.by_xml.insert(xml.into(), entry);
    }

    /// Drops the entry used longest ago: a scan, as it runs only when a parse (far
    /// dearer) is to be kept in a full cache.
    fn drop_least_recently_used(&mut self) {
        let oldest = self
            .by_xml
            .iter()
            .min_by_key(|(_, entry)| entry.used)
            .map(|(xml, _)| xml.clone());
        let Some(dropped) = oldest.and_then(|oldest| self.by_xml.remove(&oldest)) else {
            return;
        };
        self.octets -= dropped.octets;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How many parsed namespaces `cache` keeps, and the octets they are counted at.
    fn len_and_octets(cache: &NamespaceCache) -> (usize, usize) {
        let entries = cache.entries();
        (entries.by_xml.len(), entries.octets)
    }

    fn xml(n: usize, pad: usize) -> Vec<u8> {
        let padding = " ".repeat(pad);
        format!(r#"<namespace>{padding}<template delimiter="@{n}"/></namespace>"#).into_bytes()
    }

    #[test]
    fn a_namespace_is_parsed_once_and_a_bad_one_not_kept() {
        let cache = NamespaceCache::default();
        let first = cache.parsed(&xml(1, 0)).expect("parses");
        let again = cache.parsed(&xml(1, 0)).expect("parses");
        assert!(Arc::ptr_eq(&first, &again));
        assert_eq!(again.delimiter(), Some("@1"));
        assert!(cache.parsed(b"<broken").is_err());
        assert_eq!(len_and_octets(&cache), (1, 2 * xml(1, 0).len()));
    }

    #[test]
    fn entries_are_bounded_and_the_least_recently_used_dropped() {
        let cache = NamespaceCache::default();
        let kept = cache.parsed(&xml(0, 0)).expect("parses");
        let once = cache.parsed(&xml(1, 0)).expect("parses");
        for n in 2..MAX_CACHED_NAMESPACES + 10 {
            cache.parsed(&xml(n, 0)).expect("parses");
            // Namespace 0 is used all along; the others are used once each.
            cache.parsed(&xml(0, 0)).expect("parses");
        }
        assert_eq!(len_and_octets(&cache).0, MAX_CACHED_NAMESPACES);
        assert!(Arc::ptr_eq(
            &kept,
            &cache.parsed(&xml(0, 0)).expect("parses")
        ));
        let parsed_again = cache.parsed(&xml(1, 0)).expect("parses");
        assert!(
            !Arc::ptr_eq(&once, &parsed_again),
            "namespace 1 was dropped"
        );
        assert_eq!(len_and_octets(&cache).0, MAX_CACHED_NAMESPACES);
    }

    #[test]
    fn octets_are_bounded() {
        let cache = NamespaceCache::default();
        let pad = 60 * 1024;
        let each = 2 * xml(0, pad).len();
        for n in 0..MAX_CACHED_NAMESPACE_OCTETS / each + 10 {
            cache.parsed(&xml(n, pad)).expect("parses");
        }
        let (entries, octets) = len_and_octets(&cache);
        assert!(octets <= MAX_CACHED_NAMESPACE_OCTETS, "{octets}");
        assert_eq!(entries, MAX_CACHED_NAMESPACE_OCTETS / each);
    }

    #[test]
    fn expressions_are_counted_at_their_bound() {
        let with_two = |n: usize| {
            let test = r#"<if test="matches" expression="[0-9]+"><notfound/></if>"#;
            format!(r#"<template delimiter="@{n}">{test}{test}</template>"#).into_bytes()
        };
        let cache = NamespaceCache::default();
        let first = cache.parsed(&with_two(0)).expect("parses");
        let each = 2 * with_two(0).len() + first.expression_octets();
        assert!(first.expression_octets() > 0);
        for n in 1..MAX_CACHED_NAMESPACE_OCTETS / each + 10 {
            cache.parsed(&with_two(n)).expect("parses");
        }
        let (entries, octets) = len_and_octets(&cache);
        assert!(octets <= MAX_CACHED_NAMESPACE_OCTETS, "{octets}");
        assert_eq!(entries, MAX_CACHED_NAMESPACE_OCTETS / each);
    }
}
