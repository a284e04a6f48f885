//! HS_PUBKEY answers: `Str hashAlg ‖ Bytes signature` over `nonce ‖ digest`
//! (digest §8.2, §8.3).
//!
//! Owns [`PublicKeyAnswer`], [`sign_public`] (the client side) and [`verify_public`].
//! Depends on [`super::keys`] and [`super::challenge`].

use crate::codec::ProtocolVersion;
use crate::values::{Reader, Writer};

use super::challenge::ChallengeBody;
use super::error::AuthError;
use super::keys::{MAX_KEY_BITS, SignatureHash, SigningKey, VerifyingKey};

/// The longest signature accepted: an RSA signature under the largest key (a DSA
/// signature is far shorter).
pub const MAX_SIGNATURE_LEN: usize = MAX_KEY_BITS / 8;
/// The longest hash name accepted.
const MAX_HASH_NAME_LEN: usize = 64;

/// A decoded public-key answer.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PublicKeyAnswer {
    /// The hash the signature was made with.
    pub hash: SignatureHash,
    /// The raw signature (RSA PKCS#1 v1.5, or DSA DER `SEQUENCE { r, s }`).
    pub signature: Vec<u8>,
}

impl PublicKeyAnswer {
    /// Decodes the `Answer` octets of an OC 200 body; trailing octets, unknown or MD5
    /// hashes and signatures over [`MAX_SIGNATURE_LEN`] are refused.
    pub fn decode(answer: &[u8]) -> Result<Self, AuthError> {
        let mut r = Reader::new(answer);
        let name = r.bytes("signature hash")?;
        if name.len() > MAX_HASH_NAME_LEN {
            return Err(AuthError::AnswerParameter {
                field: "signature hash length",
                value: name.len() as u64,
            });
        }
        let hash =
            SignatureHash::from_name(name).ok_or_else(|| AuthError::UnsupportedAlgorithm {
                algorithm: name.to_vec(),
            })?;
        let signature = r.bytes("signature")?;
        r.finish("public-key answer")?;
        if signature.len() > MAX_SIGNATURE_LEN {
            return Err(AuthError::AnswerParameter {
                field: "signature length",
                value: signature.len() as u64,
            });
        }
        Ok(PublicKeyAnswer {
            hash,
            signature: signature.to_vec(),
        })
    }

    /// The `Answer` octets.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.str(self.hash.name());
        w.bytes(&self.signature);
        w.into_bytes()
    }
}

/// The hash J9 signs with for a challenge of `version` with an RSA key: SHA-256
/// from 2.7, SHA-1 before (§8.3).
pub fn signature_hash_for(version: ProtocolVersion) -> SignatureHash {
    if version >= ProtocolVersion::V2_7 {
        SignatureHash::Sha256
    } else {
        SignatureHash::Sha1
    }
}

/// The client side: the `Answer` octets for `challenge`, received in a message whose
/// answer formats are those of `version`, signed with `key`.
pub fn sign_public(
    challenge: &ChallengeBody,
    version: ProtocolVersion,
    key: &SigningKey,
) -> Result<Vec<u8>, AuthError> {
    let hash = signature_hash_for(version);
    let signature = key.sign(hash, &challenge.signed_bytes())?;
    Ok(PublicKeyAnswer { hash, signature }.encode())
}

/// Whether `answer` (the `Answer` octets) is `key`'s signature of `challenge`.
/// A decoded answer that does not verify is [`AuthError::Mismatch`] for `handle`.
pub fn verify_public(
    challenge: &ChallengeBody,
    answer: &[u8],
    key: &VerifyingKey,
    handle: &str,
) -> Result<(), AuthError> {
    let answer = PublicKeyAnswer::decode(answer)?;
    if key.verify(answer.hash, &challenge.signed_bytes(), &answer.signature) {
        Ok(())
    } else {
        Err(AuthError::Mismatch {
            handle: handle.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::keys::tests::{stranger_key, test_key};
    use crate::codec::RequestDigest;

    const V2_11: ProtocolVersion = ProtocolVersion::MAX_SUPPORTED;
    const V2_6: ProtocolVersion = ProtocolVersion::new(2, 6);

    fn challenge(version: ProtocolVersion) -> ChallengeBody {
        ChallengeBody {
            request_digest: RequestDigest::for_version(version, b"create 10.1000/1"),
            nonce: vec![0xa5; 16],
        }
    }

    fn verifier() -> VerifyingKey {
        VerifyingKey::from_public_key(&test_key().public_key()).unwrap()
    }

    #[test]
    fn answer_layout_matches_digest() {
        // Digest §11.7: Bytes( Str "SHA-256" ‖ Bytes <RSA signature> ).
        let answer = sign_public(&challenge(V2_11), V2_11, test_key()).unwrap();
        assert_eq!(&answer[..11], b"\0\0\0\x07SHA-256");
        assert_eq!(&answer[11..15], &[0, 0, 1, 0], "2048-bit signature");
        assert_eq!(answer.len(), 15 + 256);
    }

    #[test]
    fn sha256_and_sha1_answers_verify() {
        for version in [V2_11, V2_6] {
            let body = challenge(version);
            let answer = sign_public(&body, version, test_key()).unwrap();
            let decoded = PublicKeyAnswer::decode(&answer).unwrap();
            assert_eq!(decoded.hash, signature_hash_for(version));
            verify_public(&body, &answer, &verifier(), "0.NA/10.1000").unwrap();
        }
        assert_eq!(signature_hash_for(V2_6), SignatureHash::Sha1);
    }

    #[test]
    fn an_answer_to_another_challenge_is_refused() {
        let answer = sign_public(&challenge(V2_11), V2_11, test_key()).unwrap();
        let mut other = challenge(V2_11);
        other.nonce[0] ^= 1;
        assert!(matches!(
            verify_public(&other, &answer, &verifier(), "h/1"),
            Err(AuthError::Mismatch { .. })
        ));
    }

    #[test]
    fn a_different_key_is_refused() {
        let stranger = stranger_key();
        let body = challenge(V2_11);
        let answer = sign_public(&body, V2_11, stranger).unwrap();
        assert!(matches!(
            verify_public(&body, &answer, &verifier(), "h/1"),
            Err(AuthError::Mismatch { .. })
        ));
    }

    #[test]
    fn md5_oversized_and_trailing_answers_are_refused() {
        let md5 = PublicKeyAnswer::decode(&[0, 0, 0, 3, b'M', b'D', b'5', 0, 0, 0, 0]);
        assert!(matches!(md5, Err(AuthError::UnsupportedAlgorithm { .. })));
        let huge = PublicKeyAnswer {
            hash: SignatureHash::Sha256,
            signature: vec![1; MAX_SIGNATURE_LEN + 1],
        };
        assert!(matches!(
            PublicKeyAnswer::decode(&huge.encode()),
            Err(AuthError::AnswerParameter {
                field: "signature length",
                ..
            })
        ));
        let mut trailing = PublicKeyAnswer {
            hash: SignatureHash::Sha1,
            signature: vec![1; 4],
        }
        .encode();
        trailing.push(0);
        assert!(matches!(
            PublicKeyAnswer::decode(&trailing),
            Err(AuthError::Decode(_))
        ));
    }
}
