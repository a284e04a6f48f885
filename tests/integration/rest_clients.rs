//! The Python REST clients' requests, as pyhandle 1.5.0 sends them (recorded from
//! its `RESTHandleClient` against a capturing listener: the user check, a
//! registration, a value change and a delete), replayed against a real `hdl serve`
//! that honours credentials over HTTPS only, as a production node does.

use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, LOCATION};
use reqwest::{Client, Method, StatusCode};
use serde_json::Value;

use crate::harness::{ADMIN_BASIC, ADMIN_SECRET_TEXT, Server};
use crate::http::json_of;

/// pyhandle's registration body: an HS_ADMIN whose admin index is a string of
/// digits, and a URL that is not an absolute URL.
const REGISTER_BODY: &str = r#"{"values": [{"index": 100, "type": "HS_ADMIN", "data": {"value": {"index": "300", "handle": "0.NA/ADMIN", "permissions": "011111110011"}, "format": "admin"}}, {"index": 1, "type": "URL", "data": "www.url.foo"}]}"#;

/// pyhandle's value change.
const MODIFY_BODY: &str =
    r#"{"values": [{"index": 2, "type": "URL", "data": "http://new.example/"}]}"#;

fn basic() -> String {
    use base64::Engine;
    let user_and_secret = format!("{ADMIN_BASIC}:{ADMIN_SECRET_TEXT}");
    let encoded = base64::engine::general_purpose::STANDARD.encode(user_and_secret);
    format!("Basic {encoded}")
}

/// A client that trusts the test node's self-signed certificate and shows
/// redirects instead of following them.
fn client() -> Client {
    Client::builder()
        .danger_accept_invalid_certs(true)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("HTTP client")
}

/// One of pyhandle's authenticated writes (its headers and body), sent to `url`.
async fn send(http: &Client, method: Method, url: &str, body: &'static str) -> reqwest::Response {
    http.request(method, url)
        .header("User-Agent", "python-requests/2.34.2")
        .header("Accept", "*/*")
        .header(AUTHORIZATION, basic())
        .header(CONTENT_TYPE, "application/json")
        .body(body)
        .send()
        .await
        .expect("request")
}

/// Sends a write over plain HTTP, checks it is sent to the same path over HTTPS
/// (307, so the method and body are kept), and sends it there as pyhandle does.
async fn over_https(
    server: &Server,
    method: Method,
    target: &str,
    body: &'static str,
) -> (StatusCode, Value) {
    let http = client();
    let plain = format!("{}{target}", server.http_url());
    let redirected = send(&http, method.clone(), &plain, body).await;
    assert_eq!(
        redirected.status(),
        StatusCode::TEMPORARY_REDIRECT,
        "{target}"
    );
    let https = server.https().expect("an HTTPS listener");
    let location = redirected.headers()[LOCATION].to_str().expect("Location");
    assert_eq!(
        location,
        format!("https://127.0.0.1:{}{target}", https.port())
    );
    json_of(send(&http, method, location, body).await).await
}

#[tokio::test]
async fn pyhandle_finds_its_user_by_an_anonymous_read() {
    let server = Server::start_https_only();
    let check = client()
        .get(format!("{}/api/handles/0.NA/ADMIN", server.http_url()))
        .header("Accept", "application/json")
        .send()
        .await
        .expect("GET");
    let (status, json) = json_of(check).await;
    assert_eq!(status, StatusCode::OK, "{json}");
    assert_eq!(json["handle"], "0.NA/ADMIN");
    let types: Vec<&str> = json["values"]
        .as_array()
        .expect("values")
        .iter()
        .filter_map(|value| value["type"].as_str())
        .collect();
    assert_eq!(
        types,
        ["HS_ADMIN"],
        "the HS_ADMIN is public, the HS_SECKEY never"
    );
}

#[tokio::test]
async fn pyhandle_writes_are_sent_to_https_and_stored_as_written() {
    let server = Server::start_https_only();
    let target = "/api/handles/ADMIN/x?overwrite=true";
    let (status, json) = over_https(&server, Method::PUT, target, REGISTER_BODY).await;
    assert_eq!(status, StatusCode::CREATED, "{json}");
    let target = "/api/handles/ADMIN/x?index=2&overwrite=true";
    let (status, json) = over_https(&server, Method::PUT, target, MODIFY_BODY).await;
    assert_eq!(status, StatusCode::OK, "{json}");

    let read = client()
        .get(format!("{}/api/handles/ADMIN/x", server.http_url()))
        .send()
        .await
        .expect("GET");
    let (status, json) = json_of(read).await;
    assert_eq!(status, StatusCode::OK, "{json}");
    let values = json["values"].as_array().expect("values");
    let data = |index: u64| {
        values
            .iter()
            .find(|value| value["index"] == index)
            .map(|value| value["data"].clone())
    };
    assert_eq!(data(1).expect("index 1")["value"], "www.url.foo");
    assert_eq!(data(2).expect("index 2")["value"], "http://new.example/");
    assert_eq!(data(100).expect("index 100")["value"]["index"], 300);

    let (status, json) = over_https(&server, Method::DELETE, "/api/handles/ADMIN/x", "").await;
    assert_eq!(status, StatusCode::OK, "{json}");
}

#[tokio::test]
async fn credentials_over_plain_http_without_https_are_refused() {
    let server = Server::start_keyed(false);
    let refused = send(
        &client(),
        Method::PUT,
        &format!("{}/api/handles/SEC/x?overwrite=true", server.http_url()),
        MODIFY_BODY,
    )
    .await;
    let (status, json) = json_of(refused).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{json}");
}
