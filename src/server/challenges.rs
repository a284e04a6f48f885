//! Challenge-response on the Handle protocol edge (digest §8.1): the book of pending
//! challenges, each with the request it holds back.
//!
//! Owns [`Challenges`] and [`Pending`]. An administrative request from a caller who
//! has not authenticated is answered with a challenge and kept here; the answer (OC
//! 200) must come from the same address within the configured lifetime, once. The
//! original request is then carried out as the identity that answered.
//!
//! Each transport has a book of its own ([`STREAM_LIMITS`] for TCP, the smaller
//! [`DATAGRAM_LIMITS`] for UDP, whose source addresses anyone can forge), bounded in
//! entries and octets in all and per source address: a flood of datagrams cannot
//! take the book an administrator's TCP connection is challenged from, and one
//! source only ever recycles its own challenges.

use std::net::IpAddr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::auth::challenge::{BookLimits, Held};
use crate::auth::{AuthError, Challenge, ChallengeBook, ChallengeId};
use crate::codec::{Message, OpCode, OpFlags, Request, RequestDigest};

use super::codes::Refusal;
use super::exchange::Exchange;

/// The book of challenges sent over TCP: the defaults (10,000 challenges holding at
/// most 256 MiB; 64 and 16 MiB per source address).
pub const STREAM_LIMITS: BookLimits = BookLimits {
    capacity: 10_000,
    bytes: 256 << 20,
    per_source: 64,
    per_source_bytes: 16 << 20,
};

/// The book of challenges sent over UDP: 1,000 holding at most 16 MiB; 16 and
/// 1 MiB per source address.
pub const DATAGRAM_LIMITS: BookLimits = BookLimits {
    capacity: 1_000,
    bytes: 16 << 20,
    per_source: 16,
    per_source_bytes: 1 << 20,
};

/// Octets a pending challenge costs besides its request's own.
const ENTRY_OVERHEAD: usize = 256;

/// A request held back until its challenge is answered.
#[derive(Debug)]
pub struct Pending {
    /// Where it came from: only an answer from there is taken.
    address: IpAddr,
    /// What it weighs in the book: its octets as received, and the entry's own.
    weight: usize,
    /// Its operation.
    pub opcode: OpCode,
    /// Its flags (OverwriteWhenExists and the like apply to it, not to the answer).
    pub flags: OpFlags,
    /// Its RequestId, the client's name for it.
    pub request_name: u32,
    /// The request.
    pub request: Request,
    /// The session it was sent in, which becomes the answerer's.
    pub session: Option<u32>,
}

impl Held for Pending {
    type Source = IpAddr;

    fn source(&self) -> IpAddr {
        self.address
    }

    fn weight(&self) -> usize {
        self.weight
    }
}

/// The challenges a node has sent over one transport and waits to see answered.
#[derive(Debug)]
pub struct Challenges {
    book: Mutex<ChallengeBook<Pending>>,
}

impl Challenges {
    /// An empty book holding what `limits` allow, its challenges living `lifetime`.
    pub fn new(limits: BookLimits, lifetime: Duration) -> Self {
        Challenges {
            book: Mutex::new(ChallengeBook::new(limits, lifetime)),
        }
    }

    /// The 402 challenging `request`, whose header and body were `raw`, received from
    /// `address` in `session` (if any: the challenge then carries the session's id);
    /// or the error that stopped it (a full book: busy).
    pub fn challenge(
        &self,
        address: IpAddr,
        exchange: &Exchange,
        raw: &[u8],
        session: Option<u32>,
        request: Request,
    ) -> Message {
        let version = exchange.version();
        let digest = RequestDigest::for_version(version, raw);
        let pending = Pending {
            address,
            weight: raw.len() + ENTRY_OVERHEAD,
            opcode: request.opcode(),
            flags: exchange.flags(),
            request_name: exchange.request_name(),
            request,
            session,
        };
        let mut book = self.book.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        let issued = match session {
            Some(session) => book.issue_in_session(session, digest, version, now, pending),
            None => book.issue(digest, version, now, pending),
        };
        match issued {
            Ok(challenge) => {
                let body = challenge.body.clone();
                exchange.challenge(challenge.id.0, body.request_digest, body.nonce)
            }
            Err(error) => Refusal::from(error).into_message(exchange),
        }
    }

    /// Takes the challenge `id` answered from `address`: once, within its lifetime.
    pub fn take(&self, id: u32, address: IpAddr) -> Result<(Challenge, Pending), AuthError> {
        let mut book = self.book.lock().unwrap_or_else(PoisonError::into_inner);
        book.take_if(ChallengeId(id), Instant::now(), |pending| {
            pending.address == address
        })
    }
}
