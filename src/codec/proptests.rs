//! Property tests across the codec: arbitrary messages survive encode → decode, UDP
//! packetisation → reassembly in any order, and no input panics a decoder.

use super::testing::{hex, message};
use super::{
    ENVELOPE_LEN, Envelope, Frame, HEADER_LEN, Header, MAX_DATAGRAM_LEN, Message, MessageFlags,
    Reassembler, ResponseCode, next_frame,
};
use crate::values::wire::wire_len;
use proptest::collection::vec;
use proptest::prelude::*;

/// A message and its datagrams in a random order.
fn shuffled_datagrams() -> impl Strategy<Value = (Message, Vec<Vec<u8>>)> {
    message().prop_flat_map(|m| {
        let datagrams = m.encode_datagrams();
        (Just(m), Just(datagrams).prop_shuffle())
    })
}

/// Octets behind an envelope whose MessageLength fits them, so decoding goes past it.
fn framed_garbage() -> impl Strategy<Value = Vec<u8>> {
    (any::<[u8; 16]>(), vec(any::<u8>(), 0..300)).prop_map(|(head, payload)| {
        let mut bytes = head.to_vec();
        bytes[2] &= 0x3F; // neither CP nor EC
        bytes.extend_from_slice(&wire_len(payload.len()).to_be_bytes());
        bytes.extend_from_slice(&payload);
        bytes
    })
}

/// Decoding must not panic, and whatever decodes must survive its own re-encoding —
/// up to the renumbering of response codes for pre-2.5 peers, lossy by design (202 is
/// sent to them as 201).
fn decodes_stably(bytes: &[u8]) -> Result<(), TestCaseError> {
    if let Ok(decoded) = Message::decode(bytes) {
        let again = Message::decode(&decoded.encode());
        prop_assert!(again.is_ok(), "{again:?}");
        if let Ok(again) = again {
            let version = decoded.envelope.version;
            let wire_code = decoded.header.response_code.to_wire(version);
            let response_code = ResponseCode::from_wire(wire_code, version);
            prop_assert_eq!(Some(again.header.response_code), response_code);
            let expected = Header {
                response_code: again.header.response_code,
                ..decoded.header
            };
            prop_assert_eq!(&again.header, &expected);
            prop_assert_eq!(&again.body, &decoded.body);
            prop_assert_eq!(&again.credential, &decoded.credential);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_messages_round_trip(message in message()) {
        let bytes = message.encode();
        let decoded = Message::decode(&bytes);
        prop_assert!(decoded.is_ok(), "{decoded:?}");
        let Ok(decoded) = decoded else { return Ok(()) };
        let mut expected = message.clone();
        expected.envelope.message_length = wire_len(bytes.len() - ENVELOPE_LEN);
        expected.header.flags = message.body.wire_flags(message.header.flags);
        let raw = decoded.raw_header_and_body().unwrap_or_default();
        prop_assert_eq!(&bytes[ENVELOPE_LEN..ENVELOPE_LEN + raw.len()], raw);
        prop_assert!(raw.len() >= HEADER_LEN);
        expected.raw = Some(raw.to_vec());
        prop_assert_eq!(&decoded, &expected);
        prop_assert_eq!(decoded.encode(), bytes);
    }

    #[test]
    fn datagrams_reassemble_in_any_order((message, datagrams) in shuffled_datagrams()) {
        let mut reassembler = Reassembler::new();
        let mut whole = None;
        for (i, datagram) in datagrams.iter().enumerate() {
            prop_assert!(datagram.len() <= MAX_DATAGRAM_LEN);
            let pushed = reassembler.push(datagram);
            prop_assert!(pushed.is_ok(), "{pushed:?}");
            if let Ok(Some(bytes)) = pushed {
                prop_assert_eq!(i + 1, datagrams.len());
                whole = Some(bytes);
            }
        }
        let encoded = message.encode();
        let whole = whole.unwrap_or_default();
        prop_assert_eq!(&whole[ENVELOPE_LEN..], &encoded[ENVELOPE_LEN..]);
        let flags = if datagrams.len() > 1 {
            message.envelope.flags.with(MessageFlags::TC)
        } else {
            message.envelope.flags
        };
        let expected = Envelope {
            flags,
            sequence_number: 0,
            message_length: wire_len(encoded.len() - ENVELOPE_LEN),
            ..message.envelope
        };
        prop_assert_eq!(Envelope::peek(&whole).ok(), Some(expected));
    }

    #[test]
    fn arbitrary_octets_never_panic(bytes in vec(any::<u8>(), 0..700)) {
        decodes_stably(&bytes)?;
        let _ = Reassembler::new().push(&bytes);
        let _ = next_frame(&bytes);
    }

    #[test]
    fn framed_garbage_never_panics(bytes in framed_garbage()) {
        prop_assert_eq!(next_frame(&bytes), Frame::Ready { len: bytes.len() });
        decodes_stably(&bytes)?;
        let mut reassembler = Reassembler::new();
        let _ = reassembler.push(&bytes);
        let _ = reassembler.push(&bytes);
    }

    #[test]
    fn corrupted_messages_never_panic(
        message in message(),
        flips in vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let mut bytes = message.encode();
        for (at, octet) in flips {
            let at = ENVELOPE_LEN + at.index(bytes.len() - ENVELOPE_LEN);
            bytes[at] = octet;
        }
        decodes_stably(&bytes)?;
    }
}

#[test]
fn pre_2_5_response_codes_are_renumbered_stably() {
    // Found by the fuzzer: a 2.2 message with RC 202 re-encodes as 201.
    let mut bytes = hex("02020b0a 00000003 00010402 00000000 00000021
        00000001 00000000 19000000 000f 00 00 5f5e1000 00000009 00000001 78 00000000");
    for code in [7u32, 201, 202, 303] {
        bytes[24..28].copy_from_slice(&code.to_be_bytes());
        assert!(Message::decode(&bytes).is_ok());
        decodes_stably(&bytes).unwrap();
    }
}
