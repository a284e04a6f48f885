//! The answer cache alone: keys, bounds, eviction, invalidation and the generation
//! check, on messages built with the codec.

use super::*;
use crate::codec::{
    Body, HandleValues, Header, Message, ProtocolVersion, Request, ResolutionRequest, Response,
    ResponseCode,
};
use crate::values::HandleValue;

const VALIDITY: u32 = 60;

fn cache(entries: usize, octets: usize) -> AnswerCache {
    AnswerCache::new(AnswerCacheLimits { entries, octets }, VALIDITY).unwrap()
}

/// A resolution request of `handle` for `types`, with `flags`, RequestId `id`,
/// expiration `expiration` and SessionId `session`.
struct Asked<'a> {
    handle: &'a str,
    types: &'a [&'a str],
    flags: OpFlags,
    id: u32,
    expiration: u32,
    session: u32,
}

impl Default for Asked<'_> {
    fn default() -> Self {
        Asked {
            handle: "10.1000/a",
            types: &[],
            flags: OpFlags::J9_DEFAULT,
            id: 1,
            expiration: 100,
            session: 0,
        }
    }
}

impl Asked<'_> {
    fn bytes(&self) -> Vec<u8> {
        let body = ResolutionRequest {
            handle: self.handle.as_bytes().to_vec(),
            indexes: Vec::new(),
            types: self.types.iter().map(|t| t.as_bytes().to_vec()).collect(),
        };
        let header = Header {
            flags: self.flags,
            expiration: self.expiration,
            ..Header::request(OpCode::Resolution, 0)
        };
        let envelope = Envelope {
            session_id: self.session,
            ..Envelope::new(ProtocolVersion::new(2, 10), self.id)
        };
        Message::new(envelope, header, Body::Request(Request::Resolution(body))).encode()
    }
}

/// An answer to a resolution of `handle` with RequestId `id`, as the responder encodes
/// one: one datagram.
fn answer(handle: &str, id: u32) -> Vec<u8> {
    let header = Header {
        response_code: ResponseCode::Success,
        flags: OpFlags::J9_DEFAULT.with(OpFlags::AT),
        expiration: 7,
        ..Header::request(OpCode::Resolution, 0)
    };
    let response = Response::Resolution(HandleValues {
        handle: handle.as_bytes().to_vec(),
        values: vec![HandleValue::new(1, "URL", "https://example.org/")],
    });
    let body = Body::Response {
        digest: None,
        response,
    };
    let envelope = Envelope::new(ProtocolVersion::new(2, 10), id);
    let datagrams = Message::new(envelope, header, body).encode_datagrams();
    assert_eq!(datagrams.len(), 1);
    datagrams.into_iter().next().unwrap()
}

/// Looks `request` up and keeps `answer` for it on a miss; the ticket it was kept with.
fn keep(cache: &AnswerCache, request: &[u8], answer: &[u8]) -> Ticket {
    let ticket = cache.answer(request, &mut Vec::new()).unwrap_err().unwrap();
    assert!(cache.insert(ticket, request, answer));
    ticket
}

fn hit(cache: &AnswerCache, request: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    cache.answer(request, &mut out).ok().map(|()| out)
}

#[test]
fn a_kept_answer_comes_back_with_the_new_request_id_and_a_fresh_expiration() {
    let cache = cache(100, 1 << 20);
    let kept = answer("10.1000/a", 1);
    keep(&cache, &Asked::default().bytes(), &kept);
    let again = Asked {
        id: 0xdead_beef,
        expiration: 555,
        ..Asked::default()
    };
    let before = unix_now();
    let copy = hit(&cache, &again.bytes()).expect("a hit");
    let decoded = Message::decode(&copy).unwrap();
    assert_eq!(decoded.envelope.request_id, 0xdead_beef);
    let expiration = decoded.header.expiration;
    assert!((before + VALIDITY..=unix_now() + VALIDITY).contains(&expiration));
    // Every other octet is the kept answer's.
    let mut expected = answer("10.1000/a", 0xdead_beef);
    expected[EXPIRATION].copy_from_slice(&expiration.to_be_bytes());
    assert_eq!(copy, expected);
}

#[test]
fn every_octet_an_answer_depends_on_is_in_the_key() {
    let cache = cache(100, 1 << 20);
    keep(&cache, &Asked::default().bytes(), &answer("10.1000/a", 1));
    let others = [
        Asked {
            types: &["URL"],
            ..Asked::default()
        },
        Asked {
            flags: OpFlags::J9_DEFAULT.without(OpFlags::REC),
            ..Asked::default()
        },
        Asked {
            handle: "10.1000/A",
            ..Asked::default()
        },
        Asked {
            handle: "10.1000/b",
            ..Asked::default()
        },
    ];
    for other in others {
        assert!(hit(&cache, &other.bytes()).is_none(), "{:?}", other.handle);
    }
    // The expiration a request carries is not the answer's business, unless the
    // answer's digest covers it (RD).
    let later = Asked {
        expiration: 999,
        ..Asked::default()
    };
    assert!(hit(&cache, &later.bytes()).is_some());
    let digested = Asked {
        flags: OpFlags::J9_DEFAULT.with(OpFlags::RD),
        ..Asked::default()
    };
    keep(&cache, &digested.bytes(), &answer("10.1000/a", 1));
    let digested_later = Asked {
        expiration: 999,
        ..digested
    };
    assert!(hit(&cache, &digested_later.bytes()).is_none());
}

#[test]
fn only_plain_resolutions_are_looked_up() {
    let cache = cache(100, 1 << 20);
    let flagged = |flags: OpFlags| Asked {
        flags,
        ..Asked::default()
    };
    let refused = [
        flagged(OpFlags::J9_DEFAULT.with(OpFlags::AT)).bytes(),
        flagged(OpFlags::J9_DEFAULT.with(OpFlags::CT)).bytes(),
        flagged(OpFlags::J9_DEFAULT.with(OpFlags::ENC)).bytes(),
        flagged(OpFlags::J9_DEFAULT.without(OpFlags::PO)).bytes(),
        Asked {
            session: 5,
            ..Asked::default()
        }
        .bytes(),
    ];
    for request in refused {
        assert_eq!(cache.answer(&request, &mut Vec::new()), Err(None));
    }
    let mut cut = Asked::default().bytes();
    cut.pop();
    assert_eq!(cache.answer(&cut, &mut Vec::new()), Err(None));
    let mut site_info = Asked::default().bytes();
    site_info[OPCODE].copy_from_slice(&OpCode::GetSiteInfo.to_u32().to_be_bytes());
    assert_eq!(cache.answer(&site_info, &mut Vec::new()), Err(None));
    assert!(
        AnswerCache::new(
            AnswerCacheLimits {
                entries: 0,
                octets: 1
            },
            1
        )
        .is_none()
    );
}

#[test]
fn a_million_names_stay_within_the_bounds() {
    let cache = cache(128, 1 << 20);
    let kept = answer("10.1000/a", 1);
    for n in 0..20_000 {
        let handle = format!("10.1000/{n}");
        let request = Asked {
            handle: &handle,
            ..Asked::default()
        };
        keep(&cache, &request.bytes(), &kept);
    }
    assert!(cache.len() <= 128, "{}", cache.len());
    let octets: usize = (0..SHARDS).map(|at| cache.shard(at).octets).sum();
    assert!(octets <= 1 << 20);

    let small = self::cache(1_000_000, SHARDS * 2048);
    for n in 0..20_000 {
        let handle = format!("10.1000/{n}");
        let request = Asked {
            handle: &handle,
            ..Asked::default()
        };
        let ticket = small.answer(&request.bytes(), &mut Vec::new()).unwrap_err();
        small.insert(ticket.unwrap(), &request.bytes(), &kept);
    }
    for at in 0..SHARDS {
        assert!(small.shard(at).octets <= 2048);
    }
}

#[test]
fn the_clock_evicts_an_entry_not_hit_since_its_last_turn() {
    let entry = |n: u64| Entry {
        key_hash: n,
        handle_hash: n,
        key: Box::new([]),
        answer: Box::new([]),
        referenced: false,
    };
    let mut shard = Shard {
        most_entries: 3,
        most_octets: usize::MAX,
        ..Shard::default()
    };
    for n in 0..3 {
        assert!(shard.insert(entry(n)));
    }
    shard.get_mut(0).unwrap().referenced = true;
    shard.get_mut(2).unwrap().referenced = true;
    assert!(shard.insert(entry(3)));
    assert!(shard.get_mut(1).is_none(), "the entry not hit goes");
    assert!(shard.get_mut(0).is_some() && shard.get_mut(2).is_some());
    assert_eq!(shard.by_key.len(), 3);
}

#[test]
fn a_change_drops_its_handles_answers_under_any_spelling_and_no_other() {
    let cache = cache(100, 1 << 20);
    let lower = Asked::default();
    let upper = Asked {
        handle: "10.1000/A",
        ..Asked::default()
    };
    let other = Asked {
        handle: "10.1000/b",
        ..Asked::default()
    };
    for asked in [&lower, &upper, &other] {
        keep(&cache, &asked.bytes(), &answer(asked.handle, 1));
    }
    let folded = ["10.1000/A".to_owned()];
    cache.before_change(Change::Handles(&folded));
    assert!(hit(&cache, &lower.bytes()).is_none());
    assert!(hit(&cache, &upper.bytes()).is_none());
    assert!(hit(&cache, &other.bytes()).is_some());
    cache.after_change(Change::Handles(&folded));

    cache.before_change(Change::Everything);
    cache.after_change(Change::Everything);
    assert!(cache.is_empty());
}

#[test]
fn an_answer_read_before_a_commit_is_not_kept_after_it() {
    let cache = cache(100, 1 << 20);
    let request = Asked::default().bytes();
    let folded = ["10.1000/A".to_owned()];
    let kept = answer("10.1000/a", 1);
    let ticket = |cache: &AnswerCache| {
        cache
            .answer(&request, &mut Vec::new())
            .unwrap_err()
            .unwrap()
    };

    // Looked up, then the store read, then a whole commit, then the insert: refused.
    let before = ticket(&cache);
    cache.before_change(Change::Handles(&folded));
    cache.after_change(Change::Handles(&folded));
    assert!(!cache.insert(before, &request, &kept));

    // Looked up while a commit is under way: refused during it and after it.
    cache.before_change(Change::Handles(&folded));
    let during = ticket(&cache);
    assert!(!cache.insert(during, &request, &kept));
    cache.after_change(Change::Handles(&folded));
    assert!(!cache.insert(during, &request, &kept));

    // A change of everything stops every shard's inserts the same way.
    let before = ticket(&cache);
    cache.before_change(Change::Everything);
    cache.after_change(Change::Everything);
    assert!(!cache.insert(before, &request, &kept));

    // Looked up after the commit: kept.
    keep(&cache, &request, &kept);
    assert!(hit(&cache, &request).is_some());
}

#[test]
fn a_change_of_another_shard_leaves_a_ticket_good() {
    let cache = cache(100, 1 << 20);
    let request = Asked::default().bytes();
    let ticket = cache
        .answer(&request, &mut Vec::new())
        .unwrap_err()
        .unwrap();
    let elsewhere: Vec<String> = (0..1000)
        .map(|n| format!("10.1000/OTHER{n}"))
        .filter(|key| shard_of(cache.handle_hash(key.as_bytes())) != ticket.shard)
        .take(3)
        .collect();
    cache.before_change(Change::Handles(&elsewhere));
    cache.after_change(Change::Handles(&elsewhere));
    assert!(cache.insert(ticket, &request, &answer("10.1000/a", 1)));
}
