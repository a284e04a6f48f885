//! Encrypted session messages (envelope flag EC) against a real `hdl serve`, built as
//! J9's `HandleResolver` builds them (digest §3.8): the request MACed, then its whole
//! payload sealed with AES-128-CBC under the session key, IV first. Over TCP and UDP
//! the answer comes back sealed and opens to the answer; a payload that does not
//! open, or names no session, is refused with the session codes and admits nothing.

use hdl::auth::session_cipher::{open, seal};
use hdl::auth::{SessionKey, session_credential};
use hdl::codec::{
    ENVELOPE_LEN, Envelope, Message, MessageFlags, OpFlags, Request, ResolutionRequest,
    ResponseCode, unsealed,
};

use crate::harness::Server;
use crate::raw::{encode, tcp, tcp_frame, udp_frame};
use crate::sessions::raw_session;

/// A resolution of `0.NA/ADMIN` in session `id` with counter `counter`, asking for
/// an encrypted answer (ENC), MACed with `key`: the message before sealing.
fn resolution(id: u32, key: &SessionKey, counter: u32) -> Message {
    resolution_with(id, key, counter, OpFlags::ENC)
}

/// As [`resolution`], with `extra` flags added to J9's defaults.
fn resolution_with(id: u32, key: &SessionKey, counter: u32, extra: OpFlags) -> Message {
    let request = Request::Resolution(ResolutionRequest {
        handle: b"0.NA/ADMIN".to_vec(),
        indexes: vec![],
        types: vec![],
    });
    let mut message = encode(request, 2000 + counter);
    message.envelope.session_id = id;
    message.header.flags = message.header.flags.with(extra);
    let unsigned = message.encode();
    let header_and_body = &unsigned[ENVELOPE_LEN..unsigned.len() - 4];
    message.credential =
        Some(session_credential(key, &message.envelope, counter, header_and_body).expect("MAC"));
    message
}

/// The answer `bytes`, which must be sealed, opened with `key` and decoded.
fn opened(bytes: &[u8], key: &SessionKey) -> Message {
    let envelope = Envelope::peek(bytes).expect("an envelope");
    assert!(
        envelope.flags.contains(MessageFlags::EC),
        "the answer is not encrypted"
    );
    let plain = unsealed(&envelope, bytes, |sealed| open(key, sealed)).expect("opens");
    Message::decode(&plain).expect("decodes once opened")
}

/// Whether a session message was admitted (anything but a session or protocol error).
fn admitted(answer: &Message) -> bool {
    answer.header.response_code.to_u32() < ResponseCode::SessionTimeout.to_u32()
        && answer.header.response_code != ResponseCode::ProtocolError
}

#[test]
fn encrypted_requests_get_encrypted_answers_over_tcp_and_udp() {
    let server = Server::start();
    let (id, key) = raw_session(&server);
    // Certified too: the session MAC is made over the plain answer, then sealed.
    let request = resolution_with(id, &key, 1, OpFlags::ENC.with(OpFlags::CT));
    let sealed = request.seal(|payload| seal(&key, payload)).expect("sealed");
    let answer = opened(
        &tcp_frame(server.address(), &sealed.encode()).expect("an answer"),
        &key,
    );
    assert!(admitted(&answer), "{answer:?}");
    assert_eq!(answer.envelope.request_id, request.envelope.request_id);
    assert_eq!(answer.envelope.session_id, id);
    assert!(
        answer.credential.is_some(),
        "the answer carries its session MAC: {answer:?}"
    );

    let request = resolution(id, &key, 2);
    let sealed = request.seal(|payload| seal(&key, payload)).expect("sealed");
    let bytes = udp_frame(server.address(), &sealed.encode_datagrams(), 2002);
    let answer = opened(&bytes, &key);
    assert!(admitted(&answer), "{answer:?}");
    assert_eq!(answer.envelope.request_id, 2002);
}

#[test]
fn an_answer_nobody_asked_to_encrypt_goes_in_the_clear() {
    let server = Server::start();
    let (id, key) = raw_session(&server);
    let request = resolution_with(id, &key, 1, OpFlags::NONE);
    let sealed = request.seal(|payload| seal(&key, payload)).expect("sealed");
    let bytes = tcp_frame(server.address(), &sealed.encode()).expect("an answer");
    let envelope = Envelope::peek(&bytes).expect("an envelope");
    assert!(!envelope.flags.contains(MessageFlags::EC));
    assert!(admitted(&Message::decode(&bytes).expect("decodes")));
}

#[test]
fn payloads_that_do_not_open_or_name_no_session_are_refused_and_admit_nothing() {
    let server = Server::start();
    let (id, key) = raw_session(&server);
    let sealed = resolution(id, &key, 1)
        .seal(|payload| seal(&key, payload))
        .expect("sealed")
        .encode();

    // One octet short: not whole AES blocks.
    let mut short = sealed.clone();
    short.pop();
    let length = u32::try_from(short.len() - ENVELOPE_LEN).expect("length");
    short[16..20].copy_from_slice(&length.to_be_bytes());
    let answer = tcp(server.address(), &short).expect("an answer");
    assert_eq!(answer.header.response_code, ResponseCode::SessionFailed);

    // Sealed with another key: the padding or the message it hides is wrong.
    let other = SessionKey::generate().expect("a key");
    let foreign = resolution(id, &key, 1)
        .seal(|payload| seal(&other, payload))
        .expect("sealed");
    let answer = tcp(server.address(), &foreign.encode()).expect("an answer");
    assert!(
        matches!(
            answer.header.response_code,
            ResponseCode::SessionFailed | ResponseCode::ProtocolError
        ),
        "{answer:?}"
    );

    // No such session.
    let mut orphan = sealed.clone();
    orphan[4..8].copy_from_slice(&(id ^ 1).to_be_bytes());
    let answer = tcp(server.address(), &orphan).expect("an answer");
    assert_eq!(answer.header.response_code, ResponseCode::SessionTimeout);

    // None of them used counter 1: the good message is still admitted.
    let answer = opened(
        &tcp_frame(server.address(), &sealed).expect("an answer"),
        &key,
    );
    assert!(admitted(&answer), "{answer:?}");
}
