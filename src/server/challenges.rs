//! Challenge-response on the Handle protocol edge (digest §8.1): the book of pending
//! challenges, each with the request it holds back.
//!
//! Owns [`Challenges`] and [`Pending`]. An administrative request from a caller who
//! has not authenticated is answered with a challenge and kept here; the answer (OC
//! 200) must come from the same address within the configured lifetime, once. The
//! original request is then carried out as the identity that answered.

use std::net::IpAddr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::auth::challenge::DEFAULT_CAPACITY;
use crate::auth::{AuthError, Challenge, ChallengeBook, ChallengeId};
use crate::codec::{Message, OpCode, OpFlags, Request, RequestDigest};

use super::codes::Refusal;
use super::exchange::Exchange;

/// A request held back until its challenge is answered.
#[derive(Debug)]
pub struct Pending {
    /// Where it came from: only an answer from there is taken.
    address: IpAddr,
    /// Its operation.
    pub opcode: OpCode,
    /// Its flags (OverwriteWhenExists and the like apply to it, not to the answer).
    pub flags: OpFlags,
    /// The request.
    pub request: Request,
    /// The session it was sent in, which becomes the answerer's.
    pub session: Option<u32>,
}

/// The challenges a node has sent and waits to see answered.
#[derive(Debug)]
pub struct Challenges {
    book: Mutex<ChallengeBook<Pending>>,
}

impl Challenges {
    /// An empty book whose challenges live `lifetime`.
    pub fn new(lifetime: Duration) -> Self {
        Challenges {
            book: Mutex::new(ChallengeBook::new(DEFAULT_CAPACITY, lifetime)),
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
            opcode: request.opcode(),
            flags: exchange.flags(),
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
