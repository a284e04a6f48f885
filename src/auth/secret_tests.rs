//! Tests of the secret-key answers: the §11.7 layout, known-answer vectors and
//! round trips in every form.

use super::*;
use crate::codec::RequestDigest;
use crate::values::known::hex;

const V2_11: ProtocolVersion = ProtocolVersion::MAX_SUPPORTED;
const V2_6: ProtocolVersion = ProtocolVersion::new(2, 6);
const V2_0: ProtocolVersion = ProtocolVersion::new(2, 0);

fn challenge(version: ProtocolVersion) -> ChallengeBody {
    ChallengeBody {
        request_digest: RequestDigest::for_version(version, b"create 10.1000/1"),
        nonce: (0xa0..=0xaf).collect(),
    }
}

fn secret() -> SecretKey {
    SecretKey(b"s3cret".to_vec())
}

#[test]
fn pbkdf2_answer_matches_digest_vector_layout() {
    // Digest §11.7: 22 | 00000010 <salt> | 00002710 | 000000a0 | 00000014 <HMAC>.
    let body = challenge(V2_11);
    let answer = answer_secret(&body, V2_11, &secret()).unwrap();
    assert_eq!(answer.len(), 53);
    assert_eq!(&answer[..5], &hex("22 00000010")[..]);
    assert_eq!(&answer[21..33], &hex("00002710 000000a0 00000014")[..]);
    let SecretAnswer::Pbkdf2 { salt, mac, .. } = SecretAnswer::decode(&answer, V2_11).unwrap()
    else {
        panic!("not a PBKDF2 answer");
    };
    let key = pbkdf2_key(b"s3cret", &salt, 10_000, 160);
    assert_eq!(mac, hmac::<Hmac<Sha1>>(&key, &body.signed_bytes()));
    verify_secret(&body, V2_11, &answer, b"s3cret", "0.NA/10.1000").unwrap();
}

#[test]
fn fresh_answers_use_fresh_salts() {
    let body = challenge(V2_11);
    let a = answer_secret(&body, V2_11, &secret()).unwrap();
    let b = answer_secret(&body, V2_11, &secret()).unwrap();
    assert_ne!(a[5..21], b[5..21]);
}

#[test]
fn pbkdf2_and_hmac_match_published_vectors() {
    // RFC 6070 test 2 (c = 2) and RFC 2202 HMAC-SHA1 test 2.
    assert_eq!(
        pbkdf2_key(b"password", b"salt", 2, 160),
        hex("ea6c014dc72d6f8ccd1ed92ace1d41f0d8de8957")
    );
    assert_eq!(
        hmac::<Hmac<Sha1>>(b"Jefe", b"what do ya want for nothing?"),
        hex("effcdf6ae5eb2fa2d27416d5f184df9c259a7c79")
    );
}

#[test]
fn non_ascii_secrets_are_widened_like_java_chars() {
    // The octet 0xe9 becomes the char U+00E9, which the JDK hashes as UTF-8 c3 a9.
    let widened = pbkdf2_key(&[0xe9], b"salt", 2, 160);
    let mut direct = vec![0; 20];
    pbkdf2::pbkdf2_hmac::<Sha1>("é".as_bytes(), b"salt", 2, &mut direct);
    assert_eq!(widened, direct);
}

#[test]
fn client_forms_follow_the_version() {
    let old = answer_secret(&challenge(V2_0), V2_0, &secret()).unwrap();
    assert_eq!(old.len(), 16, "bare MD5 before 2.1");
    let body = challenge(V2_0);
    let mut sandwich = Md5::new();
    sandwich.update(b"s3cret");
    sandwich.update(body.signed_bytes());
    sandwich.update(b"s3cret");
    assert_eq!(old, sandwich.finalize().to_vec());
    let sha1 = answer_secret(&challenge(V2_6), V2_6, &secret()).unwrap();
    assert_eq!((sha1[0], sha1.len()), (CODE_SHA1, 21));
    let new = answer_secret(&challenge(V2_11), V2_11, &secret()).unwrap();
    assert_eq!(new[0], CODE_PBKDF2_HMAC_SHA1);
}

#[test]
fn every_form_verifies_with_the_right_secret_only() {
    let body = challenge(V2_11);
    let message = body.signed_bytes();
    let forms = [
        SecretAnswer::Md5(vec![]),
        SecretAnswer::Sha1(vec![]),
        SecretAnswer::Sha256(vec![]),
        SecretAnswer::HmacSha1(vec![]),
        SecretAnswer::HmacSha256(vec![]),
        SecretAnswer::Pbkdf2 {
            salt: vec![1; 16],
            iterations: 1000,
            key_bits: 160,
            mac: vec![],
        },
    ];
    for form in forms {
        let answer = with_mac(form, b"s3cret", &message).encode();
        verify_secret(&body, V2_11, &answer, b"s3cret", "h/1").unwrap();
        assert!(matches!(
            verify_secret(&body, V2_11, &answer, b"s3creT", "h/1"),
            Err(AuthError::Mismatch { .. })
        ));
        let mut other = body.clone();
        other.nonce[3] ^= 0x40;
        assert!(verify_secret(&other, V2_11, &answer, b"s3cret", "h/1").is_err());
    }
    let old = answer_secret(&challenge(V2_0), V2_0, &secret()).unwrap();
    verify_secret(&challenge(V2_0), V2_0, &old, b"s3cret", "h/1").unwrap();
    assert!(verify_secret(&challenge(V2_0), V2_0, &old, b"nope", "h/1").is_err());
}

#[test]
fn hashed_secret_is_lower_case_sha1_hex() {
    // SHA-1("password"), as J9's admin tool stores it with the "hash" option.
    let key = SecretKey::hashed(b"password");
    assert_eq!(key.0, b"5baa61e4c9b93f3f0682250b6cf8331b7ee68fd8");
    let body = challenge(V2_11);
    let answer = answer_secret(&body, V2_11, &key).unwrap();
    verify_secret(&body, V2_11, &answer, &key.0, "h/1").unwrap();
    assert!(verify_secret(&body, V2_11, &answer, b"password", "h/1").is_err());
    assert_eq!(format!("{key:?}"), "SecretKey(..)");
}

#[test]
fn out_of_bounds_pbkdf2_parameters_are_refused() {
    let answer = |salt_len: usize, iterations: u32, key_bits: u32| {
        SecretAnswer::Pbkdf2 {
            salt: vec![0; salt_len],
            iterations,
            key_bits,
            mac: vec![0; 20],
        }
        .encode()
    };
    for (bytes, field) in [
        (
            answer(16, MAX_PBKDF2_ITERATIONS + 1, 160),
            "PBKDF2 iterations",
        ),
        (answer(16, 0, 160), "PBKDF2 iterations"),
        (answer(16, 10_000, 161), "PBKDF2 key length"),
        (answer(16, 10_000, 4096), "PBKDF2 key length"),
        (answer(MAX_SALT_LEN + 1, 10_000, 160), "PBKDF2 salt length"),
    ] {
        assert!(matches!(
            SecretAnswer::decode(&bytes, V2_11),
            Err(AuthError::AnswerParameter { field: f, .. }) if f == field
        ));
    }
    let mut trailing = answer(16, 10_000, 160);
    trailing.push(0);
    assert!(matches!(
        SecretAnswer::decode(&trailing, V2_11),
        Err(AuthError::Decode(_))
    ));
}

#[test]
fn unknown_codes_and_empty_answers_are_refused() {
    assert!(matches!(
        SecretAnswer::decode(&[0x42, 1, 2], V2_11),
        Err(AuthError::UnsupportedAlgorithm { algorithm }) if algorithm == [0x42]
    ));
    assert!(matches!(
        SecretAnswer::decode(&[], V2_11),
        Err(AuthError::Decode(_))
    ));
    let body = challenge(V2_11);
    assert!(matches!(
        verify_secret(&body, V2_11, &[CODE_SHA1], b"s3cret", "h/1"),
        Err(AuthError::Mismatch { .. })
    ));
}

#[test]
fn a_strong_server_checks_only_pbkdf2_of_enough_iterations() {
    let body = challenge(V2_11);
    let message = body.signed_bytes();
    let pbkdf2 = |iterations| SecretAnswer::Pbkdf2 {
        salt: vec![1; 16],
        iterations,
        key_bits: 160,
        mac: vec![],
    };
    let weak = [
        SecretAnswer::Md5(vec![]),
        SecretAnswer::Sha1(vec![]),
        SecretAnswer::Sha256(vec![]),
        SecretAnswer::HmacSha1(vec![]),
        SecretAnswer::HmacSha256(vec![]),
        pbkdf2(MIN_STRONG_ITERATIONS - 1),
    ];
    for form in weak {
        let answer = with_mac(form, b"s3cret", &message).encode();
        assert!(matches!(
            SecretForms::Strong.admit(&answer, V2_11),
            Err(AuthError::WeakAnswer { .. })
        ));
        SecretForms::Legacy.admit(&answer, V2_11).unwrap();
    }
    let strong = with_mac(pbkdf2(MIN_STRONG_ITERATIONS), b"s3cret", &message).encode();
    SecretForms::Strong.admit(&strong, V2_11).unwrap();
    let client = answer_secret(&body, V2_11, &secret()).unwrap();
    SecretForms::Strong.admit(&client, V2_11).unwrap();
    let old = answer_secret(&challenge(V2_0), V2_0, &secret()).unwrap();
    assert!(SecretForms::Strong.admit(&old, V2_0).is_err());
    assert!(matches!(
        SecretForms::Strong.admit(&[0x7f, 1, 2], V2_11),
        Err(AuthError::UnsupportedAlgorithm { .. } | AuthError::Decode(_))
    ));
}
