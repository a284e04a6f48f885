//! UDP packetisation and reassembly (digest §1.3, §11.9, §13.2; RFC 3652 §2.3.1).
//!
//! Owns [`split_datagrams`] and [`Reassembler`]. Pure: no socket and no clock — the
//! caller keys reassemblers by peer and RequestId and drops them on its own timeout.
//!
//! A message longer than 492 octets travels as `ceil(len / 492)` datagrams, each with
//! its own envelope that differs only in SequenceNumber; every piece but the last
//! carries exactly 492 octets (J9 copies piece *i* to offset `i × 492`), and
//! MessageLength is the whole message's in every piece. Senders set TC on every piece
//! when there are several; receivers go by MessageLength, not TC, since J9 servers
//! do not set it on responses.

use super::envelope::{ENVELOPE_LEN, Envelope, MessageFlags};
use super::error::CodecError;
use super::message::MAX_MESSAGE_LEN;
use crate::values::wire::{Writer, wire_len};
use std::collections::BTreeMap;

/// The largest datagram, envelope included (J9 `MAX_UDP_PACKET_SIZE`).
pub const MAX_DATAGRAM_LEN: usize = 512;
/// Octets of message per datagram (J9 `MAX_UDP_DATA_SIZE`).
pub const DATAGRAM_PAYLOAD_LEN: usize = MAX_DATAGRAM_LEN - ENVELOPE_LEN;

/// Cuts `payload` (everything after the envelope) into datagrams, each led by
/// `envelope` with its SequenceNumber, the total MessageLength and, when there is more
/// than one, TC. An empty payload still makes one datagram.
pub fn split_datagrams(envelope: &Envelope, payload: &[u8]) -> Vec<Vec<u8>> {
    let pieces: Vec<&[u8]> = if payload.is_empty() {
        vec![payload]
    } else {
        payload.chunks(DATAGRAM_PAYLOAD_LEN).collect()
    };
    let flags = if pieces.len() > 1 {
        envelope.flags.with(MessageFlags::TC)
    } else {
        envelope.flags
    };
    pieces
        .iter()
        .enumerate()
        .map(|(sequence, piece)| {
            let mut w = Writer::with_capacity(ENVELOPE_LEN + piece.len());
            let piece_envelope = Envelope {
                flags,
                sequence_number: wire_len(sequence),
                message_length: wire_len(payload.len()),
                ..*envelope
            };
            piece_envelope.encode(&mut w);
            w.raw(piece);
            w.into_bytes()
        })
        .collect()
}

/// How many datagrams a message of `message_len` octets takes.
fn piece_count(message_len: usize) -> usize {
    message_len.div_ceil(DATAGRAM_PAYLOAD_LEN).max(1)
}

/// Collects the datagrams of one message, in any order, into the whole message.
///
/// Bounded: MessageLength is at most [`MAX_MESSAGE_LEN`], so at most 533 pieces and
/// that many octets are held; pieces are stored as they arrive, never preallocated
/// from a claimed length. Duplicates (client retries) are ignored.
#[derive(Debug, Clone, Default)]
pub struct Reassembler {
    first: Option<Envelope>,
    pieces: BTreeMap<usize, Vec<u8>>,
}

impl Reassembler {
    /// An empty reassembler.
    pub fn new() -> Self {
        Reassembler::default()
    }

    /// The octets of the pieces taken so far.
    pub fn held(&self) -> usize {
        self.pieces.values().map(Vec::len).sum()
    }

    /// The envelope of the message being collected, once a datagram has been taken.
    pub fn envelope(&self) -> Option<&Envelope> {
        self.first.as_ref()
    }

    /// Takes one datagram. Returns the whole message (envelope with SequenceNumber 0,
    /// then the payload) once every piece is in, after which the reassembler is empty
    /// again; `None` while pieces are missing. A refused datagram changes nothing.
    pub fn push(&mut self, datagram: &[u8]) -> Result<Option<Vec<u8>>, CodecError> {
        let envelope = Envelope::peek(datagram).map_err(CodecError::Envelope)?;
        let data = &datagram[ENVELOPE_LEN..];
        let total = envelope.message_length as usize;
        if total > MAX_MESSAGE_LEN {
            return Err(CodecError::TooLong {
                envelope,
                length: envelope.message_length,
                limit: MAX_MESSAGE_LEN,
            });
        }
        if let Some(first) = &self.first
            && !same_message(first, &envelope)
        {
            return Err(CodecError::ForeignDatagram {
                expected: *first,
                found: envelope,
            });
        }
        let sequence = check_piece(&envelope, data.len())?;
        let first = *self.first.get_or_insert(envelope);
        self.pieces.entry(sequence).or_insert_with(|| data.to_vec());
        if self.pieces.len() < piece_count(total) {
            return Ok(None);
        }
        self.first = None;
        let mut w = Writer::with_capacity(ENVELOPE_LEN + total);
        Envelope {
            sequence_number: 0,
            ..first
        }
        .encode(&mut w);
        for piece in std::mem::take(&mut self.pieces).into_values() {
            w.raw(&piece);
        }
        Ok(Some(w.into_bytes()))
    }
}

/// Whether two envelopes belong to the same message (all but SequenceNumber agree).
fn same_message(a: &Envelope, b: &Envelope) -> bool {
    Envelope {
        sequence_number: 0,
        ..*a
    } == Envelope {
        sequence_number: 0,
        ..*b
    }
}

/// Checks a piece's sequence number and size against its MessageLength; returns the
/// sequence number as an index.
fn check_piece(envelope: &Envelope, found: usize) -> Result<usize, CodecError> {
    let total = envelope.message_length as usize;
    let count = piece_count(total);
    let sequence = envelope.sequence_number as usize;
    let expected = if sequence >= count {
        0
    } else if sequence + 1 == count {
        total - DATAGRAM_PAYLOAD_LEN * (count - 1)
    } else {
        DATAGRAM_PAYLOAD_LEN
    };
    if sequence >= count || found != expected {
        return Err(CodecError::BadDatagram {
            envelope: *envelope,
            expected,
            found,
        });
    }
    Ok(sequence)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::testing::hex;
    use crate::codec::version::ProtocolVersion;

    fn thousand_octets() -> (Envelope, Vec<u8>) {
        let envelope = Envelope::new(ProtocolVersion::new(2, 10), 0x1234_abcd);
        let payload = (0..1000u32).map(|i| (i % 251) as u8).collect();
        (envelope, payload)
    }

    #[test]
    fn thousand_octet_message_matches_digest_vector() {
        // Digest §11.9: pieces of 492, 492 and 16 octets, TC | suggested major = 0x22.
        let (envelope, payload) = thousand_octets();
        let datagrams = split_datagrams(&envelope, &payload);
        assert_eq!(datagrams.len(), 3);
        for (i, (datagram, len)) in datagrams.iter().zip([492, 492, 16]).enumerate() {
            let head = format!("020a220b 00000000 1234abcd 0000000{i} 000003e8");
            assert_eq!(datagram[..ENVELOPE_LEN], hex(&head)[..]);
            assert_eq!(datagram.len(), ENVELOPE_LEN + len);
            assert!(datagram.len() <= MAX_DATAGRAM_LEN);
        }
    }

    #[test]
    fn pieces_reassemble_in_any_order() {
        let (envelope, payload) = thousand_octets();
        let datagrams = split_datagrams(&envelope, &payload);
        let mut reassembler = Reassembler::new();
        assert_eq!(reassembler.push(&datagrams[2]), Ok(None));
        assert_eq!(reassembler.push(&datagrams[0]), Ok(None));
        assert_eq!(reassembler.push(&datagrams[2]), Ok(None)); // a retry
        let whole = reassembler.push(&datagrams[1]).unwrap().unwrap();
        assert_eq!(whole[ENVELOPE_LEN..], payload[..]);
        let head = Envelope::peek(&whole).unwrap();
        assert_eq!(head.sequence_number, 0);
        assert_eq!(head.message_length, 1000);
        assert!(reassembler.envelope().is_none());
    }

    #[test]
    fn single_datagram_is_a_whole_message_without_tc() {
        let envelope = Envelope::new(ProtocolVersion::new(2, 11), 1);
        let datagrams = split_datagrams(&envelope, &[1, 2, 3]);
        assert_eq!(datagrams.len(), 1);
        assert!(
            !Envelope::peek(&datagrams[0])
                .unwrap()
                .flags
                .contains(MessageFlags::TC)
        );
        let whole = Reassembler::new().push(&datagrams[0]).unwrap();
        assert_eq!(whole.as_ref(), Some(&datagrams[0]));
        assert_eq!(split_datagrams(&envelope, &[]).len(), 1);
    }

    #[test]
    fn wrong_pieces_are_refused() {
        let (envelope, payload) = thousand_octets();
        let datagrams = split_datagrams(&envelope, &payload);
        let mut reassembler = Reassembler::new();
        reassembler.push(&datagrams[0]).unwrap();
        let other = split_datagrams(
            &Envelope {
                request_id: 9,
                ..envelope
            },
            &payload,
        );
        let err = reassembler.push(&other[1]).unwrap_err();
        assert!(matches!(err, CodecError::ForeignDatagram { .. }));
        let mut short = datagrams[1].clone();
        short.pop();
        let err = reassembler.push(&short).unwrap_err();
        assert!(matches!(
            err,
            CodecError::BadDatagram {
                expected: 492,
                found: 491,
                ..
            }
        ));
        let mut beyond = datagrams[2].clone();
        beyond[15] = 3;
        let err = reassembler.push(&beyond).unwrap_err();
        assert!(matches!(err, CodecError::BadDatagram { expected: 0, .. }));
        assert!(reassembler.push(&datagrams[1]).unwrap().is_none());
    }

    #[test]
    fn oversized_claims_are_refused_before_storing() {
        let mut datagram = hex("020b020b 00000000 00000001 00000000 00040001");
        datagram.extend_from_slice(&[0; 492]);
        let err = Reassembler::new().push(&datagram).unwrap_err();
        assert!(matches!(
            err,
            CodecError::TooLong {
                length: 262_145,
                ..
            }
        ));
    }
}
