//! The UDP edge's kept answers on a lone `hdl serve`: a repeated resolution is
//! answered with a copy that differs from the normal path's answer only in its
//! RequestId and expiration, and a change through the administration API shows in the
//! very next UDP answer.

use std::time::Duration;

use hdl::client::{AdminRequest, Overwrite};
use hdl::codec::{Body, Message, Request, ResolutionRequest, Response, ResponseCode};
use hdl::names::Handle;
use hdl::values::{HandleValue, ValueIndex};

use crate::caching::sample;
use crate::harness::Server;
use crate::raw;

/// Resolutions over UDP answered from kept answers, as `/metrics` counts them.
pub const HITS: &str = "hdl_udp_answer_cache_hits_total";
/// Answers kept, as `/metrics` counts them.
pub const INSERTIONS: &str = "hdl_udp_answer_cache_insertions_total";

/// Where the RequestId and the expiration sit in an answer's octets.
const REQUEST_ID: std::ops::Range<usize> = 8..12;
const EXPIRATION: std::ops::Range<usize> = 36..40;

/// The octets of the answer over UDP to a resolution of `name` (for `types`, all when
/// empty) with RequestId `id`.
pub fn udp_answer(server: std::net::SocketAddr, name: &str, types: &[&str], id: u32) -> Vec<u8> {
    let request = raw::encode(
        Request::Resolution(ResolutionRequest {
            handle: name.as_bytes().to_vec(),
            indexes: vec![],
            types: types.iter().map(|t| t.as_bytes().to_vec()).collect(),
        }),
        id,
    );
    raw::udp_frame(server, &[request.encode()], id)
}

/// The response code and the values' (index, data) of an answer's octets.
pub fn values_of(answer: &[u8]) -> (ResponseCode, Vec<(u32, Vec<u8>)>) {
    let message = Message::decode(answer).expect("a decodable answer");
    let values = match message.body {
        Body::Response {
            response: Response::Resolution(found),
            ..
        } => found
            .values
            .into_iter()
            .map(|value| (value.index.0, value.data))
            .collect(),
        _ => Vec::new(),
    };
    (message.header.response_code, values)
}

/// `answer` with the RequestId and expiration of `like`.
fn with_id_and_expiration_of(mut answer: Vec<u8>, like: &[u8]) -> Vec<u8> {
    answer[REQUEST_ID].copy_from_slice(&like[REQUEST_ID]);
    answer[EXPIRATION].copy_from_slice(&like[EXPIRATION]);
    answer
}

fn handle(text: &str) -> Handle {
    Handle::parse(text).expect("valid handle")
}

fn url(data: &str) -> HandleValue {
    HandleValue::new(1, "URL", data)
}

/// The octets of the answer over UDP to a resolution of `name` (for `types`), asked
/// again (at most [`TRIES`] times) until the answer is kept or came from a kept one: a
/// commit touching its shard while the normal path read the store refuses the
/// insertion, as the cache must, and right after start the node's own first commits
/// can.
async fn answer_until_kept(server: &Server, name: &str, types: &[&str], id: u32) -> Vec<u8> {
    let kept = || async {
        let metrics = server.metrics().await;
        sample(&metrics, HITS) + sample(&metrics, INSERTIONS)
    };
    let kept_before = kept().await;
    for _ in 0..TRIES {
        let answer = udp_answer(server.address(), name, types, id);
        if kept().await > kept_before {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no answer to {name} was kept in {TRIES} tries");
}

/// How many times [`answer_until_kept`] and [`kept_then_answered_from_it`] ask.
const TRIES: usize = 20;

/// The hits and insertions `/metrics` counts.
async fn counts(server: &Server) -> (u64, u64) {
    let metrics = server.metrics().await;
    (sample(&metrics, HITS), sample(&metrics, INSERTIONS))
}

/// The octets of an answer over UDP to a resolution of `name` (for `types`) with
/// RequestId `id`, answered by the normal path and kept, and of the very next one,
/// with RequestId `next_id`, answered from what was kept. Asked again (at most
/// [`TRIES`] times) until one such pair comes: right after start a lone node makes
/// its ring and slices its store, commits that refuse an insertion or drop what was
/// kept.
async fn kept_then_answered_from_it(
    server: &Server,
    name: &str,
    types: &[&str],
    (id, next_id): (u32, u32),
) -> (Vec<u8>, Vec<u8>) {
    let mut kept: Option<Vec<u8>> = None;
    for _ in 0..TRIES {
        let (hits, insertions) = counts(server).await;
        let asked = if kept.is_some() { next_id } else { id };
        let answer = udp_answer(server.address(), name, types, asked);
        let after = counts(server).await;
        match kept.take() {
            Some(normal) if after == (hits + 1, insertions) => return (normal, answer),
            _ if after == (hits, insertions + 1) => kept = Some(answer),
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    panic!("no answer to {name} was kept, then answered from, in {TRIES} tries");
}

async fn admin(server: &Server, request: AdminRequest) {
    server
        .client()
        .admin(request)
        .await
        .expect("the change is made");
}

#[tokio::test]
async fn a_kept_answer_is_the_normal_paths_but_for_its_request_id_and_expiration() {
    let server = Server::start();
    let values = vec![
        url("https://example.org/kept"),
        HandleValue::new(2, "EMAIL", "kept@example.org"),
    ];
    let create = AdminRequest::Create {
        handle: handle("TEST/kept"),
        values,
        overwrite: Overwrite::Refuse,
    };
    admin(&server, create).await;

    let ids = (31, 0x7fff_0032);
    let (normal, kept) = kept_then_answered_from_it(&server, "TEST/kept", &[], ids).await;
    assert_eq!(
        Message::decode(&kept).unwrap().envelope.request_id,
        0x7fff_0032
    );
    assert_eq!(with_id_and_expiration_of(kept, &normal), normal);

    // Another type list is another answer.
    let (hits, insertions) = counts(&server).await;
    let urls = answer_until_kept(&server, "TEST/kept", &["URL"], 33).await;
    assert_eq!(counts(&server).await, (hits, insertions + 1));
    let (code, values) = values_of(&urls);
    assert_eq!(code, ResponseCode::Success);
    assert_eq!(values, [(1, b"https://example.org/kept".to_vec())]);

    // A miss is answered, never kept.
    let missing = udp_answer(server.address(), "TEST/missing", &[], 34);
    assert_eq!(values_of(&missing).0, ResponseCode::HandleNotFound);
    assert_eq!(counts(&server).await, (hits, insertions + 1));
}

#[tokio::test]
async fn a_change_through_the_admin_api_shows_in_the_next_udp_answer() {
    let server = Server::start();
    let create = AdminRequest::Create {
        handle: handle("TEST/changing"),
        values: vec![url("https://example.org/1")],
        overwrite: Overwrite::Refuse,
    };
    admin(&server, create).await;
    let resolve = |id| values_of(&udp_answer(server.address(), "TEST/Changing", &[], id));
    let (first, kept) = kept_then_answered_from_it(&server, "TEST/Changing", &[], (1, 2)).await;
    assert_eq!(values_of(&first), values_of(&kept));

    let modify = AdminRequest::ModifyValues {
        handle: handle("test/changing"),
        values: vec![url("https://example.org/2")],
    };
    admin(&server, modify).await;
    let modified = vec![(1, b"https://example.org/2".to_vec())];
    assert_eq!(resolve(3), (ResponseCode::Success, modified.clone()));
    let kept = answer_until_kept(&server, "TEST/Changing", &[], 4).await;
    assert_eq!(values_of(&kept), (ResponseCode::Success, modified.clone()));
    assert_eq!(resolve(4), (ResponseCode::Success, modified.clone()));

    let add = AdminRequest::AddValues {
        handle: handle("TEST/changing"),
        values: vec![HandleValue::new(2, "EMAIL", "added@example.org")],
        overwrite: Overwrite::Refuse,
    };
    admin(&server, add).await;
    let mut added = modified;
    added.push((2, b"added@example.org".to_vec()));
    assert_eq!(resolve(5), (ResponseCode::Success, added.clone()));
    let kept = answer_until_kept(&server, "TEST/Changing", &[], 6).await;
    assert_eq!(values_of(&kept), (ResponseCode::Success, added.clone()));
    assert_eq!(resolve(6), (ResponseCode::Success, added));

    let remove = AdminRequest::RemoveValues {
        handle: handle("TEST/changing"),
        indexes: vec![ValueIndex(2)],
    };
    admin(&server, remove).await;
    let (code, values) = resolve(7);
    assert_eq!((code, values.len()), (ResponseCode::Success, 1));

    let delete = AdminRequest::Delete {
        handle: handle("TEST/changing"),
    };
    admin(&server, delete).await;
    assert_eq!(resolve(8).0, ResponseCode::HandleNotFound);
    let metrics = server.metrics().await;
    assert!(
        sample(&metrics, HITS) >= 3,
        "answers were kept between changes"
    );
}
