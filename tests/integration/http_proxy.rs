//! The web proxy, the pages, `/metrics` and HTTPS end to end against a real `hdl serve`.

use hdl::client::Transport;
use hdl::names::Handle;
use hdl::values::ValueSelection;
use reqwest::header::{EXPIRES, LOCATION};
use reqwest::{Client, Response, StatusCode};
use serde_json::json;

use crate::harness::Server;
use crate::http::{Api, client};

async fn seed_proxy(api: &Api) {
    let loc = r#"<locations><location id="0" href="https://zero.example/" weight="0"/><location id="1" href="https://loc.example/" weight="1" http="303"/></locations>"#;
    let values = json!([
        {"index": 1, "type": "URL", "data": "https://url.example/page", "ttl": 3600},
        {"index": 2, "type": "10320/loc", "data": loc},
        {"index": 3, "type": "DESC", "data": "<script>alert('x')</script>"},
    ]);
    assert_eq!(
        api.put("/api/handles/TEST/proxy", &values).await.status(),
        201
    );
    let plain = json!([{"index": 1, "type": "URL", "data": "https://plain.example/"}]);
    assert_eq!(
        api.put("/api/handles/TEST/plain", &plain).await.status(),
        201
    );
    let alias = json!([{"index": 1, "type": "HS_ALIAS", "data": "TEST/plain"}]);
    assert_eq!(
        api.put("/api/handles/TEST/alias", &alias).await.status(),
        201
    );
    let greek = json!([{"index": 1, "type": "URL", "data": "https://greek.example/"}]);
    assert_eq!(
        api.put("/api/handles/test/%CE%B1%CE%B2", &greek)
            .await
            .status(),
        201
    );
}

fn location(response: &Response) -> &str {
    response.headers()[LOCATION]
        .to_str()
        .expect("ASCII Location")
}

#[tokio::test]
async fn proxy_redirects_by_loc_url_alias_and_reference_forms() {
    let api = Api::start();
    seed_proxy(&api).await;
    let loc = api.get("/TEST/proxy").await;
    assert_eq!(loc.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&loc), "https://loc.example/");
    let zero = api.get("/TEST/proxy?locatt=id:0").await;
    assert_eq!(
        (zero.status(), location(&zero)),
        (StatusCode::FOUND, "https://zero.example/")
    );
    let url = api.get("/TEST/proxy?type=URL&urlappend=/x%3Fy").await;
    assert_eq!(
        (url.status(), location(&url)),
        (StatusCode::FOUND, "https://url.example/page/x?y")
    );
    let expires = httpdate::parse_http_date(url.headers()[EXPIRES].to_str().expect("Expires"))
        .expect("HTTP date");
    let ahead = expires
        .duration_since(std::time::SystemTime::now())
        .expect("in the future");
    assert!(
        ahead.as_secs() > 3500 && ahead.as_secs() <= 3600,
        "{ahead:?}"
    );
    let alias = api.get("/TEST/alias?index=1").await;
    assert_eq!(
        (alias.status(), location(&alias)),
        (StatusCode::MOVED_PERMANENTLY, "/TEST/plain?index=1")
    );
    for path in [
        "/hdl:TEST/plain",
        "/doi:TEST/plain",
        "/info:hdl/TEST/plain",
        "/urn:hdl:TEST/plain",
        "/test/PLAIN",
    ] {
        let response = api.get(path).await;
        assert_eq!(response.status(), StatusCode::FOUND, "{path}");
        assert_eq!(location(&response), "https://plain.example/", "{path}");
    }
    let greek = api.get("/iso-8859-7@test/%E1%E2").await;
    assert_eq!(
        (greek.status(), location(&greek)),
        (StatusCode::FOUND, "https://greek.example/")
    );
    let utf8 = api.get("/test/%CE%B1%CE%B2").await;
    assert_eq!(location(&utf8), "https://greek.example/");
}

#[tokio::test]
async fn proxy_shows_escaped_values_and_refuses_what_is_not_there() {
    let api = Api::start();
    seed_proxy(&api).await;
    for path in ["/TEST/proxy?noredirect", "/TEST/proxy?action=showvalues"] {
        let page = api.get(path).await;
        assert_eq!(page.status(), StatusCode::OK);
        assert!(page.headers().get(LOCATION).is_none());
        let html = page.text().await.expect("body");
        assert!(
            html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"),
            "{html}"
        );
        assert!(!html.contains("<script>"), "{html}");
        assert!(html.contains("https://url.example/page"), "{html}");
    }
    let missing = api.get("/TEST/missing").await;
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    assert!(missing.headers().get(LOCATION).is_none());
    assert!(
        missing
            .text()
            .await
            .expect("body")
            .contains("Handle not found")
    );
    for path in [
        "/TEST/%zz",
        "/TEST/%FF",
        "/noslash",
        "/TEST/proxy?index=nope",
    ] {
        let response = api.get(path).await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{path}");
        assert!(response.headers().get(LOCATION).is_none(), "{path}");
    }
    let front = api.get("/").await;
    assert_eq!(front.status(), StatusCode::OK);
    assert!(
        front
            .text()
            .await
            .expect("body")
            .contains("<form action=\"/\"")
    );
    let form = api.get("/?handle=TEST/plain&noredirect=").await;
    assert_eq!(form.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&form), "/TEST/plain?noredirect");
}

#[tokio::test]
async fn status_and_metrics_count_both_protocols() {
    let api = Api::start();
    seed_proxy(&api).await;
    api.get("/TEST/plain").await;
    let client = api.server.client();
    let handle = Handle::parse("TEST/nothing").expect("handle");
    let missing = client
        .resolve(&handle, &ValueSelection::all(), Transport::Udp)
        .await;
    assert!(missing.is_err());
    let metrics = api.get("/metrics").await;
    assert_eq!(metrics.status(), StatusCode::OK);
    let text = metrics.text().await.expect("body");
    for line in [
        r#"hdl_requests_total{protocol="http",op="proxy",code="302"} 1"#,
        r#"hdl_requests_total{protocol="http",op="api_put",code="201"} 4"#,
        r#"hdl_requests_total{protocol="handle",op="resolution",code="100"} 1"#,
        r#"hdl_request_duration_seconds_count{protocol="handle",op="resolution"} 1"#,
        "hdl_raft_is_primary 1",
    ] {
        assert!(text.contains(line), "{line} missing from:\n{text}");
    }
    let status = api.get("/status").await.text().await.expect("body");
    assert!(status.contains("<td>primary</td>"), "{status}");
    assert!(
        status.contains("Node status") && status.contains(&api.server.address().to_string()),
        "{status}"
    );
}

#[tokio::test]
async fn https_with_a_self_signed_certificate() {
    let server =
        Server::start_with_config("[http]\nhttps_listen = \"127.0.0.1:0\"\nself_signed = true\n");
    let https = server.https().expect("https= announced");
    let insecure = Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .expect("client");
    let answer = insecure
        .get(format!(
            "https://localhost:{}/api/handles/TEST/none",
            https.port()
        ))
        .send()
        .await
        .expect("GET over TLS");
    assert_eq!(answer.status(), StatusCode::NOT_FOUND);
    let strict = client();
    let refused = strict
        .get(format!("https://localhost:{}/", https.port()))
        .send()
        .await;
    assert!(
        refused.is_err(),
        "an unknown certificate must not be trusted"
    );
}
