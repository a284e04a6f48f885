//! The edge against the in-memory handler: no Raft node, no store. The JSON API
//! (GET with filters, PUT, DELETE, listing and search pages), the proxy's redirect and the
//! status page, as a browser or an API client sees them.

use axum::http::HeaderMap;

use crate::service::memory::MemoryHandler;
use crate::values::{AdminPermissions, AdminRecord, Permissions};

use super::*;

/// A router state over a fresh [`MemoryHandler::example`] holding `10.1000/a` (a URL
/// and an e-mail address), and the handler.
fn in_memory() -> (Arc<MemoryHandler>, HttpState) {
    let handler = Arc::new(MemoryHandler::example());
    handler.insert(
        "10.1000/a",
        vec![
            HandleValue::new(1, "URL", "https://a.example/"),
            HandleValue::new(2, "EMAIL", "a@example.org"),
        ],
    );
    let address: SocketAddr = "127.0.0.1:1".parse().unwrap();
    let state = HttpState::new(HttpShared {
        handler: handler.clone(),
        metrics: Arc::new(Metrics::new()),
        node: NodeInfo {
            id: 1,
            handle: address,
            http: address,
            https: None,
            peer: Some(address),
        },
        allow_plain_auth_from_loopback: true,
        sessions: Arc::new(Mutex::new(SessionTable::new(10, Duration::from_secs(60)))),
        guesses: Arc::default(),
        work: Arc::default(),
        secret_forms: SecretForms::Strong,
    });
    (handler, state)
}

fn admin() -> String {
    basic("300:0.NA/ADMIN", "s3cret")
}

/// The status, headers and body text of `method path` from loopback over HTTP.
async fn raw(
    state: &HttpState,
    method: &str,
    path: &str,
    authorization: Option<String>,
    body: &'static str,
) -> (StatusCode, HeaderMap, String) {
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json");
    if let Some(authorization) = authorization {
        request = request.header(header::AUTHORIZATION, authorization);
    }
    let request = request.body(Body::from(body)).unwrap();
    let peer: SocketAddr = LOOPBACK.parse().unwrap();
    let response = answer_from(state, Channel::Http, peer, request).await;
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap();
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    (parts.status, parts.headers, text)
}

async fn json(
    state: &HttpState,
    method: &str,
    path: &str,
    authorization: Option<String>,
    body: &'static str,
) -> (StatusCode, serde_json::Value) {
    let (status, _, text) = raw(state, method, path, authorization, body).await;
    (status, serde_json::from_str(&text).unwrap())
}

fn indexes(json: &serde_json::Value) -> Vec<u64> {
    let values = json["values"].as_array().unwrap();
    values
        .iter()
        .map(|v| v["index"].as_u64().unwrap())
        .collect()
}

#[tokio::test]
async fn get_selects_by_type_and_index_and_a_missing_handle_is_404() {
    let (_handler, state) = in_memory();
    let get = |path| json(&state, "GET", path, None, "");
    let (status, every) = get("/api/handles/10.1000/A").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(every["handle"], "10.1000/A", "the handle as requested");
    assert_eq!(indexes(&every), [1, 2]);
    let (_, by_type) = get("/api/handles/10.1000/a?type=EMAIL").await;
    assert_eq!(indexes(&by_type), [2]);
    let (_, by_index) = get("/api/handles/10.1000/a?index=1").await;
    assert_eq!(indexes(&by_index), [1]);
    let (status, nothing) = get("/api/handles/10.1000/a?index=9").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(nothing["responseCode"], 200);
    let (status, missing) = get("/api/handles/10.1000/none").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(missing["responseCode"], 100);
}

#[tokio::test]
async fn put_and_delete_need_an_administrator_and_change_the_handler() {
    let (handler, state) = in_memory();
    let body = r#"[{"index":1,"type":"URL","data":"https://new.example/"}]"#;
    let (status, refused) = json(&state, "PUT", "/api/handles/10.1000/new", None, body).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(refused["responseCode"], 402);
    assert!(handler.get("10.1000/new").is_none());

    let put = |path| json(&state, "PUT", path, Some(admin()), body);
    let (status, created) = put("/api/handles/10.1000/new").await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(
        created,
        serde_json::json!({"responseCode": 1, "handle": "10.1000/new"})
    );
    let stored = handler.get("10.1000/new").unwrap();
    assert_eq!(stored.values[0].data, b"https://new.example/");
    let (status, exists) = put("/api/handles/10.1000/new?overwrite=false").await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(exists["responseCode"], 101);
    let (status, _) = put("/api/handles/10.1000/new").await;
    assert_eq!(status, StatusCode::OK, "a replacement is not a creation");

    let (status, _) = json(
        &state,
        "DELETE",
        "/api/handles/10.1000/a?index=2",
        Some(admin()),
        "",
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(handler.get("10.1000/a").unwrap().values.len(), 1);
    let (status, _) = json(
        &state,
        "DELETE",
        "/api/handles/10.1000/new",
        Some(admin()),
        "",
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert!(handler.get("10.1000/new").is_none());
    let (status, gone) = json(
        &state,
        "DELETE",
        "/api/handles/10.1000/new",
        Some(admin()),
        "",
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(gone["responseCode"], 100);
}

#[tokio::test]
async fn a_listing_is_paged() {
    let (handler, state) = in_memory();
    for n in 0..4 {
        handler.insert(
            &format!("10.1000/n{n}"),
            vec![HandleValue::new(1, "URL", "x")],
        );
    }
    let path = "/api/handles?prefix=0.NA/10.1000&page=1&pageSize=2";
    let (status, page) = json(&state, "GET", path, Some(admin()), "").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["prefix"], "10.1000");
    assert_eq!(page["totalCount"], "5");
    assert_eq!(
        page["handles"],
        serde_json::json!(["10.1000/n1", "10.1000/n2"])
    );
    let (status, refused) = json(&state, "GET", path, None, "").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(refused["responseCode"], 402);
}

#[tokio::test]
async fn a_search_answers_a_paged_list_of_handles_and_refuses_what_it_cannot_search() {
    let (handler, state) = in_memory();
    for n in 0..4 {
        let url = format!("https://n.example/{n}");
        handler.insert(
            &format!("10.1000/n{n}"),
            vec![HandleValue::new(1, "URL", url)],
        );
    }
    let search = |path| json(&state, "GET", path, Some(admin()), "");
    let (status, page) = search("/api/handles?URL=https://n.example/*&limit=3&page=1").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page, serde_json::json!(["10.1000/n3"]));
    let (_, exact) = search("/api/handles?url=https://a.example/&prefix=10.1000").await;
    assert_eq!(exact, serde_json::json!(["10.1000/a"]));
    let (status, refused) = search("/api/handles?DESC=x").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert_eq!(refused["responseCode"], 4);
    let many = format!("/api/handles?{}", vec!["URL=x"; 17].join("&"));
    let (status, refused) = search(&many).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    let (status, refused) = json(&state, "GET", "/api/handles?URL=*", None, "").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{refused}");
}

#[tokio::test]
async fn the_proxy_redirects_to_the_url_and_a_missing_handle_is_a_404_page() {
    let (_handler, state) = in_memory();
    let (status, headers, page) = raw(&state, "GET", "/10.1000/a", None, "").await;
    assert_eq!(status, StatusCode::FOUND);
    assert_eq!(headers[header::LOCATION], "https://a.example/");
    assert!(headers.contains_key(header::EXPIRES));
    let link = "<a href=\"https://a.example/\">https://a.example/</a>";
    assert!(page.contains(link), "{page}");
    let (status, _, page) = raw(&state, "GET", "/hdl:10.1000/a?noredirect", None, "").await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("a@example.org"), "{page}");
    let (status, headers, page) = raw(&state, "GET", "/10.1000/none", None, "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(!headers.contains_key(header::LOCATION));
    assert!(page.contains("10.1000/none"), "{page}");
}

/// A handle with a web URL, a `javascript:` URL, markup, an HS_ADMIN and a value only
/// the public may write, all stamped at 2024-01-01T00:00:00Z.
fn page_values() -> Vec<HandleValue> {
    let admin = AdminRecord {
        permissions: AdminPermissions::ADD_HANDLE
            .with(AdminPermissions::READ_VALUE)
            .with(AdminPermissions::LIST_HANDLES),
        admin_handle: "0.NA/10.1000".into(),
        admin_index: 300,
        legacy_padding: false,
    };
    let values = [
        HandleValue::new(1, "URL", "https://example.org/a?b=1&c=2"),
        HandleValue::new(2, "URL", "javascript:alert(1)"),
        HandleValue::new(3, "DESC", r#"<script>alert("x")</script>"#),
        HandleValue::new(100, "HS_ADMIN", admin.encode()),
        HandleValue {
            permissions: Permissions::PUBLIC_READ.with(Permissions::PUBLIC_WRITE),
            ..HandleValue::new(4, "EMAIL", "a@example.org")
        },
    ];
    values
        .into_iter()
        .map(|value| HandleValue {
            timestamp: 1_704_067_200,
            ..value
        })
        .collect()
}

#[tokio::test]
async fn the_values_page_links_web_urls_only_and_shows_when_who_and_what() {
    let (handler, state) = in_memory();
    handler.insert("10.1000/page", page_values());
    let (status, _, page) = raw(&state, "GET", "/10.1000/page?noredirect", None, "").await;
    assert_eq!(status, StatusCode::OK);
    let link = "<a href=\"https://example.org/a?b=1&amp;c=2\" rel=\"noopener\">\
                https://example.org/a?b=1&amp;c=2</a>";
    assert!(page.contains(link), "{page}");
    assert_eq!(page.matches("rel=\"noopener\"").count(), 1, "{page}");
    assert!(!page.contains("href=\"javascript"), "{page}");
    assert!(page.contains("javascript:alert(1)"), "{page}");
    assert!(
        page.contains("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;"),
        "{page}"
    );
    assert!(!page.contains("<script"), "{page}");
    assert_eq!(page.matches("2024-01-01T00:00:00Z").count(), 5, "{page}");
    assert!(
        page.contains("admin read, admin write, public read"),
        "{page}"
    );
    assert!(
        page.contains("<td>public read, public write</td>"),
        "{page}"
    );
    assert!(page.contains("<td class=\"when\">86400 s</td>"), "{page}");
    let admin = "administrator: 0.NA/10.1000 (index 300)\n\
                 permissions: add handle, read value, list handles";
    assert!(page.contains(admin), "{page}");
}

#[tokio::test]
async fn the_status_page_shows_the_handlers_view_of_the_set() {
    let (_handler, state) = in_memory();
    let (status, _, page) = raw(&state, "GET", "/status", None, "").await;
    assert_eq!(status, StatusCode::OK);
    for expected in ["1 (primary)", "node 1", "192.0.2.1:2651", "192.0.2.1:8000"] {
        assert!(page.contains(expected), "{expected} in {page}");
    }
    let (status, _, metrics) = raw(&state, "GET", "/metrics", None, "").await;
    assert_eq!(status, StatusCode::OK);
    assert!(metrics.contains("hdl_uptime_seconds"), "{metrics}");
}
