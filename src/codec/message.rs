//! A whole message: envelope, header, body and credential (digest §1.1, §2, §2.5,
//! §11; RFC 3652 §2.2).
//!
//! Owns [`Message`], [`MAX_MESSAGE_LEN`] and [`MAX_VALUE_LIST_LEN`]. Pure; depends only on [`crate::values`]
//! and the codec's parts.
//!
//! Invariants: [`Message::decode`] takes exactly one envelope and its MessageLength
//! octets — fewer or more is an error, as are octets after the credential — and keeps
//! the header and body octets as received, because request digests and signatures are
//! computed over them (digest §13.5). [`Message::encode`] cannot fail; it derives
//! MessageLength, BodyLength and (in responses) the RD bit, and always writes the
//! credential length, 0 when there is none (digest §13.3).

use super::body::Body;
use super::credential::Credential;
use super::envelope::{ENVELOPE_LEN, Envelope, MessageFlags};
use super::error::CodecError;
use super::header::{HEADER_LEN, Header};
use super::udp::{DATAGRAM_PAYLOAD_LEN, MAX_DATAGRAM_LEN, split_datagrams};
use crate::values::wire::{DecodeError, Reader, Writer, wire_len};

/// The largest MessageLength accepted (J9 `Common.MAX_MESSAGE_LENGTH`, 256 KiB); it
/// counts the octets after the envelope.
pub const MAX_MESSAGE_LEN: usize = 262_144;

/// The most octets a handle's values may take in their RFC 3652 encoding (the value
/// list: its count and every value), so that a resolution answer carrying all of them
/// fits one message of [`MAX_MESSAGE_LEN`], which J9 and hdl clients read over TCP.
/// The 8 KiB left over hold the rest of the worst answer, about 3.3 KiB: the header
/// (24), a SHA-256 request digest (33), a handle of the longest kind (4 + 2,048), a
/// credential signed by an 8,192-bit server key (1,075) and the IV and padding of a
/// sealed answer (32).
pub const MAX_VALUE_LIST_LEN: usize = MAX_MESSAGE_LEN - 8 * 1024;

/// Offset of MessageLength inside the envelope.
const MESSAGE_LENGTH_OFFSET: usize = 16;

/// One Handle protocol message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The envelope; its MessageLength is derived when encoding.
    pub envelope: Envelope,
    /// The header; its BodyLength is derived when encoding.
    pub header: Header,
    /// The body.
    pub body: Body,
    /// The credential, decoded but not verified; `None` when absent or empty.
    pub credential: Option<Credential>,
    /// Header and body exactly as received; `None` for a message built locally.
    pub(super) raw: Option<Vec<u8>>,
}

impl Message {
    /// A message to send, without credential.
    pub fn new(envelope: Envelope, header: Header, body: Body) -> Self {
        Message {
            envelope,
            header,
            body,
            credential: None,
            raw: None,
        }
    }

    /// The header and body octets exactly as received (what request digests and
    /// signatures cover); `None` for a message that was not decoded.
    pub fn raw_header_and_body(&self) -> Option<&[u8]> {
        self.raw.as_deref()
    }

    /// Decodes one complete message: the 20-octet envelope and exactly MessageLength
    /// octets after it (a TCP frame, or reassembled UDP datagrams).
    pub fn decode(bytes: &[u8]) -> Result<Message, CodecError> {
        let envelope = Envelope::peek(bytes).map_err(CodecError::Envelope)?;
        check_envelope(&envelope, bytes.len() - ENVELOPE_LEN)?;
        let malformed = |header| {
            move |source| CodecError::Malformed {
                envelope,
                header,
                source,
            }
        };
        let mut r = Reader::new(bytes);
        r.take(ENVELOPE_LEN, "envelope").map_err(malformed(None))?;
        let (header, body_len) =
            Header::decode(&mut r, envelope.version).map_err(malformed(None))?;
        let body = decode_body(&header, bytes, &mut r, body_len as usize)
            .map_err(malformed(Some(header)))?
            .ok_or(CodecError::UnsupportedOperation { envelope, header })?;
        let raw = bytes[ENVELOPE_LEN..r.offset()].to_vec();
        let credential = decode_credential(&mut r).map_err(malformed(Some(header)))?;
        Ok(Message {
            envelope,
            header,
            body,
            credential,
            raw: Some(raw),
        })
    }

    /// The message on the wire: envelope, header, body and credential.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(ENVELOPE_LEN + HEADER_LEN + 256);
        self.envelope.encode(&mut w);
        self.encode_payload_into(&mut w);
        let message_len = w.len() - ENVELOPE_LEN;
        w.patch_u32(MESSAGE_LENGTH_OFFSET, wire_len(message_len));
        w.into_bytes()
    }

    /// The message as UDP datagrams of at most 512 octets (digest §1.3). A message
    /// that fits one datagram (most answers) is written once, in place, with no
    /// second copy: the datagram is the message with sequence number 0.
    pub fn encode_datagrams(&self) -> Vec<Vec<u8>> {
        let mut w = Writer::with_capacity(MAX_DATAGRAM_LEN);
        let first = Envelope {
            sequence_number: 0,
            ..self.envelope
        };
        first.encode(&mut w);
        self.encode_payload_into(&mut w);
        let payload_len = w.len() - ENVELOPE_LEN;
        if payload_len > DATAGRAM_PAYLOAD_LEN {
            let message = w.into_bytes();
            return split_datagrams(&self.envelope, &message[ENVELOPE_LEN..]);
        }
        w.patch_u32(MESSAGE_LENGTH_OFFSET, wire_len(payload_len));
        vec![w.into_bytes()]
    }

    /// Header, body and credential: the octets after the envelope.
    pub(super) fn payload(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(HEADER_LEN + 256);
        self.encode_payload_into(&mut w);
        w.into_bytes()
    }

    /// Appends header, body and credential.
    fn encode_payload_into(&self, w: &mut Writer) {
        let flags = self.body.wire_flags(self.header.flags);
        self.header.encode(w, self.envelope.version, flags, 0);
        let body_start = w.len();
        self.body.encode(w);
        let body_len = wire_len(w.len() - body_start);
        w.patch_u32(body_start - 4, body_len);
        match &self.credential {
            Some(credential) => credential.encode(w),
            None => w.u32(0),
        }
    }
}

/// Refuses envelopes whose payload cannot or must not be decoded.
fn check_envelope(envelope: &Envelope, present: usize) -> Result<(), CodecError> {
    let envelope = *envelope;
    let declared = envelope.message_length;
    if declared as usize > MAX_MESSAGE_LEN {
        return Err(CodecError::TooLong {
            envelope,
            length: declared,
            limit: MAX_MESSAGE_LEN,
        });
    }
    if declared as usize != present {
        return Err(CodecError::LengthMismatch {
            envelope,
            declared,
            present,
        });
    }
    if envelope.flags.contains(MessageFlags::CP) {
        return Err(CodecError::Compressed { envelope });
    }
    if envelope.flags.contains(MessageFlags::EC) {
        return Err(CodecError::Encrypted { envelope });
    }
    Ok(())
}

/// Reads the body with a reader bounded to BodyLength (offsets stay those of the whole
/// message) and moves `r` past it.
fn decode_body(
    header: &Header,
    bytes: &[u8],
    r: &mut Reader<'_>,
    body_len: usize,
) -> Result<Option<Body>, DecodeError> {
    let start = r.offset();
    r.take(body_len, "body")?;
    let mut body_reader = Reader::new(&bytes[..start + body_len]);
    body_reader.take(start, "header")?;
    let body = Body::decode(header, &mut body_reader)?;
    if body.is_some() {
        body_reader.finish("body")?;
    }
    Ok(body)
}

/// Reads the credential, tolerating its absence, then insists nothing follows.
fn decode_credential(r: &mut Reader<'_>) -> Result<Option<Credential>, DecodeError> {
    let credential = if r.remaining() == 0 {
        None
    } else {
        Credential::decode(r)?
    };
    r.finish("message")?;
    Ok(credential)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::codes::{OpCode, ResponseCode};
    use crate::codec::digest::RequestDigest;
    use crate::codec::header::OpFlags;
    use crate::codec::request::{HandleValues, Request, ResolutionRequest};
    use crate::codec::response::{ErrorResponse, Response};
    use crate::codec::testing::hex;
    use crate::codec::version::ProtocolVersion;
    use crate::values::HandleValue;

    const EXPIRY: u32 = 0x5f5e_1000;

    #[test]
    fn the_largest_handle_fits_one_signed_sealed_answer() {
        // One value of data filling the list to the bound, a 2,048-octet handle, a
        // SHA-256 request digest and an 8,192-bit signature.
        let mut value = HandleValue::new(1, "URL", Vec::new());
        value.data = vec![0; MAX_VALUE_LIST_LEN - 4 - value.encoded_len()];
        let values = vec![value];
        assert_eq!(crate::values::value_list_len(&values), MAX_VALUE_LIST_LEN);
        let envelope = Envelope::new(ProtocolVersion::new(2, 11), 1);
        let header = Header::request(OpCode::Resolution, EXPIRY);
        let body = Body::Response {
            digest: Some(RequestDigest::Sha256([0; 32])),
            response: Response::Resolution(HandleValues {
                handle: vec![b'a'; crate::names::MAX_HANDLE_LEN],
                values,
            }),
        };
        let mut answer = Message::new(envelope, header, body);
        answer.credential = Some(Credential {
            version: 0,
            reserved: 0,
            options: 0,
            signer_handle: Vec::new(),
            signer_index: 0,
            credential_type: b"HS_SIGNED".to_vec(),
            digest_algorithm: b"SHA-256".to_vec(),
            signature: vec![0; 8192 / 8],
        });
        let sealing = 32;
        assert!(answer.payload().len() + sealing <= MAX_MESSAGE_LEN);
    }

    #[test]
    fn datagrams_are_the_payload_cut_in_pieces_whatever_its_size() {
        for data_len in [0, 100, 3 * DATAGRAM_PAYLOAD_LEN] {
            let mut answer = doi_url_response(OpFlags::NONE, None);
            answer.envelope.sequence_number = 7;
            if let Body::Response {
                response: Response::Resolution(values),
                ..
            } = &mut answer.body
            {
                values.values[0].data = vec![b'x'; data_len];
            }
            let datagrams = answer.encode_datagrams();
            assert_eq!(
                datagrams,
                split_datagrams(&answer.envelope, &answer.payload()),
                "{data_len} octets of data"
            );
            assert_eq!(datagrams.len() > 1, data_len > DATAGRAM_PAYLOAD_LEN);
        }
    }

    /// Decodes `hex`, checks it against `expected` (whose raw part is filled in from
    /// the input) and encodes it back to the same octets.
    fn both_ways(hex_text: &str, mut expected: Message) {
        let bytes = hex(hex_text);
        let decoded = Message::decode(&bytes).unwrap();
        expected.envelope.message_length = wire_len(bytes.len() - ENVELOPE_LEN);
        expected.raw = Some(bytes[ENVELOPE_LEN..bytes.len() - 4].to_vec());
        assert_eq!(decoded, expected);
        assert_eq!(decoded.encode(), bytes);
        assert_eq!(
            Message {
                raw: None,
                ..expected
            }
            .encode(),
            bytes
        );
    }

    fn resolve(handle: &str, types: &[&str]) -> Body {
        Body::Request(Request::Resolution(ResolutionRequest {
            handle: handle.as_bytes().to_vec(),
            indexes: vec![],
            types: types.iter().map(|t| t.as_bytes().to_vec()).collect(),
        }))
    }

    fn envelope(minor: u8, request_id: u32) -> Envelope {
        Envelope::new(ProtocolVersion::new(2, minor), request_id)
    }

    fn doi_url_response(flags: OpFlags, digest: Option<RequestDigest>) -> Message {
        let values = vec![HandleValue {
            timestamp: 0x5f5e_0000,
            ..HandleValue::new(1, "URL", "https://www.doi.org/")
        }];
        let header = Header {
            response_code: ResponseCode::Success,
            flags,
            ..Header::request(OpCode::Resolution, EXPIRY)
        };
        let response = Response::Resolution(HandleValues {
            handle: b"10.1000/1".to_vec(),
            values,
        });
        Message::new(
            envelope(11, 0x0102_0304),
            header,
            Body::Response { digest, response },
        )
    }

    #[test]
    fn resolve_all_values_matches_digest_vector() {
        // Digest §11.1.
        let header = Header {
            site_info_serial: 15,
            ..Header::request(OpCode::Resolution, EXPIRY)
        };
        let message = Message::new(envelope(10, 0x0102_0304), header, resolve("0.NA/10", &[]));
        both_ways(
            "020a020b 00000000 01020304 00000000 0000002f 00000001 00000000 19000000
             000f 00 00 5f5e1000 00000013 00000007 302e4e412f3130 00000000 00000000 00000000",
            message,
        );
    }

    #[test]
    fn v9_prefix_lookup_matches_digest_vector() {
        // Digest §11.2.
        let header = Header {
            site_info_serial: 15,
            recursion_count: 1,
            ..Header::request(OpCode::Resolution, 0x6500_0000)
        };
        let types = ["HS_SITE", "HS_SITE.6", "HS_SERV", "HS_NAMESPACE"];
        let body = resolve("0.NA/10.1000", &types);
        both_ways(
            "020a020b 00000000 1234abcd 00000000 00000067 00000001 00000000 19000000
             000f 01 00 65000000 0000004b 0000000c 302e4e412f31302e31303030 00000000
             00000004 00000007 48535f53495445 00000009 48535f534954452e36
             00000007 48535f53455256 0000000c 48535f4e414d455350414345 00000000",
            Message::new(envelope(10, 0x1234_abcd), header, body),
        );
    }

    #[test]
    fn hs_site_response_matches_digest_vector() {
        // Digest §11.3: a primary answers in 2.11 with one HS_SITE value.
        let site = hex(
            "0001 020a 0003 80 02 00000000 00000001 00000004 64657363 00000007 4578616d706c65
             00000001 00000001 000000000000000000000000 c000020a 00000000 00000003
             03 01 00000a51 02 00 00000a51 03 02 00001f40",
        );
        let value = HandleValue {
            timestamp: 0x5f00_0000,
            ..HandleValue::new(1, "HS_SITE", site)
        };
        let header = Header {
            response_code: ResponseCode::Success,
            flags: OpFlags::J9_DEFAULT | OpFlags::AT,
            site_info_serial: 15,
            recursion_count: 1,
            ..Header::request(OpCode::Resolution, 0x6500_0000)
        };
        let response = Response::Resolution(HandleValues {
            handle: b"0.NA/10.1000".to_vec(),
            values: vec![value],
        });
        let body = Body::Response {
            digest: None,
            response,
        };
        both_ways(
            "020b020b 00000000 1234abcd 00000000 000000a6 00000001 00000001 99000000
             000f 01 00 65000000 0000008a 0000000c 302e4e412f31302e31303030 00000001
             00000001 5f000000 00 00015180 0e 00000007 48535f53495445 00000055
             0001 020a 0003 80 02 00000000 00000001 00000004 64657363 00000007 4578616d706c65
             00000001 00000001 000000000000000000000000 c000020a 00000000 00000003
             03 01 00000a51 02 00 00000a51 03 02 00001f40 00000000 00000000",
            Message::new(envelope(11, 0x1234_abcd), header, body),
        );
    }

    #[test]
    fn url_response_matches_digest_vector() {
        // Digest §11.4.
        both_ways(
            "020b020b 00000000 01020304 00000000 0000005e 00000001 00000001 19000000
             ffff 00 00 5f5e1000 00000042 00000009 31302e313030302f31 00000001
             00000001 5f5e0000 00 00015180 0e 00000003 55524c
             00000014 68747470733a2f2f7777772e646f692e6f72672f 00000000 00000000",
            doi_url_response(OpFlags::J9_DEFAULT, None),
        );
    }

    #[test]
    fn request_digest_is_over_the_raw_request_and_matches_digest_vector() {
        // Digest §11.5: the request as received, its SHA-256 in the response body.
        let request_bytes = hex(
            "020b020b 00000000 01020304 00000000 00000031 00000001 00000000 19800000
             0001 00 00 5f5e1000 00000015 00000009 31302e313030302f31 00000000 00000000
             00000000",
        );
        let request = Message::decode(&request_bytes).unwrap();
        assert_eq!(request.encode(), request_bytes);
        let raw = request.raw_header_and_body().unwrap();
        assert_eq!(raw.len(), 45);
        let digest = RequestDigest::for_version(ProtocolVersion::new(2, 11), raw);
        let response = doi_url_response(request.header.flags, Some(digest));
        let bytes = response.encode();
        let prefix = "00000001 00000001 19800000 ffff 00 00 5f5e1000 00000063 03
            27a27e8f7f7b14ea2c209471c7e185c6bd011987ef18117cbd482039ae23dab0 00000009";
        assert_eq!(&bytes[ENVELOPE_LEN..ENVELOPE_LEN + 61], &hex(prefix)[..]);
        let decoded = Message::decode(&bytes).unwrap();
        let Body::Response {
            digest: Some(d), ..
        } = &decoded.body
        else {
            panic!("no digest in {decoded:?}");
        };
        assert!(d.matches(raw));
    }

    #[test]
    fn error_responses_match_digest_vectors() {
        // Digest §11.6 (header onwards; the envelope is ours).
        let not_found = |message: &str| {
            let header = Header {
                response_code: ResponseCode::HandleNotFound,
                ..Header::request(OpCode::Resolution, EXPIRY)
            };
            let response = Response::Error(ErrorResponse {
                message: message.into(),
                indexes: None,
            });
            let body = Body::Response {
                digest: None,
                response,
            };
            Message::new(envelope(11, 1), header, body)
        };
        let head = "00000001 00000064 19000000 ffff 00 00 5f5e1000";
        let envelope_hex = |len: u8| format!("020b020b 00000000 00000001 00000000 000000{len:02x}");
        both_ways(
            &format!(
                "{} {head} 0000000d 00000009 6e6f7420666f756e64 00000000",
                envelope_hex(41)
            ),
            not_found("not found"),
        );
        both_ways(
            &format!("{} {head} 00000004 00000000 00000000", envelope_hex(32)),
            not_found(""),
        );
    }

    fn sample_request() -> Vec<u8> {
        let header = Header::request(OpCode::Resolution, EXPIRY);
        Message::new(envelope(10, 7), header, resolve("10.1000/1", &["URL"])).encode()
    }

    #[test]
    fn missing_credential_length_is_tolerated_and_written_back() {
        let mut bytes = sample_request();
        bytes.truncate(bytes.len() - 4);
        bytes[19] -= 4;
        let message = Message::decode(&bytes).unwrap();
        assert_eq!(message.credential, None);
        assert_eq!(message.encode(), sample_request());
    }

    #[test]
    fn octets_after_the_credential_are_refused() {
        let mut bytes = sample_request();
        bytes.push(0);
        bytes[19] += 1;
        let err = Message::decode(&bytes).unwrap_err();
        assert!(matches!(
            err,
            CodecError::Malformed {
                source: DecodeError::TrailingBytes {
                    what: "message",
                    count: 1
                },
                header: Some(_),
                ..
            }
        ));
        assert_eq!(err.envelope().map(|e| e.request_id), Some(7));
    }

    #[test]
    fn envelope_problems_keep_the_request_id() {
        let good = sample_request();
        let mut long = good.clone();
        long[16..20].copy_from_slice(&(262_145u32).to_be_bytes());
        let mut short = good.clone();
        short.pop();
        let mut compressed = good.clone();
        compressed[2] |= 0x80;
        let mut encrypted = good.clone();
        encrypted[2] |= 0x40;
        for bad in [long, short, compressed, encrypted] {
            let err = Message::decode(&bad).unwrap_err();
            assert_eq!(err.envelope().map(|e| e.request_id), Some(7), "{err}");
        }
        let err = Message::decode(&good[..19]).unwrap_err();
        assert!(matches!(err, CodecError::Envelope(_)));
        assert_eq!(err.envelope(), None);
    }

    #[test]
    fn body_shorter_than_its_fields_is_malformed_with_header() {
        let mut bytes = sample_request();
        bytes[43] -= 1; // BodyLength one short: the type list runs into the credential
        let err = Message::decode(&bytes).unwrap_err();
        assert_eq!(err.header().map(|h| h.opcode), Some(OpCode::Resolution));
    }

    #[test]
    fn unsupported_operation_is_distinct() {
        let mut bytes = sample_request();
        bytes[22..24].copy_from_slice(&1003u16.to_be_bytes()); // OC_BACKUP_SERVER
        let err = Message::decode(&bytes).unwrap_err();
        let CodecError::UnsupportedOperation { envelope, header } = err else {
            panic!("{err:?}");
        };
        assert_eq!(envelope.request_id, 7);
        assert_eq!(header.opcode, OpCode::BackupServer);
    }

    #[test]
    fn response_codes_are_renumbered_for_pre_2_5_peers() {
        let header = Header {
            response_code: ResponseCode::ServerBackup,
            ..Header::request(OpCode::Resolution, EXPIRY)
        };
        let body = Body::Response {
            digest: None,
            response: Response::Error(ErrorResponse {
                message: "backup".into(),
                indexes: None,
            }),
        };
        let message = Message::new(envelope(4, 9), header, body);
        let bytes = message.encode();
        assert_eq!(bytes[24..28], 303u32.to_be_bytes());
        let decoded = Message::decode(&bytes).unwrap();
        assert_eq!(decoded.header.response_code, ResponseCode::ServerBackup);
        assert_eq!(decoded.body, message.body);
    }
}
