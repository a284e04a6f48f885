//! The bodies of authentication messages (digest §3.7, §8.1, §11.7): the answer to
//! a challenge (OC_CHALLENGE_RESPONSE, 200), the request to verify a secret-key
//! answer (OC_VERIFY_RESPONSE, 201) and its one-octet result.
//!
//! Owns [`AuthAnswer`] and [`VerifyRequest`]. Pure; depends on [`crate::values::wire`]
//! and [`RequestDigest`]. Fields are kept as sent: what they mean (which key types
//! exist, how answers are checked, their bounds) is the authentication layer's.
//!
//! Layouts: 200 is `AuthType Str ‖ KeyHandle Str ‖ KeyIndex u32 ‖ Answer Bytes`;
//! 201 is `KeyHandle Str ‖ KeyIndex u32 ‖ Nonce Bytes ‖ ReqDigest ‖ Answer Bytes`, where
//! J9 writes the digest as `Bytes` (the old format, whose length's first octet 0
//! doubles as the hash code) and also accepts `code ‖ digest` — [`RequestDigest`]
//! reads both.

use super::digest::RequestDigest;
use crate::values::wire::{DecodeError, Reader, Writer};

/// The body of an OC_CHALLENGE_RESPONSE (200) request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AuthAnswer {
    /// `HS_PUBKEY` or `HS_SECKEY`, as sent.
    pub auth_type: Vec<u8>,
    /// The handle holding the key, e.g. `0.NA/10.1000`.
    pub key_handle: Vec<u8>,
    /// The key's value index; 0 means any (J9 ≥ 8).
    pub key_index: u32,
    /// The signature or MAC.
    pub answer: Vec<u8>,
}

impl AuthAnswer {
    /// Appends the body.
    pub fn encode(&self, w: &mut Writer) {
        w.bytes(&self.auth_type);
        w.bytes(&self.key_handle);
        w.u32(self.key_index);
        w.bytes(&self.answer);
    }

    /// Reads the body.
    pub fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(AuthAnswer {
            auth_type: r.bytes("authentication type")?.to_vec(),
            key_handle: r.bytes("key handle")?.to_vec(),
            key_index: r.u32("key index")?,
            answer: r.bytes("answer")?.to_vec(),
        })
    }
}

/// The body of an OC_VERIFY_RESPONSE (201) request: is `answer` a MAC of
/// `nonce ‖ digest` under the HS_SECKEY at `key_index` of `key_handle`?
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VerifyRequest {
    /// The handle holding the secret key.
    pub key_handle: Vec<u8>,
    /// The secret key's value index (0: any).
    pub key_index: u32,
    /// The challenge's nonce.
    pub nonce: Vec<u8>,
    /// The challenge's request digest.
    pub digest: RequestDigest,
    /// The answer to check.
    pub answer: Vec<u8>,
}

impl VerifyRequest {
    /// Appends the body.
    pub fn encode(&self, w: &mut Writer) {
        w.bytes(&self.key_handle);
        w.u32(self.key_index);
        w.bytes(&self.nonce);
        self.digest.encode(w);
        w.bytes(&self.answer);
    }

    /// Reads the body.
    pub fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(VerifyRequest {
            key_handle: r.bytes("key handle")?.to_vec(),
            key_index: r.u32("key index")?,
            nonce: r.bytes("nonce")?.to_vec(),
            digest: RequestDigest::decode(r)?,
            answer: r.bytes("answer")?.to_vec(),
        })
    }
}

/// Reads the one-octet result of a 201 response (bit 0: valid).
pub(super) fn decode_verification(r: &mut Reader<'_>) -> Result<bool, DecodeError> {
    Ok(r.u8("verification result")? & 1 == 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::testing::hex;

    #[test]
    fn answer_body_matches_digest_vector() {
        // Digest §11.7: Str "HS_SECKEY" ‖ Str "0.NA/10.1000" ‖ 0000012c ‖ Bytes(53).
        let answer = AuthAnswer {
            auth_type: b"HS_SECKEY".to_vec(),
            key_handle: b"0.NA/10.1000".to_vec(),
            key_index: 300,
            answer: vec![0x22; 53],
        };
        let mut w = Writer::new();
        answer.encode(&mut w);
        let bytes = w.into_bytes();
        let head =
            hex("00000009 48535f5345434b4559 0000000c 302e4e412f31302e31303030 0000012c 00000035");
        assert_eq!(&bytes[..head.len()], &head[..]);
        let mut r = Reader::new(&bytes);
        assert_eq!(AuthAnswer::decode(&mut r).unwrap(), answer);
        r.finish("body").unwrap();
    }

    #[test]
    fn verify_body_reads_both_digest_forms() {
        // Digest §11.7: J9 writes the digest as Bytes; a code octet is accepted too.
        let j9 = hex("0000000c 302e4e412f31302e31303030 0000012c 00000002 a0a1
             00000004 01020304 00000001 22");
        let mut r = Reader::new(&j9);
        let request = VerifyRequest::decode(&mut r).unwrap();
        r.finish("body").unwrap();
        assert_eq!(request.digest.digest(), &[1, 2, 3, 4]);
        assert_eq!(request.nonce, [0xa0, 0xa1]);
        let mut w = Writer::new();
        request.encode(&mut w);
        assert_eq!(w.into_bytes(), j9);
        let coded = VerifyRequest {
            digest: RequestDigest::Sha256([7; 32]),
            ..request
        };
        let mut w = Writer::new();
        coded.encode(&mut w);
        let bytes = w.into_bytes();
        assert_eq!(
            VerifyRequest::decode(&mut Reader::new(&bytes)).unwrap(),
            coded
        );
    }

    #[test]
    fn challenge_message_matches_digest_vector() {
        // Digest §11.7: the 402 answering an admin create, behind a 2.11 envelope.
        let payload = hex("00000064 00000192 19800000 ffff 00 00 5f5e1000 00000035
             03 b5e70ee022b841013d2e393e311b9193bc35b9678d0684cd7d05fd979c96194d
             00000010 a0a1a2a3a4a5a6a7a8a9aaabacadaeaf 00000000");
        let mut bytes = hex("020b020b 00000007 00000009 00000000");
        bytes.extend_from_slice(&u32::try_from(payload.len()).unwrap().to_be_bytes());
        bytes.extend_from_slice(&payload);
        let message = crate::codec::Message::decode(&bytes).unwrap();
        assert_eq!(message.envelope.session_id, 7);
        let crate::codec::Body::Response {
            digest: Some(RequestDigest::Sha256(digest)),
            response: crate::codec::Response::Challenge { nonce },
        } = &message.body
        else {
            panic!("not a challenge: {message:?}");
        };
        assert_eq!(digest[0], 0xb5);
        assert_eq!(nonce, &(0xa0..=0xaf).collect::<Vec<u8>>());
        assert_eq!(message.encode(), bytes);
    }

    #[test]
    fn truncated_bodies_are_refused() {
        let bytes = hex("00000009 48535f5345434b4559 0000000c 302e4e41");
        assert!(AuthAnswer::decode(&mut Reader::new(&bytes)).is_err());
        assert!(decode_verification(&mut Reader::new(&[])).is_err());
        assert!(decode_verification(&mut Reader::new(&[1])).unwrap());
        assert!(!decode_verification(&mut Reader::new(&[0])).unwrap());
    }
}
