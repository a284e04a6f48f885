//! Checking an answer to a challenge against the key of the identity that gave it,
//! wherever its handle lives (digest §8.1 step 4), and answering other servers' OC 201
//! for the secret keys held here.
//!
//! A key handle this service holds is checked here, for both key types, its values read
//! from the replica set owning its slot (module `records`). A key
//! handle under a prefix this store knows nothing of (no handle and not homed) belongs
//! to another service, found through the GHR by the [`Resolver`] when one is
//! configured: its HS_PUBKEY values are resolved there and the signature checked here;
//! an HS_SECKEY answer is sent there in an OC_VERIFY_RESPONSE, and that service says
//! whether it is right. Without a resolver, or for an identity handle missing under a
//! prefix of this store, the answer is refused with [`Error::KeyNotHeld`]
//! (RC_AUTHEN_ERROR, 406).
//!
//! A key handle this member's store lacks is looked up again once the store has
//! caught up with the primary (`key_values`), so a member that lags (or holds an
//! apply uncommitted for a few milliseconds) never refuses an identity the set
//! already holds: an administrator created through the primary, or the bootstrap
//! one just after `hdl cluster up` says ready, authenticates at once on every member.

use std::time::Instant;

use crate::auth::{
    AuthError, AuthType, Challenge, ChallengeAnswer, ChallengeBody, ChallengeId, Identity,
    verify_answer,
};
use crate::codec::{ProtocolVersion, VerifyRequest};
use crate::names::Handle;
use crate::resolver::Resolver;
use crate::values::{HandleValue, KnownType, ValueIndex, ValueSelection};

use super::{Error, Service};

impl Service {
    /// The identity that answered `challenge` with `answer`, if the answer verifies
    /// against a key of the key handle, held here or at its own service.
    pub(super) async fn identity_of_answer(
        &self,
        challenge: &Challenge,
        answer: &ChallengeAnswer,
    ) -> Result<Identity, Error> {
        let handle = Handle::parse(&answer.key_handle).map_err(|_| not_held(answer))?;
        if let Some(values) = self.key_values(&handle).await? {
            return self.check(challenge, answer, values).await;
        }
        let ours = self.knows_prefix(handle.prefix_key())?;
        match &self.resolver {
            Some(resolver) if !ours => {
                self.verify_elsewhere(resolver, &handle, challenge, answer)
                    .await
            }
            _ => Err(not_held(answer)),
        }
    }

    /// Every value of key handle `handle` ([`Service::values_of`]); one missing is
    /// looked up again after a fresh read, so that what this member has not applied
    /// (or holds uncommitted) yet is not taken for absent.
    async fn key_values(&self, handle: &Handle) -> Result<Option<Vec<HandleValue>>, Error> {
        if let Some(values) = self.values_of(handle).await? {
            return Ok(Some(values));
        }
        self.replica.ensure_fresh_read().await?;
        self.values_of(handle).await
    }

    /// Checks `answer` against `key_values` on the [`Verifier`](super::Verifier).
    async fn check(
        &self,
        challenge: &Challenge,
        answer: &ChallengeAnswer,
        key_values: Vec<HandleValue>,
    ) -> Result<Identity, Error> {
        let (challenge, answer) = (challenge.clone(), answer.clone());
        let checked = self
            .verifier
            .run(move || verify_answer(&challenge, &answer, &key_values))
            .await?;
        checked.map_err(Error::Authentication)
    }

    /// Whether `request` (an OC 201 from another server, in a message of `version`)
    /// holds a right answer for the HS_SECKEY it names in this service.
    pub(super) async fn verify_answer_held_here(
        &self,
        request: &VerifyRequest,
        version: ProtocolVersion,
    ) -> Result<bool, Error> {
        let key_handle = String::from_utf8_lossy(&request.key_handle).into_owned();
        let handle = Handle::parse(&key_handle).map_err(|_| Error::KeyNotHeld {
            handle: key_handle.clone(),
        })?;
        let values = self.key_values(&handle).await?.ok_or(Error::KeyNotHeld {
            handle: key_handle.clone(),
        })?;
        let (challenge, answer) = other_server_answer(request, key_handle, version);
        match self.check(&challenge, &answer, values).await {
            Ok(_identity) => Ok(true),
            Err(Error::Authentication(_)) => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// Checks `answer` with the help of the service that holds `handle`.
    async fn verify_elsewhere(
        &self,
        resolver: &Resolver,
        handle: &Handle,
        challenge: &Challenge,
        answer: &ChallengeAnswer,
    ) -> Result<Identity, Error> {
        let unreachable = |error| Error::KeyService {
            handle: answer.key_handle.clone(),
            reason: format!("{error}"),
        };
        match answer.auth_type {
            AuthType::PublicKey => {
                let selection = key_selection(answer.key_index);
                let values = resolver
                    .resolve(handle, &selection)
                    .await
                    .map_err(unreachable)?;
                self.check(challenge, answer, values).await
            }
            AuthType::SecretKey => {
                let request = VerifyRequest {
                    key_handle: answer.key_handle.as_bytes().to_vec(),
                    key_index: answer.key_index,
                    nonce: challenge.body.nonce.clone(),
                    digest: challenge.body.request_digest.clone(),
                    answer: answer.answer.clone(),
                };
                let valid = resolver
                    .verify_secret_answer(handle, request)
                    .await
                    .map_err(unreachable)?;
                if valid {
                    Ok(Identity {
                        handle: answer.key_handle.clone(),
                        index: answer.key_index,
                    })
                } else {
                    Err(Error::Authentication(AuthError::Mismatch {
                        handle: answer.key_handle.clone(),
                    }))
                }
            }
        }
    }
}

/// The challenge and the answer an OC 201 from another server (in a message of
/// `version`) carries for the HS_SECKEY of `key_handle`.
pub(super) fn other_server_answer(
    request: &VerifyRequest,
    key_handle: String,
    version: ProtocolVersion,
) -> (Challenge, ChallengeAnswer) {
    let challenge = Challenge {
        id: ChallengeId(0),
        body: ChallengeBody {
            request_digest: request.digest.clone(),
            nonce: request.nonce.clone(),
        },
        issued_at: Instant::now(),
        version,
    };
    let answer = ChallengeAnswer {
        auth_type: AuthType::SecretKey,
        key_handle,
        key_index: request.key_index,
        answer: request.answer.clone(),
    };
    (challenge, answer)
}

/// The values to resolve for a public key at `index` (0: every HS_PUBKEY).
fn key_selection(index: u32) -> ValueSelection {
    if index == 0 {
        ValueSelection {
            indexes: Vec::new(),
            types: vec![KnownType::HsPubkey.name().to_owned()],
        }
    } else {
        ValueSelection {
            indexes: vec![ValueIndex(index)],
            types: Vec::new(),
        }
    }
}

fn not_held(answer: &ChallengeAnswer) -> Error {
    Error::KeyNotHeld {
        handle: answer.key_handle.clone(),
    }
}

impl Service {
    /// The identity whose HS_SECKEY (at its index, or any index when it is 0) in this
    /// service equals `secret`: HTTP Basic authentication.
    pub(super) async fn identity_of_secret(
        &self,
        identity: &Identity,
        secret: &[u8],
    ) -> Result<Identity, Error> {
        let handle = Handle::parse(&identity.handle).map_err(|_| Error::KeyNotHeld {
            handle: identity.handle.clone(),
        })?;
        let values = self
            .key_values(&handle)
            .await?
            .ok_or_else(|| Error::KeyNotHeld {
                handle: identity.handle.clone(),
            })?;
        secret_identity(identity, &values, secret)
    }
}

/// The identity whose HS_SECKEY among `key_values` (at its index, or any index when
/// it is 0) equals `secret`.
pub(super) fn secret_identity(
    identity: &Identity,
    key_values: &[HandleValue],
    secret: &[u8],
) -> Result<Identity, Error> {
    key_values
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

/// Equality that takes the same time wherever the first difference is.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0, |acc, (x, y)| acc | (x ^ y)) == 0
}
