//! Certified resolution: asking with CT and refusing any answer whose `HS_SIGNED`
//! signature does not check out with the server's key (digest §2.1, §2.5, §8.6).
//!
//! As J9's `HandleResolver`, the key to verify with is that of the server entry
//! (in the HS_SITE) the client contacted: [`Client::server_key`] reads it from the
//! server's own get-site-info answer, the entry whose address and port are the
//! server's; a caller who holds the key already gives it. A missing, foreign or wrong
//! signature is an error, never a fallback to the unsigned answer.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use super::message::Answer;
use super::{Client, ClientError, Resolution, Transport, no_answer, outgoing};
use super::{resolution_of, resolution_request};
use crate::auth::{SignatureError, VerifyingKey, verify_signed};
use crate::codec::{Message, OpFlags};
use crate::names::Handle;
use crate::values::{SiteInfo, ValueSelection};

/// The server keys to check answers with, by server address.
pub type ServerKeys = BTreeMap<SocketAddr, VerifyingKey>;

impl Client {
    /// Resolves `handle` as [`Client::resolve`] does, with CT set, and checks each
    /// answer's signature with the key `keys` holds for the server that sent it. An
    /// answer that fails is refused ([`ClientError::Signature`]); no other server is
    /// asked then.
    pub async fn resolve_certified(
        &self,
        handle: &Handle,
        selection: &ValueSelection,
        transport: Transport,
        keys: &ServerKeys,
    ) -> Result<Resolution, ClientError> {
        let request = resolution_request(handle, selection);
        let flags = OpFlags::J9_DEFAULT.with(OpFlags::CT);
        let mut last = None;
        let mut attempts = 0;
        for &server in self.servers() {
            let key = keys.get(&server).ok_or(ClientError::NoServerKey {
                server,
                reason: "no key given for this server".to_owned(),
            })?;
            for &wire in transport.sequence() {
                attempts += 1;
                match self.exchange(server, wire, outgoing(&request, flags)).await {
                    Ok(message) => {
                        check_signature(&message, key)
                            .map_err(|source| ClientError::Signature { server, source })?;
                        return resolution_of(Answer::of(message)?.response);
                    }
                    Err(error) => last = Some((attempts, error)),
                }
            }
        }
        Err(no_answer(last))
    }

    /// The key of `server` as its own HS_SITE gives it (get-site-info asked of that
    /// server alone): the entry with its address and one of its ports.
    pub async fn server_key(&self, server: SocketAddr) -> Result<VerifyingKey, ClientError> {
        let alone = Client::with_config(vec![server], self.config.clone());
        let site = alone.site_info().await?;
        key_of(&site, server)
    }
}

/// Checks that `message` (as received) carries a valid `HS_SIGNED` signature by `key`.
pub fn check_signature(message: &Message, key: &VerifyingKey) -> Result<(), SignatureError> {
    let header_and_body = message.raw_header_and_body().unwrap_or_default();
    verify_signed(
        key,
        &message.envelope,
        header_and_body,
        message.credential.as_ref(),
    )
}

/// The key of the entry of `site` at `server`'s address and port.
fn key_of(site: &SiteInfo, server: SocketAddr) -> Result<VerifyingKey, ClientError> {
    let no_key = |reason: &str| ClientError::NoServerKey {
        server,
        reason: reason.to_owned(),
    };
    let entry = site
        .servers
        .iter()
        .find(|entry| {
            entry.address == server.ip()
                && entry
                    .interfaces
                    .iter()
                    .any(|interface| interface.port == u32::from(server.port()))
        })
        .ok_or_else(|| no_key("its site information lists no server at this address"))?;
    if entry.public_key.is_empty() {
        return Err(no_key("its server entry carries no key"));
    }
    VerifyingKey::from_hs_pubkey(&entry.public_key)
        .map_err(|error| no_key(&format!("its server entry's key is unusable: {error}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::keys::tests::{stranger_key, test_key};
    use crate::auth::sign_message;
    use crate::codec::{
        Body, ENVELOPE_LEN, Envelope, HandleValues, Header, OpCode, ProtocolVersion, Response,
        ResponseCode,
    };
    use crate::values::HandleValue;

    /// A signed resolution answer as a server sends it, encoded.
    fn signed_answer() -> Vec<u8> {
        let header = Header {
            response_code: ResponseCode::Success,
            flags: OpFlags::J9_DEFAULT.with(OpFlags::CT),
            ..Header::request(OpCode::Resolution, 0x7000_0000)
        };
        let response = Response::Resolution(HandleValues {
            handle: b"10.1000/1".to_vec(),
            values: vec![HandleValue::new(1, "URL", "https://www.doi.org/")],
        });
        let body = Body::Response {
            digest: None,
            response,
        };
        let envelope = Envelope::new(ProtocolVersion::new(2, 11), 0x0102_0304);
        let mut message = Message::new(envelope, header, body);
        let bytes = message.encode();
        let header_and_body = &bytes[ENVELOPE_LEN..bytes.len() - 4];
        let credential = sign_message(test_key(), &envelope, 0, header_and_body).unwrap();
        message.credential = Some(credential);
        message.encode()
    }

    fn key(of: &crate::auth::SigningKey) -> VerifyingKey {
        VerifyingKey::from_public_key(&of.public_key()).unwrap()
    }

    #[test]
    fn a_signed_answer_checks_out() {
        let message = Message::decode(&signed_answer()).unwrap();
        assert_eq!(check_signature(&message, &key(test_key())), Ok(()));
        assert_eq!(
            check_signature(&message, &key(stranger_key())),
            Err(SignatureError::Mismatch)
        );
    }

    #[test]
    fn a_flipped_octet_in_header_or_body_is_refused() {
        let bytes = signed_answer();
        let mut credential = crate::values::wire::Writer::new();
        let decoded = Message::decode(&bytes).unwrap();
        decoded.credential.unwrap().encode(&mut credential);
        let signed_end = bytes.len() - credential.len();
        let mut refused = 0;
        for at in ENVELOPE_LEN..signed_end {
            let mut tampered = bytes.clone();
            tampered[at] ^= 0x01;
            // A flip may make the message undecodable; one that decodes must fail.
            if let Ok(message) = Message::decode(&tampered) {
                assert_eq!(
                    check_signature(&message, &key(test_key())),
                    Err(SignatureError::Mismatch),
                    "octet {at}"
                );
                refused += 1;
            }
        }
        assert!(refused > 20, "{refused} decodable tamperings");
    }

    #[test]
    fn an_unsigned_answer_is_refused() {
        let mut message = Message::decode(&signed_answer()).unwrap();
        message.credential = None;
        let message = Message::decode(&message.encode()).unwrap();
        assert_eq!(
            check_signature(&message, &key(test_key())),
            Err(SignatureError::Missing)
        );
    }

    /// An answer J9 9.2.0 accepted with signature checks on (a CT resolution of
    /// `TEST/signed` over TCP, in the `j9` namespace, 2026-11-23), and the modulus of
    /// the key in that server's HS_SITE entry (exponent 65537).
    const J9_ACCEPTED: [&str; 10] = [
        "020b020b0000000051177ff6000000000000018e0000000100000001d9000000000100006b05764e00000046",
        "0000000b544553542f7369676e656400000001000000016b04cd8200000151800e0000000355524c00000016",
        "68747470733a2f2f6578616d706c652e6f72672f6a39000000000000012c0000000000000000000000000000",
        "000948535f5349474e45440000010f000000075348412d32353600000100593b125020431c28c165b32bbdec",
        "cc2fb264789e8a0fb89e17532a7d59d514b4523953beee07ccaed47d41cb67536c1b3f43fb7cdd115547f8fc",
        "7ab9fcb7527a40c1491020908925bf4a281d80b69a3a396be3ee5bc42642840e16969835ffea98777f8eeb8f",
        "051b5fe9c38a952b4e330efa881db128870752ea2769515c6c44290c66293238992792da8ac163d293b763e8",
        "abeb50b1feb0e1ea09aaa60e354bac29fc86df26fc71c4b8f9365681fb233bdc7457225345c9394d349f11e0",
        "6995cea36cb5f5b4e8e31351fc9433b72c58b5d03835dffe4e51f7c5f1dc6c98d04f2cb542457e824db7bec6",
        "5218740d1800e2b6b491aac08fbd65dfd38eaf19d8f1",
    ];
    const J9_SERVER_MODULUS: [&str; 6] = [
        "c624cd1f62195b9d9dc202abf7578b0e06c75fea31e0904d4aa113b7a9a73368fb3b8ef0fba62c31a934d247",
        "1b2dc1b1f359e5bfdd57853c8fb8fe4301db4e751f9a34c35dfe0e7ccfc7734d731d033dd630e91c676b2527",
        "ca132b52ff8d2e01ed17902b18f8f7717f604e34ce1ea25afce763eb386e5b1594287fa19a0c5fe4fa709fa0",
        "0572ae156a6f5c179718a9278a9872cc660ef73fab1fa5366be21c891271c64829acd31aeaa9a9d8bb313df9",
        "17b95b824edf11983f02612a052cbf6c524441307912c35c83f37e5b8b3b00239349dad6eca6c670c83bf4b7",
        "0b230382b3f9ecca1f2c46abba0315d669886dd269b517e8660baadd1f6fdb81eb99f183",
    ];

    #[test]
    fn the_answer_j9_accepted_checks_out_and_a_flip_does_not() {
        let modulus = crate::values::known::hex(&J9_SERVER_MODULUS.concat());
        let public = crate::values::PublicKey::Rsa {
            exponent: vec![1, 0, 1],
            modulus,
        };
        let key = VerifyingKey::from_public_key(&public).unwrap();
        let bytes = crate::values::known::hex(&J9_ACCEPTED.concat());
        let message = Message::decode(&bytes).unwrap();
        let credential = message.credential.clone().unwrap();
        assert_eq!(credential.credential_type, b"HS_SIGNED");
        assert_eq!(credential.digest_algorithm, b"SHA-256");
        assert_eq!(check_signature(&message, &key), Ok(()));
        let mut tampered = bytes.clone();
        let url_end = bytes.windows(2).position(|w| w == b"j9").unwrap();
        tampered[url_end + 1] = b'8';
        let message = Message::decode(&tampered).unwrap();
        assert_eq!(
            check_signature(&message, &key),
            Err(SignatureError::Mismatch)
        );
    }
}
