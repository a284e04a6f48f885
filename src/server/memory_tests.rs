//! The responder against the in-memory handler: no Raft node, no store. Resolution
//! filters, not found, challenge-response with a secret key, list paging and site
//! info, as a client sees them on the wire.

use crate::auth::{SecretForms, SecretKey};
use crate::client::{Credentials, Key};
use crate::codec::AuthAnswer;
use crate::service::Handler;
use crate::service::memory::MemoryHandler;

use super::*;

/// A responder over a fresh [`MemoryHandler::example`], and the handler.
fn in_memory() -> (Arc<MemoryHandler>, Responder) {
    in_memory_checking(SecretForms::Strong)
}

/// [`in_memory`], checking secret-key answers of `forms`.
fn in_memory_checking(secret_forms: SecretForms) -> (Arc<MemoryHandler>, Responder) {
    let handler = Arc::new(MemoryHandler::example());
    let settings = ResponseSettings {
        site_serial: 42,
        validity_secs: 60,
        challenge_lifetime: Duration::from_secs(20),
        session_lifetime: Duration::from_secs(60),
        max_sessions: 4,
        secret_forms,
    };
    let responder = Responder::new(handler.clone(), settings, Arc::new(Metrics::new()));
    (handler, responder)
}

fn anonymous() -> Caller {
    Caller::anonymous(LOCAL)
}

fn resolve_selected(handle: &str, indexes: &[u32], types: &[&str]) -> Vec<u8> {
    let body = ResolutionRequest {
        handle: handle.as_bytes().to_vec(),
        indexes: indexes.iter().copied().map(ValueIndex).collect(),
        types: types.iter().map(|t| t.as_bytes().to_vec()).collect(),
    };
    request(Request::Resolution(body), OpFlags::J9_DEFAULT)
}

fn resolved_indexes(message: &Message) -> Vec<u32> {
    let Response::Resolution(values) = response(message) else {
        panic!("not a resolution: {message:?}")
    };
    values.values.iter().map(|value| value.index.0).collect()
}

/// The OC 200 answering `challenge` with the secret `secret` of the administrator.
fn answer_with(challenge: &Message, secret: &[u8]) -> Vec<u8> {
    let credentials = Credentials {
        identity: MemoryHandler::admin(),
        key: Key::Secret(SecretKey(secret.to_vec())),
    };
    let answer: AuthAnswer = credentials.answer(challenge).unwrap();
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

/// A create of `handle` as a client of protocol `version` sends it.
fn create_as_version(handle: &str, version: ProtocolVersion) -> Vec<u8> {
    let mut message = Message::decode(&create(handle, Vec::new())).unwrap();
    message.envelope.version = version;
    message.envelope.suggested = version;
    message.encode()
}

#[tokio::test]
async fn a_secret_answered_in_sha1_is_refused_unless_legacy_forms_are_allowed() {
    let old = ProtocolVersion::new(2, 6);
    for (forms, code) in [
        (SecretForms::Strong, ResponseCode::AuthenticationFailed),
        (SecretForms::Legacy, ResponseCode::Success),
    ] {
        let (handler, responder) = in_memory_checking(forms);
        let create = create_as_version("10.1000/old", old);
        let challenge = ask_as(&responder, anonymous(), &create).await;
        assert_eq!(challenge.envelope.version, old);
        let answer = answer_with(&challenge, MemoryHandler::SECRET);
        let answered = ask_as(&responder, anonymous(), &answer).await;
        assert_eq!(answered.header.response_code, code, "{forms:?}");
        assert_eq!(
            handler.get("10.1000/old").is_some(),
            forms == SecretForms::Legacy
        );
    }
}

#[tokio::test]
async fn resolution_selects_by_type_and_index_and_hides_private_values() {
    let (handler, responder) = in_memory();
    let private = HandleValue {
        permissions: crate::values::Permissions::ADMIN_ONLY,
        ..HandleValue::new(4, "DESC", "internal")
    };
    handler.insert(
        "10.1000/a",
        vec![
            HandleValue::new(1, "URL", "https://a.example/"),
            HandleValue::new(2, "EMAIL", "a@example.org"),
            HandleValue::new(3, "URL.mirror", "https://b.example/"),
            private,
        ],
    );
    let every = ask_as(&responder, anonymous(), &resolve("10.1000/A")).await;
    assert_eq!(resolved_indexes(&every), [1, 2, 3]);
    let by_type = resolve_selected("10.1000/a", &[], &["url"]);
    let by_type = ask_as(&responder, anonymous(), &by_type).await;
    assert_eq!(resolved_indexes(&by_type), [1], "URL matches only URL");
    let subtypes = resolve_selected("10.1000/a", &[], &["URL."]);
    let subtypes = ask_as(&responder, anonymous(), &subtypes).await;
    assert_eq!(
        resolved_indexes(&subtypes),
        [1, 3],
        "URL. matches its subtypes"
    );
    let by_index = resolve_selected("10.1000/a", &[2], &[]);
    let by_index = ask_as(&responder, anonymous(), &by_index).await;
    assert_eq!(resolved_indexes(&by_index), [2]);
    let either = resolve_selected("10.1000/a", &[2], &["URL.mirror"]);
    let either = ask_as(&responder, anonymous(), &either).await;
    assert_eq!(resolved_indexes(&either), [2, 3]);
    let none = resolve_selected("10.1000/a", &[9], &[]);
    let none = ask_as(&responder, anonymous(), &none).await;
    assert_eq!(none.header.response_code, ResponseCode::ValuesNotFound);
}

#[tokio::test]
async fn a_missing_handle_is_not_found() {
    let (_handler, responder) = in_memory();
    let answer = ask_as(&responder, anonymous(), &resolve("10.1000/none")).await;
    assert_eq!(answer.header.response_code, ResponseCode::HandleNotFound);
    assert_eq!(answer.header.opcode, OpCode::Resolution);
    assert!(matches!(response(&answer), Response::Error(_)));
}

#[tokio::test]
async fn an_administrator_who_answers_is_obeyed_and_a_wrong_answer_is_refused() {
    let (handler, responder) = in_memory();
    let url = vec![HandleValue::new(1, "URL", "https://a.example/")];

    let challenge = ask_as(&responder, anonymous(), &create("10.1000/new", url.clone())).await;
    assert_eq!(
        challenge.header.response_code,
        ResponseCode::AuthenticationNeeded
    );
    assert!(handler.get("10.1000/new").is_none(), "held back");
    let wrong = answer_with(&challenge, b"not the secret");
    let refused = ask_as(&responder, anonymous(), &wrong).await;
    assert_eq!(
        refused.header.response_code,
        ResponseCode::AuthenticationFailed
    );
    assert_eq!(refused.header.opcode, OpCode::CreateHandle);
    assert!(handler.get("10.1000/new").is_none());

    let challenge = ask_as(&responder, anonymous(), &create("10.1000/new", url)).await;
    let right = answer_with(&challenge, MemoryHandler::SECRET);
    let done = ask_as(&responder, anonymous(), &right).await;
    assert_eq!(done.header.response_code, ResponseCode::Success);
    assert_eq!(done.header.opcode, OpCode::CreateHandle);
    assert_eq!(done.envelope.request_id, 0x0506_0708);
    let created = handler.get("10.1000/new").unwrap();
    assert_eq!(created.values[0].data, b"https://a.example/");
    assert_ne!(created.values[0].timestamp, 0, "the server stamps values");
    let replayed = ask_as(&responder, anonymous(), &right).await;
    assert_eq!(
        replayed.header.response_code,
        ResponseCode::AuthenticationTimeout,
        "a challenge is answered once"
    );
}

#[tokio::test]
async fn an_authenticated_stranger_is_not_an_administrator() {
    let (_handler, responder) = in_memory();
    let stranger = Caller::Administrator {
        identity: Identity {
            handle: "10.1000/someone".into(),
            index: 300,
        },
    };
    let url = vec![HandleValue::new(1, "URL", "https://a.example/")];
    let answer = ask_as(&responder, stranger, &create("10.1000/x", url)).await;
    assert_eq!(answer.header.response_code, ResponseCode::InvalidAdmin);
}

#[tokio::test]
async fn a_listing_comes_in_pages_that_say_when_more_follow() {
    let (handler, responder) = in_memory();
    for n in 0..LIST_PAGE_LEN * 2 + 1 {
        let url = HandleValue::new(1, "URL", "https://a.example/");
        handler.insert(&format!("10.1000/{n:03}"), vec![url]);
    }
    handler.insert("10.2000/other", vec![HandleValue::new(1, "URL", "x")]);
    let bytes = request(
        Request::ListHandles {
            prefix: b"10.1000".to_vec(),
        },
        OpFlags::J9_DEFAULT,
    );
    let Reply::List(mut pages) = responder.respond(administrator(), &bytes).await else {
        panic!("not a list")
    };
    let mut sizes = Vec::new();
    let mut continued = Vec::new();
    let mut listed = Vec::new();
    while let Some(page) = pages.next_page().await {
        continued.push(page.header.flags.contains(OpFlags::CN));
        let Response::ListHandles { handles } = response(&page) else {
            panic!("{page:?}")
        };
        sizes.push(handles.len());
        listed.extend(
            handles
                .iter()
                .map(|h| String::from_utf8_lossy(h).into_owned()),
        );
    }
    assert_eq!(sizes, [LIST_PAGE_LEN, LIST_PAGE_LEN, 1]);
    assert_eq!(continued, [true, true, false]);
    assert_eq!(listed.first().map(String::as_str), Some("10.1000/000"));
    assert_eq!(listed.last().map(String::as_str), Some("10.1000/100"));

    let stranger = Caller::Administrator {
        identity: Identity {
            handle: "10.1000/someone".into(),
            index: 300,
        },
    };
    let Reply::List(mut refused) = responder.respond(stranger, &bytes).await else {
        panic!("not a list")
    };
    let first = refused.next_page().await.unwrap();
    assert_eq!(first.header.response_code, ResponseCode::InvalidAdmin);
    assert!(
        refused.next_page().await.is_none(),
        "a refusal ends the answer"
    );
    let challenged = ask_as(&responder, anonymous(), &bytes).await;
    assert_eq!(
        challenged.header.response_code,
        ResponseCode::AuthenticationNeeded
    );
}

#[tokio::test]
async fn site_info_is_the_handlers() {
    let (handler, responder) = in_memory();
    let bytes = request(
        Request::GetSiteInfo { handle: Vec::new() },
        OpFlags::J9_DEFAULT,
    );
    let answer = ask_as(&responder, anonymous(), &bytes).await;
    let Response::SiteInfo { site } = response(&answer) else {
        panic!("not site info: {answer:?}")
    };
    let site = SiteInfo::decode(site).unwrap();
    assert_eq!(site, Handler::site_info(handler.as_ref()).await);
    assert_eq!(site.serial_number, 42);
    assert_eq!(site.servers[0].address.to_string(), "192.0.2.1");
}
