//! The 24-octet message header and its OpFlag bits (digest §2, §2.1; RFC 3652 §2.2.2).
//!
//! Owns [`Header`] and [`OpFlags`]. Pure; depends only on [`crate::values::wire`] and
//! the codec's own code and version types.
//!
//! Layout: `OpCode u32 ‖ ResponseCode u32 ‖ OpFlag u32 ‖ SiteInfoSerialNumber u16 ‖
//! RecursionCount u8 ‖ reserved u8 ‖ ExpirationTime u32 ‖ BodyLength u32`.
//! BodyLength is not stored: it is written from the body and checked on decode. The
//! reserved octet is written as 0 and, like J9, ignored when read.

use super::codes::{OpCode, ResponseCode};
use super::envelope::{ENVELOPE_LEN, Envelope};
use super::version::ProtocolVersion;
use crate::values::wire::{DecodeError, Reader, Writer};

/// Octets in a header.
pub const HEADER_LEN: usize = 24;

/// The OpFlag bit mask (bit 31 is the most significant bit of the first octet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct OpFlags(u32);

impl OpFlags {
    /// No flag.
    pub const NONE: OpFlags = OpFlags(0);
    /// AT: answer from a primary only; in a response, sent by a primary.
    pub const AT: OpFlags = OpFlags(0x8000_0000);
    /// CT: sign the response.
    pub const CT: OpFlags = OpFlags(0x4000_0000);
    /// ENC: encrypt the response (needs a session).
    pub const ENC: OpFlags = OpFlags(0x2000_0000);
    /// REC: the server may resolve on the client's behalf.
    pub const REC: OpFlags = OpFlags(0x1000_0000);
    /// CA: a caching server should sign what it returns.
    pub const CA: OpFlags = OpFlags(0x0800_0000);
    /// CN: more messages for this request follow on the same connection.
    pub const CN: OpFlags = OpFlags(0x0400_0000);
    /// KC: keep the TCP connection open (ignored by J9).
    pub const KC: OpFlags = OpFlags(0x0200_0000);
    /// PO: return only publicly readable values.
    pub const PO: OpFlags = OpFlags(0x0100_0000);
    /// RD: the response body starts with a digest of the request.
    pub const RD: OpFlags = OpFlags(0x0080_0000);
    /// OverwriteWhenExists: create/add replace instead of failing (CNRI).
    pub const OW: OpFlags = OpFlags(0x0040_0000);
    /// MintNewSuffix: create appends a fresh suffix to the handle (CNRI).
    pub const MINT: OpFlags = OpFlags(0x0020_0000);
    /// DoNotRefer: do not answer with a prefix referral (CNRI).
    pub const DNRF: OpFlags = OpFlags(0x0010_0000);
    /// What every J9-built message carries: `REC | CA | PO` (`0x19000000`).
    pub const J9_DEFAULT: OpFlags = OpFlags(0x1900_0000);

    /// The flags from their wire value; unknown bits are kept as sent.
    pub const fn from_bits(bits: u32) -> Self {
        OpFlags(bits)
    }

    /// The wire value.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Whether every bit of `other` is set here.
    pub const fn contains(self, other: OpFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// These flags with the bits of `other` added.
    pub const fn with(self, other: OpFlags) -> OpFlags {
        OpFlags(self.0 | other.0)
    }

    /// These flags with the bits of `other` removed.
    pub const fn without(self, other: OpFlags) -> OpFlags {
        OpFlags(self.0 & !other.0)
    }
}

impl std::ops::BitOr for OpFlags {
    type Output = OpFlags;

    fn bitor(self, rhs: OpFlags) -> OpFlags {
        self.with(rhs)
    }
}

/// The message header, less the BodyLength that is derived from the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Header {
    /// The operation (a response carries its request's).
    pub opcode: OpCode,
    /// [`ResponseCode::Reserved`] in a request, the outcome in a response.
    pub response_code: ResponseCode,
    /// The OpFlag bits. In a response, RD is written from whether the body carries a
    /// request digest, so the two cannot disagree.
    pub flags: OpFlags,
    /// The sender's HS_SITE serial; J9 requests send `0xFFFF` when unknown.
    pub site_info_serial: u16,
    /// Referrals followed or forwards made so far.
    pub recursion_count: u8,
    /// Seconds since the Unix epoch after which the message is stale (J9 clients refuse
    /// an expired response).
    pub expiration: u32,
}

impl Header {
    /// A request header for `opcode` with J9's default flags, an unknown site serial,
    /// no recursion and the given expiry.
    pub const fn request(opcode: OpCode, expiration: u32) -> Self {
        Header {
            opcode,
            response_code: ResponseCode::Reserved,
            flags: OpFlags::J9_DEFAULT,
            site_info_serial: 0xFFFF,
            recursion_count: 0,
            expiration,
        }
    }

    /// Whether this heads a request (response code 0).
    pub fn is_request(&self) -> bool {
        self.response_code == ResponseCode::Reserved
    }

    /// The envelope and header at the start of a whole message or of its first UDP
    /// datagram (sequence number 0; later datagrams carry no header), the body unread:
    /// enough to tell a request from a response and read its outcome, as a load
    /// generator sorts answers by the thousand.
    pub fn peek(message: &[u8]) -> Result<(Envelope, Header), DecodeError> {
        let envelope = Envelope::peek(message)?;
        let mut r = Reader::new(message);
        r.take(ENVELOPE_LEN, "envelope")?;
        let (header, _) = Header::decode(&mut r, envelope.version)?;
        Ok((envelope, header))
    }

    /// Appends the 24 octets for a message of `version` with `flags` (the caller's
    /// final OpFlag value) and `body_len` octets of body.
    pub(super) fn encode(
        &self,
        w: &mut Writer,
        version: ProtocolVersion,
        flags: OpFlags,
        body_len: u32,
    ) {
        w.u32(self.opcode.to_u32());
        w.u32(self.response_code.to_wire(version));
        w.u32(flags.bits());
        w.u16(self.site_info_serial);
        w.u8(self.recursion_count);
        w.u8(0);
        w.u32(self.expiration);
        w.u32(body_len);
    }

    /// Reads 24 octets of a message of `version`; returns the header and BodyLength.
    pub(super) fn decode(
        r: &mut Reader<'_>,
        version: ProtocolVersion,
    ) -> Result<(Self, u32), DecodeError> {
        let opcode = OpCode::from_u32(r.u32("opcode")?);
        let wire_code = r.u32("response code")?;
        let response_code =
            ResponseCode::from_wire(wire_code, version).ok_or(DecodeError::InvalidField {
                field: "response code",
                value: u64::from(wire_code),
            })?;
        let flags = OpFlags::from_bits(r.u32("opflags")?);
        let site_info_serial = r.u16("site info serial")?;
        let recursion_count = r.u8("recursion count")?;
        r.u8("reserved")?;
        let header = Header {
            opcode,
            response_code,
            flags,
            site_info_serial,
            recursion_count,
            expiration: r.u32("expiration time")?,
        };
        Ok((header, r.u32("body length")?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::testing::hex;

    const V2_10: ProtocolVersion = ProtocolVersion::new(2, 10);

    #[test]
    fn resolution_request_header_matches_digest_vector() {
        // Digest §11.1: OC 1, RC 0, REC|CA|PO, serial 15, expiry 0x5f5e1000, body 19.
        let bytes = hex("00000001 00000000 19000000 000f 00 00 5f5e1000 00000013");
        let header = Header {
            site_info_serial: 15,
            ..Header::request(OpCode::Resolution, 0x5f5e_1000)
        };
        let mut w = Writer::new();
        header.encode(&mut w, V2_10, header.flags, 19);
        assert_eq!(w.into_bytes(), bytes);
        let mut r = Reader::new(&bytes);
        assert_eq!(Header::decode(&mut r, V2_10).unwrap(), (header, 19));
        r.finish("header").unwrap();
    }

    #[test]
    fn peek_reads_the_envelope_and_header_of_a_message_and_leaves_the_body() {
        // Digest §11.1's request: envelope, header, then 19 octets of body (not given).
        let message = hex("020a020b 00000000 01020304 00000000 0000002f \
             00000001 00000000 19000000 000f 00 00 5f5e1000 00000013");
        let (envelope, header) = Header::peek(&message).unwrap();
        assert_eq!(envelope.request_id, 0x0102_0304);
        assert_eq!(header.opcode, OpCode::Resolution);
        assert!(header.is_request());
        let err = Header::peek(&message[..ENVELOPE_LEN + 6]).unwrap_err();
        assert!(matches!(err, DecodeError::Truncated { .. }), "{err}");
    }

    #[test]
    fn unknown_response_code_is_refused() {
        let bytes = hex("00000001 00000384 19000000 ffff 00 00 5f5e1000 00000000");
        assert_eq!(
            Header::decode(&mut Reader::new(&bytes), V2_10).unwrap_err(),
            DecodeError::InvalidField {
                field: "response code",
                value: 900
            }
        );
    }

    #[test]
    fn flag_constants_match_the_digest_masks() {
        let all = [
            OpFlags::AT,
            OpFlags::CT,
            OpFlags::ENC,
            OpFlags::REC,
            OpFlags::CA,
            OpFlags::CN,
            OpFlags::KC,
            OpFlags::PO,
            OpFlags::RD,
            OpFlags::OW,
            OpFlags::MINT,
            OpFlags::DNRF,
        ];
        let union = all.iter().fold(OpFlags::NONE, |acc, f| acc | *f);
        assert_eq!(union.bits(), 0xFFF0_0000);
        assert_eq!(
            OpFlags::REC | OpFlags::CA | OpFlags::PO,
            OpFlags::J9_DEFAULT
        );
        // Digest §11.10: create with Mint + Overwrite.
        assert_eq!(
            (OpFlags::J9_DEFAULT | OpFlags::MINT | OpFlags::OW).bits(),
            0x1960_0000
        );
        assert!(
            !OpFlags::J9_DEFAULT
                .without(OpFlags::PO)
                .contains(OpFlags::PO)
        );
    }
}
