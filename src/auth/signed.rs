//! Messages signed with a server's key: the `HS_SIGNED` credential of certified
//! answers (digest §2.5, §8.6, §11.8).
//!
//! Owns [`sign_message`], [`verify_signed`], [`signed_octets`] (what a signature
//! covers) and [`SignatureError`]. Pure: the caller gives the envelope, the header and
//! body octets (as encoded, or as received) and the key. Depends on [`crate::codec`]
//! and [`super::keys`].
//!
//! What a signature covers depends on the message's envelope version, as J9's
//! `AbstractMessage.signMessage/verifyMessage` have it: below 2.6 the header and body
//! alone; from 2.7 `Major ‖ Minor ‖ [SuggestedMajor ‖ SuggestedMinor from 2.8] ‖
//! SessionId u32 ‖ RequestId u32 ‖ SessionCounter u32` before them; in 2.6, J9's
//! overlapping writes leave `Major ‖ Minor ‖ SessionId[0..2] ‖ SessionCounter u32 ‖
//! six zero octets`. The session counter travels as the credential's signer index.
//! The hash: SHA-256 from 2.7 (J9 `HandleServer.supportsSha256Signature` with an RSA
//! key), SHA-1 below.

use thiserror::Error;

use super::keys::{KeyError, SignatureHash, SigningKey, VerifyingKey};
use crate::codec::{Credential, Envelope, ProtocolVersion};
use crate::values::wire::Writer;

/// The credential type of a public-key signature.
pub const SIGNED_TYPE: &[u8] = b"HS_SIGNED";
/// The legacy credential type J9 still accepts for a public-key signature.
const OLD_SIGNED_TYPE: &[u8] = b"HS_DSAPUBKEY";

const V2_6: ProtocolVersion = ProtocolVersion::new(2, 6);
const V2_7: ProtocolVersion = ProtocolVersion::new(2, 7);
const V2_8: ProtocolVersion = ProtocolVersion::new(2, 8);

/// Why a signed message does not check out.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum SignatureError {
    /// The message carries no credential.
    #[error("the answer is not signed")]
    Missing,
    /// The credential is not a public-key signature (e.g. a session `HS_MAC`).
    #[error("the answer's credential is {0:?}, not an HS_SIGNED signature")]
    NotSigned(String),
    /// The signature names a hash we do not verify with.
    #[error("the signature's hash {0:?} is not SHA-256 or SHA-1")]
    UnknownHash(String),
    /// The signature does not match the message and the key.
    #[error("the signature does not match the answer and the server's key")]
    Mismatch,
}

/// The hash a server signs a message of `version` with (RSA keys).
pub fn signature_hash(version: ProtocolVersion) -> SignatureHash {
    if version >= V2_7 {
        SignatureHash::Sha256
    } else {
        SignatureHash::Sha1
    }
}

/// The octets a signature of a message with `envelope`, session `counter` and
/// `header_and_body` covers (module doc).
pub fn signed_octets(envelope: &Envelope, counter: u32, header_and_body: &[u8]) -> Vec<u8> {
    let mut w = Writer::with_capacity(header_and_body.len() + 16);
    let version = envelope.version;
    if version >= V2_6 {
        w.u8(version.major);
        w.u8(version.minor);
    }
    if version >= V2_7 {
        if version >= V2_8 {
            let suggested = envelope.suggested_version();
            w.u8(suggested.major);
            w.u8(suggested.minor);
        }
        w.u32(envelope.session_id);
        w.u32(envelope.request_id);
        w.u32(counter);
    } else if version >= V2_6 {
        w.raw(&envelope.session_id.to_be_bytes()[..2]);
        w.u32(counter);
        w.raw(&[0; 6]);
    }
    w.raw(header_and_body);
    w.into_bytes()
}

/// The `HS_SIGNED` credential of a message with `envelope`, session `counter` (0
/// outside a session) and `header_and_body`, signed with `key`.
pub fn sign_message(
    key: &SigningKey,
    envelope: &Envelope,
    counter: u32,
    header_and_body: &[u8],
) -> Result<Credential, KeyError> {
    let hash = signature_hash(envelope.version);
    let signature = key.sign(hash, &signed_octets(envelope, counter, header_and_body))?;
    Ok(Credential {
        version: 0,
        reserved: 0,
        options: 0,
        signer_handle: vec![],
        signer_index: counter,
        credential_type: SIGNED_TYPE.to_vec(),
        digest_algorithm: hash.name().as_bytes().to_vec(),
        signature,
    })
}

/// Checks that `credential` is a signature by `key` of a message with `envelope`
/// and `header_and_body` (as received).
pub fn verify_signed(
    key: &VerifyingKey,
    envelope: &Envelope,
    header_and_body: &[u8],
    credential: Option<&Credential>,
) -> Result<(), SignatureError> {
    let credential = credential.ok_or(SignatureError::Missing)?;
    let kind = credential.credential_type.as_slice();
    if kind != SIGNED_TYPE && kind != OLD_SIGNED_TYPE {
        return Err(SignatureError::NotSigned(lossy(kind)));
    }
    let hash = SignatureHash::from_name(&credential.digest_algorithm)
        .ok_or_else(|| SignatureError::UnknownHash(lossy(&credential.digest_algorithm)))?;
    let signed = signed_octets(envelope, credential.signer_index, header_and_body);
    if key.verify(hash, &signed, &credential.signature) {
        Ok(())
    } else {
        Err(SignatureError::Mismatch)
    }
}

fn lossy(octets: &[u8]) -> String {
    String::from_utf8_lossy(octets).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::keys::tests::{stranger_key, test_key};
    use crate::values::known::hex;
    use crate::values::wire::Reader;

    const HEADER_AND_BODY: &[u8] = b"header and body octets";

    fn envelope(minor: u8) -> Envelope {
        Envelope {
            session_id: 0x0102_0304,
            ..Envelope::new(ProtocolVersion::new(2, minor), 0x0a0b_0c0d)
        }
    }

    fn verifying(key: &SigningKey) -> VerifyingKey {
        VerifyingKey::from_public_key(&key.public_key()).unwrap()
    }

    #[test]
    fn the_prefix_follows_the_version() {
        let body = b"HB";
        let v211 = Envelope {
            suggested: ProtocolVersion::new(2, 11),
            ..envelope(10)
        };
        assert_eq!(
            signed_octets(&v211, 7, body),
            [hex("020a 020b 01020304 0a0b0c0d 00000007"), body.to_vec()].concat()
        );
        assert_eq!(
            signed_octets(&envelope(7), 7, body),
            [hex("0207 01020304 0a0b0c0d 00000007"), body.to_vec()].concat()
        );
        // J9's 2.6 "painful bug": each write restarts at offset 4.
        assert_eq!(
            signed_octets(&envelope(6), 7, body),
            [hex("0206 0102 00000007 000000000000"), body.to_vec()].concat()
        );
        assert_eq!(signed_octets(&envelope(5), 7, body), body.to_vec());
    }

    #[test]
    fn a_signed_message_verifies_and_has_the_digest_layout() {
        let envelope = envelope(11);
        let credential = sign_message(test_key(), &envelope, 0, HEADER_AND_BODY).unwrap();
        let key = verifying(test_key());
        assert_eq!(
            verify_signed(&key, &envelope, HEADER_AND_BODY, Some(&credential)),
            Ok(())
        );
        let mut w = Writer::new();
        credential.encode(&mut w);
        let bytes = w.into_bytes();
        // Digest §11.8 with a 2048-bit key: length, 0 0 0000, signer "", counter,
        // "HS_SIGNED", SignedInfo length, "SHA-256", the 256-octet signature.
        let head = hex(
            "0000012c 00 00 0000 00000000 00000000 00000009 48535f5349474e4544 0000010f 00000007 5348412d323536 00000100",
        );
        assert_eq!(&bytes[..head.len()], head.as_slice());
        assert_eq!(bytes.len(), head.len() + 256);
        let back = Credential::decode(&mut Reader::new(&bytes)).unwrap();
        assert_eq!(back, Some(credential));
    }

    #[test]
    fn old_versions_sign_with_sha1() {
        let envelope = envelope(5);
        let credential = sign_message(test_key(), &envelope, 0, HEADER_AND_BODY).unwrap();
        assert_eq!(credential.digest_algorithm, b"SHA1");
        let key = verifying(test_key());
        assert_eq!(
            verify_signed(&key, &envelope, HEADER_AND_BODY, Some(&credential)),
            Ok(())
        );
    }

    #[test]
    fn any_flipped_octet_fails() {
        let envelope = envelope(11);
        let credential = sign_message(test_key(), &envelope, 0, HEADER_AND_BODY).unwrap();
        let key = verifying(test_key());
        for at in 0..HEADER_AND_BODY.len() {
            let mut tampered = HEADER_AND_BODY.to_vec();
            tampered[at] ^= 0x01;
            assert_eq!(
                verify_signed(&key, &envelope, &tampered, Some(&credential)),
                Err(SignatureError::Mismatch),
                "octet {at}"
            );
        }
        let other_request = Envelope {
            request_id: 1,
            ..envelope
        };
        assert_eq!(
            verify_signed(&key, &other_request, HEADER_AND_BODY, Some(&credential)),
            Err(SignatureError::Mismatch)
        );
        let mut bad_signature = credential.clone();
        bad_signature.signature[10] ^= 0x80;
        assert_eq!(
            verify_signed(&key, &envelope, HEADER_AND_BODY, Some(&bad_signature)),
            Err(SignatureError::Mismatch)
        );
    }

    #[test]
    fn another_key_missing_or_foreign_credentials_are_refused() {
        let envelope = envelope(11);
        let credential = sign_message(test_key(), &envelope, 0, HEADER_AND_BODY).unwrap();
        let stranger = verifying(stranger_key());
        assert_eq!(
            verify_signed(&stranger, &envelope, HEADER_AND_BODY, Some(&credential)),
            Err(SignatureError::Mismatch)
        );
        let key = verifying(test_key());
        assert_eq!(
            verify_signed(&key, &envelope, HEADER_AND_BODY, None),
            Err(SignatureError::Missing)
        );
        let mac = Credential {
            credential_type: b"HS_MAC".to_vec(),
            ..credential.clone()
        };
        assert!(matches!(
            verify_signed(&key, &envelope, HEADER_AND_BODY, Some(&mac)),
            Err(SignatureError::NotSigned(_))
        ));
        let md5 = Credential {
            digest_algorithm: b"MD5".to_vec(),
            ..credential
        };
        assert!(matches!(
            verify_signed(&key, &envelope, HEADER_AND_BODY, Some(&md5)),
            Err(SignatureError::UnknownHash(_))
        ));
    }
}
