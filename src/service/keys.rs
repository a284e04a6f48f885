//! Checking an answer to a challenge against the key handle held by this service
//! (digest §8.1 step 4).
//!
//! The key handle's values are read from this member's store, HS_SECKEY included, and
//! the answer is verified here, for both key types. A key handle this service does not
//! hold would need a resolution (HS_PUBKEY) or an OC_VERIFY_RESPONSE (HS_SECKEY) to
//! the service responsible for it; there is no client of other services (no GHR
//! look-up) yet, so such an answer is refused with [`Error::KeyNotHeld`]
//! (RC_AUTHEN_ERROR, 406).

use crate::auth::{AuthError, Challenge, ChallengeAnswer, Identity, verify_answer};
use crate::names::Handle;
use crate::values::{KnownType, ValueSelection};

use super::{Error, Service};

impl Service {
    /// The identity that answered `challenge` with `answer`, if the answer verifies
    /// against a key of the key handle in this member's store.
    pub fn verify_answer(
        &self,
        challenge: &Challenge,
        answer: &ChallengeAnswer,
    ) -> Result<Identity, Error> {
        let not_held = || Error::KeyNotHeld {
            handle: answer.key_handle.clone(),
        };
        let handle = Handle::parse(&answer.key_handle).map_err(|_| not_held())?;
        let record = self
            .store
            .read()?
            .get(&handle, &ValueSelection::all())?
            .ok_or_else(not_held)?;
        verify_answer(challenge, answer, &record.values).map_err(Error::Authentication)
    }
}

impl Service {
    /// The identity whose HS_SECKEY (at its index, or any index when it is 0) in this
    /// member's store equals `secret`: HTTP Basic authentication.
    pub fn verify_secret(&self, identity: &Identity, secret: &[u8]) -> Result<Identity, Error> {
        let handle = Handle::parse(&identity.handle).map_err(|_| Error::KeyNotHeld {
            handle: identity.handle.clone(),
        })?;
        let record = self
            .store
            .read()?
            .get(&handle, &ValueSelection::all())?
            .ok_or_else(|| Error::KeyNotHeld {
                handle: identity.handle.clone(),
            })?;
        record
            .values
            .iter()
            .filter(|value| value.known_type() == Some(KnownType::HsSeckey))
            .filter(|value| identity.index == 0 || value.index.0 == identity.index)
            .find(|value| constant_time_eq(&value.data, secret))
            .map(|value| Identity {
                handle: identity.handle.clone(),
                index: value.index.0,
            })
            .ok_or_else(|| {
                Error::Authentication(AuthError::Mismatch {
                    handle: identity.handle.clone(),
                })
            })
    }
}

/// Equality that takes the same time wherever the first difference is.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0, |acc, (x, y)| acc | (x ^ y)) == 0
}
