//! The edge in-process, for what a loopback test cannot show: callers from another
//! machine (their address given to [`Edge::serving`], no socket involved) and requests
//! arriving over HTTPS (the listener's [`Channel`]).

use std::net::SocketAddr;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use base64::Engine;
use tower::ServiceExt;

use super::*;
use crate::auth::Identity;
use crate::config::SiteConfig;
use crate::service::bootstrap::BootstrapAdmin;
use crate::service::{AuthPolicy, ExistingHandle, Operation, Service};
use crate::storage::Store;
use crate::values::HandleValue;

const REMOTE: &str = "192.0.2.7:5000";
const LOOPBACK: &str = "[::1]:5000";
/// The request timeout of the routers under test: longer than any test takes.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// `request` answered by a listener on `channel` as it would over a connection from
/// `peer`.
async fn answer_from(
    state: &HttpState,
    channel: Channel,
    peer: SocketAddr,
    request: Request<Body>,
) -> Response {
    let edge = Arc::new(Edge::of_listener(state.clone(), channel, REQUEST_TIMEOUT));
    let answered = edge.serving(peer).oneshot(request).await;
    answered.unwrap_or_else(|never| match never {})
}

/// A node whose server administrator `300:0.NA/ADMIN` has the secret `s3cret`, and
/// where `300:TEST/user` (secret `u5er`) administers nothing.
async fn state() -> (tempfile::TempDir, HttpState) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(&dir.path().join("handles.redb")).unwrap());
    let address: SocketAddr = "127.0.0.1:1".parse().unwrap();
    let replica = crate::replication::start_alone(Arc::clone(&store), dir.path(), address).await;
    let policy = AuthPolicy {
        server_admins: vec![Identity {
            handle: "0.NA/ADMIN".into(),
            index: 300,
        }],
    };
    let service = Service::new(store, replica, policy, SiteConfig::default());
    let admin = BootstrapAdmin::SecretKey(b"s3cret".to_vec());
    service
        .bootstrap(&admin, &["ADMIN".to_owned()])
        .await
        .unwrap();
    let user = HandleValue {
        permissions: crate::values::Permissions::ADMIN_ONLY,
        ..HandleValue::new(300, "HS_SECKEY", "u5er")
    };
    let operation = Operation::Create {
        handle: crate::names::Handle::parse("TEST/user").unwrap(),
        values: vec![user],
        existing: ExistingHandle::Refuse,
    };
    service.write(operation).await.unwrap();
    let state = HttpState::new(HttpShared {
        handler: Arc::new(service),
        metrics: Arc::new(Metrics::new()),
        node: NodeInfo {
            id: 1,
            handle: address,
            http: address,
            https: None,
            peer: Some(address),
        },
        allow_plain_auth_from_loopback: true,
        sessions: Arc::new(Mutex::new(SessionTable::new(100, Duration::from_secs(60)))),
        guesses: Arc::default(),
        work: Arc::default(),
        secret_forms: SecretForms::Strong,
    });
    (dir, state)
}

fn basic(user: &str, secret: &str) -> String {
    let text = format!("{}:{secret}", user.replace(':', "%3A"));
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(text)
    )
}

struct Call<'a> {
    method: &'a str,
    path: &'a str,
    from: &'a str,
    channel: Channel,
    authorization: Option<String>,
}

async fn call(state: &HttpState, call: Call<'_>) -> (StatusCode, bool, serde_json::Value) {
    let body = r#"[{"index":1,"type":"URL","data":"https://a/"}]"#;
    let mut request = Request::builder()
        .method(call.method)
        .uri(call.path)
        .header("content-type", "application/json");
    if let Some(authorization) = call.authorization {
        request = request.header(header::AUTHORIZATION, authorization);
    }
    let request = request.body(Body::from(body)).unwrap();
    let peer: SocketAddr = call.from.parse().unwrap();
    let response = answer_from(state, call.channel, peer, request).await;
    let status = response.status();
    let challenged = response.headers().contains_key(header::WWW_AUTHENTICATE);
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    (status, challenged, serde_json::from_slice(&bytes).unwrap())
}

fn admin_routes() -> [(&'static str, &'static str); 5] {
    [
        ("PUT", "/api/handles/TEST/x"),
        ("DELETE", "/api/handles/TEST/user"),
        ("GET", "/api/handles?prefix=TEST"),
        ("GET", "/api/prefixes"),
        ("GET", "/api/handles/TEST/user?publicOnly=false"),
    ]
}

#[tokio::test]
async fn administration_needs_credentials_honoured_only_where_safe() {
    let (_dir, state) = state().await;
    let admin = basic("300:0.NA/ADMIN", "s3cret");
    let cases = [
        (None, REMOTE, Channel::Https, 401, 402),
        (Some(admin.clone()), REMOTE, Channel::Http, 401, 402),
        (
            Some(basic("300:0.NA/ADMIN", "wrong")),
            REMOTE,
            Channel::Https,
            401,
            402,
        ),
        (
            Some(basic("300:0.NA/NOBODY", "x")),
            REMOTE,
            Channel::Https,
            401,
            402,
        ),
        (Some("Basic !!!".into()), REMOTE, Channel::Https, 401, 402),
        (
            Some("Handle sessionId=1".into()),
            REMOTE,
            Channel::Https,
            401,
            402,
        ),
        (
            Some(basic("300:TEST/user", "u5er")),
            REMOTE,
            Channel::Https,
            403,
            400,
        ),
    ];
    for (authorization, from, channel, status, code) in cases {
        // Each case starts with a clean budget of failed credentials (the budget
        // itself is tested in `auth::guesses`).
        *state.guesses.lock().unwrap() = Guesses::default();
        for (method, path) in admin_routes() {
            let who = format!("{method} {path} {authorization:?} {channel:?}");
            let sent = Call {
                method,
                path,
                from,
                channel,
                authorization: authorization.clone(),
            };
            let (got, challenged, json) = call(&state, sent).await;
            assert_eq!(got.as_u16(), status, "{who}: {json}");
            assert_eq!(json["responseCode"], code, "{who}: {json}");
            assert_eq!(challenged, status == 401, "{who}: WWW-Authenticate");
        }
    }
}

#[tokio::test]
async fn an_administrator_writes_over_https_or_from_loopback() {
    let (_dir, state) = state().await;
    let admin = basic("300:0.NA/ADMIN", "s3cret");
    for (from, channel, path) in [
        (REMOTE, Channel::Https, "/api/handles/TEST/x"),
        (LOOPBACK, Channel::Http, "/api/handles/TEST/y"),
    ] {
        let put = Call {
            method: "PUT",
            path,
            from,
            channel,
            authorization: Some(admin.clone()),
        };
        let (status, _, json) = call(&state, put).await;
        assert_eq!(status, StatusCode::CREATED, "{json}");
    }
    let list = Call {
        method: "GET",
        path: "/api/handles?prefix=TEST",
        from: REMOTE,
        channel: Channel::Https,
        authorization: Some(admin),
    };
    let (status, _, json) = call(&state, list).await;
    assert_eq!(status, StatusCode::OK, "{json}");
    assert_eq!(json["totalCount"], "3", "{json}");
}

#[tokio::test]
async fn sessions_are_opened_over_https_from_anywhere_but_not_plain_http() {
    let (_dir, state) = state().await;
    let open = |from, channel| Call {
        method: "POST",
        path: "/api/sessions",
        from,
        channel,
        authorization: None,
    };
    let (status, _, json) = call(&state, open(REMOTE, Channel::Https)).await;
    assert_eq!(status, StatusCode::CREATED, "{json}");
    assert_eq!(json["authenticated"], false, "{json}");
    let session = json["sessionId"].as_str().unwrap().to_owned();
    let (status, challenged, json) = call(&state, open(REMOTE, Channel::Http)).await;
    assert_eq!(
        (status, challenged),
        (StatusCode::UNAUTHORIZED, true),
        "{json}"
    );
    let only = crate::client::authorization::session_header(&session);
    let show = |channel| Call {
        method: "GET",
        path: "/api/sessions/this",
        from: REMOTE,
        channel,
        authorization: Some(only.clone()),
    };
    let (status, _, json) = call(&state, show(Channel::Https)).await;
    assert_eq!(json["sessionId"], session.as_str(), "{status}: {json}");
    let (status, _, json) = call(&state, show(Channel::Http)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{json}");
}

#[tokio::test]
async fn every_answer_is_readable_by_any_origin_and_preflights_are_answered_at_once() {
    let (_dir, state) = state().await;
    let answer = |method: &str, path: &str| {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header(header::ORIGIN, "https://elsewhere.example")
            .body(Body::empty())
            .unwrap();
        let peer: SocketAddr = REMOTE.parse().unwrap();
        answer_from(&state, Channel::Http, peer, request)
    };
    for path in [
        "/api/handles/TEST/user",
        "/TEST/user",
        "/api/handles/TEST/none",
    ] {
        let response = answer("GET", path).await;
        let headers = response.headers();
        assert_eq!(headers["access-control-allow-origin"], "*", "{path}");
        assert_eq!(headers["access-control-expose-headers"], "*", "{path}");
        assert!(!headers.contains_key("access-control-allow-credentials"));
    }
    let preflight = answer("OPTIONS", "/api/handles/TEST/user").await;
    assert_eq!(preflight.status(), StatusCode::OK);
    for name in ["origin", "methods", "headers"] {
        let name = format!("access-control-allow-{name}");
        assert_eq!(preflight.headers()[name.as_str()], "*", "{name}");
    }
    let body = axum::body::to_bytes(preflight.into_body(), 1024).await;
    assert!(body.unwrap().is_empty());
}

#[tokio::test]
async fn an_answer_not_ready_by_the_deadline_is_408_and_a_ready_one_is_never() {
    let late = within(Instant::now(), pin!(std::future::pending())).await;
    assert_eq!(late.status(), StatusCode::REQUEST_TIMEOUT);
    let past = Instant::now() - Duration::from_secs(1);
    let created = std::future::ready(StatusCode::CREATED.into_response());
    let ready = within(past, pin!(created)).await;
    assert_eq!(ready.status(), StatusCode::CREATED);
}

#[path = "memory_tests.rs"]
mod memory_tests;
