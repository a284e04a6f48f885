//! The HTTP JSON API end to end against a real `hdl serve`, with reqwest as the client
//! (redirects not followed); `http_proxy` has the proxy, the pages and HTTPS.

use hdl::client::{AdminRequest, Overwrite, Transport};
use hdl::names::Handle;
use hdl::restjson::parse_value;
use hdl::values::{HandleValue, ValueIndex, ValueList, ValueReference, ValueSelection};
use reqwest::header::CONTENT_TYPE;
use reqwest::{Client, Response, StatusCode};
use serde_json::{Value, json};

use crate::harness::{ADMIN_BASIC, ADMIN_SECRET_TEXT, Server};

pub fn client() -> Client {
    Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("HTTP client")
}

/// A client sending the bootstrap administrator's Basic credentials with every request.
pub fn admin_client() -> Client {
    basic_client(ADMIN_BASIC, ADMIN_SECRET_TEXT)
}

/// A client sending the Basic credentials `user` (`INDEX%3AHANDLE`) and `secret` with
/// every request.
pub fn basic_client(user: &str, secret: &str) -> Client {
    use base64::Engine;
    let credentials = format!("{user}:{secret}");
    let encoded = base64::engine::general_purpose::STANDARD.encode(credentials);
    let mut headers = reqwest::header::HeaderMap::new();
    let value =
        reqwest::header::HeaderValue::from_str(&format!("Basic {encoded}")).expect("header value");
    headers.insert(reqwest::header::AUTHORIZATION, value);
    Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .default_headers(headers)
        .build()
        .expect("HTTP client")
}

/// A server and an HTTP client for it, authenticated as the bootstrap administrator.
pub struct Api {
    pub server: Server,
    pub http: Client,
}

impl Api {
    pub fn start() -> Api {
        Api {
            server: Server::start(),
            http: admin_client(),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.server.http_url())
    }

    pub async fn get(&self, path: &str) -> Response {
        self.http.get(self.url(path)).send().await.expect("GET")
    }

    pub async fn put(&self, path: &str, body: &Value) -> Response {
        self.put_raw(path, "application/json", body.to_string())
            .await
    }

    pub async fn put_raw(
        &self,
        path: &str,
        content_type: &str,
        body: impl Into<String>,
    ) -> Response {
        self.http
            .put(self.url(path))
            .header(CONTENT_TYPE, content_type)
            .body(body.into())
            .send()
            .await
            .expect("PUT")
    }

    pub async fn delete(&self, path: &str) -> Response {
        self.http
            .delete(self.url(path))
            .send()
            .await
            .expect("DELETE")
    }
}

/// The status and JSON body of an answer.
pub async fn json_of(response: Response) -> (StatusCode, Value) {
    let status = response.status();
    let text = response.text().await.expect("body");
    let json = serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    (status, json)
}

fn indexes(json: &Value) -> Vec<u64> {
    json["values"]
        .as_array()
        .expect("values")
        .iter()
        .map(|value| value["index"].as_u64().expect("index"))
        .collect()
}

fn url_value(index: u32, url: &str) -> Value {
    json!({"index": index, "type": "URL", "data": {"format": "string", "value": url}})
}

#[tokio::test]
async fn put_then_get_keeps_stored_order_and_echoes_the_spelling() {
    let api = Api::start();
    let values: Vec<Value> = [100, 111, 2222, 333, 4]
        .iter()
        .map(|&i| url_value(i, &format!("https://example.org/{i}")))
        .collect();
    let (status, body) = json_of(api.put("/api/handles/TEST/Abc", &json!(values)).await).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(body, json!({"responseCode": 1, "handle": "TEST/Abc"}));
    let (status, body) = json_of(api.get("/api/handles/test/ABC").await).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["responseCode"], 1);
    assert_eq!(body["handle"], "test/ABC");
    assert_eq!(indexes(&body), [100, 111, 2222, 333, 4]);
    assert_eq!(
        body["values"][0]["data"]["value"],
        "https://example.org/100"
    );
    // Overwrite is the default: replacing answers 200; overwrite=false is 409/101.
    let one = json!({"values": [url_value(1, "https://b.example/")], "handle": "test/abc"});
    let (status, _) = json_of(api.put("/api/handles/TEST/Abc", &one).await).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) =
        json_of(api.put("/api/handles/TEST/Abc?overwrite=false", &one).await).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(body["responseCode"], 101);
    let (_, body) = json_of(api.get("/api/handles/TEST/Abc").await).await;
    assert_eq!(indexes(&body), [1]);
}

#[tokio::test]
async fn get_selects_by_index_and_type_and_reports_misses() {
    let api = Api::start();
    let values = json!([
        url_value(1, "https://a.example/"),
        {"index": 2, "type": "URL.alt", "data": "https://alt.example/"},
        {"index": 3, "type": "EMAIL", "data": "a@example.org"},
        {"index": 100, "type": "HS_ADMIN", "data": {"format": "admin",
            "value": {"handle": "0.NA/TEST", "index": 300, "permissions": "011111110011"}}},
    ]);
    assert_eq!(
        api.put("/api/handles/TEST/sel", &values).await.status(),
        201
    );
    // The HS_ADMIN has public read (the default for one sent without permissions).
    assert_eq!(selected(&api, "").await, [1, 2, 3, 100]);
    assert_eq!(selected(&api, "?type=URL").await, [1]);
    assert_eq!(selected(&api, "?type=URL.").await, [1, 2]);
    assert_eq!(selected(&api, "?index=3&type=URL").await, [1, 3]);
    assert_eq!(selected(&api, "?publicOnly=false").await, [1, 2, 3, 100]);
    assert_eq!(selected(&api, "?auth=true&index=2").await, [2]);
    let (status, body) = json_of(api.get("/api/handles/TEST/sel?type=DESC").await).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        json!({"responseCode": 200, "handle": "TEST/sel", "values": []})
    );
    let (status, body) = json_of(api.get("/api/handles/TEST/none").await).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["responseCode"], 100);
    assert_eq!(body["handle"], "TEST/none");
    let (_, admin) = json_of(
        api.get("/api/handles/TEST/sel?publicOnly=false&index=100")
            .await,
    )
    .await;
    assert_eq!(admin["values"][0]["data"]["format"], "admin");
    // Public read, the default of an HS_ADMIN, is left unsaid like every default.
    assert!(admin["values"][0].get("permissions").is_none(), "{admin}");
}

#[tokio::test]
async fn put_with_indexes_adds_or_replaces_only_those_values() {
    let api = Api::start();
    let values = json!([url_value(1, "https://a/"), url_value(2, "https://b/")]);
    assert_eq!(
        api.put("/api/handles/TEST/part", &values).await.status(),
        201
    );
    let two = json!([url_value(2, "https://z/")]);
    let (status, _) = json_of(api.put("/api/handles/TEST/part?index=2", &two).await).await;
    assert_eq!(status, StatusCode::OK);
    let three = json!({"index": 3, "type": "DESC", "data": "third"});
    let (status, _) = json_of(
        api.put("/api/handles/TEST/part?index=various", &three)
            .await,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = json_of(api.put("/api/handles/TEST/part?index=1", &two).await).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["responseCode"], 4);
    let (status, body) = json_of(api.put("/api/handles/TEST/gone?index=2", &two).await).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["responseCode"], 100);
    let (_, body) = json_of(api.get("/api/handles/TEST/part").await).await;
    assert_eq!(indexes(&body), [1, 2, 3]);
    assert_eq!(body["values"][1]["data"]["value"], "https://z/");
}

#[tokio::test]
async fn delete_removes_values_then_the_handle() {
    let api = Api::start();
    let values = json!([url_value(1, "https://a/"), url_value(2, "https://b/")]);
    api.put("/api/handles/TEST/del", &values).await;
    let (status, body) = json_of(api.delete("/api/handles/TEST/del?index=2").await).await;
    assert_eq!(
        (status, body["responseCode"].clone()),
        (StatusCode::OK, json!(1))
    );
    let (_, body) = json_of(api.get("/api/handles/TEST/del").await).await;
    assert_eq!(indexes(&body), [1]);
    let (status, body) = json_of(api.delete("/api/handles/TEST/del?index=9").await).await;
    assert_eq!(
        (status, body["responseCode"].clone()),
        (StatusCode::BAD_REQUEST, json!(200))
    );
    let (status, body) = json_of(api.delete("/api/handles/TEST/del?index=various").await).await;
    assert_eq!(
        (status, body["responseCode"].clone()),
        (StatusCode::BAD_REQUEST, json!(4))
    );
    let (status, body) = json_of(api.delete("/api/handles/TEST/del").await).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, json!({"responseCode": 1, "handle": "TEST/del"}));
    let (status, body) = json_of(api.delete("/api/handles/TEST/del").await).await;
    assert_eq!(
        (status, body["responseCode"].clone()),
        (StatusCode::NOT_FOUND, json!(100))
    );
}

#[tokio::test]
async fn mint_new_suffix_creates_a_unique_handle() {
    let api = Api::start();
    let value = json!([url_value(1, "https://minted.example/")]);
    let (status, first) = json_of(
        api.put("/api/handles/TEST/?mintNewSuffix=true", &value)
            .await,
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let (_, second) = json_of(api.put("/api/handles/TEST/?mintNewSuffix", &value).await).await;
    let minted = first["handle"].as_str().expect("minted handle");
    assert!(
        minted.starts_with("TEST/") && minted.len() == "TEST/".len() + 36,
        "{minted}"
    );
    assert_ne!(first["handle"], second["handle"]);
    let (status, body) = json_of(api.get(&format!("/api/handles/{minted}")).await).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(indexes(&body), [1]);
}

#[tokio::test]
async fn malformed_requests_get_400_json_and_change_nothing() {
    let api = Api::start();
    let values = json!([url_value(1, "https://a/")]);
    api.put("/api/handles/TEST/keep", &values).await;
    let bad_puts: [(&str, &str, &str, u64); 7] = [
        (
            "/api/handles/TEST/keep",
            "text/plain",
            r#"[{"index":1,"type":"URL","data":"https://x/"}]"#,
            4,
        ),
        ("/api/handles/TEST/keep", "application/json", "{not json", 4),
        (
            "/api/handles/TEST/keep",
            "application/json",
            r#"[{"index":1,"type":"URL","data":["x"]}]"#,
            4,
        ),
        (
            "/api/handles/TEST/keep",
            "application/json",
            r#"[{"index":1,"type":"EMAIL","data":"not an address"}]"#,
            202,
        ),
        (
            "/api/handles/TEST/keep",
            "application/json",
            r#"[{"index":1,"type":"URL","data":"https://x/"},{"index":1,"type":"URL","data":"https://y/"}]"#,
            202,
        ),
        ("/api/handles/%FF%FE/keep", "application/json", r#"[]"#, 102),
        ("/api/handles/TEST%2", "application/json", r#"[]"#, 4),
    ];
    for (path, content_type, body, code) in bad_puts {
        let (status, json) = json_of(api.put_raw(path, content_type, body).await).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path} {body}: {json}");
        assert_eq!(json["responseCode"], code, "{path} {body}: {json}");
        assert!(
            json["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{json}"
        );
    }
    let (_, json) = json_of(
        api.put_raw(
            "/api/handles/TEST/keep",
            "application/json",
            r#"[{"index":1,"type":"URL","data":["x"]}]"#,
        )
        .await,
    )
    .await;
    assert!(
        json["message"]
            .as_str()
            .unwrap_or_default()
            .contains("Not a JSON Object"),
        "{json}"
    );
    let named = json!({"handle": "OTHER/x", "values": values});
    let (status, json) = json_of(api.put("/api/handles/TEST/keep", &named).await).await;
    assert_eq!(
        (status, json["responseCode"].clone()),
        (StatusCode::BAD_REQUEST, json!(102))
    );
    for path in [
        "/api/handles/noslash",
        "/api/handles/TEST/keep?index=x",
        "/api/handles/TEST/keep?callback=alert(1)",
    ] {
        let (status, json) = json_of(api.get(path).await).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {json}");
    }
    let (_, json) = json_of(api.get("/api/handles/TEST/keep").await).await;
    assert_eq!(indexes(&json), [1]);
    assert_eq!(json["values"][0]["data"]["value"], "https://a/");
}

#[tokio::test]
async fn listing_pages_prefixes_jsonp_pretty_and_cors() {
    let api = Api::start();
    for name in ["a", "b", "c"] {
        let path = format!("/api/handles/LIST/{name}");
        assert_eq!(
            api.put(&path, &json!([url_value(1, "https://a/")]))
                .await
                .status(),
            201
        );
    }
    let (status, page) = json_of(api.get("/api/handles?prefix=list&page=1&pageSize=2").await).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(page["totalCount"], "3");
    assert_eq!(page["handles"], json!(["LIST/c"]));
    let (_, count) = json_of(api.get("/api/handles?prefix=0.NA/LIST&pageSize=0").await).await;
    assert_eq!(
        (count["totalCount"].clone(), count["handles"].clone()),
        (json!("3"), json!([]))
    );
    let (_, all) = json_of(api.get("/api/handles?prefix=LIST").await).await;
    assert_eq!(all["handles"], json!(["LIST/a", "LIST/b", "LIST/c"]));
    let (status, _) = json_of(api.get("/api/handles").await).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (_, prefixes) = json_of(api.get("/api/prefixes").await).await;
    // 0.NA holds the bootstrap administrator's 0.NA/ADMIN.
    assert_eq!(
        prefixes,
        json!({"responseCode": 1, "prefixes": ["0.NA", "LIST"]})
    );
    let jsonp_path = "/api/handles/LIST/a?callback=show&index=1";
    let jsonp = client().get(api.url(jsonp_path)).send().await.expect("GET");
    let text = jsonp.text().await.expect("body");
    assert!(
        text.starts_with("show({\"responseCode\":1,") && text.ends_with(");"),
        "{text}"
    );
    let (status, json) = json_of(api.get(jsonp_path).await).await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "no JSONP for a caller with credentials: {json}"
    );
    let pretty = api
        .get("/api/handles/LIST/a?pretty")
        .await
        .text()
        .await
        .expect("body");
    assert!(pretty.contains("\n  \"responseCode\": 1"), "{pretty}");
    let cors = api
        .http
        .get(api.url("/api/handles/LIST/a"))
        .header("Origin", "https://elsewhere.example")
        .send()
        .await
        .expect("GET");
    assert_eq!(cors.headers()["access-control-allow-origin"], "*");
    assert!(
        cors.headers()
            .get("access-control-allow-credentials")
            .is_none()
    );
}

#[tokio::test]
async fn binary_protocol_and_api_see_the_same_values() {
    let api = Api::start();
    let client = api.server.client();
    let group = ValueList(vec![ValueReference {
        handle: "0.NA/TEST".into(),
        index: ValueIndex(300),
    }]);
    let values = vec![
        HandleValue::new(1, "URL", "https://binary.example/"),
        HandleValue::new(2, "CUSTOM", vec![0, 1, 0xfe, 0xff]),
        HandleValue::new(200, "HS_VLIST", group.encode()),
    ];
    let request = AdminRequest::Create {
        handle: Handle::parse("TEST/bin").expect("handle"),
        values,
        overwrite: Overwrite::Refuse,
    };
    client.admin(request).await.expect("create over TCP");
    let resolved = client
        .resolve(
            &Handle::parse("TEST/bin").expect("handle"),
            &ValueSelection::all(),
            Transport::Tcp,
        )
        .await
        .expect("resolve");
    let (_, body) = json_of(api.get("/api/handles/TEST/bin").await).await;
    let from_api: Vec<HandleValue> = body["values"]
        .as_array()
        .expect("values")
        .iter()
        .map(|value| parse_value(value).expect("value JSON"))
        .collect();
    let stamped: Vec<HandleValue> = from_api
        .into_iter()
        .zip(&resolved.values)
        .map(|(value, wire)| HandleValue {
            timestamp: wire.timestamp,
            ..value
        })
        .collect();
    assert_eq!(stamped, resolved.values);
    assert_eq!(body["values"][2]["data"]["format"], "vlist");
    // And the other way: written over the API, read over UDP.
    let sent = json!([
        {"index": 5, "type": "EMAIL", "data": "x@example.org", "ttl": 60},
        {"index": 6, "type": "CUSTOM", "data": {"format": "hex", "value": "00ff10"}, "permissions": "1111"},
        {"index": 7, "type": "DESC", "data": {"format": "base64", "value": "aGVsbG8="}},
    ]);
    assert_eq!(api.put("/api/handles/TEST/json", &sent).await.status(), 201);
    let resolved = client
        .resolve(
            &Handle::parse("TEST/json").expect("handle"),
            &ValueSelection::all(),
            Transport::Udp,
        )
        .await
        .expect("resolve");
    let expected: Vec<HandleValue> = sent
        .as_array()
        .expect("array")
        .iter()
        .zip(&resolved.values)
        .map(|(value, wire)| HandleValue {
            timestamp: wire.timestamp,
            ..parse_value(value).expect("value")
        })
        .collect();
    assert_eq!(resolved.values, expected);
    assert_eq!(resolved.values[1].data, [0, 0xff, 0x10]);
}

/// The indexes `GET /api/handles/TEST/sel<query>` answers, which must be a 200.
async fn selected(api: &Api, query: &str) -> Vec<u64> {
    let (status, body) = json_of(api.get(&format!("/api/handles/TEST/sel{query}")).await).await;
    assert_eq!(status, StatusCode::OK, "{query}: {body}");
    indexes(&body)
}
