//! The 20-octet message envelope (digest §1.1, §1.2; RFC 3652 §2.2.1).
//!
//! Owns [`Envelope`] and [`MessageFlags`]. Pure: no I/O, no clock. Depends only on
//! [`crate::values::wire`].
//!
//! Layout: `MajorVersion u8 ‖ MinorVersion u8 ‖ MessageFlag(3 bits) | SuggestedMajor(5
//! bits) ‖ SuggestedMinor u8 ‖ SessionId u32 ‖ RequestId u32 ‖ SequenceNumber u32 ‖
//! MessageLength u32`. The envelope is never signed, digested or encrypted.
//!
//! Invariant: every octet is kept, so decode → encode reproduces the input exactly; the
//! "reserved" low bits of octet 2 are CNRI's suggested major version and are never
//! rejected (digest §13.1).

use super::version::ProtocolVersion;
use crate::values::wire::{DecodeError, Reader, Writer};

/// Octets in an envelope.
pub const ENVELOPE_LEN: usize = 20;

/// Where RequestId sits in the envelope.
const REQUEST_ID_OFFSET: usize = 8;

/// Bits of octet 2 that hold the suggested major version (DO-IRP's 5-bit field; J9
/// reads only `0x03`, which is identical for major 2).
const SUGGESTED_MAJOR_MASK: u8 = 0x1F;

/// The three message flags in the high bits of envelope octet 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MessageFlags(u8);

impl MessageFlags {
    /// No flag set.
    pub const NONE: MessageFlags = MessageFlags(0);
    /// CP: the payload is compressed (never implemented by J9; refused).
    pub const CP: MessageFlags = MessageFlags(0x80);
    /// EC: the payload is encrypted with a session key.
    pub const EC: MessageFlags = MessageFlags(0x40);
    /// TC: the message is split over several UDP datagrams.
    pub const TC: MessageFlags = MessageFlags(0x20);

    /// The flags from octet 2; the suggested-major bits are dropped.
    pub const fn from_bits(bits: u8) -> Self {
        MessageFlags(bits & !SUGGESTED_MAJOR_MASK)
    }

    /// The flag bits as they sit in octet 2.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// Whether every flag of `other` is set here.
    pub const fn contains(self, other: MessageFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// These flags with those of `other` added.
    pub const fn with(self, other: MessageFlags) -> MessageFlags {
        MessageFlags(self.0 | other.0)
    }

    /// These flags with those of `other` removed.
    pub const fn without(self, other: MessageFlags) -> MessageFlags {
        MessageFlags(self.0 & !other.0)
    }
}

/// The envelope in front of every message and of every UDP datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Envelope {
    /// The version the message is encoded in.
    pub version: ProtocolVersion,
    /// The highest version the sender can read, as sent (5-bit major; a major of 0
    /// means the sender did not suggest one, see [`Envelope::suggested_version`]).
    pub suggested: ProtocolVersion,
    /// CP, EC and TC.
    pub flags: MessageFlags,
    /// 0 outside a session; the challenge id in the authentication flow.
    pub session_id: u32,
    /// Chosen by the requester, echoed by the responder.
    pub request_id: u32,
    /// The index of this UDP datagram; 0 for a whole message.
    pub sequence_number: u32,
    /// Octets of the whole message after the envelope (not of this datagram).
    /// [`super::Message::encode`] fills it in.
    pub message_length: u32,
}

impl Envelope {
    /// An envelope for a new message of `version` that suggests
    /// [`ProtocolVersion::MAX_SUPPORTED`], with no flags, session or length.
    pub const fn new(version: ProtocolVersion, request_id: u32) -> Self {
        Envelope {
            version,
            suggested: ProtocolVersion::MAX_SUPPORTED,
            flags: MessageFlags::NONE,
            session_id: 0,
            request_id,
            sequence_number: 0,
            message_length: 0,
        }
    }

    /// The highest version the sender can read: the suggested version, or the
    /// envelope's own version when none was suggested (pre-v8 peers).
    pub fn suggested_version(&self) -> ProtocolVersion {
        if self.suggested.major == 0 {
            self.version
        } else {
            self.suggested
        }
    }

    /// Appends the 20 octets.
    pub fn encode(&self, w: &mut Writer) {
        w.u8(self.version.major);
        w.u8(self.version.minor);
        w.u8(self.flags.bits() | (self.suggested.major & SUGGESTED_MAJOR_MASK));
        w.u8(self.suggested.minor);
        w.u32(self.session_id);
        w.u32(self.request_id);
        w.u32(self.sequence_number);
        w.u32(self.message_length);
    }

    /// Reads the 20 octets at the start of `r`; no value is refused here (limits on
    /// MessageLength are the caller's, see [`super::Message::decode`]).
    pub fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let major = r.u8("major version")?;
        let minor = r.u8("minor version")?;
        let flag_octet = r.u8("message flags")?;
        let suggested_minor = r.u8("suggested minor version")?;
        Ok(Envelope {
            version: ProtocolVersion::new(major, minor),
            suggested: ProtocolVersion::new(flag_octet & SUGGESTED_MAJOR_MASK, suggested_minor),
            flags: MessageFlags::from_bits(flag_octet),
            session_id: r.u32("session id")?,
            request_id: r.u32("request id")?,
            sequence_number: r.u32("sequence number")?,
            message_length: r.u32("message length")?,
        })
    }

    /// Sets the RequestId of an encoded envelope in place: a sender that sends one
    /// encoded message again and again as different requests.
    pub fn set_request_id(encoded: &mut [u8; ENVELOPE_LEN], request_id: u32) {
        encoded[REQUEST_ID_OFFSET..REQUEST_ID_OFFSET + 4]
            .copy_from_slice(&request_id.to_be_bytes());
    }

    /// Reads the envelope at the start of `bytes` (which may go on past it).
    pub fn peek(bytes: &[u8]) -> Result<Self, DecodeError> {
        Envelope::decode(&mut Reader::new(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::testing::hex;

    fn encode(envelope: &Envelope) -> Vec<u8> {
        let mut w = Writer::new();
        envelope.encode(&mut w);
        w.into_bytes()
    }

    #[test]
    fn v9_request_envelope_matches_digest_vector() {
        // Digest §11.1: sent as 2.10, suggesting 2.11, MessageLength 47.
        let bytes = hex("020a020b 00000000 01020304 00000000 0000002f");
        let envelope = Envelope {
            message_length: 47,
            ..Envelope::new(ProtocolVersion::new(2, 10), 0x0102_0304)
        };
        assert_eq!(encode(&envelope), bytes);
        assert_eq!(Envelope::peek(&bytes).unwrap(), envelope);
    }

    #[test]
    fn truncation_flag_shares_octet_two_with_suggested_major() {
        // Digest §11.9: TC (0x20) | suggested major 2 = 0x22.
        let bytes = hex("020a220b 00000000 1234abcd 00000001 000003e8");
        let envelope = Envelope::peek(&bytes).unwrap();
        assert!(envelope.flags.contains(MessageFlags::TC));
        assert!(!envelope.flags.contains(MessageFlags::CP));
        assert_eq!(envelope.suggested, ProtocolVersion::new(2, 11));
        assert_eq!(envelope.sequence_number, 1);
        assert_eq!(envelope.message_length, 1000);
        assert_eq!(encode(&envelope), bytes);
    }

    #[test]
    fn missing_suggestion_means_the_envelope_version() {
        let bytes = hex("0203 0000 00000000 00000001 00000000 00000000");
        let envelope = Envelope::peek(&bytes).unwrap();
        assert_eq!(envelope.suggested_version(), ProtocolVersion::new(2, 3));
        assert_eq!(encode(&envelope), bytes);
    }

    #[test]
    fn set_request_id_changes_that_field_alone() {
        let envelope = Envelope {
            message_length: 47,
            ..Envelope::new(ProtocolVersion::new(2, 10), 0x0102_0304)
        };
        let mut bytes: [u8; ENVELOPE_LEN] = encode(&envelope).try_into().unwrap();
        Envelope::set_request_id(&mut bytes, 0x7fff_fffe);
        let expected = Envelope {
            request_id: 0x7fff_fffe,
            ..envelope
        };
        assert_eq!(Envelope::peek(&bytes).unwrap(), expected);
    }

    #[test]
    fn short_envelope_is_truncated() {
        let err = Envelope::peek(&[2, 10, 2, 11, 0]).unwrap_err();
        assert!(matches!(err, DecodeError::Truncated { offset: 4, .. }));
    }

    #[test]
    fn every_flag_octet_round_trips() {
        for octet in 0..=u8::MAX {
            let mut bytes = hex("020b000b 00000000 00000000 00000000 00000000");
            bytes[2] = octet;
            assert_eq!(encode(&Envelope::peek(&bytes).unwrap()), bytes);
        }
    }
}
