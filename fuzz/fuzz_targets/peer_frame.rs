//! Fuzzes the peer wire's decoders: a plain frame's length header and every message a
//! peer's frame body may hold (the head of a request or an answer, then a Raft group
//! call or answer of either machine, or an admin call), which must decode or be
//! refused without a panic. The input is also sealed and opened with a connection's
//! keys (a frame from an authenticated peer), and a forged frame must never open.

#![no_main]

use hdl::placement::MapMachine;
use hdl::replication::HandleSet;
use hdl::replication::admin::{AdminAnswer, AdminRequest};
use hdl::replication::network::frame::{self, HEADER_LEN, MAX_HANDSHAKE_FRAME_LEN};
use hdl::replication::network::seal::{
    Handshake, Kind, NONCE_LEN, SEALED_HEADER_LEN, SessionKeys, Side, rest_len,
};
use hdl::replication::network::{Destination, ForwardError, GroupAnswer, GroupCall, Reply};
use libfuzzer_sys::fuzz_target;
use serde::de::DeserializeOwned;

fuzz_target!(|data: &[u8]| {
    if let Some(header) = data.first_chunk::<HEADER_LEN>() {
        let _ = frame::body_len(*header, MAX_HANDSHAKE_FRAME_LEN);
    }
    bodies(data);
    sealed(data);
});

/// Every message type, decoded whole and as a head followed by a body.
fn bodies(data: &[u8]) {
    decode::<GroupCall<HandleSet>>(data);
    decode::<GroupCall<MapMachine>>(data);
    decode::<GroupAnswer<HandleSet>>(data);
    decode::<GroupAnswer<MapMachine>>(data);
    decode::<AdminRequest>(data);
    decode::<Result<AdminAnswer, ForwardError>>(data);
    if let Ok((_, body)) = postcard::take_from_bytes::<Destination>(data) {
        decode::<GroupCall<HandleSet>>(body);
        decode::<AdminRequest>(body);
    }
    if let Ok((_, body)) = postcard::take_from_bytes::<Reply>(data) {
        decode::<GroupAnswer<HandleSet>>(body);
    }
}

fn decode<T: DeserializeOwned>(body: &[u8]) {
    let _ = frame::decode::<T>(body);
}

/// The input sealed by one end opens at the other, unchanged; the input taken as a
/// sealed frame (header, body and tag) does not.
fn sealed(data: &[u8]) {
    let nonces = ([1; NONCE_LEN], [2; NONCE_LEN]);
    let handshake = Handshake {
        server_nonce: &nonces.0,
        client_nonce: &nonces.1,
        client: 7,
    };
    let secret = b"the fuzzing cluster secret......";
    let client = SessionKeys::derive(secret, &handshake, Side::Client);
    let mut server = SessionKeys::derive(secret, &handshake, Side::Server);
    let mut bytes = Vec::new();
    if client
        .sealer
        .clone()
        .seal(Kind::Call, 3, data, &mut bytes)
        .is_err()
    {
        return;
    }
    let header: &[u8; SEALED_HEADER_LEN] = bytes.first_chunk().expect("a header");
    assert_eq!(rest_len(header).ok(), Some(bytes.len() - SEALED_HEADER_LEN));
    let opened = (server.opener.clone())
        .open(header, bytes[SEALED_HEADER_LEN..].to_vec())
        .expect("a sealed frame opens");
    assert_eq!(opened.body, data);
    if let Some(header) = data.first_chunk::<SEALED_HEADER_LEN>() {
        let forged = server
            .opener
            .open(header, data[SEALED_HEADER_LEN..].to_vec());
        assert!(forged.is_err(), "a forged frame opened");
    }
}
