//! Challenge-response through the responder (digest §8.1): the challenge, the answer,
//! the original operation carried out, and every way an answer is refused.

use std::net::Ipv6Addr;

use super::*;
use crate::auth::SigningKey;
use crate::auth::keys::tests::{stranger_key, test_key};
use crate::client::{Credentials, Key};
use crate::codec::AuthAnswer;

/// The key handle of the server administrator, with the test key at index 300.
async fn with_admin_key(responder: &Responder) {
    let key = HandleValue::new(300, "HS_PUBKEY", test_key().public_key().encode());
    let made = ask(responder, &create("0.NA/ADMIN", vec![key])).await;
    assert_eq!(made.header.response_code, ResponseCode::Success);
}

fn answer_to(challenge: &Message, identity: Identity, key: &SigningKey) -> AuthAnswer {
    let credentials = Credentials {
        identity,
        key: Key::Public(Arc::new(
            SigningKey::from_pem(&key.to_pem().unwrap()).unwrap(),
        )),
    };
    credentials.answer(challenge).unwrap()
}

/// The OC 200 message answering `challenge` with `answer`.
fn answer_message(challenge: &Message, answer: AuthAnswer) -> Vec<u8> {
    let header = Header {
        flags: OpFlags::J9_DEFAULT,
        ..Header::request(OpCode::ChallengeResponse, 0)
    };
    let envelope = Envelope {
        session_id: challenge.envelope.session_id,
        ..Envelope::new(ProtocolVersion::new(2, 10), 0x0506_0708)
    };
    let body = Body::Request(Request::ChallengeResponse(answer));
    Message::new(envelope, header, body).encode()
}

async fn challenge_of(responder: &Responder, bytes: &[u8]) -> Message {
    let challenge = ask_as(responder, Caller::anonymous(LOCAL), bytes).await;
    assert_eq!(
        challenge.header.response_code,
        ResponseCode::AuthenticationNeeded
    );
    challenge
}

fn url() -> Vec<HandleValue> {
    vec![HandleValue::new(1, "URL", "https://a.example/")]
}

async fn exists(responder: &Responder, handle: &str) -> bool {
    let answer = ask(responder, &resolve(handle)).await;
    answer.header.response_code == ResponseCode::Success
}

#[tokio::test]
async fn an_answered_challenge_carries_out_the_original_request() {
    let (_dir, responder) = responder().await;
    with_admin_key(&responder).await;
    let request = create("10.1000/auth", url());
    let challenge = challenge_of(&responder, &request).await;
    assert_eq!(challenge.header.opcode, OpCode::CreateHandle);
    assert_ne!(challenge.envelope.session_id, 0);
    let Body::Response {
        digest: Some(digest),
        response: Response::Challenge { nonce },
    } = &challenge.body
    else {
        panic!("not a challenge: {challenge:?}");
    };
    assert!(digest.matches(&request[20..request.len() - 4]));
    assert_eq!(nonce.len(), 16);
    assert!(!exists(&responder, "10.1000/auth").await, "held back");

    let answer = answer_message(&challenge, answer_to(&challenge, admin(), test_key()));
    let done = ask_as(&responder, Caller::anonymous(LOCAL), &answer).await;
    assert_eq!(done.header.response_code, ResponseCode::Success, "{done:?}");
    assert_eq!(done.header.opcode, OpCode::CreateHandle);
    assert_eq!(done.envelope.request_id, 0x0506_0708);
    assert!(exists(&responder, "10.1000/auth").await);

    let replay = ask_as(&responder, Caller::anonymous(LOCAL), &answer).await;
    assert_eq!(
        replay.header.response_code,
        ResponseCode::AuthenticationTimeout
    );
}

#[tokio::test]
async fn only_the_challenged_address_may_answer() {
    let (_dir, responder) = responder().await;
    with_admin_key(&responder).await;
    let challenge = challenge_of(&responder, &create("10.1000/addr", url())).await;
    let answer = answer_message(&challenge, answer_to(&challenge, admin(), test_key()));
    let elsewhere = Caller::anonymous(IpAddr::V6(Ipv6Addr::LOCALHOST));
    let refused = ask_as(&responder, elsewhere, &answer).await;
    assert_eq!(
        refused.header.response_code,
        ResponseCode::AuthenticationTimeout
    );
    let done = ask_as(&responder, Caller::anonymous(LOCAL), &answer).await;
    assert_eq!(done.header.response_code, ResponseCode::Success);
}

#[tokio::test]
async fn wrong_keys_unknown_identities_and_strangers_are_refused() {
    let (_dir, responder) = responder().await;
    with_admin_key(&responder).await;
    let stranger = Identity {
        handle: "0.NA/NOBODY".into(),
        index: 300,
    };
    let member = ask(
        &responder,
        &create(
            "10.1000/keyholder",
            vec![HandleValue::new(
                300,
                "HS_PUBKEY",
                test_key().public_key().encode(),
            )],
        ),
    )
    .await;
    assert_eq!(member.header.response_code, ResponseCode::Success);
    let not_admin = Identity {
        handle: "10.1000/keyholder".into(),
        index: 300,
    };
    let cases = [
        (admin(), stranger_key(), ResponseCode::AuthenticationFailed),
        (stranger, test_key(), ResponseCode::AuthenticationError),
        (not_admin, test_key(), ResponseCode::InvalidAdmin),
    ];
    for (identity, key, code) in cases {
        let challenge = challenge_of(&responder, &create("10.1000/refused", url())).await;
        let answer = answer_message(&challenge, answer_to(&challenge, identity, key));
        let refused = ask_as(&responder, Caller::anonymous(LOCAL), &answer).await;
        assert_eq!(refused.header.response_code, code, "{refused:?}");
        assert_eq!(refused.header.opcode, OpCode::CreateHandle);
        assert!(!exists(&responder, "10.1000/refused").await);
    }
}

#[tokio::test]
async fn expired_challenges_and_malformed_answers_are_refused() {
    let (_dir, responder) = responder_with(Duration::ZERO).await;
    with_admin_key(&responder).await;
    let challenge = challenge_of(&responder, &create("10.1000/late", url())).await;
    let answer = answer_message(&challenge, answer_to(&challenge, admin(), test_key()));
    let late = ask_as(&responder, Caller::anonymous(LOCAL), &answer).await;
    assert_eq!(
        late.header.response_code,
        ResponseCode::AuthenticationTimeout
    );

    let (_dir, responder) = super::responder().await;
    with_admin_key(&responder).await;
    let garbage = [
        (b"HS_FOOKEY".to_vec(), vec![1]),
        (b"HS_PUBKEY".to_vec(), vec![0; 3000]),
        (b"HS_PUBKEY".to_vec(), vec![1, 2, 3]),
    ];
    for (auth_type, bytes) in garbage {
        let challenge = challenge_of(&responder, &create("10.1000/junk", url())).await;
        let answer = AuthAnswer {
            auth_type,
            key_handle: b"0.NA/ADMIN".to_vec(),
            key_index: 300,
            answer: bytes,
        };
        let refused = ask_as(
            &responder,
            Caller::anonymous(LOCAL),
            &answer_message(&challenge, answer),
        )
        .await;
        assert_eq!(
            refused.header.response_code,
            ResponseCode::InvalidCredential,
            "{refused:?}"
        );
    }
    assert!(!exists(&responder, "10.1000/junk").await);
}

/// An anonymous caller at the `n`-th address of 10.0.0.0/8.
fn stranger(n: u32) -> Caller {
    Caller::anonymous(IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + n)))
}

#[tokio::test]
async fn a_datagram_flood_cannot_take_the_book_tcp_callers_are_challenged_from() {
    let (_dir, responder) = responder().await;
    with_admin_key(&responder).await;
    let datagrams = responder.for_datagrams();
    let request = create("10.1000/flood", url());
    let mut busy = 0;
    for n in 0..10_001 {
        let answer = ask_as(&datagrams, stranger(n), &request).await;
        if answer.header.response_code == ResponseCode::ServerTooBusy {
            busy += 1;
        }
    }
    assert!(busy > 0, "forged sources fill the datagram book");
    let challenge = challenge_of(&responder, &create("10.1000/admin", url())).await;
    let answer = answer_message(&challenge, answer_to(&challenge, admin(), test_key()));
    let done = ask_as(&responder, Caller::anonymous(LOCAL), &answer).await;
    assert_eq!(done.header.response_code, ResponseCode::Success, "{done:?}");
}

#[tokio::test]
async fn one_source_only_recycles_its_own_challenges() {
    let (_dir, responder) = responder().await;
    with_admin_key(&responder).await;
    let challenge = challenge_of(&responder, &create("10.1000/first", url())).await;
    let request = create("10.1000/flood", url());
    for _ in 0..10_001 {
        let answer = ask_as(&responder, stranger(1), &request).await;
        assert_eq!(
            answer.header.response_code,
            ResponseCode::AuthenticationNeeded,
            "a source at its share is challenged, at the cost of its own oldest"
        );
    }
    let answer = answer_message(&challenge, answer_to(&challenge, admin(), test_key()));
    let done = ask_as(&responder, Caller::anonymous(LOCAL), &answer).await;
    assert_eq!(done.header.response_code, ResponseCode::Success, "{done:?}");
}
