//! The Handle protocol end to end: the client library (and raw codec messages)
//! against a real `hdl serve`.

use hdl::client::{AdminRequest, Client, ClientError, Overwrite, Transport};
use hdl::codec::{
    Body, ENVELOPE_LEN, MAX_MESSAGE_LEN, Message, OpCode, Request, Response, ResponseCode,
};
use hdl::names::Handle;
use hdl::values::{
    AdminPermissions, AdminRecord, HandleValue, InterfaceProtocol, Permissions, ValueIndex,
    ValueSelection,
};

use crate::harness::Server;
use crate::raw;

fn handle(text: &str) -> Handle {
    Handle::parse(text).expect("valid handle")
}

fn admin_value() -> HandleValue {
    let record = AdminRecord {
        permissions: AdminPermissions::ALL,
        admin_handle: "0.NA/TEST".into(),
        admin_index: 300,
        legacy_padding: false,
    };
    HandleValue {
        permissions: Permissions::ADMIN_ONLY,
        ..HandleValue::new(100, "HS_ADMIN", record.encode())
    }
}

async fn create(client: &Client, name: &str, values: Vec<HandleValue>) {
    let request = AdminRequest::Create {
        handle: handle(name),
        values,
        overwrite: Overwrite::Refuse,
    };
    client.admin(request).await.expect("create");
}

async fn resolve(client: &Client, name: &str, selection: ValueSelection) -> Vec<u32> {
    let resolution = client
        .resolve(&handle(name), &selection, Transport::Auto)
        .await
        .expect("resolve");
    resolution.values.iter().map(|v| v.index.0).collect()
}

fn code(result: Result<impl std::fmt::Debug, ClientError>) -> ResponseCode {
    let error = result.expect_err("an error response");
    error
        .response_code()
        .unwrap_or_else(|| panic!("not a server error: {error}"))
}

fn raw_code(answer: Option<Message>) -> ResponseCode {
    answer.expect("an answer").header.response_code
}

#[tokio::test]
async fn resolves_over_udp_and_over_tcp() {
    let server = Server::start();
    let client = server.client();
    let values = vec![
        HandleValue::new(1, "URL", "https://example.org/"),
        HandleValue::new(2, "EMAIL", "hdl@example.org"),
    ];
    create(&client, "TEST/both", values.clone()).await;
    for transport in [Transport::Udp, Transport::Tcp, Transport::Auto] {
        let resolution = client
            .resolve(&handle("test/BOTH"), &ValueSelection::all(), transport)
            .await
            .unwrap_or_else(|e| panic!("{transport}: {e}"));
        assert_eq!(resolution.handle.as_str(), "test/BOTH");
        let found: Vec<_> = resolution
            .values
            .iter()
            .map(|v| (v.index, v.value_type.as_str(), v.data.as_slice()))
            .collect();
        let sent: Vec<_> = values
            .iter()
            .map(|v| (v.index, v.value_type.as_str(), v.data.as_slice()))
            .collect();
        assert_eq!(found, sent, "{transport}");
        assert!(resolution.values.iter().all(|v| v.timestamp > 0));
    }
}

#[tokio::test]
async fn an_answer_of_several_datagrams_is_reassembled() {
    let server = Server::start();
    let client = server.client();
    let values: Vec<_> = (1..=5)
        .map(|i| HandleValue::new(i, "DESC", "x".repeat(500)))
        .collect();
    create(&client, "TEST/large", values).await;
    let resolution = client
        .resolve(
            &handle("TEST/large"),
            &ValueSelection::all(),
            Transport::Udp,
        )
        .await
        .expect("resolve over UDP");
    assert_eq!(resolution.values.len(), 5);
    assert!(resolution.values.iter().all(|v| v.data.len() == 500));
    let (answer, datagrams) = raw::udp(server.address(), &raw::resolution(b"TEST/large", 77));
    assert_eq!(answer.header.response_code, ResponseCode::Success);
    assert!(datagrams >= 6, "{datagrams} datagrams for > 2.5 KB");
}

#[tokio::test]
async fn type_and_index_filters_pick_values() {
    let server = Server::start();
    let client = server.client();
    let values = vec![
        HandleValue::new(1, "URL", "https://example.org/1"),
        HandleValue::new(2, "EMAIL", "hdl@example.org"),
        HandleValue::new(3, "URL.alt", "https://example.org/3"),
    ];
    create(&client, "TEST/filters", values).await;
    let select = |indexes: &[u32], types: &[&str]| ValueSelection {
        indexes: indexes.iter().copied().map(ValueIndex).collect(),
        types: types.iter().map(|t| (*t).to_owned()).collect(),
    };
    let name = "TEST/filters";
    assert_eq!(resolve(&client, name, select(&[], &["email"])).await, [2]);
    assert_eq!(resolve(&client, name, select(&[1], &[])).await, [1]);
    assert_eq!(
        resolve(&client, name, select(&[1], &["EMAIL"])).await,
        [1, 2]
    );
    assert_eq!(resolve(&client, name, select(&[], &["URL"])).await, [1]);
    assert_eq!(resolve(&client, name, select(&[], &["URL."])).await, [1, 3]);
    let none = client
        .resolve(&handle(name), &select(&[9], &["DESC"]), Transport::Udp)
        .await;
    assert_eq!(code(none), ResponseCode::ValuesNotFound);
}

#[tokio::test]
async fn admin_values_are_never_resolved() {
    let server = Server::start();
    let client = server.client();
    let values = vec![
        HandleValue::new(1, "URL", "https://example.org/"),
        admin_value(),
    ];
    create(&client, "TEST/admin", values).await;
    assert_eq!(
        resolve(&client, "TEST/admin", ValueSelection::all()).await,
        [1]
    );
    for selection in [
        ValueSelection {
            indexes: vec![ValueIndex(100)],
            types: vec![],
        },
        ValueSelection {
            indexes: vec![],
            types: vec!["HS_ADMIN".into()],
        },
    ] {
        for transport in [Transport::Udp, Transport::Tcp] {
            let found = client
                .resolve(&handle("TEST/admin"), &selection, transport)
                .await;
            assert_eq!(code(found), ResponseCode::ValuesNotFound);
        }
    }
}

#[tokio::test]
async fn site_info_describes_the_server() {
    let server = Server::start();
    let site = server.client().site_info().await.expect("site info");
    let [record] = site.servers.as_slice() else {
        panic!("one server expected: {site:?}");
    };
    assert_eq!(record.address, server.address().ip());
    let port = u32::from(server.address().port());
    for protocol in [InterfaceProtocol::Tcp, InterfaceProtocol::Udp] {
        let found = record
            .interfaces
            .iter()
            .any(|i| i.protocol == protocol && i.port == port);
        assert!(found, "{protocol:?} on {port}: {:?}", record.interfaces);
    }
}

#[tokio::test]
async fn values_are_added_modified_removed_and_handles_deleted() {
    let server = Server::start();
    let client = server.client();
    let name = "TEST/life";
    create(
        &client,
        name,
        vec![HandleValue::new(1, "URL", "https://a.example/")],
    )
    .await;
    let admin = |request| client.admin(request);
    let add = |data: &str, overwrite| AdminRequest::AddValues {
        handle: handle(name),
        values: vec![HandleValue::new(2, "DESC", data)],
        overwrite,
    };
    assert_eq!(
        admin(add("one", Overwrite::Refuse)).await.expect("add"),
        Response::Done
    );
    let taken = admin(add("again", Overwrite::Refuse)).await;
    assert_eq!(code(taken), ResponseCode::ValueAlreadyExists);
    let replaced = admin(add("two", Overwrite::Replace)).await;
    assert_eq!(replaced.expect("add with overwrite"), Response::Done);
    let modify = AdminRequest::ModifyValues {
        handle: handle(name),
        values: vec![HandleValue::new(1, "URL", "https://b.example/")],
    };
    admin(modify).await.expect("modify");
    let found = client
        .resolve(&handle(name), &ValueSelection::all(), Transport::Tcp)
        .await
        .expect("resolve");
    assert_eq!(found.values[0].data, b"https://b.example/");
    assert_eq!(found.values[1].data, b"two");
    let remove = AdminRequest::RemoveValues {
        handle: handle(name),
        indexes: vec![ValueIndex(2)],
    };
    admin(remove).await.expect("remove");
    assert_eq!(resolve(&client, name, ValueSelection::all()).await, [1]);
    admin(AdminRequest::Delete {
        handle: handle(name),
    })
    .await
    .expect("delete");
    let gone = client
        .resolve(&handle(name), &ValueSelection::all(), Transport::Udp)
        .await;
    assert_eq!(code(gone), ResponseCode::HandleNotFound);
}

#[tokio::test]
async fn create_names_the_handle_and_overwrite_replaces() {
    let server = Server::start();
    let client = server.client();
    let create = |url: &str, overwrite| AdminRequest::Create {
        handle: handle("TEST/over"),
        values: vec![HandleValue::new(7, "URL", url)],
        overwrite,
    };
    let created = client
        .admin(create("https://a.example/", Overwrite::Refuse))
        .await;
    let Ok(Response::CreateHandle { handle: Some(name) }) = created else {
        panic!("{created:?}");
    };
    assert_eq!(name, b"TEST/over");
    let again = client
        .admin(create("https://b.example/", Overwrite::Refuse))
        .await;
    assert_eq!(code(again), ResponseCode::HandleAlreadyExists);
    client
        .admin(create("https://c.example/", Overwrite::Replace))
        .await
        .expect("overwrite");
    let found = client
        .resolve(&handle("TEST/over"), &ValueSelection::all(), Transport::Udp)
        .await
        .expect("resolve");
    assert_eq!(found.values[0].data, b"https://c.example/");
}

#[tokio::test]
async fn listing_reads_every_page_within_its_bound() {
    let server = Server::start();
    let client = server.client();
    for n in 0..120 {
        let value = HandleValue::new(1, "URL", format!("https://example.org/{n}"));
        create(&client, &format!("LIST/{n:03}"), vec![value]).await;
    }
    create(&client, "OTHER/1", vec![HandleValue::new(1, "DESC", "x")]).await;
    let mut listed = client.list_handles("LIST", 1000).await.expect("list");
    listed.sort();
    let expected: Vec<_> = (0..120).map(|n| format!("LIST/{n:03}")).collect();
    assert_eq!(listed, expected);
    let by_prefix_handle = client.list_handles("0.NA/LIST", 1000).await.expect("list");
    assert_eq!(by_prefix_handle.len(), 120);
    let bounded = client
        .list_handles("LIST", 60)
        .await
        .expect_err("over the bound");
    assert!(matches!(bounded, ClientError::TooManyHandles { limit: 60 }));
}

#[tokio::test]
async fn every_error_code_comes_from_a_real_request() {
    let server = Server::start();
    let client = server.client();
    create(
        &client,
        "TEST/err",
        vec![HandleValue::new(1, "URL", "https://e.example/")],
    )
    .await;
    let all = ValueSelection::all();
    let missing = client
        .resolve(&handle("TEST/none"), &all, Transport::Udp)
        .await;
    assert_eq!(code(missing), ResponseCode::HandleNotFound);
    let request = |values, name: &str| AdminRequest::Create {
        handle: handle(name),
        values,
        overwrite: Overwrite::Refuse,
    };
    let url = HandleValue::new(1, "URL", "https://e.example/");
    let exists = client.admin(request(vec![url.clone()], "TEST/err")).await;
    assert_eq!(code(exists), ResponseCode::HandleAlreadyExists);
    let invalid = HandleValue::new(1, "HS_ADMIN", "not an admin record");
    let bad_value = client.admin(request(vec![invalid], "TEST/bad")).await;
    assert_eq!(code(bad_value), ResponseCode::InvalidValue);
    let add = AdminRequest::AddValues {
        handle: handle("TEST/err"),
        values: vec![url],
        overwrite: Overwrite::Refuse,
    };
    assert_eq!(
        code(client.admin(add).await),
        ResponseCode::ValueAlreadyExists
    );
    let no_match = ValueSelection {
        indexes: vec![ValueIndex(5)],
        types: vec![],
    };
    let none = client
        .resolve(&handle("TEST/err"), &no_match, Transport::Tcp)
        .await;
    assert_eq!(code(none), ResponseCode::ValuesNotFound);
    raw_error_codes(&server);
}

/// 102, 4 and 5 need requests the client cannot build.
fn raw_error_codes(server: &Server) {
    let address = server.address();
    for bad in [&b"TEST/"[..], b"/local", b"\xff\xfe/x"] {
        let answer = raw::tcp(address, &raw::resolution(bad, 11).encode());
        assert_eq!(raw_code(answer), ResponseCode::InvalidHandle, "{bad:?}");
    }
    let mut truncated = raw::resolution(b"TEST/err", 12).encode();
    // The handle's length claims more octets than the body holds.
    truncated[raw::BODY_OFFSET..raw::BODY_OFFSET + 4].copy_from_slice(&1000u32.to_be_bytes());
    let answer = raw::tcp(address, &truncated).expect("an answer");
    assert_eq!(answer.header.response_code, ResponseCode::ProtocolError);
    assert_eq!(answer.envelope.request_id, 12);
    let site = raw::encode(
        Request::GetSiteInfo {
            handle: b"/".to_vec(),
        },
        13,
    )
    .encode();
    let unknown = raw::with_opcode(site, OpCode::BackupServer);
    let answer = raw::tcp(address, &unknown).expect("an answer");
    assert_eq!(
        answer.header.response_code,
        ResponseCode::OperationNotSupported
    );
    assert_eq!(answer.header.opcode, OpCode::BackupServer);
    assert!(matches!(answer.body, Body::Response { .. }));
}

#[tokio::test]
async fn garbage_datagrams_do_not_harm_the_next_request() {
    let server = Server::start();
    create(
        &server.client(),
        "TEST/udp",
        vec![HandleValue::new(1, "DESC", "ok")],
    )
    .await;
    let valid = raw::resolution(b"TEST/udp", 21).encode();
    let mut oversized = valid[..ENVELOPE_LEN].to_vec();
    let too_long = u32::try_from(MAX_MESSAGE_LEN + 1).expect("fits");
    oversized[16..20].copy_from_slice(&too_long.to_be_bytes());
    oversized.extend_from_slice(&[0; 100]);
    let mut truncated = valid[..valid.len() - 10].to_vec();
    truncated[8..12].copy_from_slice(&22u32.to_be_bytes());
    let garbage = vec![
        b"\xde\xad".to_vec(),
        vec![0xff; 512],
        oversized,
        truncated,
        raw::with_opcode(valid.clone(), OpCode::Unknown(77)),
    ];
    let message = raw::resolution(b"TEST/udp", 23);
    let ((answer, _), others) = raw::udp_after(server.address(), &garbage, &message);
    assert_eq!(answer.header.response_code, ResponseCode::Success);
    for other in others {
        let reply = Message::decode(&other).expect("answers to garbage decode");
        assert_ne!(reply.header.response_code, ResponseCode::Success);
    }
    let resolution = server
        .client()
        .resolve(&handle("TEST/udp"), &ValueSelection::all(), Transport::Udp)
        .await
        .expect("a valid request after garbage");
    assert_eq!(resolution.values[0].data, b"ok");
}

#[tokio::test]
async fn garbage_tcp_messages_do_not_harm_the_next_request() {
    let server = Server::start();
    let address = server.address();
    create(
        &server.client(),
        "TEST/tcp",
        vec![HandleValue::new(1, "DESC", "ok")],
    )
    .await;
    // Too short for an envelope, then closed: nobody to answer.
    assert!(raw::tcp(address, b"\xde\xad\xbe\xef").is_none());
    // An envelope announcing more than 256 KiB: answered with 4 or closed, never read.
    let mut oversized = raw::resolution(b"TEST/tcp", 31).encode()[..ENVELOPE_LEN].to_vec();
    oversized[16..20].copy_from_slice(&0x7fff_ffffu32.to_be_bytes());
    if let Some(answer) = raw::tcp(address, &oversized) {
        assert_eq!(answer.header.response_code, ResponseCode::ProtocolError);
        assert_eq!(answer.envelope.request_id, 31);
    }
    // Fewer octets than announced, then closed.
    let valid = raw::resolution(b"TEST/tcp", 32).encode();
    assert!(raw::tcp(address, &valid[..valid.len() - 5]).is_none());
    // Octets that are no message at all but look like an envelope.
    let noise = raw::tcp(address, &[0x02; 64]);
    assert!(noise.is_none_or(|answer| answer.header.response_code == ResponseCode::ProtocolError));
    let resolution = server
        .client()
        .resolve(&handle("TEST/tcp"), &ValueSelection::all(), Transport::Tcp)
        .await
        .expect("a valid request after garbage");
    assert_eq!(resolution.values[0].data, b"ok");
}

/// OC 100 with MINT: the server picks a UUID suffix under the base, answers with the
/// handle it created, and a second mint gets another; anonymous mints are challenged.
#[tokio::test]
async fn a_create_with_mint_makes_a_fresh_handle_under_the_base() {
    let server = Server::start();
    let admin = server.client();
    let url = vec![HandleValue::new(1, "URL", "https://minted.example/")];
    let mint = |base: &str| AdminRequest::Mint {
        base: base.to_owned(),
        values: url.clone(),
    };
    let mut minted = Vec::new();
    for base in ["TEST", "TEST/batch-"] {
        let created = match admin.admin(mint(base)).await.expect("minted") {
            Response::CreateHandle { handle: Some(name) } => {
                String::from_utf8(name).expect("UTF-8")
            }
            other => panic!("unexpected answer {other:?}"),
        };
        let prefix = if base.contains('/') {
            base.to_owned()
        } else {
            format!("{base}/")
        };
        assert!(
            created.starts_with(&prefix) && created.len() == prefix.len() + 36,
            "{created}"
        );
        let resolved = admin
            .resolve(&handle(&created), &ValueSelection::all(), Transport::Tcp)
            .await
            .expect("the minted handle resolves");
        assert_eq!(resolved.values[0].data, b"https://minted.example/");
        minted.push(created);
    }
    assert_ne!(minted[0], minted[1]);
    let anonymous = server.anonymous_client().admin(mint("TEST")).await;
    let code = anonymous.expect_err("challenged").response_code();
    assert_eq!(code, Some(ResponseCode::AuthenticationNeeded));
}

/// Resolutions over UDP handed to a reader thread, as `/metrics` counts them.
const HANDED_OFF: &str = "hdl_udp_answers_handed_off_total";

/// Every datagram `socket` receives until it has `count` or is quiet for a second.
fn datagrams(socket: &std::net::UdpSocket, count: usize) -> Vec<Vec<u8>> {
    let quiet = std::time::Duration::from_secs(1);
    socket.set_read_timeout(Some(quiet)).expect("timeout");
    let mut buffer = [0u8; hdl::codec::MAX_DATAGRAM_LEN];
    let mut received = Vec::with_capacity(count);
    while received.len() < count {
        match socket.recv(&mut buffer) {
            Ok(len) => received.push(buffer[..len].to_vec()),
            Err(_) => break,
        }
    }
    received
}

#[tokio::test]
async fn udp_resolutions_handed_to_disk_readers_are_answered_byte_for_byte_as_in_the_loop() {
    // Every answer counts as slow, so after the first one resolutions go to the
    // readers while one of the two is free, and to the loop when both are busy; no
    // answer is kept, or the repeated request would be answered from it in the loop.
    let config = "[handle]\nudp_disk_readers = 2\nudp_slow_answer_micros = 0\n\
                  udp_answer_cache_entries = 0\n";
    let server = Server::start_with_config(config);
    let values = vec![
        HandleValue::new(1, "URL", "https://example.org/disk"),
        HandleValue::new(2, "EMAIL", "disk@example.org"),
    ];
    create(&server.client(), "TEST/disk", values).await;
    let request = raw::resolution(b"TEST/disk", 31);
    let datagram = request.encode();
    let request_datagrams = std::slice::from_ref(&datagram);
    let handed_off = || async { crate::caching::sample(&server.metrics().await, HANDED_OFF) };

    let in_loop = raw::udp_frame(server.address(), request_datagrams, 31);
    assert_eq!(handed_off().await, 0, "nothing was slow before the first");
    let answer = Message::decode(&in_loop).expect("an answer");
    assert_eq!(answer.header.response_code, ResponseCode::Success);
    assert!(
        in_loop.len() <= hdl::codec::MAX_DATAGRAM_LEN,
        "one datagram"
    );

    // The previous answer's reader may still hold its place: one is free.
    let from_reader = raw::udp_frame(server.address(), request_datagrams, 31);
    assert_eq!(handed_off().await, 1);
    assert_eq!(from_reader, in_loop);

    const BURST: usize = 64;
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    socket.connect(server.address()).expect("connect");
    for _ in 0..BURST {
        socket.send(&datagram).expect("send");
    }
    let answers = datagrams(&socket, BURST);
    assert_eq!(
        answers.len(),
        BURST,
        "every request of the burst is answered"
    );
    assert!(answers.iter().all(|answer| *answer == in_loop));
    let after = handed_off().await;
    assert!(
        (2..=1 + BURST as u64).contains(&after),
        "{after} handed off"
    );
}
