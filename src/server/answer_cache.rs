//! Whole encoded answers to plain UDP resolutions, kept so that a repeated one is
//! answered with a copy: the request's octets are looked up, the kept datagram copied,
//! its RequestId and expiration time patched, and it is sent.
//!
//! Owns [`AnswerCache`]: what is plainly cacheable, the key, the bound, the eviction
//! and the invalidation protocol. It never reads the store and never builds an answer:
//! the UDP edge (module `udp`) looks requests up, and inserts what the responder
//! answered from this node's own store at once ([`crate::service::Answered::FromStore`]);
//! the node tells it of every store commit ([`AnswerCache::before_change`],
//! [`AnswerCache::after_change`]), through the storage layer's commit watch, which
//! this module does not know.
//!
//! **What is cached.** A request in one datagram, SessionId 0, no envelope flag (not
//! compressed, encrypted or truncated), sequence number 0, opcode RESOLUTION, header
//! flag PO set and AT, CT and ENC clear (an authoritative read goes through the
//! primary; a signed or sealed answer is not a copy), answered with RC 1 (success)
//! from this node's store at once (not derived by a template, not forwarded, not
//! referred) in one datagram. Everything else, and a request with PO clear (whose
//! answer may be a challenge), takes the normal path and is never inserted.
//!
//! **Key.** Every octet of the request the answer can depend on: the envelope's
//! version, flags and suggested version, the whole header and the whole body (handle,
//! index list, type list, any credential section). Only the RequestId (patched into
//! the answer) and the header's expiration time are left out; with RD set the
//! expiration is kept in the key, since the answer's request digest covers it. Two
//! requests of one key get byte-identical answers but for the RequestId and the
//! expiration, which [`AnswerCache::answer`] sets as the responder's `Exchange`
//! does: now plus `[handle] response_validity_secs`.
//!
//! **Bound.** `[handle] udp_answer_cache_entries` entries and
//! `udp_answer_cache_octets` octets (request, answer and a fixed overhead counted),
//! split evenly over [`SHARDS`] shards chosen by the folded handle, each under its own
//! lock, so the receiving loop and the reader threads seldom meet. A full shard evicts
//! by clock (second chance): a hit marks its entry, the hand clears marks until it
//! finds an unmarked one. Misses (not found, referrals, errors) are never inserted, so
//! a stranger asking for a million distinct names grows nothing; asking for a million
//! existing ones only turns the shards over.
//!
//! **Never stale.** A kept answer is what the normal path would answer now, because
//! every commit that may change an answer goes through this protocol, per shard, under
//! the shard's lock:
//! 1. before the commit starts ([`AnswerCache::before_change`]): the entries of the
//!    changed handles are dropped (of every handle, for a change the store cannot name
//!    handle by handle: slot states, the ring, documents such as the cluster map,
//!    snapshot installs, bulk puts), the shard's generation is bumped and its count of
//!    commits under way raised;
//! 2. the commit runs and becomes visible;
//! 3. after it ([`AnswerCache::after_change`]): the generation is bumped again and the
//!    count lowered.
//!
//! A miss notes the shard's generation ([`Ticket`]) before the responder reads the
//! store, and its answer is inserted only if, under the shard's lock, the generation is
//! unchanged and no commit is under way. So an entry inserted was read by a read that
//! began after the last commit touching its shard ended (step 3) and before the next
//! began (step 1): `Store::read` opens or shares a snapshot only as of a commit count
//! read at the call, and a shared snapshot is handed out only while the count is the
//! one it was opened at, so a read begun after step 3 sees that commit, and one begun
//! before it bumped the generation the insert checks. An entry inserted before step 1
//! is dropped by it. Between steps 1 and 3 a changed handle has no entry and gets none,
//! so no hit can return what the store held before a commit once the commit is
//! visible. What else an answer of RC 1 from the store rests on is in the store too
//! (the slot states `held_here` reads, the cluster map the router places a handle by,
//! in the metadata group's store, which is watched as well), or fixed while the node
//! runs (the site serial, the validity, the configuration: there is no reload); the
//! replica set a node answers for is set once, when it joins, before which no answer
//! was read from a store of its own. Prefix records (homing, handle counts) are not
//! reported: they change referrals and "not homed" answers, which are never kept.

use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::clock::unix_now;
use crate::codec::{ENVELOPE_LEN, Envelope, HEADER_LEN, MessageFlags, OpCode, OpFlags};

/// How many shards the entries are split over.
pub const SHARDS: usize = 64;

/// Octets counted for an entry besides its request and answer: the entry, the map
/// slots and the allocations' own overhead.
const ENTRY_OVERHEAD: usize = 128;

/// Where the RequestId sits in an envelope.
const REQUEST_ID: std::ops::Range<usize> = 8..12;

/// Where the header's expiration time sits in a message (after the envelope).
const EXPIRATION: std::ops::Range<usize> = ENVELOPE_LEN + 16..ENVELOPE_LEN + 20;

/// Where a request's header flags sit.
const FLAGS: std::ops::Range<usize> = ENVELOPE_LEN + 8..ENVELOPE_LEN + 12;

/// Where a request's opcode sits.
const OPCODE: std::ops::Range<usize> = ENVELOPE_LEN..ENVELOPE_LEN + 4;

/// Where a request's body starts: its handle's length, then the handle.
const BODY: usize = ENVELOPE_LEN + HEADER_LEN;

/// Flags a cached request must not carry.
const UNCACHED_FLAGS: OpFlags = OpFlags::AT.with(OpFlags::CT).with(OpFlags::ENC);

/// How much the cache may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnswerCacheLimits {
    /// The most answers kept; 0 keeps none.
    pub entries: usize,
    /// The most octets kept (requests, answers and overhead); 0 keeps none.
    pub octets: usize,
}

/// Kept answers to plain UDP resolutions (see the module docs).
#[derive(Debug)]
pub struct AnswerCache {
    shards: Box<[Mutex<Shard>]>,
    hashing: RandomState,
    validity_secs: u32,
}

/// A request that may be answered from the cache: where its entry would be, and the
/// generation of its shard when it was looked up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket {
    shard: usize,
    key_hash: u64,
    handle_hash: u64,
    generation: u64,
}

/// What a commit may change, as the cache is told it.
#[derive(Debug, Clone, Copy)]
pub enum Change<'a> {
    /// The handles of these folded keys.
    Handles(&'a [String]),
    /// Anything.
    Everything,
}

/// One shard: its entries, its indexes and its invalidation state.
#[derive(Debug, Default)]
struct Shard {
    entries: Vec<Option<Entry>>,
    free: Vec<usize>,
    by_key: HashMap<u64, usize>,
    by_handle: HashMap<u64, Vec<usize>>,
    octets: usize,
    hand: usize,
    generation: u64,
    changing: u32,
    most_entries: usize,
    most_octets: usize,
}

#[derive(Debug)]
struct Entry {
    key_hash: u64,
    handle_hash: u64,
    key: Box<[u8]>,
    answer: Box<[u8]>,
    referenced: bool,
}

impl Entry {
    fn octets(&self) -> usize {
        self.key.len() + self.answer.len() + ENTRY_OVERHEAD
    }
}

/// The octets of a request that make its key, in order (see the module docs).
#[derive(Debug, Clone, Copy)]
struct KeyParts<'a> {
    parts: [&'a [u8]; 4],
}

impl<'a> KeyParts<'a> {
    /// The key of `request`, when it is plainly cacheable (module docs); with its
    /// handle's octets.
    fn of(request: &'a [u8]) -> Option<(KeyParts<'a>, &'a [u8])> {
        let envelope = Envelope::peek(request).ok()?;
        let whole = ENVELOPE_LEN.checked_add(envelope.message_length as usize)?;
        let plain = envelope.flags == MessageFlags::NONE
            && envelope.session_id == 0
            && envelope.sequence_number == 0
            && request.len() == whole;
        if !plain || OpCode::from_u32(word(request, OPCODE)?) != OpCode::Resolution {
            return None;
        }
        let flags = OpFlags::from_bits(word(request, FLAGS)?);
        if !flags.contains(OpFlags::PO) || flags.bits() & UNCACHED_FLAGS.bits() != 0 {
            return None;
        }
        let handle_len = word(request, BODY..BODY + 4)? as usize;
        let handle = request.get(BODY + 4..(BODY + 4).checked_add(handle_len)?)?;
        let expiration: &[u8] = if flags.contains(OpFlags::RD) {
            &request[EXPIRATION]
        } else {
            &[]
        };
        let parts = [
            &request[..REQUEST_ID.start],
            &request[REQUEST_ID.end..EXPIRATION.start],
            expiration,
            &request[EXPIRATION.end..],
        ];
        Some((KeyParts { parts }, handle))
    }

    fn len(&self) -> usize {
        self.parts.iter().map(|part| part.len()).sum()
    }

    fn to_boxed(self) -> Box<[u8]> {
        self.parts.concat().into_boxed_slice()
    }

    /// Whether `stored` is this key.
    fn is(&self, stored: &[u8]) -> bool {
        if stored.len() != self.len() {
            return false;
        }
        let mut rest = stored;
        self.parts.iter().all(|part| {
            let (head, tail) = rest.split_at(part.len());
            rest = tail;
            head == *part
        })
    }
}

/// The big-endian word at `range` of `bytes`.
fn word(bytes: &[u8], range: std::ops::Range<usize>) -> Option<u32> {
    Some(u32::from_be_bytes(bytes.get(range)?.try_into().ok()?))
}

impl AnswerCache {
    /// A cache within `limits` whose answers expire `validity_secs` after they are
    /// sent; `None` when the limits keep nothing.
    pub fn new(limits: AnswerCacheLimits, validity_secs: u32) -> Option<AnswerCache> {
        if limits.entries == 0 || limits.octets == 0 {
            return None;
        }
        let shard = || {
            Mutex::new(Shard {
                most_entries: limits.entries.div_ceil(SHARDS),
                most_octets: limits.octets.div_ceil(SHARDS),
                ..Shard::default()
            })
        };
        Some(AnswerCache {
            shards: (0..SHARDS).map(|_| shard()).collect(),
            hashing: RandomState::new(),
            validity_secs,
        })
    }

    /// Writes into `out` the answer kept for `request` from `peer`'s, with its
    /// RequestId and expiration set: `Ok(())` on a hit. On a miss, the ticket to
    /// insert its answer with ([`AnswerCache::insert`]), when `request` is plainly
    /// cacheable; `Err(None)` when it is not.
    pub fn answer(&self, request: &[u8], out: &mut Vec<u8>) -> Result<(), Option<Ticket>> {
        let (key, handle) = KeyParts::of(request).ok_or(None)?;
        let handle_hash = self.handle_hash(handle);
        let key_hash = self.key_hash(&key);
        let shard_at = shard_of(handle_hash);
        let mut shard = self.shard(shard_at);
        let ticket = Ticket {
            shard: shard_at,
            key_hash,
            handle_hash,
            generation: shard.generation,
        };
        let Some(entry) = shard.get_mut(key_hash).filter(|entry| key.is(&entry.key)) else {
            return Err(Some(ticket));
        };
        entry.referenced = true;
        out.clear();
        out.extend_from_slice(&entry.answer);
        drop(shard);
        out[REQUEST_ID].copy_from_slice(&request[REQUEST_ID]);
        let expiration = unix_now().saturating_add(self.validity_secs);
        out[EXPIRATION].copy_from_slice(&expiration.to_be_bytes());
        Ok(())
    }

    /// Keeps `answer` (one datagram) to `request`, looked up with `ticket` before the
    /// store was read for it; nothing when a commit touching its shard began since
    /// (module docs). Whether it was kept.
    pub fn insert(&self, ticket: Ticket, request: &[u8], answer: &[u8]) -> bool {
        let Some((key, _)) = KeyParts::of(request) else {
            return false;
        };
        if answer.len() < EXPIRATION.end {
            return false;
        }
        let mut shard = self.shard(ticket.shard);
        if shard.generation != ticket.generation || shard.changing > 0 {
            return false;
        }
        shard.remove_key(ticket.key_hash);
        let entry = Entry {
            key_hash: ticket.key_hash,
            handle_hash: ticket.handle_hash,
            key: key.to_boxed(),
            answer: answer.into(),
            referenced: false,
        };
        shard.insert(entry)
    }

    /// Before a commit that may change `change` starts: drops what it may change and
    /// refuses insertions into its shards until [`AnswerCache::after_change`].
    pub fn before_change(&self, change: Change<'_>) {
        self.each_shard_of(change, |shard, handles| {
            shard.generation += 1;
            shard.changing += 1;
            match handles {
                Some(handles) => handles.iter().for_each(|&hash| shard.remove_handle(hash)),
                None => shard.clear(),
            }
        });
    }

    /// Once the commit [`AnswerCache::before_change`] was told of is over (visible, or
    /// failed).
    pub fn after_change(&self, change: Change<'_>) {
        self.each_shard_of(change, |shard, _| {
            shard.generation += 1;
            shard.changing = shard.changing.saturating_sub(1);
        });
    }

    /// How many answers are kept.
    pub fn len(&self) -> usize {
        (0..SHARDS).map(|at| self.shard(at).by_key.len()).sum()
    }

    /// Whether no answer is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Runs `each` on every shard `change` touches, with the handle hashes of it that
    /// shard holds (`None`: every handle).
    fn each_shard_of(&self, change: Change<'_>, mut each: impl FnMut(&mut Shard, Option<&[u64]>)) {
        match change {
            Change::Everything => (0..SHARDS).for_each(|at| each(&mut self.shard(at), None)),
            Change::Handles(keys) => {
                let mut by_shard: HashMap<usize, Vec<u64>> = HashMap::new();
                for key in keys {
                    let hash = self.handle_hash(key.as_bytes());
                    by_shard.entry(shard_of(hash)).or_default().push(hash);
                }
                for (at, hashes) in by_shard {
                    each(&mut self.shard(at), Some(&hashes));
                }
            }
        }
    }

    /// The hash of a handle's folded key (ASCII letters upper-cased, as the store
    /// folds them), from the handle as written or as folded.
    fn handle_hash(&self, handle: &[u8]) -> u64 {
        let mut hasher = self.hashing.build_hasher();
        let mut folded = [0u8; 64];
        for chunk in handle.chunks(folded.len()) {
            let folded = &mut folded[..chunk.len()];
            folded.copy_from_slice(chunk);
            folded.make_ascii_uppercase();
            hasher.write(folded);
        }
        hasher.finish()
    }

    fn key_hash(&self, key: &KeyParts<'_>) -> u64 {
        let mut hasher = self.hashing.build_hasher();
        for part in key.parts {
            hasher.write(part);
        }
        hasher.finish()
    }

    fn shard(&self, at: usize) -> MutexGuard<'_, Shard> {
        self.shards[at]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

fn shard_of(handle_hash: u64) -> usize {
    // The low bits pick the shard (SHARDS is a power of two).
    handle_hash.to_le_bytes()[0] as usize % SHARDS
}

impl Shard {
    fn get_mut(&mut self, key_hash: u64) -> Option<&mut Entry> {
        let at = *self.by_key.get(&key_hash)?;
        self.entries[at].as_mut()
    }

    /// Adds `entry`, evicting by clock until it fits; whether it fits at all.
    fn insert(&mut self, entry: Entry) -> bool {
        let octets = entry.octets();
        if octets > self.most_octets {
            return false;
        }
        while !self.by_key.is_empty()
            && (self.by_key.len() >= self.most_entries || self.octets + octets > self.most_octets)
        {
            self.evict_one();
        }
        let at = match self.free.pop() {
            Some(at) => at,
            None => {
                self.entries.push(None);
                self.entries.len() - 1
            }
        };
        self.octets += octets;
        self.by_key.insert(entry.key_hash, at);
        self.by_handle
            .entry(entry.handle_hash)
            .or_default()
            .push(at);
        self.entries[at] = Some(entry);
        true
    }

    /// Evicts the first entry the clock hand finds unmarked, clearing marks as it goes.
    fn evict_one(&mut self) {
        // Two turns at most: the first clears every mark.
        for _ in 0..2 * self.entries.len() {
            if self.by_key.is_empty() {
                return;
            }
            self.hand = (self.hand + 1) % self.entries.len();
            match &mut self.entries[self.hand] {
                Some(entry) if entry.referenced => entry.referenced = false,
                Some(_) => return self.remove_at(self.hand),
                None => {}
            }
        }
    }

    fn remove_key(&mut self, key_hash: u64) {
        if let Some(&at) = self.by_key.get(&key_hash) {
            self.remove_at(at);
        }
    }

    fn remove_handle(&mut self, handle_hash: u64) {
        for at in self.by_handle.remove(&handle_hash).unwrap_or_default() {
            self.remove_at(at);
        }
    }

    fn remove_at(&mut self, at: usize) {
        let Some(entry) = self.entries[at].take() else {
            return;
        };
        self.octets -= entry.octets();
        self.by_key.remove(&entry.key_hash);
        if let Some(places) = self.by_handle.get_mut(&entry.handle_hash) {
            places.retain(|&place| place != at);
            if places.is_empty() {
                self.by_handle.remove(&entry.handle_hash);
            }
        }
        self.free.push(at);
    }

    fn clear(&mut self) {
        self.entries.clear();
        self.free.clear();
        self.by_key.clear();
        self.by_handle.clear();
        self.octets = 0;
        self.hand = 0;
    }
}

#[cfg(test)]
#[path = "answer_cache_tests.rs"]
mod tests;
