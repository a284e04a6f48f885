//! Fuzzes the codec's decoders: whole messages, TCP framing and UDP reassembly must
//! never panic, and whatever decodes must survive its own re-encoding (up to the
//! renumbering of response codes for peers older than 2.5, which is lossy by design).

#![no_main]

use hdl::codec::{Frame, Message, Reassembler, ResponseCode, next_frame};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Frame::Ready { len } = next_frame(data) {
        assert!(len <= data.len());
    }
    let mut reassembler = Reassembler::new();
    for datagram in data.chunks(512) {
        let _ = reassembler.push(datagram);
    }
    if let Ok(message) = Message::decode(data) {
        let again = Message::decode(&message.encode()).expect("re-encoded message decodes");
        let version = message.envelope.version;
        let wire_code = message.header.response_code.to_wire(version);
        let code = ResponseCode::from_wire(wire_code, version);
        assert_eq!(Some(again.header.response_code), code);
        assert_eq!(again.header.flags, message.header.flags);
        assert_eq!(again.header.opcode, message.header.opcode);
        assert_eq!(again.body, message.body);
        assert_eq!(again.credential, message.credential);
    }
});
