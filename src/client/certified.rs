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
}
