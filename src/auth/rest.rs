//! Answers to the challenge of the Handle.Net REST API (`HANDLE-NET-REFERENCE.md` §1.2,
//! "Authentication over REST"): the client signs or MACs `nonce ‖ cnonce`, the
//! server's nonce followed by its own.
//!
//! Owns [`RestAnswer`], [`RestProof`], [`RestAlgorithm`] and [`Pbkdf2Params`], with
//! the client side [`sign_rest`] and [`mac_rest`]. The REST challenge is the binary
//! protocol's with the client nonce in the place of the request digest: both are what
//! follows the nonce in the signed octets (digest §8.2), and J9's servlet verifies
//! exactly so. Verification is therefore [`super::answer::verify_answer`] unchanged:
//! the same key look-up, bounds (PBKDF2 parameters, signature length) and MACs.
//! Depends on [`super::answer`], [`super::public`], [`super::secret`], [`super::keys`]
//! and [`crate::codec`] (the digest type). Pure: the issue time is passed in;
//! randomness only for a client's PBKDF2 salt.

use std::time::Instant;

use crate::codec::{ProtocolVersion, RequestDigest};

use super::answer::{AuthType, ChallengeAnswer, MAX_ANSWER_LEN};
use super::challenge::{Challenge, ChallengeBody, ChallengeId};
use super::error::AuthError;
use super::keys::{SignatureHash, SigningKey};
use super::permissions::Identity;
use super::public::PublicKeyAnswer;
use super::secret::{SecretAnswer, SecretKey, answer_secret};

/// The longest client nonce accepted.
pub const MAX_CNONCE_LEN: usize = 1024;

/// The `alg` of a REST answer. J9 compares names ignoring case and punctuation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RestAlgorithm {
    /// `SHA1`: an RSA/DSA signature with SHA-1, or `SHA1(key ‖ m ‖ key)`.
    Sha1,
    /// `SHA256`: an RSA/DSA signature with SHA-256, or `SHA256(key ‖ m ‖ key)`.
    Sha256,
    /// `HMAC-SHA1(key, m)` (secret keys only).
    HmacSha1,
    /// `HMAC-SHA256(key, m)` (secret keys only).
    HmacSha256,
    /// `HMAC-SHA1(PBKDF2-HMAC-SHA1(key, salt, iterations, length), m)` (secret keys
    /// only).
    Pbkdf2HmacSha1,
}

impl RestAlgorithm {
    /// The algorithm a name stands for, ignoring case, `-` and `_`; `None` for
    /// anything else, MD5 included (we refuse a broken hash).
    pub fn from_name(name: &str) -> Option<Self> {
        let folded: String = name
            .chars()
            .filter(|c| !matches!(c, '-' | '_'))
            .map(|c| c.to_ascii_lowercase())
            .collect();
        match folded.as_str() {
            "sha" | "sha1" => Some(RestAlgorithm::Sha1),
            "sha256" | "sha2" => Some(RestAlgorithm::Sha256),
            "hmacsha1" => Some(RestAlgorithm::HmacSha1),
            "hmacsha256" => Some(RestAlgorithm::HmacSha256),
            "pbkdf2hmacsha1" | "pbkdf2withhmacsha1" => Some(RestAlgorithm::Pbkdf2HmacSha1),
            _ => None,
        }
    }

    /// The name clients send.
    pub fn name(self) -> &'static str {
        match self {
            RestAlgorithm::Sha1 => "SHA1",
            RestAlgorithm::Sha256 => "SHA256",
            RestAlgorithm::HmacSha1 => "HMAC-SHA1",
            RestAlgorithm::HmacSha256 => "HMAC-SHA256",
            RestAlgorithm::Pbkdf2HmacSha1 => "PBKDF2-HMAC-SHA1",
        }
    }
}

/// The `salt`, `iterations` and `length` (bits) of a PBKDF2 answer, bounded when the
/// answer is verified ([`super::secret::MAX_PBKDF2_ITERATIONS`] and friends).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Pbkdf2Params {
    /// The salt.
    pub salt: Vec<u8>,
    /// PBKDF2 iterations.
    pub iterations: u32,
    /// Derived-key length in bits.
    pub key_bits: u32,
}

/// The signature or MAC of a REST answer.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RestProof {
    /// `type="HS_PUBKEY"`.
    Public(PublicKeyAnswer),
    /// `type="HS_SECKEY"`.
    Secret(SecretAnswer),
}

impl RestProof {
    /// The proof of `auth_type` named by `alg`, with `signature` (and for PBKDF2 its
    /// parameters). Algorithms that do not fit the type and signatures over
    /// [`MAX_ANSWER_LEN`] are refused.
    pub fn new(
        auth_type: AuthType,
        alg: RestAlgorithm,
        signature: Vec<u8>,
        pbkdf2: Option<Pbkdf2Params>,
    ) -> Result<Self, AuthError> {
        if signature.len() > MAX_ANSWER_LEN {
            return Err(AuthError::AnswerParameter {
                field: "signature length",
                value: signature.len() as u64,
            });
        }
        let unsupported = || AuthError::UnsupportedAlgorithm {
            algorithm: alg.name().as_bytes().to_vec(),
        };
        let proof = match (auth_type, alg) {
            (AuthType::PublicKey, RestAlgorithm::Sha1 | RestAlgorithm::Sha256) => {
                let hash = if alg == RestAlgorithm::Sha1 {
                    SignatureHash::Sha1
                } else {
                    SignatureHash::Sha256
                };
                RestProof::Public(PublicKeyAnswer { hash, signature })
            }
            (AuthType::PublicKey, _) => return Err(unsupported()),
            (AuthType::SecretKey, RestAlgorithm::Sha1) => {
                RestProof::Secret(SecretAnswer::Sha1(signature))
            }
            (AuthType::SecretKey, RestAlgorithm::Sha256) => {
                RestProof::Secret(SecretAnswer::Sha256(signature))
            }
            (AuthType::SecretKey, RestAlgorithm::HmacSha1) => {
                RestProof::Secret(SecretAnswer::HmacSha1(signature))
            }
            (AuthType::SecretKey, RestAlgorithm::HmacSha256) => {
                RestProof::Secret(SecretAnswer::HmacSha256(signature))
            }
            (AuthType::SecretKey, RestAlgorithm::Pbkdf2HmacSha1) => {
                let params = pbkdf2.ok_or(AuthError::AnswerParameter {
                    field: "PBKDF2 salt, iterations and length (missing)",
                    value: 0,
                })?;
                RestProof::Secret(SecretAnswer::Pbkdf2 {
                    salt: params.salt,
                    iterations: params.iterations,
                    key_bits: params.key_bits,
                    mac: signature,
                })
            }
        };
        Ok(proof)
    }

    /// The `alg`, the signature or MAC, and the PBKDF2 parameters, as a client sends
    /// them; `None` for the one form REST cannot carry (the pre-2.1 MD5).
    pub fn parts(&self) -> Option<(RestAlgorithm, &[u8], Option<Pbkdf2Params>)> {
        let parts = match self {
            RestProof::Public(answer) => {
                let alg = match answer.hash {
                    SignatureHash::Sha1 => RestAlgorithm::Sha1,
                    SignatureHash::Sha256 => RestAlgorithm::Sha256,
                };
                (alg, &answer.signature[..], None)
            }
            RestProof::Secret(SecretAnswer::Sha1(mac)) => (RestAlgorithm::Sha1, &mac[..], None),
            RestProof::Secret(SecretAnswer::Sha256(mac)) => (RestAlgorithm::Sha256, &mac[..], None),
            RestProof::Secret(SecretAnswer::HmacSha1(mac)) => {
                (RestAlgorithm::HmacSha1, &mac[..], None)
            }
            RestProof::Secret(SecretAnswer::HmacSha256(mac)) => {
                (RestAlgorithm::HmacSha256, &mac[..], None)
            }
            RestProof::Secret(SecretAnswer::Pbkdf2 {
                salt,
                iterations,
                key_bits,
                mac,
            }) => {
                let params = Pbkdf2Params {
                    salt: salt.clone(),
                    iterations: *iterations,
                    key_bits: *key_bits,
                };
                (RestAlgorithm::Pbkdf2HmacSha1, &mac[..], Some(params))
            }
            RestProof::Secret(SecretAnswer::OldMd5(_) | SecretAnswer::Md5(_)) => return None,
        };
        Some(parts)
    }

    fn auth_type(&self) -> AuthType {
        match self {
            RestProof::Public(_) => AuthType::PublicKey,
            RestProof::Secret(_) => AuthType::SecretKey,
        }
    }

    fn encode(&self) -> Vec<u8> {
        match self {
            RestProof::Public(answer) => answer.encode(),
            RestProof::Secret(answer) => answer.encode(),
        }
    }
}

/// A client's answer: who it claims to be (`id`), its nonce (`cnonce`) and its proof.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RestAnswer {
    /// The identity claimed; index 0 means any key of the right type.
    pub identity: Identity,
    /// The client nonce.
    pub cnonce: Vec<u8>,
    /// The signature or MAC of `nonce ‖ cnonce`.
    pub proof: RestProof,
}

impl RestAnswer {
    /// The challenge this answers: the session's `nonce` with the answer's client nonce.
    pub fn challenge(&self, nonce: &[u8], issued_at: Instant) -> Challenge {
        Challenge {
            id: ChallengeId(0),
            body: body(nonce, &self.cnonce),
            issued_at,
            version: ProtocolVersion::MAX_SUPPORTED,
        }
    }

    /// The answer in the binary protocol's form, for [`super::answer::verify_answer`].
    pub fn challenge_answer(&self) -> ChallengeAnswer {
        ChallengeAnswer {
            auth_type: self.proof.auth_type(),
            key_handle: self.identity.handle.clone(),
            key_index: self.identity.index,
            answer: self.proof.encode(),
        }
    }
}

/// What the client signs: `nonce ‖ cnonce`, the cnonce in the digest's place.
fn body(nonce: &[u8], cnonce: &[u8]) -> ChallengeBody {
    ChallengeBody {
        request_digest: RequestDigest::OldFormat(cnonce.to_vec()),
        nonce: nonce.to_vec(),
    }
}

/// The client side: an RSA signature of `nonce ‖ cnonce` with SHA-256.
pub fn sign_rest(nonce: &[u8], cnonce: &[u8], key: &SigningKey) -> Result<RestProof, AuthError> {
    let hash = SignatureHash::Sha256;
    let signature = key.sign(hash, &body(nonce, cnonce).signed_bytes())?;
    Ok(RestProof::Public(PublicKeyAnswer { hash, signature }))
}

/// The client side: a MAC of `nonce ‖ cnonce` under `secret`, either the old
/// `SHA1(key ‖ m ‖ key)` ([`RestAlgorithm::Sha1`]) or what J9 clients send by default,
/// PBKDF2-HMAC-SHA1 with a fresh salt ([`RestAlgorithm::Pbkdf2HmacSha1`]).
pub fn mac_rest(
    nonce: &[u8],
    cnonce: &[u8],
    secret: &SecretKey,
    alg: RestAlgorithm,
) -> Result<RestProof, AuthError> {
    // The binary answer formats of the versions that use these MACs (digest §8.4).
    let version = match alg {
        RestAlgorithm::Sha1 => ProtocolVersion::new(2, 6),
        RestAlgorithm::Pbkdf2HmacSha1 => ProtocolVersion::MAX_SUPPORTED,
        _ => {
            return Err(AuthError::UnsupportedAlgorithm {
                algorithm: alg.name().as_bytes().to_vec(),
            });
        }
    };
    let octets = answer_secret(&body(nonce, cnonce), version, secret)?;
    Ok(RestProof::Secret(SecretAnswer::decode(
        &octets,
        ProtocolVersion::MAX_SUPPORTED,
    )?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::answer::verify_answer;
    use crate::auth::keys::tests::{stranger_key, test_key};
    use crate::values::HandleValue;

    const NONCE: &[u8] = &[0x5a; 16];
    const CNONCE: &[u8] = &[0xc3; 16];

    fn admin(index: u32) -> Identity {
        Identity {
            handle: "0.NA/TEST".into(),
            index,
        }
    }

    fn key_values() -> Vec<HandleValue> {
        vec![
            HandleValue::new(300, "HS_PUBKEY", test_key().public_key().encode()),
            HandleValue::new(301, "HS_SECKEY", b"s3cret".to_vec()),
        ]
    }

    fn verify(answer: &RestAnswer, nonce: &[u8]) -> Result<Identity, AuthError> {
        let challenge = answer.challenge(nonce, Instant::now());
        verify_answer(&challenge, &answer.challenge_answer(), &key_values())
    }

    fn answer(proof: RestProof) -> RestAnswer {
        RestAnswer {
            identity: admin(0),
            cnonce: CNONCE.to_vec(),
            proof,
        }
    }

    #[test]
    fn a_public_key_signature_of_nonce_and_cnonce_verifies() {
        let signed = answer(sign_rest(NONCE, CNONCE, test_key()).unwrap());
        assert_eq!(verify(&signed, NONCE).unwrap(), admin(300));
        assert!(matches!(
            verify(&signed, &[0; 16]),
            Err(AuthError::Mismatch { .. })
        ));
        let stranger = answer(sign_rest(NONCE, CNONCE, stranger_key()).unwrap());
        assert!(matches!(
            verify(&stranger, NONCE),
            Err(AuthError::Mismatch { .. })
        ));
    }

    #[test]
    fn sha1_sandwich_matches_the_reference_formula() {
        use sha1::{Digest, Sha1};
        let proof = mac_rest(
            NONCE,
            CNONCE,
            &SecretKey(b"s3cret".to_vec()),
            RestAlgorithm::Sha1,
        )
        .unwrap();
        let expected = Sha1::digest([&b"s3cret"[..], NONCE, CNONCE, b"s3cret"].concat());
        let (alg, mac, pbkdf2) = proof.parts().unwrap();
        assert_eq!(
            (alg, mac, pbkdf2),
            (RestAlgorithm::Sha1, &expected[..], None)
        );
        assert_eq!(verify(&answer(proof), NONCE).unwrap(), admin(301));
    }

    #[test]
    fn pbkdf2_answers_verify_and_round_trip_through_their_parts() {
        let secret = SecretKey(b"s3cret".to_vec());
        let proof = mac_rest(NONCE, CNONCE, &secret, RestAlgorithm::Pbkdf2HmacSha1).unwrap();
        let (alg, mac, pbkdf2) = proof.parts().unwrap();
        let params = pbkdf2.clone().unwrap();
        assert_eq!((params.iterations, params.key_bits), (10_000, 160));
        let rebuilt = RestProof::new(AuthType::SecretKey, alg, mac.to_vec(), pbkdf2).unwrap();
        assert_eq!(rebuilt, proof);
        assert_eq!(verify(&answer(rebuilt), NONCE).unwrap(), admin(301));
        let wrong = mac_rest(
            NONCE,
            CNONCE,
            &SecretKey(b"nope".to_vec()),
            RestAlgorithm::Pbkdf2HmacSha1,
        )
        .unwrap();
        assert!(matches!(
            verify(&answer(wrong), NONCE),
            Err(AuthError::Mismatch { .. })
        ));
    }

    #[test]
    fn pbkdf2_parameters_out_of_bounds_are_refused_before_any_work() {
        let params = Pbkdf2Params {
            salt: vec![1; 16],
            iterations: u32::MAX,
            key_bits: 160,
        };
        let proof = RestProof::new(
            AuthType::SecretKey,
            RestAlgorithm::Pbkdf2HmacSha1,
            vec![0; 20],
            Some(params),
        )
        .unwrap();
        assert!(matches!(
            verify(&answer(proof), NONCE),
            Err(AuthError::AnswerParameter {
                field: "PBKDF2 iterations",
                ..
            })
        ));
    }

    #[test]
    fn algorithms_that_do_not_fit_the_type_or_are_unknown_are_refused() {
        assert_eq!(
            RestAlgorithm::from_name("pbkdf2_hmac-SHA1"),
            Some(RestAlgorithm::Pbkdf2HmacSha1)
        );
        assert_eq!(
            RestAlgorithm::from_name("SHA-256"),
            Some(RestAlgorithm::Sha256)
        );
        assert_eq!(RestAlgorithm::from_name("MD5"), None);
        let hmac = RestProof::new(
            AuthType::PublicKey,
            RestAlgorithm::HmacSha1,
            vec![0; 20],
            None,
        );
        assert!(matches!(hmac, Err(AuthError::UnsupportedAlgorithm { .. })));
        let missing = RestProof::new(
            AuthType::SecretKey,
            RestAlgorithm::Pbkdf2HmacSha1,
            vec![0; 20],
            None,
        );
        assert!(matches!(missing, Err(AuthError::AnswerParameter { .. })));
        let huge = RestProof::new(
            AuthType::PublicKey,
            RestAlgorithm::Sha256,
            vec![0; MAX_ANSWER_LEN + 1],
            None,
        );
        assert!(matches!(huge, Err(AuthError::AnswerParameter { .. })));
    }
}
