//! Messages whose payload is encrypted with a session key (envelope flag EC, digest
//! §3.8; J9 `HdlTcpRequestHandler`, `HandleResolver.sendHdlTcpRequest`).
//!
//! Owns [`Sealed`] and [`unsealed`]: where the encrypted octets sit, not how they are
//! encrypted — the cipher is passed in (the server uses
//! [`crate::auth::session_cipher`]). Pure.
//!
//! The payload is everything after the envelope — header, body and credential — so a
//! credential is computed over the plain message before it is sealed. The envelope
//! stays in the clear, with EC set and MessageLength counting the sealed octets.

use super::envelope::{ENVELOPE_LEN, Envelope, MessageFlags};
use super::message::Message;
use super::udp::split_datagrams;
use crate::values::wire::{Writer, wire_len};

/// A message ready to send with its payload sealed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    envelope: Envelope,
    payload: Vec<u8>,
}

impl Message {
    /// This message with its payload passed through `seal`, and EC set.
    pub fn seal<E>(&self, seal: impl FnOnce(&[u8]) -> Result<Vec<u8>, E>) -> Result<Sealed, E> {
        let payload = seal(&self.payload())?;
        let envelope = Envelope {
            flags: self.envelope.flags.with(MessageFlags::EC),
            ..self.envelope
        };
        Ok(Sealed { envelope, payload })
    }
}

impl Sealed {
    /// The session the message is sealed for.
    pub fn session_id(&self) -> u32 {
        self.envelope.session_id
    }

    /// The message on the wire: the envelope, then the sealed payload.
    pub fn encode(&self) -> Vec<u8> {
        with_envelope(&self.envelope, &self.payload)
    }

    /// The message as UDP datagrams of at most 512 octets (digest §1.3), each with EC.
    pub fn encode_datagrams(&self) -> Vec<Vec<u8>> {
        split_datagrams(&self.envelope, &self.payload)
    }
}

/// A received message whose envelope has EC (`bytes` holds the envelope and all of
/// its MessageLength octets) with its payload opened by `open` and EC cleared: what
/// [`Message::decode`] takes. `envelope` is the one read from `bytes`.
pub fn unsealed<E>(
    envelope: &Envelope,
    bytes: &[u8],
    open: impl FnOnce(&[u8]) -> Result<Vec<u8>, E>,
) -> Result<Vec<u8>, E> {
    let plain = open(bytes.get(ENVELOPE_LEN..).unwrap_or_default())?;
    let envelope = Envelope {
        flags: envelope.flags.without(MessageFlags::EC),
        ..*envelope
    };
    Ok(with_envelope(&envelope, &plain))
}

/// `envelope`, its MessageLength set to the length of `payload`, then `payload`.
fn with_envelope(envelope: &Envelope, payload: &[u8]) -> Vec<u8> {
    let envelope = Envelope {
        message_length: wire_len(payload.len()),
        ..*envelope
    };
    let mut w = Writer::with_capacity(ENVELOPE_LEN + payload.len());
    envelope.encode(&mut w);
    w.raw(payload);
    w.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{
        Body, CodecError, Header, OpCode, ProtocolVersion, Request, ResolutionRequest,
    };

    fn message() -> Message {
        let envelope = Envelope {
            session_id: 77,
            ..Envelope::new(ProtocolVersion::MAX_SUPPORTED, 5)
        };
        let header = Header::request(OpCode::Resolution, 2_000_000_000);
        let body = Body::Request(Request::Resolution(ResolutionRequest {
            handle: b"0.NA/TEST".to_vec(),
            indexes: Vec::new(),
            types: Vec::new(),
        }));
        Message::new(envelope, header, body)
    }

    /// A stand-in cipher: reverse the octets (the codec must not care which).
    fn reverse(octets: &[u8]) -> Result<Vec<u8>, ()> {
        Ok(octets.iter().rev().copied().collect())
    }

    #[test]
    fn a_sealed_message_opens_to_the_same_message() {
        let plain = message();
        let sealed = plain.seal(reverse).unwrap();
        let bytes = sealed.encode();
        let envelope = Envelope::peek(&bytes).unwrap();
        assert!(envelope.flags.contains(MessageFlags::EC));
        assert!(matches!(
            Message::decode(&bytes),
            Err(CodecError::Encrypted { .. })
        ));
        let opened = unsealed(&envelope, &bytes, reverse).unwrap();
        let decoded = Message::decode(&opened).unwrap();
        assert_eq!(decoded.header, plain.header);
        assert_eq!(decoded.body, plain.body);
        assert_eq!(decoded.envelope.session_id, 77);
    }

    #[test]
    fn every_datagram_of_a_sealed_message_says_ec() {
        let sealed = message().seal(|p| Ok::<_, ()>(p.repeat(20))).unwrap();
        let datagrams = sealed.encode_datagrams();
        assert!(datagrams.len() > 1);
        for datagram in &datagrams {
            let envelope = Envelope::peek(datagram).unwrap();
            assert!(envelope.flags.contains(MessageFlags::EC));
        }
    }

    #[test]
    fn a_failed_opening_is_the_callers_error() {
        let bytes = message().seal(reverse).unwrap().encode();
        let envelope = Envelope::peek(&bytes).unwrap();
        assert_eq!(
            unsealed(&envelope, &bytes, |_| Err::<Vec<u8>, _>("bad")),
            Err("bad")
        );
    }
}
