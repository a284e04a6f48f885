//! Property tests: no input panics a decoder or a verifier of the authentication
//! module, and whatever decodes survives its own re-encoding.

use std::time::Instant;

use proptest::collection::vec;
use proptest::prelude::*;

use super::answer::{ChallengeAnswer, verify_answer};
use super::challenge::{Challenge, ChallengeBody, ChallengeId};
use super::keys::VerifyingKey;
use super::permissions::{Identity, Operation, authorise};
use super::public::PublicKeyAnswer;
use super::secret::{SecretAnswer, verify_secret};
use crate::codec::{ProtocolVersion, RequestDigest};
use crate::values::{HandleValue, PublicKey};

fn version() -> impl Strategy<Value = ProtocolVersion> {
    (0u8..=11).prop_map(|minor| ProtocolVersion::new(2, minor))
}

fn challenge(version: ProtocolVersion) -> Challenge {
    let digest = RequestDigest::for_version(version, b"request");
    Challenge {
        id: ChallengeId(1),
        body: ChallengeBody {
            request_digest: digest,
            nonce: vec![7; 16],
        },
        issued_at: Instant::now(),
        version,
    }
}

proptest! {
    #[test]
    fn challenge_bodies_never_panic(bytes in vec(any::<u8>(), 0..128), v in version()) {
        if let Ok(body) = ChallengeBody::decode(&bytes, v) {
            let mut w = crate::values::Writer::new();
            body.encode(v, &mut w);
            prop_assert_eq!(ChallengeBody::decode(&w.into_bytes(), v).ok(), Some(body));
        }
    }

    #[test]
    fn answer_bodies_never_panic(bytes in vec(any::<u8>(), 0..256), v in version()) {
        if let Ok(answer) = ChallengeAnswer::decode(&bytes) {
            prop_assert_eq!(ChallengeAnswer::decode(&answer.encode()).ok(), Some(answer.clone()));
            let keys = [
                HandleValue::new(300, "HS_SECKEY", b"secret".to_vec()),
                HandleValue::new(301, "HS_PUBKEY", bytes.clone()),
            ];
            prop_assert!(verify_answer(&challenge(v), &answer, &keys).is_err());
        }
    }

    #[test]
    fn public_answers_never_panic(bytes in vec(any::<u8>(), 0..128)) {
        if let Ok(answer) = PublicKeyAnswer::decode(&bytes) {
            prop_assert_eq!(PublicKeyAnswer::decode(&answer.encode()).ok(), Some(answer));
        }
    }

    #[test]
    fn secret_answers_never_panic(bytes in vec(any::<u8>(), 0..96), v in version()) {
        if let Ok(answer) = SecretAnswer::decode(&bytes, v) {
            prop_assert_eq!(SecretAnswer::decode(&answer.encode(), v).ok(), Some(answer));
        }
        let body = challenge(v).body;
        prop_assert!(verify_secret(&body, v, &bytes, b"secret", "h/1").is_err());
    }

    #[test]
    fn hs_pubkey_data_never_panics(bytes in vec(any::<u8>(), 0..96)) {
        let _ = VerifyingKey::from_hs_pubkey(&bytes);
    }

    #[test]
    fn arbitrary_rsa_numbers_never_panic(
        modulus in vec(any::<u8>(), 120..136),
        exponent in vec(any::<u8>(), 0..6),
        signature in vec(any::<u8>(), 0..140),
    ) {
        let key = PublicKey::Rsa { exponent, modulus };
        if let Ok(key) = VerifyingKey::from_public_key(&key) {
            prop_assert!(!key.verify(super::SignatureHash::Sha256, b"m", &signature));
        }
    }

    #[test]
    fn arbitrary_dsa_numbers_never_panic(
        p in vec(any::<u8>(), 128..130),
        q in vec(any::<u8>(), 0..24),
        g in vec(any::<u8>(), 0..8),
        y in vec(any::<u8>(), 0..8),
        signature in vec(any::<u8>(), 0..60),
    ) {
        if let Ok(key) = VerifyingKey::from_public_key(&PublicKey::Dsa { q, p, g, y }) {
            prop_assert!(!key.verify(super::SignatureHash::Sha1, b"m", &signature));
        }
    }

    #[test]
    fn arbitrary_admin_data_never_panics(
        admin in vec(any::<u8>(), 0..64),
        group in vec(any::<u8>(), 0..64),
    ) {
        let identity = Identity { handle: "10.1000/alice".into(), index: 300 };
        let values = [HandleValue::new(100, "HS_ADMIN", admin)];
        let group_values = vec![HandleValue::new(200, "HS_VLIST", group)];
        let lookup = |_: &str| Some(group_values.clone());
        let _ = authorise(&identity, Operation::AddValue, &values, &[], &[], &lookup);
    }
}
