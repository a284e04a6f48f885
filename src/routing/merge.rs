//! Calls every replica set answers for its own handles: listing a prefix's handles,
//! counting them, listing prefixes and searching by value, asked of every set that
//! owns slots and merged.
//!
//! Listing pages: each set is asked for `limit` handles after `after`; the pages are
//! merged in folded-key order and cut at `limit`, so the next page (after the last
//! handle returned) misses none and repeats none; search pages likewise, in index
//! order (matched value, then handle), the next after the last position. A set that cannot be reached makes
//! the whole answer [`Error::Unavailable`]: a listing with a set missing would look
//! complete. Without a ring, the node's own set answers alone.

use std::collections::{BTreeMap, BTreeSet};

use crate::names::{Handle, fold_key};
use crate::service::{Caller, Error, Found, PrefixRecord, SearchPosition};
use crate::storage::Slot;
use crate::values::SearchQuery;

use super::forward::unexpected;
use super::router::Router;
use super::wire::{Answer, ForwardCall, MAX_PAGE, run_local};

impl Router {
    /// The answers of every set owning slots to `call` (of this node's set alone
    /// without a ring), in set order.
    async fn ask_every_set(&self, call: ForwardCall) -> Result<Vec<Answer>, Error> {
        let map = self.forwarder.map()?;
        let local = self.local.borrow().clone();
        if map.slot_count() == 0 {
            let local = local.ok_or(Error::NoSet)?;
            return Ok(vec![run_local(&local.service, &call, None).await?]);
        }
        let owners: BTreeSet<_> = map.slots.iter().copied().collect();
        let mut answers = Vec::with_capacity(owners.len());
        for owner in owners {
            let answer = match &local {
                Some(set) if set.id == owner => run_local(&set.service, &call, None).await?,
                _ => {
                    // Any slot of the set names it in an unavailable answer.
                    let slot = map.slots.iter().position(|set| *set == owner);
                    let slot = Slot(slot.and_then(|at| u32::try_from(at).ok()).unwrap_or(0));
                    let sent = self.forwarder.send(&map, slot, Some(owner), call.clone());
                    sent.await?
                }
            };
            answers.push(answer);
        }
        Ok(answers)
    }

    /// The handles under `prefix` held by every set, summed.
    pub(super) async fn count_everywhere(
        &self,
        caller: &Caller,
        prefix: &str,
    ) -> Result<u64, Error> {
        let call = ForwardCall::CountHandles {
            caller: caller.clone(),
            prefix: prefix.to_owned(),
        };
        let mut total: u64 = 0;
        for answer in self.ask_every_set(call).await? {
            match answer {
                Answer::Count(count) => total = total.saturating_add(count),
                other => return Err(unexpected(&other)),
            }
        }
        Ok(total)
    }

    /// Up to `limit` (at most [`MAX_PAGE`]) handles under `prefix` after `after`,
    /// merged from every set in folded-key order.
    pub(super) async fn list_everywhere(
        &self,
        caller: &Caller,
        prefix: &str,
        after: Option<&Handle>,
        limit: usize,
    ) -> Result<Vec<String>, Error> {
        let limit = u32::try_from(limit).unwrap_or(MAX_PAGE).min(MAX_PAGE);
        let call = ForwardCall::ListHandles {
            caller: caller.clone(),
            prefix: prefix.to_owned(),
            after: after.cloned(),
            limit,
        };
        let mut pages = Vec::new();
        for answer in self.ask_every_set(call).await? {
            match answer {
                Answer::Handles(page) => pages.push(page),
                other => return Err(unexpected(&other)),
            }
        }
        Ok(merge_pages(pages, usize::try_from(limit).unwrap_or(0)))
    }

    /// Up to `limit` (at most [`MAX_PAGE`]) handles matching `query` after `after`,
    /// merged from every set in index order.
    pub(super) async fn search_everywhere(
        &self,
        caller: &Caller,
        query: &SearchQuery,
        after: Option<&SearchPosition>,
        limit: usize,
    ) -> Result<Vec<Found>, Error> {
        let limit = u32::try_from(limit).unwrap_or(MAX_PAGE).min(MAX_PAGE);
        let call = ForwardCall::SearchHandles {
            caller: caller.clone(),
            query: query.clone(),
            after: after.cloned(),
            limit,
        };
        let mut merged = BTreeMap::new();
        for answer in self.ask_every_set(call).await? {
            match answer {
                Answer::Found(found) => {
                    for hit in found {
                        merged.entry(hit.position.clone()).or_insert(hit);
                    }
                }
                other => return Err(unexpected(&other)),
            }
        }
        let limit = usize::try_from(limit).unwrap_or(0);
        Ok(merged.into_values().take(limit).collect())
    }

    /// Every naming authority known to any set: one record per prefix (folded), its
    /// handle counts summed, homed when any set has it homed.
    pub(super) async fn prefixes_everywhere(
        &self,
        caller: &Caller,
    ) -> Result<Vec<PrefixRecord>, Error> {
        let call = ForwardCall::ListPrefixes {
            caller: caller.clone(),
        };
        let mut lists = Vec::new();
        for answer in self.ask_every_set(call).await? {
            match answer {
                Answer::Prefixes(list) => lists.push(list),
                other => return Err(unexpected(&other)),
            }
        }
        Ok(union_prefixes(lists))
    }
}

/// The first `limit` handles of `pages` (each in folded-key order) in folded-key
/// order, each once.
pub(super) fn merge_pages(pages: Vec<Vec<String>>, limit: usize) -> Vec<String> {
    let mut merged = BTreeMap::new();
    for display in pages.into_iter().flatten() {
        merged.entry(fold_key(&display)).or_insert(display);
    }
    merged.into_values().take(limit).collect()
}

/// One record per folded prefix of `lists`, in folded order: counts summed, homed
/// when any list has it homed, the first spelling seen.
pub(super) fn union_prefixes(lists: Vec<Vec<PrefixRecord>>) -> Vec<PrefixRecord> {
    let mut union: BTreeMap<String, PrefixRecord> = BTreeMap::new();
    for record in lists.into_iter().flatten() {
        let entry = union
            .entry(fold_key(&record.display))
            .or_insert_with(|| PrefixRecord {
                display: record.display.clone(),
                handle_count: 0,
                homed: false,
            });
        entry.handle_count = entry.handle_count.saturating_add(record.handle_count);
        entry.homed |= record.homed;
    }
    union.into_values().collect()
}
