//! Challenges: what a server sends with RC_AUTHEN_NEEDED (402), and the book of
//! challenges waiting for an answer (digest §8.1, §11.7).
//!
//! Owns [`Challenge`], its wire body [`ChallengeBody`], [`ChallengeId`] and
//! [`ChallengeBook`]. Pure: the nonce comes from `getrandom`, time is passed in.
//!
//! Invariants: a book never holds more than its capacity; a challenge is taken out
//! once (a replay of its id finds nothing) and never after its lifetime.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::time::{Duration, Instant};

use crate::codec::{Envelope, ProtocolVersion, RequestDigest};
use crate::values::{DecodeError, Reader, Writer};

use super::error::AuthError;

/// Octets of a fresh nonce (J9 sends 16; clients accept any length).
pub const NONCE_LEN: usize = 16;
/// The longest nonce a decoder accepts.
const MAX_NONCE_LEN: usize = 1024;
/// The version from which the digest comes first, with its hash-code octet.
const V2_1: ProtocolVersion = ProtocolVersion::new(2, 1);

/// The id of a challenge: the envelope SessionId of the 402 and of the answer (§8.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChallengeId(pub u32);

/// The body of an RC_AUTHEN_NEEDED response: what the client signs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ChallengeBody {
    /// The digest of the challenged request's header and body (§2.4).
    pub request_digest: RequestDigest,
    /// Random octets chosen by the server.
    pub nonce: Vec<u8>,
}

impl ChallengeBody {
    /// Appends the body as a message of `version` carries it: from 2.1
    /// `hash code ‖ digest ‖ Bytes nonce`, in 2.0 `Bytes nonce ‖ Bytes digest`.
    pub fn encode(&self, version: ProtocolVersion, w: &mut Writer) {
        if version >= V2_1 {
            self.request_digest.encode(w);
            w.bytes(&self.nonce);
        } else {
            w.bytes(&self.nonce);
            self.request_digest.encode(w);
        }
    }

    /// Reads a whole challenge body of a message of `version`; trailing octets are an
    /// error.
    pub fn decode(body: &[u8], version: ProtocolVersion) -> Result<Self, DecodeError> {
        let mut r = Reader::new(body);
        let (request_digest, nonce) = if version >= V2_1 {
            let digest = RequestDigest::decode(&mut r)?;
            (digest, r.bytes("challenge nonce")?)
        } else {
            let nonce = r.bytes("challenge nonce")?;
            (
                RequestDigest::OldFormat(r.bytes("request digest")?.to_vec()),
                nonce,
            )
        };
        if nonce.len() > MAX_NONCE_LEN {
            return Err(DecodeError::InvalidField {
                field: "challenge nonce length",
                value: nonce.len() as u64,
            });
        }
        r.finish("challenge body")?;
        Ok(ChallengeBody {
            request_digest,
            nonce: nonce.to_vec(),
        })
    }

    /// What an answer signs or MACs: `nonce ‖ digest`, the digest without its hash
    /// code (§8.2).
    pub fn signed_bytes(&self) -> Vec<u8> {
        [&self.nonce[..], self.request_digest.digest()].concat()
    }
}

/// The version whose answer formats apply to a challenge carried by `envelope`
/// (§8.4, J9 `SecretKeyAuthenticationInfo.authenticate`): the lower of the message's
/// version and the version it suggests (its own when it suggests none).
pub fn answer_formats_version(envelope: &Envelope) -> ProtocolVersion {
    envelope.version.min(envelope.suggested_version())
}

/// A challenge a server has sent and waits to see answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    /// Its id (the envelope SessionId).
    pub id: ChallengeId,
    /// What was sent.
    pub body: ChallengeBody,
    /// When it was issued (the caller's clock).
    pub issued_at: Instant,
    /// The version whose answer formats apply: the lower of the 402 message's
    /// version and the version it suggests (§8.4).
    pub version: ProtocolVersion,
}

impl Challenge {
    /// A challenge of the request whose digest is `request_digest`, with a fresh
    /// [`NONCE_LEN`]-octet nonce.
    pub fn new(
        id: ChallengeId,
        request_digest: RequestDigest,
        version: ProtocolVersion,
        issued_at: Instant,
    ) -> Result<Self, AuthError> {
        let mut nonce = vec![0; NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(AuthError::Random)?;
        Ok(Challenge {
            id,
            body: ChallengeBody {
                request_digest,
                nonce,
            },
            issued_at,
            version,
        })
    }
}

/// The highest id of a challenge issued outside a session. Ids above it
/// are left to sessions ([`ChallengeBook::issue_in_session`]): a challenge inside a
/// session carries the session's id, as the reference server's do, and the two must
/// never meet.
pub const MAX_COUNTED_ID: u32 = 0x00FF_FFFF;

/// Random ids drawn before a book gives up finding a free one.
const ID_ATTEMPTS: usize = 64;

/// How long a challenge may wait for its answer by default (J9 `max_auth_time`).
pub const DEFAULT_LIFETIME: Duration = Duration::from_secs(20);

/// What a book needs to know of what waits with a challenge.
pub trait Held {
    /// Who sent the challenged request: each source's share of the book is bounded.
    type Source: Eq + Hash + Clone;
    /// The request's source.
    fn source(&self) -> Self::Source;
    /// The octets it keeps alive while it waits.
    fn weight(&self) -> usize;
}

/// How much a book holds: in all and for one source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BookLimits {
    /// Challenges pending at once.
    pub capacity: usize,
    /// Octets held by the pending requests at once.
    pub bytes: usize,
    /// Challenges one source may have pending; its oldest makes room for its next.
    pub per_source: usize,
    /// Octets one source's pending requests may hold; likewise.
    pub per_source_bytes: usize,
}

impl Default for BookLimits {
    /// 10,000 challenges holding at most 256 MiB; 64 and 16 MiB per source.
    fn default() -> Self {
        BookLimits {
            capacity: 10_000,
            bytes: 256 << 20,
            per_source: 64,
            per_source_bytes: 16 << 20,
        }
    }
}

/// What one source has pending, oldest first.
#[derive(Debug, Default)]
struct Share {
    ids: VecDeque<ChallengeId>,
    bytes: usize,
}

/// The pending challenges of a server, each with what the caller needs to carry out
/// the challenged operation afterwards (`P`, e.g. the original request).
///
/// Bounded in entries and in octets held, in all and per source: a source that
/// reaches its share recycles its own oldest challenge, so no source can take the
/// book from the others.
#[derive(Debug)]
pub struct ChallengeBook<P: Held> {
    pending: HashMap<ChallengeId, (Challenge, P)>,
    shares: HashMap<P::Source, Share>,
    bytes: usize,
    limits: BookLimits,
    lifetime: Duration,
}

impl<P: Held> Default for ChallengeBook<P> {
    fn default() -> Self {
        ChallengeBook::new(BookLimits::default(), DEFAULT_LIFETIME)
    }
}

impl<P: Held> ChallengeBook<P> {
    /// An empty book holding what `limits` allow, each challenge for `lifetime`.
    pub fn new(limits: BookLimits, lifetime: Duration) -> Self {
        ChallengeBook {
            pending: HashMap::new(),
            shares: HashMap::new(),
            bytes: 0,
            limits,
            lifetime,
        }
    }

    /// How many challenges are pending (expired ones included until pruned).
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Whether no challenge is pending.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// The octets the pending requests hold.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Issues a challenge of the request with `request_digest`, remembering `pending`
    /// until it is answered, under a random id from 1 to [`MAX_COUNTED_ID`]. A
    /// source at its share first loses its own oldest challenge; a full book first
    /// drops expired challenges, then refuses ([`AuthError::TooManyChallenges`]).
    pub fn issue(
        &mut self,
        request_digest: RequestDigest,
        version: ProtocolVersion,
        now: Instant,
        pending: P,
    ) -> Result<&Challenge, AuthError> {
        self.make_room(&pending, now)?;
        let id = self.free_id()?;
        self.insert(id, request_digest, version, now, pending)
    }

    /// Issues a challenge of a request sent in session `session` (an id above
    /// [`MAX_COUNTED_ID`]): the challenge takes the session's id, and replaces a
    /// challenge still pending in that session (the reference server does the same).
    pub fn issue_in_session(
        &mut self,
        session: u32,
        request_digest: RequestDigest,
        version: ProtocolVersion,
        now: Instant,
        pending: P,
    ) -> Result<&Challenge, AuthError> {
        let id = ChallengeId(session);
        self.remove(id);
        self.make_room(&pending, now)?;
        self.insert(id, request_digest, version, now, pending)
    }

    /// Room for `pending`: its source's oldest challenges go while the source is at
    /// its share; then a full book drops expired challenges, and refuses if still
    /// full.
    fn make_room(&mut self, pending: &P, now: Instant) -> Result<(), AuthError> {
        let weight = pending.weight();
        let source = pending.source();
        while let Some(share) = self.shares.get(&source) {
            let over = share.ids.len() >= self.limits.per_source
                || share.bytes + weight > self.limits.per_source_bytes;
            let Some(&oldest) = share.ids.front().filter(|_| over) else {
                break;
            };
            self.remove(oldest);
        }
        if !self.fits(weight) {
            self.prune(now);
        }
        if self.fits(weight) && weight <= self.limits.per_source_bytes {
            Ok(())
        } else {
            Err(AuthError::TooManyChallenges {
                capacity: self.limits.capacity,
            })
        }
    }

    fn fits(&self, weight: usize) -> bool {
        self.pending.len() < self.limits.capacity && self.bytes + weight <= self.limits.bytes
    }

    fn insert(
        &mut self,
        id: ChallengeId,
        request_digest: RequestDigest,
        version: ProtocolVersion,
        now: Instant,
        pending: P,
    ) -> Result<&Challenge, AuthError> {
        let challenge = Challenge::new(id, request_digest, version, now)?;
        let weight = pending.weight();
        let share = self.shares.entry(pending.source()).or_default();
        share.ids.push_back(id);
        share.bytes += weight;
        self.bytes += weight;
        let (challenge, _) = self.pending.entry(id).or_insert((challenge, pending));
        Ok(challenge)
    }

    /// Takes `id` out of the book and out of its source's share.
    fn remove(&mut self, id: ChallengeId) -> Option<(Challenge, P)> {
        let (challenge, pending) = self.pending.remove(&id)?;
        let weight = pending.weight();
        self.bytes -= weight;
        let source = pending.source();
        if let Some(share) = self.shares.get_mut(&source) {
            share.ids.retain(|held| *held != id);
            share.bytes -= weight;
            if share.ids.is_empty() {
                self.shares.remove(&source);
            }
        }
        Some((challenge, pending))
    }

    /// A random id from 1 to [`MAX_COUNTED_ID`] not in use, so that nobody can tell
    /// which id the next challenge (someone else's) will carry.
    fn free_id(&self) -> Result<ChallengeId, AuthError> {
        (0..ID_ATTEMPTS)
            .map(|_| ChallengeId(rand::random_range(1..=MAX_COUNTED_ID)))
            .find(|id| !self.pending.contains_key(id))
            .ok_or(AuthError::TooManyChallenges {
                capacity: self.limits.capacity,
            })
    }

    /// Takes the challenge `id` out of the book, once: an unknown (or already
    /// answered) id is [`AuthError::UnknownChallenge`], one older than the lifetime
    /// [`AuthError::ChallengeExpired`] (and is dropped).
    pub fn take(&mut self, id: ChallengeId, now: Instant) -> Result<(Challenge, P), AuthError> {
        let (challenge, pending) = self.remove(id).ok_or(AuthError::UnknownChallenge { id })?;
        if self.is_expired(&challenge, now) {
            return Err(AuthError::ChallengeExpired { id });
        }
        Ok((challenge, pending))
    }

    /// As [`take`](Self::take), but only when `owns` accepts what is pending with the
    /// challenge: one answered by somebody else (e.g. from another address) is left
    /// in the book for its rightful answer and reported as
    /// [`AuthError::UnknownChallenge`].
    pub fn take_if(
        &mut self,
        id: ChallengeId,
        now: Instant,
        owns: impl FnOnce(&P) -> bool,
    ) -> Result<(Challenge, P), AuthError> {
        match self.pending.get(&id) {
            Some((_, pending)) if !owns(pending) => Err(AuthError::UnknownChallenge { id }),
            _ => self.take(id, now),
        }
    }

    /// Drops every expired challenge.
    pub fn prune(&mut self, now: Instant) {
        let expired: Vec<ChallengeId> = self
            .pending
            .iter()
            .filter(|(_, (challenge, _))| self.is_expired(challenge, now))
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            self.remove(id);
        }
    }

    fn is_expired(&self, challenge: &Challenge, now: Instant) -> bool {
        now.saturating_duration_since(challenge.issued_at) > self.lifetime
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::known::hex;

    /// Digest §11.7: the 53-octet body of the 402 answering an admin create.
    const BODY_HEX: &str = "03 b5e70ee022b841013d2e393e311b9193bc35b9678d0684cd7d05fd979c96194d
        00000010 a0a1a2a3a4a5a6a7a8a9aaabacadaeaf";
    const V2_11: ProtocolVersion = ProtocolVersion::MAX_SUPPORTED;

    fn vector_body() -> ChallengeBody {
        let bytes = hex(BODY_HEX);
        let mut digest = [0; 32];
        digest.copy_from_slice(&bytes[1..33]);
        ChallengeBody {
            request_digest: RequestDigest::Sha256(digest),
            nonce: (0xa0..=0xaf).collect(),
        }
    }

    #[test]
    fn body_matches_digest_vector() {
        let mut w = Writer::new();
        vector_body().encode(V2_11, &mut w);
        let bytes = w.into_bytes();
        assert_eq!(bytes.len(), 0x35);
        assert_eq!(bytes, hex(BODY_HEX));
        assert_eq!(ChallengeBody::decode(&bytes, V2_11).unwrap(), vector_body());
    }

    #[test]
    fn signed_bytes_are_nonce_then_raw_digest() {
        let signed = vector_body().signed_bytes();
        assert_eq!(signed.len(), 16 + 32);
        assert_eq!(&signed[..16], &vector_body().nonce[..]);
        assert_eq!(&signed[16..], &hex(BODY_HEX)[1..33]);
    }

    #[test]
    fn old_format_puts_the_nonce_first() {
        let body = ChallengeBody {
            request_digest: RequestDigest::OldFormat(vec![7; 16]),
            nonce: vec![1, 2],
        };
        let v2_0 = ProtocolVersion::new(2, 0);
        let mut w = Writer::new();
        body.encode(v2_0, &mut w);
        let bytes = w.into_bytes();
        assert_eq!(&bytes[..10], &hex("00000002 0102 00000010")[..]);
        assert_eq!(ChallengeBody::decode(&bytes, v2_0).unwrap(), body);
    }

    #[test]
    fn trailing_octets_and_huge_nonces_are_refused() {
        let mut bytes = hex(BODY_HEX);
        bytes.push(0);
        assert!(ChallengeBody::decode(&bytes, V2_11).is_err());
        let mut w = Writer::new();
        w.u8(3);
        w.raw(&[0; 32]);
        w.bytes(&[0; MAX_NONCE_LEN + 1]);
        assert!(matches!(
            ChallengeBody::decode(&w.into_bytes(), V2_11),
            Err(DecodeError::InvalidField { .. })
        ));
    }

    #[test]
    fn answer_formats_follow_the_lower_version() {
        let mut envelope = Envelope::new(ProtocolVersion::new(2, 10), 1);
        assert_eq!(
            answer_formats_version(&envelope),
            ProtocolVersion::new(2, 10)
        );
        envelope.suggested = ProtocolVersion::new(2, 6);
        assert_eq!(
            answer_formats_version(&envelope),
            ProtocolVersion::new(2, 6)
        );
        envelope.suggested = ProtocolVersion::new(0, 0);
        assert_eq!(
            answer_formats_version(&envelope),
            ProtocolVersion::new(2, 10)
        );
    }

    /// A request held in the tests: its source and its size.
    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Sent {
        from: u8,
        octets: usize,
    }

    impl Held for Sent {
        type Source = u8;
        fn source(&self) -> u8 {
            self.from
        }
        fn weight(&self) -> usize {
            self.octets
        }
    }

    fn sent(from: u8, octets: usize) -> Sent {
        Sent { from, octets }
    }

    /// Room for `capacity` challenges, each source for all of them.
    fn limits(capacity: usize) -> BookLimits {
        BookLimits {
            capacity,
            bytes: 1 << 20,
            per_source: capacity,
            per_source_bytes: 1 << 20,
        }
    }

    fn digest() -> RequestDigest {
        RequestDigest::for_version(V2_11, b"request")
    }

    #[test]
    fn a_challenge_is_taken_once() {
        let now = Instant::now();
        let mut book = ChallengeBook::<Sent>::default();
        let challenge = book
            .issue(digest(), V2_11, now, sent(1, 10))
            .unwrap()
            .clone();
        assert_eq!(challenge.body.nonce.len(), NONCE_LEN);
        let (taken, pending) = book.take(challenge.id, now).unwrap();
        assert_eq!((taken, pending), (challenge.clone(), sent(1, 10)));
        assert!(matches!(
            book.take(challenge.id, now),
            Err(AuthError::UnknownChallenge { id }) if id == challenge.id
        ));
        assert!(book.is_empty());
    }

    #[test]
    fn a_challenge_is_taken_only_by_its_owner() {
        let now = Instant::now();
        let mut book = ChallengeBook::<Sent>::default();
        let id = book.issue(digest(), V2_11, now, sent(1, 0)).unwrap().id;
        assert!(matches!(
            book.take_if(id, now, |owner| owner.from == 2),
            Err(AuthError::UnknownChallenge { .. })
        ));
        assert_eq!(
            book.take_if(id, now, |owner| owner.from == 1).unwrap().1,
            sent(1, 0)
        );
        assert!(book.take_if(id, now, |_| true).is_err());
    }

    #[test]
    fn nonces_and_ids_differ() {
        let now = Instant::now();
        let mut book = ChallengeBook::<Sent>::default();
        let a = book
            .issue(digest(), V2_11, now, sent(1, 0))
            .unwrap()
            .clone();
        let b = book
            .issue(digest(), V2_11, now, sent(1, 0))
            .unwrap()
            .clone();
        assert_ne!(a.id, b.id);
        assert_ne!(a.body.nonce, b.body.nonce);
        assert_ne!(a.id, ChallengeId(0));
    }

    #[test]
    fn an_expired_challenge_is_refused_and_dropped() {
        let now = Instant::now();
        let mut book = ChallengeBook::new(limits(10), Duration::from_secs(5));
        let id = book.issue(digest(), V2_11, now, sent(1, 0)).unwrap().id;
        let late = now + Duration::from_secs(6);
        assert!(matches!(
            book.take(id, late),
            Err(AuthError::ChallengeExpired { .. })
        ));
        assert!(book.is_empty());
        let id = book.issue(digest(), V2_11, now, sent(1, 0)).unwrap().id;
        assert!(book.take(id, now + Duration::from_secs(5)).is_ok());
    }

    #[test]
    fn a_full_book_drops_expired_challenges_then_refuses() {
        let now = Instant::now();
        let mut book = ChallengeBook::new(limits(2), DEFAULT_LIFETIME);
        book.issue(digest(), V2_11, now, sent(1, 0)).unwrap();
        book.issue(digest(), V2_11, now, sent(2, 0)).unwrap();
        assert!(matches!(
            book.issue(digest(), V2_11, now, sent(3, 0)),
            Err(AuthError::TooManyChallenges { capacity: 2 })
        ));
        let later = now + DEFAULT_LIFETIME + Duration::from_secs(1);
        book.issue(digest(), V2_11, later, sent(3, 0)).unwrap();
        assert_eq!(book.len(), 1);
    }

    #[test]
    fn ids_outside_sessions_are_random_and_below_session_ids() {
        let now = Instant::now();
        let mut book = ChallengeBook::<Sent>::default();
        let ids: Vec<u32> = (0..100)
            .map(|n| book.issue(digest(), V2_11, now, sent(n, 0)).unwrap().id.0)
            .collect();
        assert!(ids.iter().all(|&id| (1..=MAX_COUNTED_ID).contains(&id)));
        let distinct: std::collections::HashSet<_> = ids.iter().collect();
        assert_eq!(distinct.len(), 100, "ids in use are never reused");
        let steps = ids.windows(2).filter(|pair| pair[1] == pair[0] + 1).count();
        assert!(steps < 5, "ids do not count up: {ids:?}");
    }

    #[test]
    fn a_source_at_its_share_recycles_its_own_oldest_challenge() {
        let now = Instant::now();
        let limits = BookLimits {
            capacity: 10,
            bytes: 1000,
            per_source: 3,
            per_source_bytes: 500,
        };
        let mut book = ChallengeBook::new(limits, DEFAULT_LIFETIME);
        let other = book.issue(digest(), V2_11, now, sent(2, 10)).unwrap().id;
        let first = book.issue(digest(), V2_11, now, sent(1, 10)).unwrap().id;
        for _ in 0..100 {
            book.issue(digest(), V2_11, now, sent(1, 10)).unwrap();
        }
        assert_eq!(
            book.len(),
            4,
            "three of the flooding source's, one of the other's"
        );
        assert!(book.take(first, now).is_err(), "its oldest made room");
        assert!(
            book.take(other, now).is_ok(),
            "the other source keeps its challenge"
        );

        let big = book.issue(digest(), V2_11, now, sent(1, 400)).unwrap().id;
        book.issue(digest(), V2_11, now, sent(1, 400)).unwrap();
        assert!(
            book.take(big, now).is_err(),
            "octets count as well as entries"
        );
        assert_eq!(book.bytes(), 400);
        assert!(book.issue(digest(), V2_11, now, sent(3, 501)).is_err());
    }

    #[test]
    fn many_sources_fill_the_book_by_octets_too() {
        let now = Instant::now();
        let limits = BookLimits {
            capacity: 100,
            bytes: 1000,
            per_source: 10,
            per_source_bytes: 1000,
        };
        let mut book = ChallengeBook::new(limits, DEFAULT_LIFETIME);
        for from in 0..4 {
            book.issue(digest(), V2_11, now, sent(from, 250)).unwrap();
        }
        assert!(matches!(
            book.issue(digest(), V2_11, now, sent(9, 1)),
            Err(AuthError::TooManyChallenges { .. })
        ));
        let later = now + DEFAULT_LIFETIME + Duration::from_secs(1);
        book.issue(digest(), V2_11, later, sent(9, 1)).unwrap();
        assert_eq!((book.len(), book.bytes()), (1, 1));
    }
}
