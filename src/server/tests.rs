//! The responder end to end in memory: request bytes in, response messages out.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::auth::{Identity, SecretForms};
use crate::codec::{
    Body, Envelope, HandleValues, Header, Message, OpCode, OpFlags, ProtocolVersion, Request,
    ResolutionRequest, Response, ResponseCode,
};
use crate::metrics::Metrics;
use crate::service::{AuthPolicy, Caller, Service};
use crate::storage::Store;
use crate::values::{HandleValue, SiteInfo, ValueIndex};
use responder::Reply;

const LOCAL: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// The server administrator of the test responders.
fn admin() -> Identity {
    Identity {
        handle: "0.NA/ADMIN".into(),
        index: 300,
    }
}

/// A caller who has authenticated as the server administrator.
fn administrator() -> Caller {
    Caller::Administrator { identity: admin() }
}

async fn responder() -> (tempfile::TempDir, Responder) {
    responder_with(Duration::from_secs(20)).await
}

/// A responder whose challenges live `challenge_lifetime`, with [`admin`] as its
/// server administrator.
async fn responder_with(challenge_lifetime: Duration) -> (tempfile::TempDir, Responder) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(&dir.path().join("handles.redb")).unwrap());
    let handle = "127.0.0.1:2641".parse().unwrap();
    let replica = crate::replication::start_alone(Arc::clone(&store), dir.path(), handle).await;
    let settings = ResponseSettings {
        site_serial: 7,
        validity_secs: 60,
        challenge_lifetime,
        session_lifetime: Duration::from_secs(60),
        max_sessions: 4,
        secret_forms: SecretForms::Strong,
    };
    let policy = AuthPolicy {
        server_admins: vec![admin()],
    };
    let service = Service::new(store, replica, policy, Config::default().site);
    let metrics = Arc::new(Metrics::new());
    (dir, Responder::new(Arc::new(service), settings, metrics))
}

fn request(request: Request, flags: OpFlags) -> Vec<u8> {
    let header = Header {
        flags,
        ..Header::request(request.opcode(), 0)
    };
    let envelope = Envelope::new(ProtocolVersion::new(2, 10), 0x0102_0304);
    Message::new(envelope, header, Body::Request(request)).encode()
}

async fn ask(responder: &Responder, bytes: &[u8]) -> Message {
    ask_as(responder, administrator(), bytes).await
}

async fn ask_as(responder: &Responder, caller: Caller, bytes: &[u8]) -> Message {
    match responder.respond(caller, bytes).await {
        Reply::One(message) => Message::decode(&message.encode()).unwrap(),
        other => panic!("expected one message, got {other:?}"),
    }
}

fn response(message: &Message) -> &Response {
    match &message.body {
        Body::Response { response, .. } => response,
        Body::Request(_) => panic!("a request came back"),
    }
}

fn resolve(handle: &str) -> Vec<u8> {
    resolve_flagged(handle, OpFlags::J9_DEFAULT)
}

/// A resolution of `handle` asking to keep the connection open after its answer (KC).
fn resolve_keeping(handle: &str) -> Vec<u8> {
    resolve_flagged(handle, OpFlags::J9_DEFAULT.with(OpFlags::KC))
}

fn resolve_flagged(handle: &str, flags: OpFlags) -> Vec<u8> {
    let body = ResolutionRequest {
        handle: handle.as_bytes().to_vec(),
        indexes: Vec::new(),
        types: Vec::new(),
    };
    request(Request::Resolution(body), flags)
}

fn create(handle: &str, values: Vec<HandleValue>) -> Vec<u8> {
    let body = HandleValues {
        handle: handle.as_bytes().to_vec(),
        values,
    };
    request(Request::CreateHandle(body), OpFlags::J9_DEFAULT)
}

#[tokio::test]
async fn created_handle_resolves_with_echoed_ids_and_future_expiry() {
    let (_dir, responder) = responder().await;
    let url = HandleValue::new(1, "URL", "https://www.doi.org/");
    let created = ask(&responder, &create("10.1000/1", vec![url.clone()])).await;
    assert_eq!(created.header.response_code, ResponseCode::Success);
    let handle = Some(b"10.1000/1".to_vec());
    assert_eq!(response(&created), &Response::CreateHandle { handle });

    let answer = ask(&responder, &resolve("10.1000/1")).await;
    assert_eq!(answer.envelope.request_id, 0x0102_0304);
    assert_eq!(answer.envelope.version, ProtocolVersion::new(2, 11));
    assert_eq!(answer.header.opcode, OpCode::Resolution);
    assert_eq!(answer.header.site_info_serial, 7);
    assert!(answer.header.expiration > crate::clock::unix_now());
    assert!(answer.header.flags.contains(OpFlags::AT));
    let Response::Resolution(values) = response(&answer) else {
        panic!("not a resolution: {answer:?}")
    };
    assert_eq!(values.values.len(), 1);
    assert_eq!(values.values[0].data, url.data);
}

#[tokio::test]
async fn errors_carry_their_codes() {
    let (_dir, responder) = responder().await;
    let url = || vec![HandleValue::new(1, "URL", "https://a.example/")];
    assert_eq!(
        ask(&responder, &create("10.1000/x", url()))
            .await
            .header
            .response_code,
        ResponseCode::Success
    );
    let cases = [
        (resolve("10.1000/none"), ResponseCode::HandleNotFound),
        (
            create("10.1000/X", url()),
            ResponseCode::HandleAlreadyExists,
        ),
        (resolve("/no-prefix"), ResponseCode::InvalidHandle),
        (
            create(
                "10.1000/bad",
                vec![HandleValue::new(1, "HS_ADMIN", "not an admin record")],
            ),
            ResponseCode::InvalidValue,
        ),
        (
            request(
                Request::RemoveValue {
                    handle: b"10.1000/x".to_vec(),
                    indexes: vec![ValueIndex(9)],
                },
                OpFlags::J9_DEFAULT,
            ),
            ResponseCode::ValuesNotFound,
        ),
        (
            request(
                Request::AddValue(HandleValues {
                    handle: b"10.1000/x".to_vec(),
                    values: url(),
                }),
                OpFlags::J9_DEFAULT,
            ),
            ResponseCode::ValueAlreadyExists,
        ),
    ];
    for (bytes, code) in cases {
        let answer = ask(&responder, &bytes).await;
        assert_eq!(answer.header.response_code, code, "{answer:?}");
        assert!(matches!(response(&answer), Response::Error(_)));
    }
}

#[tokio::test]
async fn request_digest_is_returned_when_asked() {
    let (_dir, responder) = responder().await;
    let bytes = resolve("10.1000/none");
    let mut with_rd = Message::decode(&bytes).unwrap();
    with_rd.header.flags = with_rd.header.flags.with(OpFlags::RD);
    let sent = with_rd.encode();
    let answer = ask(&responder, &sent).await;
    let Body::Response {
        digest: Some(digest),
        ..
    } = &answer.body
    else {
        panic!("no digest: {answer:?}")
    };
    let header_and_body = &sent[20..sent.len() - 4];
    assert!(
        digest.matches(header_and_body),
        "over header and body, not the credential"
    );
}

#[tokio::test]
async fn garbage_and_unsupported_operations_are_answered() {
    let (_dir, responder) = responder().await;
    let mut truncated = resolve("10.1000/1");
    truncated.truncate(truncated.len() - 6);
    let answer = ask(&responder, &truncated).await;
    assert_eq!(answer.header.response_code, ResponseCode::ProtocolError);
    assert_eq!(answer.envelope.request_id, 0x0102_0304);

    let mut unknown = resolve("10.1000/1");
    unknown[20..24].copy_from_slice(&1003u32.to_be_bytes());
    let answer = ask(&responder, &unknown).await;
    assert_eq!(
        answer.header.response_code,
        ResponseCode::OperationNotSupported
    );

    assert!(matches!(
        responder.respond(Caller::anonymous(LOCAL), b"short").await,
        Reply::Nothing
    ));
}

#[tokio::test]
async fn site_info_describes_the_replica_set_and_its_primary() {
    let (_dir, responder) = responder().await;
    // A write is acknowledged only by the primary: after it, the set has one.
    let url = vec![HandleValue::new(1, "URL", "https://a/")];
    ask(&responder, &create("10.1000/site", url)).await;
    let answer = ask(
        &responder,
        &request(
            Request::GetSiteInfo {
                handle: b"/".to_vec(),
            },
            OpFlags::J9_DEFAULT,
        ),
    )
    .await;
    let Response::SiteInfo { site } = response(&answer) else {
        panic!("not site info: {answer:?}")
    };
    let site = SiteInfo::decode(site).unwrap();
    assert_eq!(site.servers.len(), 1);
    assert_eq!(site.servers[0].server_id, 1);
    assert_eq!(site.servers[0].interfaces[0].port, 2641);
    assert!(site.attributes.contains(&("primary".into(), "1".into())));
}

#[tokio::test]
async fn list_is_sent_in_continued_pages() {
    let (_dir, responder) = responder().await;
    for n in 0..(LIST_PAGE_LEN + 3) {
        let bytes = create(
            &format!("10.1000/{n:03}"),
            vec![HandleValue::new(1, "URL", "https://a/")],
        );
        ask(&responder, &bytes).await;
    }
    let bytes = request(
        Request::ListHandles {
            prefix: b"0.NA/10.1000".to_vec(),
        },
        OpFlags::J9_DEFAULT,
    );
    let Reply::List(mut pages) = responder.respond(administrator(), &bytes).await else {
        panic!("not a list")
    };
    let mut listed = Vec::new();
    let mut continued = Vec::new();
    while let Some(page) = pages.next_page().await {
        continued.push(page.header.flags.contains(OpFlags::CN));
        let Response::ListHandles { handles } = response(&page) else {
            panic!("{page:?}")
        };
        listed.extend(
            handles
                .iter()
                .map(|h| String::from_utf8(h.clone()).unwrap()),
        );
        assert!(continued.len() < 10, "bounded");
    }
    assert_eq!(continued, [true, false]);
    assert_eq!(listed.len(), LIST_PAGE_LEN + 3);
    assert_eq!(listed[0], "10.1000/000");
}

/// Every page of a certified listing, and a certified answer, carries a signature
/// by the server key that checks out over the page as received; nothing else does.
#[tokio::test]
async fn certified_answers_and_list_pages_are_signed() {
    let (_dir, responder) = responder().await;
    let key = crate::auth::keys::tests::test_key();
    let responder = responder.with_server_key(Arc::new(key.clone()));
    let verifying = crate::auth::VerifyingKey::from_public_key(&key.public_key()).unwrap();
    for n in 0..(LIST_PAGE_LEN + 1) {
        let bytes = create(
            &format!("10.1000/{n:03}"),
            vec![HandleValue::new(1, "URL", "https://a/")],
        );
        assert_eq!(ask(&responder, &bytes).await.credential, None);
    }
    let list = Request::ListHandles {
        prefix: b"0.NA/10.1000".to_vec(),
    };
    for (flags, signed) in [
        (OpFlags::J9_DEFAULT.with(OpFlags::CT), true),
        (OpFlags::J9_DEFAULT, false),
    ] {
        let bytes = request(list.clone(), flags);
        let Reply::List(mut pages) = responder.respond(administrator(), &bytes).await else {
            panic!("not a list")
        };
        let mut count = 0;
        while let Some(page) = pages.next_page().await {
            let page = Message::decode(&page.encode()).unwrap();
            let checked = crate::client::check_signature(&page, &verifying);
            assert_eq!(checked.is_ok(), signed, "{checked:?}");
            count += 1;
            assert!(count < 10, "bounded");
        }
        assert_eq!(count, 2);
    }
    let certified = request(
        Request::Resolution(ResolutionRequest {
            handle: b"10.1000/000".to_vec(),
            indexes: vec![],
            types: vec![],
        }),
        OpFlags::J9_DEFAULT.with(OpFlags::CT),
    );
    let answer = ask(&responder, &certified).await;
    assert_eq!(answer.header.response_code, ResponseCode::Success);
    assert_eq!(crate::client::check_signature(&answer, &verifying), Ok(()));
    assert_eq!(
        ask(&responder, &resolve("10.1000/000")).await.credential,
        None
    );
}

#[tokio::test]
async fn busy_answer_echoes_the_request() {
    let (_dir, responder) = responder().await;
    let Reply::One(answer) = responder.busy(&resolve("10.1000/1")) else {
        panic!("a busy answer is still an answer")
    };
    assert_eq!(answer.header.response_code, ResponseCode::ServerTooBusy);
    assert_eq!(answer.envelope.request_id, 0x0102_0304);
}

#[path = "auth_tests.rs"]
mod auth_tests;

#[path = "drain_tests.rs"]
mod drain_tests;
#[path = "memory_tests.rs"]
mod memory_tests;

#[tokio::test]
async fn answering_a_datagram_is_a_small_future() {
    // Each datagram's answer is a future moved into a task of its own; the rarer,
    // larger requests are boxed so that moving it stays cheap.
    let (_dir, responder) = responder().await;
    let bytes = resolve("10.1000/size");
    let answering = responder.respond(Caller::anonymous(LOCAL), &bytes);
    // 9,632 octets before the boxing; 5,712 after.
    let size = size_of_val(&answering);
    assert!(size <= 8 * 1024, "{size} octets");
}

#[tokio::test]
async fn serving_a_connection_is_a_small_future() {
    // Each accepted connection's future is moved into a task of its own (and, before,
    // into the drain's bound): the answers it awaits are boxed so that moving it
    // stays cheap (with one request per connection, as J9 clients send, copying it was
    // 5 % of the server's CPU).
    let (_dir, responder) = responder().await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let client = tokio::net::TcpStream::connect(listener.local_addr().unwrap());
    let ((stream, peer), _client) =
        tokio::join!(async { listener.accept().await.unwrap() }, async {
            client.await.unwrap()
        });
    let (_start, draining) = drain::channel();
    let serving = tcp::connection(stream, peer, responder, Duration::from_secs(5), draining);
    // 6,272 octets before the boxing; 3,128 after; 1,016 since the reply is taken
    // apart before it is written (the connection's future no longer holds a
    // listing's next page while it writes).
    let size = size_of_val(&serving);
    assert!(size <= 1536, "{size} octets");
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn accepted_connections_inherit_nodelay_from_the_listener() {
    // The connections do not set TCP_NODELAY themselves on Linux: answers, pipelined
    // ones included, would wait for acknowledgements were it not inherited.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    tcp::set_nodelay_inherited(&listener).unwrap();
    let client = tokio::net::TcpStream::connect(listener.local_addr().unwrap());
    let ((stream, _peer), _client) =
        tokio::join!(async { listener.accept().await.unwrap() }, async {
            client.await.unwrap()
        });
    assert!(stream.nodelay().unwrap());
}

#[tokio::test]
async fn handles_of_prefixes_served_elsewhere_are_referred() {
    let (_dir, responder) = responder().await;
    let site = responder.handler.site_info().await.encode();
    for (name, kind) in [("0.NA/FAR", "HS_SITE"), ("0.NA/DER", "HS_SITE.PREFIX")] {
        let values = vec![HandleValue::new(1, kind, site.clone())];
        let created = ask(&responder, &create(name, values)).await;
        assert_eq!(
            created.header.response_code,
            ResponseCode::Success,
            "{name}"
        );
    }
    let referral = |message: &Message| match response(message) {
        Response::Referral(referral) => referral.clone(),
        other => panic!("not a referral: {other:?}"),
    };

    // The GHR of FAR: a service referral naming 0.NA/FAR and its HS_SITE.
    let far = ask(&responder, &resolve("FAR/x")).await;
    assert_eq!(far.header.response_code, ResponseCode::ServiceReferral);
    let to = referral(&far);
    assert_eq!(to.handle, b"0.NA/FAR");
    let values = to.values.expect("values");
    assert_eq!(
        (values.len(), values[0].value_type.as_str()),
        (1, "HS_SITE")
    );

    // A derived prefix handle of DER, missing here: a prefix referral to DER's
    // delegate, with no handle and the HS_SITE.PREFIX value.
    let derived = ask(&responder, &resolve("0.NA/DER.SUB.X")).await;
    assert_eq!(derived.header.response_code, ResponseCode::PrefixReferral);
    let to = referral(&derived);
    assert!(to.handle.is_empty());
    assert_eq!(to.values.expect("values")[0].value_type, "HS_SITE.PREFIX");

    // DER's own handles are administered here (its prefix handle names no service),
    // and a prefix nobody describes is not found on a service on its own.
    for name in ["DER/x", "ELSEWHERE/x", "0.NA/NOWHERE.SUB"] {
        let missing = ask(&responder, &resolve(name)).await;
        assert_eq!(
            missing.header.response_code,
            ResponseCode::HandleNotFound,
            "{name}"
        );
    }
}

#[tokio::test]
async fn homing_is_for_server_administrators_and_lists_what_was_homed() {
    let (_dir, responder) = responder().await;
    let prefix = |name: &str| name.as_bytes().to_vec();
    let homing = [
        Request::HomeNa {
            prefix: prefix("0.NA/10.5555"),
        },
        Request::HomeNa {
            prefix: prefix("20"),
        },
        Request::UnhomeNa {
            prefix: prefix("0.NA/20"),
        },
    ];
    for body in homing {
        let answer = ask(&responder, &request(body, OpFlags::J9_DEFAULT)).await;
        assert_eq!(answer.header.response_code, ResponseCode::Success);
    }
    let list = request(
        Request::ListHomedNas {
            handle: prefix("/"),
        },
        OpFlags::J9_DEFAULT,
    );
    let listed = ask(&responder, &list).await;
    let Response::ListHandles { handles } = response(&listed) else {
        panic!("not a list: {listed:?}")
    };
    assert_eq!(handles, &[prefix("0.NA/10.5555")]);
    let someone = Caller::Administrator {
        identity: Identity {
            handle: "0.NA/SOMEONE".into(),
            index: 300,
        },
    };
    let home = request(
        Request::HomeNa {
            prefix: prefix("30"),
        },
        OpFlags::J9_DEFAULT,
    );
    let refused = ask_as(&responder, someone, &home).await;
    assert_eq!(refused.header.response_code, ResponseCode::InvalidAdmin);
}
