//! The client's answer to a challenge, the body of OC_CHALLENGE_RESPONSE (200), and
//! its verification against the key handle's values (digest §3.7, §8.1).
//!
//! Owns [`ChallengeAnswer`], [`AuthType`] and [`verify_answer`]. Depends on
//! [`super::public`], [`super::secret`], [`super::keys`] and [`crate::values`].
//!
//! Body layout: `AuthType Str ‖ KeyHandle Str ‖ KeyIndex u32 ‖ Answer Bytes`, every
//! octet accounted for.

use crate::codec::AuthAnswer;
use crate::values::{DecodeError, HandleValue, KnownType, Reader, Writer};

use super::challenge::Challenge;
use super::error::AuthError;
use super::keys::VerifyingKey;
use super::permissions::Identity;
use super::public::{PublicKeyAnswer, verify_public};
use super::secret::{SecretAnswer, verify_secret};

/// The longest `Answer` accepted (a PBKDF2 answer with the largest salt, or an RSA
/// signature under the largest key, fits well within it).
pub const MAX_ANSWER_LEN: usize = 2048;
/// The longest key handle accepted (as [`crate::names::MAX_HANDLE_LEN`]).
const MAX_KEY_HANDLE_LEN: usize = crate::names::MAX_HANDLE_LEN;

/// How the client proves who it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AuthType {
    /// `HS_PUBKEY`: a signature with the private key of an HS_PUBKEY value.
    PublicKey,
    /// `HS_SECKEY`: a MAC with the secret of an HS_SECKEY value.
    SecretKey,
}

impl AuthType {
    /// The wire name, which is also the value type of the key.
    pub fn name(self) -> &'static str {
        match self {
            AuthType::PublicKey => "HS_PUBKEY",
            AuthType::SecretKey => "HS_SECKEY",
        }
    }

    fn key_type(self) -> KnownType {
        match self {
            AuthType::PublicKey => KnownType::HsPubkey,
            AuthType::SecretKey => KnownType::HsSeckey,
        }
    }
}

/// The body of an OC_CHALLENGE_RESPONSE (200) request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ChallengeAnswer {
    /// How the client authenticates.
    pub auth_type: AuthType,
    /// The handle holding the client's key, e.g. `0.NA/10.1000`.
    pub key_handle: String,
    /// The index of the key value; 0 means any value of the right type (J9 ≥ 8).
    pub key_index: u32,
    /// The signature or MAC ([`PublicKeyAnswer`] or [`SecretAnswer`] octets).
    pub answer: Vec<u8>,
}

impl ChallengeAnswer {
    /// Decodes a whole OC 200 body.
    pub fn decode(body: &[u8]) -> Result<Self, AuthError> {
        let mut r = Reader::new(body);
        let wire = AuthAnswer::decode(&mut r)?;
        r.finish("challenge answer")?;
        ChallengeAnswer::from_wire(wire)
    }

    /// Checks the fields of a decoded OC 200 body: a known type, a UTF-8 key handle
    /// and answer within their bounds.
    pub fn from_wire(wire: AuthAnswer) -> Result<Self, AuthError> {
        let auth_type = match &wire.auth_type[..] {
            b"HS_PUBKEY" => AuthType::PublicKey,
            b"HS_SECKEY" => AuthType::SecretKey,
            other => {
                return Err(AuthError::UnknownAuthType {
                    auth_type: other.iter().copied().take(64).collect(),
                });
            }
        };
        if wire.key_handle.len() > MAX_KEY_HANDLE_LEN {
            return Err(AuthError::AnswerParameter {
                field: "key handle length",
                value: wire.key_handle.len() as u64,
            });
        }
        let key_handle = String::from_utf8(wire.key_handle).map_err(|_| {
            AuthError::Decode(DecodeError::Malformed {
                field: "key handle",
                reason: "not UTF-8",
            })
        })?;
        if wire.answer.len() > MAX_ANSWER_LEN {
            return Err(AuthError::AnswerParameter {
                field: "answer length",
                value: wire.answer.len() as u64,
            });
        }
        Ok(ChallengeAnswer {
            auth_type,
            key_handle,
            key_index: wire.key_index,
            answer: wire.answer,
        })
    }

    /// The wire body.
    pub fn to_wire(&self) -> AuthAnswer {
        AuthAnswer {
            auth_type: self.auth_type.name().as_bytes().to_vec(),
            key_handle: self.key_handle.as_bytes().to_vec(),
            key_index: self.key_index,
            answer: self.answer.clone(),
        }
    }

    /// The OC 200 body.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        self.to_wire().encode(&mut w);
        w.into_bytes()
    }
}

/// Checks `answer` to `challenge` against `key_values`, the values of
/// `answer.key_handle` (the caller resolves them, with the HS_SECKEY values when it
/// holds the handle itself; a secret key held elsewhere needs OC 201, §8.1).
///
/// Tries every value of the answer's key type at `key_index` (all of them when it is
/// 0) and returns the identity with the index of the key that verified, as J9 does
/// for index-0 authentication. A malformed answer fails before any key is tried; if
/// no key verifies, the result is [`AuthError::Mismatch`] when some key was usable,
/// else the last key's [`KeyError`](super::keys::KeyError), else [`AuthError::NoKey`].
pub fn verify_answer(
    challenge: &Challenge,
    answer: &ChallengeAnswer,
    key_values: &[HandleValue],
) -> Result<Identity, AuthError> {
    check_form(challenge, answer)?;
    let mut outcome = Err(AuthError::NoKey {
        handle: answer.key_handle.clone(),
        index: answer.key_index,
        auth_type: answer.auth_type.name(),
    });
    let candidates = key_values.iter().filter(|value| {
        value.known_type() == Some(answer.auth_type.key_type())
            && (answer.key_index == 0 || value.index.0 == answer.key_index)
    });
    for value in candidates {
        match check_key(challenge, answer, &value.data) {
            Ok(()) => {
                return Ok(Identity {
                    handle: answer.key_handle.clone(),
                    index: value.index.0,
                });
            }
            Err(mismatch @ AuthError::Mismatch { .. }) => outcome = Err(mismatch),
            Err(key_error) if !matches!(outcome, Err(AuthError::Mismatch { .. })) => {
                outcome = Err(key_error);
            }
            Err(_) => {}
        }
    }
    outcome
}

/// Fails unless the answer octets decode in the form of its type.
fn check_form(challenge: &Challenge, answer: &ChallengeAnswer) -> Result<(), AuthError> {
    match answer.auth_type {
        AuthType::PublicKey => PublicKeyAnswer::decode(&answer.answer).map(drop),
        AuthType::SecretKey => SecretAnswer::decode(&answer.answer, challenge.version).map(drop),
    }
}

/// Checks the answer against the data of one key value.
fn check_key(
    challenge: &Challenge,
    answer: &ChallengeAnswer,
    data: &[u8],
) -> Result<(), AuthError> {
    let handle = answer.key_handle.as_str();
    match answer.auth_type {
        AuthType::PublicKey => {
            let key = VerifyingKey::from_hs_pubkey(data)?;
            verify_public(&challenge.body, &answer.answer, &key, handle)
        }
        AuthType::SecretKey => verify_secret(
            &challenge.body,
            challenge.version,
            &answer.answer,
            data,
            handle,
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::auth::keys::KeyError;
    use crate::auth::keys::tests::{stranger_key, test_key};
    use crate::auth::public::sign_public;
    use crate::auth::secret::{SecretKey, answer_secret};
    use crate::codec::{ProtocolVersion, RequestDigest};
    use crate::values::known::hex;

    const V2_11: ProtocolVersion = ProtocolVersion::MAX_SUPPORTED;
    const ADMIN: &str = "0.NA/10.1000";

    fn challenge() -> Challenge {
        let digest = RequestDigest::for_version(V2_11, b"create 10.1000/1");
        Challenge::new(super::super::ChallengeId(9), digest, V2_11, Instant::now()).unwrap()
    }

    fn key_values() -> Vec<HandleValue> {
        vec![
            HandleValue::new(
                100,
                "HS_ADMIN",
                hex("0fff 0000000c 302e4e412f31302e31303030 0000012c"),
            ),
            HandleValue::new(299, "HS_PUBKEY", stranger_key().public_key().encode()),
            HandleValue::new(300, "HS_PUBKEY", test_key().public_key().encode()),
            HandleValue::new(301, "HS_SECKEY", b"s3cret".to_vec()),
            HandleValue::new(302, "HS_PUBKEY", b"garbage".to_vec()),
        ]
    }

    fn public_answer(index: u32) -> ChallengeAnswer {
        ChallengeAnswer {
            auth_type: AuthType::PublicKey,
            key_handle: ADMIN.into(),
            key_index: index,
            answer: sign_public(&challenge().body, V2_11, test_key()).unwrap(),
        }
    }

    #[test]
    fn body_matches_digest_layout() {
        // Digest §11.7: Str "HS_SECKEY" ‖ Str "0.NA/10.1000" ‖ 0000012c ‖ Bytes(53).
        let body = ChallengeAnswer {
            auth_type: AuthType::SecretKey,
            key_handle: ADMIN.into(),
            key_index: 300,
            answer: vec![0x22; 53],
        };
        let bytes = body.encode();
        let head =
            hex("00000009 48535f5345434b4559 0000000c 302e4e412f31302e31303030 0000012c 00000035");
        assert_eq!(&bytes[..head.len()], &head[..]);
        assert_eq!(bytes.len(), head.len() + 53);
        assert_eq!(ChallengeAnswer::decode(&bytes).unwrap(), body);
    }

    #[test]
    fn public_key_answers_verify_by_index_or_any() {
        let challenge = challenge();
        let mut answer = public_answer(300);
        answer.answer = sign_public(&challenge.body, V2_11, test_key()).unwrap();
        let identity = verify_answer(&challenge, &answer, &key_values()).unwrap();
        assert_eq!(
            identity,
            Identity {
                handle: ADMIN.into(),
                index: 300
            }
        );
        answer.key_index = 0;
        assert_eq!(
            verify_answer(&challenge, &answer, &key_values())
                .unwrap()
                .index,
            300
        );
    }

    #[test]
    fn a_wrong_or_missing_key_is_refused() {
        let challenge = challenge();
        let mut answer = public_answer(299);
        answer.answer = sign_public(&challenge.body, V2_11, test_key()).unwrap();
        assert!(matches!(
            verify_answer(&challenge, &answer, &key_values()),
            Err(AuthError::Mismatch { .. })
        ));
        answer.key_index = 302;
        assert!(matches!(
            verify_answer(&challenge, &answer, &key_values()),
            Err(AuthError::Key(KeyError::Decode(_)))
        ));
        answer.key_index = 301;
        assert!(matches!(
            verify_answer(&challenge, &answer, &key_values()),
            Err(AuthError::NoKey { index: 301, .. })
        ));
    }

    #[test]
    fn secret_key_answers_verify() {
        let challenge = challenge();
        let secret = SecretKey(b"s3cret".to_vec());
        let mut answer = ChallengeAnswer {
            auth_type: AuthType::SecretKey,
            key_handle: ADMIN.into(),
            key_index: 0,
            answer: answer_secret(&challenge.body, V2_11, &secret).unwrap(),
        };
        assert_eq!(
            verify_answer(&challenge, &answer, &key_values())
                .unwrap()
                .index,
            301
        );
        answer.answer =
            answer_secret(&challenge.body, V2_11, &SecretKey(b"nope".to_vec())).unwrap();
        assert!(matches!(
            verify_answer(&challenge, &answer, &key_values()),
            Err(AuthError::Mismatch { .. })
        ));
    }

    #[test]
    fn malformed_bodies_are_refused() {
        let mut other_type = public_answer(300);
        other_type.key_handle = "x".into();
        let mut bytes = other_type.encode();
        bytes[4..13].copy_from_slice(b"HS_FOOKEY");
        assert!(matches!(
            ChallengeAnswer::decode(&bytes),
            Err(AuthError::UnknownAuthType { .. })
        ));
        let mut trailing = public_answer(300).encode();
        trailing.push(0);
        assert!(matches!(
            ChallengeAnswer::decode(&trailing),
            Err(AuthError::Decode(_))
        ));
        let mut huge = public_answer(300);
        huge.answer = vec![0; MAX_ANSWER_LEN + 1];
        assert!(matches!(
            ChallengeAnswer::decode(&huge.encode()),
            Err(AuthError::AnswerParameter {
                field: "answer length",
                ..
            })
        ));
        let mut garbage = public_answer(300);
        garbage.answer = vec![1, 2, 3];
        assert!(matches!(
            verify_answer(&challenge(), &garbage, &key_values()),
            Err(AuthError::Decode(_))
        ));
    }
}
