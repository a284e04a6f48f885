//! The `Handle` challenge-response scheme of the HTTP API and `/api/sessions`, end to
//! end against a real `hdl serve`: a session opened, its nonce answered with the
//! public key or the secret (PBKDF2 and SHA-1), then writes with only the session id;
//! replays, wrong keys, unknown or deleted sessions and garbage refused with a fresh
//! challenge.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hdl::auth::{
    Identity, RestAlgorithm, RestAnswer, RestProof, SecretKey, SigningKey, mac_rest, sign_rest,
};
use hdl::client::authorization::{answer_header, session_header};
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE};
use reqwest::{Client, StatusCode};
use serde_json::{Value, json};

use crate::harness::{ADMIN, ADMIN_KEY, ADMIN_SECRET_TEXT, KEYED_ADMIN, OTHER_KEY, Server};
use crate::http::{client, json_of};

fn identity(text: &str) -> Identity {
    hdl::config::parse_identity(text).expect("identity")
}

fn signing_key(path: &str) -> SigningKey {
    SigningKey::from_pem(&std::fs::read_to_string(path).expect("key file")).expect("PEM")
}

/// An open session as the server described it.
struct Session {
    id: String,
    nonce: Vec<u8>,
}

impl Session {
    fn of(json: &Value) -> Session {
        Session {
            id: json["sessionId"].as_str().expect("sessionId").to_owned(),
            nonce: STANDARD
                .decode(json["nonce"].as_str().expect("nonce"))
                .expect("base64 nonce"),
        }
    }

    fn only(&self) -> String {
        session_header(&self.id)
    }

    fn answered(&self, who: &str, proof: impl FnOnce(&[u8], &[u8]) -> RestProof) -> String {
        let cnonce = vec![0x42; 16];
        let answer = RestAnswer {
            identity: identity(who),
            proof: proof(&self.nonce, &cnonce),
            cnonce,
        };
        answer_header(&self.id, &answer).expect("a REST proof")
    }

    fn signed(&self, who: &str, key: &str) -> String {
        let key = signing_key(key);
        self.answered(who, |nonce, cnonce| {
            sign_rest(nonce, cnonce, &key).expect("signature")
        })
    }

    fn maced(&self, secret: &str, alg: RestAlgorithm) -> String {
        let secret = SecretKey(secret.as_bytes().to_vec());
        self.answered(ADMIN, |nonce, cnonce| {
            mac_rest(nonce, cnonce, &secret, alg).expect("MAC")
        })
    }
}

async fn open(http: &Client, base: &str) -> Session {
    let response = http
        .post(format!("{base}/api/sessions"))
        .send()
        .await
        .expect("POST");
    let (status, json) = json_of(response).await;
    assert_eq!(status, StatusCode::CREATED, "{json}");
    assert_eq!(json["authenticated"], false, "{json}");
    Session::of(&json)
}

/// `method /api/sessions/this` with `authorization`: the status, the JSON (null for
/// an empty body) and the challenges.
async fn this(
    http: &Client,
    base: &str,
    method: reqwest::Method,
    authorization: &str,
) -> (StatusCode, Value, Vec<String>) {
    let response = http
        .request(method, format!("{base}/api/sessions/this"))
        .header(AUTHORIZATION, authorization)
        .send()
        .await
        .expect("request");
    answer(response).await
}

/// Creates `handle` with `authorization`.
async fn create(
    http: &Client,
    base: &str,
    handle: &str,
    authorization: &str,
) -> (StatusCode, Value, Vec<String>) {
    let response = http
        .put(format!("{base}/api/handles/{handle}"))
        .header(CONTENT_TYPE, "application/json")
        .header(AUTHORIZATION, authorization)
        .body(json!([{"index": 1, "type": "URL", "data": "https://s.example/"}]).to_string())
        .send()
        .await
        .expect("PUT");
    answer(response).await
}

async fn answer(response: reqwest::Response) -> (StatusCode, Value, Vec<String>) {
    let challenges = response
        .headers()
        .get_all(WWW_AUTHENTICATE)
        .iter()
        .map(|value| value.to_str().expect("ASCII").to_owned())
        .collect();
    let status = response.status();
    let text = response.text().await.expect("body");
    let json = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
    };
    (status, json, challenges)
}

/// Asserts a 401 with `{"responseCode":402}`, a `Handle` challenge (naming `session`
/// when given, else a fresh one) and `Basic`.
fn assert_challenged(got: &(StatusCode, Value, Vec<String>), session: Option<&str>) {
    let (status, json, challenges) = got;
    assert_eq!(*status, StatusCode::UNAUTHORIZED, "{json}");
    assert_eq!(json["responseCode"], 402, "{json}");
    assert!(json["message"].as_str().is_some_and(|m| !m.is_empty()));
    let handle = challenges
        .iter()
        .find(|c| c.starts_with("Handle sessionId=\""))
        .unwrap_or_else(|| panic!("no Handle challenge in {challenges:?}"));
    assert!(handle.contains(", nonce=\""), "{handle}");
    if let Some(session) = session {
        assert!(handle.contains(session), "{handle} should name {session}");
    }
    assert!(challenges.iter().any(|c| c == "Basic realm=\"hdl\""));
}

async fn resolves(http: &Client, url: String) -> StatusCode {
    http.get(url).send().await.expect("GET").status()
}

#[tokio::test]
async fn a_public_key_session_creates_with_the_session_id_alone() {
    let server = Server::start_keyed(true);
    let base = server.http_url();
    let http = client();
    let session = open(&http, &base).await;
    let answered = session.signed("0:0.NA/SEC", ADMIN_KEY);
    let (status, json, _) = this(&http, &base, reqwest::Method::PUT, &answered).await;
    assert_eq!(status, StatusCode::OK, "{json}");
    assert_eq!(json["authenticated"], true, "{json}");
    assert_eq!(json["id"], KEYED_ADMIN, "index 0 finds the key at 300");
    assert_eq!(json["sessionId"], session.id.as_str());
    assert_ne!(
        Session::of(&json).nonce,
        session.nonce,
        "the nonce is used up"
    );
    for n in 0..3 {
        let created = create(&http, &base, &format!("SEC/{n}"), &session.only()).await;
        assert_eq!(created.0, StatusCode::CREATED, "{:?}", created.1);
    }
    let (status, json, _) = this(&http, &base, reqwest::Method::GET, &session.only()).await;
    assert_eq!((status, &json["id"]), (StatusCode::OK, &json!(KEYED_ADMIN)));
}

#[tokio::test]
async fn secret_key_sessions_authenticate_with_pbkdf2_and_with_sha1_only_where_allowed() {
    let server = Server::start();
    let base = server.http_url();
    let http = client();
    let session = open(&http, &base).await;
    let sha1 = session.maced(ADMIN_SECRET_TEXT, RestAlgorithm::Sha1);
    let refused = create(&http, &base, "ADMIN/sha1", &sha1).await;
    assert_challenged(&refused, Some(&session.id));
    assert!(
        refused.1.to_string().contains("legacy_secret_answers"),
        "{}",
        refused.1
    );
    let gone = resolves(&http, format!("{base}/api/handles/ADMIN/sha1")).await;
    assert_eq!(gone, StatusCode::NOT_FOUND);
    drop(server);

    let server = Server::start_with_config("[auth]\nlegacy_secret_answers = true\n");
    let base = server.http_url();
    for (n, alg) in [RestAlgorithm::Pbkdf2HmacSha1, RestAlgorithm::Sha1]
        .into_iter()
        .enumerate()
    {
        let session = open(&http, &base).await;
        let answered = session.maced(ADMIN_SECRET_TEXT, alg);
        // The answer rides on a write itself; the session stays authenticated after.
        let (status, json, _) = create(&http, &base, &format!("ADMIN/a{n}"), &answered).await;
        assert_eq!(status, StatusCode::CREATED, "{alg:?}: {json}");
        let (status, json, _) = create(&http, &base, &format!("ADMIN/b{n}"), &session.only()).await;
        assert_eq!(status, StatusCode::CREATED, "{alg:?}: {json}");
    }
}

#[tokio::test]
async fn a_replayed_answer_is_refused() {
    let server = Server::start();
    let base = server.http_url();
    let http = client();
    let session = open(&http, &base).await;
    let answered = session.maced(ADMIN_SECRET_TEXT, RestAlgorithm::Pbkdf2HmacSha1);
    let (status, json, _) = this(&http, &base, reqwest::Method::PUT, &answered).await;
    assert_eq!(status, StatusCode::OK, "{json}");
    let replayed = create(&http, &base, "ADMIN/replayed", &answered).await;
    assert_challenged(&replayed, Some(&session.id));
    let gone = resolves(&http, format!("{base}/api/handles/ADMIN/replayed")).await;
    assert_eq!(gone, StatusCode::NOT_FOUND);
    let fresh = open(&http, &base).await;
    let elsewhere = answered.replace(&session.id, &fresh.id);
    assert_challenged(
        &create(&http, &base, "ADMIN/replayed", &elsewhere).await,
        None,
    );
}

#[tokio::test]
async fn a_wrong_key_is_refused_and_changes_nothing() {
    let server = Server::start_keyed(true);
    let base = server.http_url();
    let http = client();
    let session = open(&http, &base).await;
    let wrong = session.signed(KEYED_ADMIN, OTHER_KEY);
    let refused = create(&http, &base, "SEC/wrong", &wrong).await;
    assert_challenged(&refused, Some(&session.id));
    let gone = resolves(
        &http,
        format!("{}/api/handles/SEC/wrong", server.http_url()),
    )
    .await;
    assert_eq!(gone, StatusCode::NOT_FOUND);
    let (status, json, _) = this(&http, &base, reqwest::Method::GET, &session.only()).await;
    assert_eq!(
        (status, &json["authenticated"]),
        (StatusCode::OK, &json!(false))
    );
    let confirm = this(&http, &base, reqwest::Method::PUT, &session.only()).await;
    assert_challenged(&confirm, Some(&session.id));
}

#[tokio::test]
async fn a_wrong_secret_is_refused() {
    let server = Server::start();
    let base = server.http_url();
    let http = client();
    let session = open(&http, &base).await;
    let wrong = session.maced("not-the-secret", RestAlgorithm::Pbkdf2HmacSha1);
    assert_challenged(
        &create(&http, &base, "ADMIN/w", &wrong).await,
        Some(&session.id),
    );
    let gone = resolves(&http, format!("{base}/api/handles/ADMIN/w")).await;
    assert_eq!(gone, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn unknown_deleted_and_garbage_sessions_get_a_fresh_challenge() {
    let server = Server::start();
    let base = server.http_url();
    let http = client();
    let anonymous = http
        .put(format!("{base}/api/handles/ADMIN/anon"))
        .header(CONTENT_TYPE, "application/json")
        .body("[]")
        .send()
        .await
        .expect("PUT");
    assert_challenged(&answer(anonymous).await, None);
    let unknown = create(&http, &base, "ADMIN/u", &session_header("nope")).await;
    assert_challenged(&unknown, None);
    assert!(!unknown.2.iter().any(|c| c.contains("\"nope\"")));

    let session = open(&http, &base).await;
    let answered = session.maced(ADMIN_SECRET_TEXT, RestAlgorithm::Pbkdf2HmacSha1);
    assert_eq!(
        this(&http, &base, reqwest::Method::PUT, &answered).await.0,
        StatusCode::OK
    );
    let (status, json, _) = this(&http, &base, reqwest::Method::DELETE, &session.only()).await;
    assert_eq!((status, json), (StatusCode::NO_CONTENT, Value::Null));
    let reused = create(&http, &base, "ADMIN/deleted", &session.only()).await;
    assert_challenged(&reused, None);
    assert!(!reused.2.iter().any(|c| c.contains(&session.id)));
    assert_challenged(
        &this(&http, &base, reqwest::Method::GET, &session.only()).await,
        None,
    );

    let signed = r#"sessionId=s, id="300:0.NA/ADMIN", type=HS_SECKEY, cnonce=AA==, alg=SHA1"#;
    let garbage = [
        "Handle sessionId=".to_owned(),
        "Handle sessionId=\"unterminated".to_owned(),
        "Handle sessionId=a, sessionId=b".to_owned(),
        format!("Handle {signed}, signature=!!!"),
        format!("Handle {signed}"),
        format!("Handle {}", signed.replace("HS_SECKEY", "HS_NOKEY")),
        format!("Handle {signed}, signature=AA==, version=7"),
        format!("Handle sessionId=\"{}\"", "x".repeat(5000)),
        "Handle clientCert=\"true\"".to_owned(),
        "Bearer abc".to_owned(),
    ];
    for header in garbage {
        let got = create(&http, &base, "ADMIN/garbage", &header).await;
        let shown: String = header.chars().take(60).collect();
        assert_eq!(got.0, StatusCode::UNAUTHORIZED, "{shown}: {:?}", got.1);
        assert_eq!(got.1["responseCode"], 402, "{shown}: {:?}", got.1);
        assert!(got.1["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    let gone = resolves(&http, format!("{base}/api/handles/ADMIN/garbage")).await;
    assert_eq!(gone, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn sessions_over_plain_http_are_refused_unless_allowed() {
    let server = Server::start_keyed(false);
    let base = server.http_url();
    let http = client();
    let response = http
        .post(format!("{base}/api/sessions"))
        .send()
        .await
        .expect("POST");
    let (status, json) = json_of(response).await;
    assert_eq!(
        (status, &json["responseCode"]),
        (StatusCode::UNAUTHORIZED, &json!(402))
    );
    let (status, json, challenges) = create(&http, &base, "SEC/plain", &session_header("x")).await;
    assert_eq!(
        (status, &json["responseCode"]),
        (StatusCode::UNAUTHORIZED, &json!(402))
    );
    assert!(
        !challenges.iter().any(|c| c.starts_with("Handle")),
        "no session is offered where it would not be honoured: {challenges:?}"
    );
    let gone = resolves(
        &http,
        format!("{}/api/handles/SEC/plain", server.http_url()),
    )
    .await;
    assert_eq!(gone, StatusCode::NOT_FOUND);
}
