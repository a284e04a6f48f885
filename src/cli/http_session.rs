//! An authenticated session of a node's REST API (`/api/sessions`), for the commands
//! that speak HTTP: opened (`POST`), its nonce answered once with the credentials
//! (`PUT /this`: an RSA signature with a key, PBKDF2-HMAC-SHA1 with a secret, as J9
//! clients answer), then named by its id alone, and closed (`DELETE /this`).

use crate::auth::{RestAlgorithm, RestAnswer, mac_rest, sign_rest};
use crate::client::authorization::{answer_header, session_header};
use crate::client::{Credentials, Key};
use anyhow::{Context, bail};
use base64::Engine;

/// One authenticated session of the node at `base` (`http://HOST:PORT` or an
/// `https://` URL).
pub struct HttpSession {
    base: String,
    /// The `Authorization` value naming the session.
    pub header: String,
}

impl HttpSession {
    /// Opens a session at `base` and authenticates it with `credentials`.
    pub async fn open(
        client: &reqwest::Client,
        base: &str,
        credentials: &Credentials,
    ) -> anyhow::Result<HttpSession> {
        let opened = call(client, reqwest::Method::POST, base, "", None).await?;
        let session = string_field(&opened, "sessionId")?;
        let nonce = base64::engine::general_purpose::STANDARD
            .decode(string_field(&opened, "nonce")?)
            .context("the session nonce is not base64")?;
        let answer = session_answer(credentials, &nonce)?;
        let header = answer_header(&session, &answer).context("no REST form for this proof")?;
        call(client, reqwest::Method::PUT, base, "/this", Some(&header)).await?;
        Ok(HttpSession {
            base: base.to_owned(),
            header: session_header(&session),
        })
    }

    /// Closes the session.
    pub async fn close(self, client: &reqwest::Client) -> anyhow::Result<()> {
        let method = reqwest::Method::DELETE;
        call(client, method, &self.base, "/this", Some(&self.header)).await?;
        Ok(())
    }
}

/// The answer to `nonce`: an RSA signature with the key, or PBKDF2-HMAC-SHA1 with
/// the secret (what J9 clients send).
fn session_answer(credentials: &Credentials, nonce: &[u8]) -> anyhow::Result<RestAnswer> {
    let cnonce: [u8; 16] = rand::random();
    let proof = match &credentials.key {
        Key::Public(key) => sign_rest(nonce, &cnonce, key)?,
        Key::Secret(secret) => mac_rest(nonce, &cnonce, secret, RestAlgorithm::Pbkdf2HmacSha1)?,
    };
    Ok(RestAnswer {
        identity: credentials.identity.clone(),
        cnonce: cnonce.to_vec(),
        proof,
    })
}

/// `method {base}/api/sessions{path}`; its JSON (null when empty), or the error.
async fn call(
    client: &reqwest::Client,
    method: reqwest::Method,
    base: &str,
    path: &str,
    authorization: Option<&str>,
) -> anyhow::Result<serde_json::Value> {
    let url = format!("{base}/api/sessions{path}");
    let mut request = client.request(method.clone(), &url);
    if let Some(authorization) = authorization {
        request = request.header(reqwest::header::AUTHORIZATION, authorization);
    }
    let response = request
        .send()
        .await
        .with_context(|| format!("{method} {url}"))?;
    let status = response.status();
    let text = response
        .text()
        .await
        .with_context(|| format!("{method} {url}"))?;
    if !status.is_success() {
        bail!("{method} {url}: HTTP {status}: {text}");
    }
    if text.is_empty() {
        return Ok(serde_json::Value::Null);
    }
    serde_json::from_str(&text).with_context(|| format!("{method} {url}: not JSON"))
}

fn string_field(json: &serde_json::Value, name: &str) -> anyhow::Result<String> {
    json[name]
        .as_str()
        .map(str::to_owned)
        .with_context(|| format!("no {name} in {json}"))
}
