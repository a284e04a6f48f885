//! Fuzzes UDP reassembly: any series of datagrams (each taken as a length octet and
//! that many octets) must never panic nor hold more than a message's bound, and a
//! whole message is its envelope then exactly MessageLength octets. Then the input,
//! as an envelope and a payload, cut by `split_datagrams` and pushed in a rotated
//! order, must come back whole.

#![no_main]

use hdl::codec::{ENVELOPE_LEN, Envelope, MAX_MESSAGE_LEN, Reassembler, split_datagrams};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    arbitrary_datagrams(data);
    split_and_reassemble(data);
});

/// Each datagram is `len` then `len` octets (a short last one takes what is left).
fn arbitrary_datagrams(mut data: &[u8]) {
    let mut reassembler = Reassembler::new();
    while let Some((&len, rest)) = data.split_first() {
        let len = usize::from(len).min(rest.len());
        let (datagram, rest) = rest.split_at(len);
        data = rest;
        if let Ok(Some(message)) = reassembler.push(datagram) {
            let envelope = Envelope::peek(&message).expect("a whole message's envelope");
            assert_eq!(envelope.sequence_number, 0);
            assert_eq!(
                message.len(),
                ENVELOPE_LEN + envelope.message_length as usize
            );
        }
        assert!(reassembler.held() <= MAX_MESSAGE_LEN);
    }
}

/// The envelope at the start of `data` and the rest as its payload, cut into
/// datagrams and pushed starting from a piece the first octet picks.
fn split_and_reassemble(data: &[u8]) {
    let Ok(envelope) = Envelope::peek(data) else {
        return;
    };
    let payload = &data[ENVELOPE_LEN..];
    let datagrams = split_datagrams(&envelope, payload);
    let start = usize::from(data[0]) % datagrams.len();
    let mut reassembler = Reassembler::new();
    let mut whole = None;
    for datagram in datagrams[start..].iter().chain(&datagrams[..start]) {
        assert!(whole.is_none(), "a message completed before its last piece");
        whole = reassembler
            .push(datagram)
            .expect("a piece of a split message");
    }
    let whole = whole.expect("every piece pushed makes the message");
    assert_eq!(&whole[ENVELOPE_LEN..], payload);
}
