//! Who sends an HTTP request (Handle.Net reference §1.2, "Authentication over REST"):
//! `Authorization: Basic` with the user `index%3Ahandle` and the HS_SECKEY secret as
//! the password, checked against this member's store.
//!
//! Owns [`Channel`] and the [`authenticate`] middleware, which puts the [`Caller`] into
//! the request's extensions for the handlers. Credentials are honoured over HTTPS, and
//! over plain HTTP only from a loopback address when `[http]
//! allow_plain_auth_from_loopback` is set; elsewhere they are refused (401), never
//! silently ignored. Missing credentials make an anonymous caller, whose writes the
//! service refuses with RC_AUTHEN_NEEDED (HTTP 401). Every 401 carries
//! `WWW-Authenticate: Basic realm="hdl"`. The `Handle` challenge-response scheme and
//! `/api/sessions` are not implemented: such a header is answered 401 with a message.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use base64::Engine;
use serde_json::json;

use super::HttpState;
use super::answer::Format;
use crate::config::parse_identity;
use crate::service::Caller;

/// The longest Authorization header read.
const MAX_AUTHORIZATION_LEN: usize = 4096;

/// Whether a request came over TLS (an extension set by the listener's router).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// Plain HTTP.
    Http,
    /// HTTPS.
    Https,
}

/// Why credentials were not accepted.
#[derive(Debug, thiserror::Error)]
enum Refusal {
    #[error("credentials are honoured only over HTTPS")]
    Insecure,
    #[error("malformed Authorization header: {0}")]
    Malformed(&'static str),
    #[error("the Handle authorization scheme (sessions) is not supported; use Basic")]
    HandleScheme,
    #[error("{0}")]
    Rejected(String),
}

/// Puts the request's [`Caller`] into its extensions, or answers 401.
pub async fn authenticate(
    State(state): State<HttpState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    mut request: Request,
    next: Next,
) -> Response {
    let channel = request
        .extensions()
        .get::<Channel>()
        .copied()
        .unwrap_or(Channel::Http);
    let header = request.headers().get(header::AUTHORIZATION).cloned();
    let caller = match header {
        None => Caller::anonymous(peer.ip()),
        Some(value) => match caller(&state, &value, peer, channel) {
            Ok(caller) => caller,
            Err(refusal) => return unauthorised(&refusal.to_string()),
        },
    };
    request.extensions_mut().insert(caller);
    let mut response = next.run(request).await;
    if response.status() == StatusCode::UNAUTHORIZED {
        challenge_header(&mut response);
    }
    response
}

fn caller(
    state: &HttpState,
    value: &HeaderValue,
    peer: SocketAddr,
    channel: Channel,
) -> Result<Caller, Refusal> {
    let secure = channel == Channel::Https
        || (state.allow_plain_auth_from_loopback && peer.ip().is_loopback());
    if !secure {
        return Err(Refusal::Insecure);
    }
    if value.len() > MAX_AUTHORIZATION_LEN {
        return Err(Refusal::Malformed("too long"));
    }
    let text = value
        .to_str()
        .map_err(|_| Refusal::Malformed("not ASCII"))?;
    let (scheme, rest) = text.trim().split_once(' ').unwrap_or((text, ""));
    if scheme.eq_ignore_ascii_case("Handle") {
        return Err(Refusal::HandleScheme);
    }
    if !scheme.eq_ignore_ascii_case("Basic") {
        return Err(Refusal::Malformed("unknown scheme"));
    }
    let (user, secret) = basic(rest.trim())?;
    let identity = parse_identity(&user).ok_or(Refusal::Malformed("user is not index:handle"))?;
    let identity = state
        .service
        .verify_secret(&identity, &secret)
        .map_err(|error| Refusal::Rejected(error.to_string()))?;
    Ok(Caller::Administrator { identity })
}

/// The percent-decoded user and the password of Basic credentials.
fn basic(encoded: &str) -> Result<(String, Vec<u8>), Refusal> {
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|_| Refusal::Malformed("not base64"))?;
    let colon = decoded
        .iter()
        .position(|&b| b == b':')
        .ok_or(Refusal::Malformed("no ':' between user and password"))?;
    let user = percent_encoding::percent_decode(&decoded[..colon])
        .decode_utf8()
        .map_err(|_| Refusal::Malformed("user is not UTF-8"))?
        .into_owned();
    Ok((user, decoded[colon + 1..].to_vec()))
}

fn unauthorised(message: &str) -> Response {
    let body = json!({"responseCode": 402, "message": message});
    let mut response = Format::default().answer(StatusCode::UNAUTHORIZED, &body);
    challenge_header(&mut response);
    response
}

fn challenge_header(response: &mut Response) {
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"hdl\""),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_decode_with_an_encoded_colon() {
        let encoded = base64::engine::general_purpose::STANDARD.encode("300%3A0.NA/TEST:pa:ss");
        let (user, secret) = basic(&encoded).unwrap();
        assert_eq!(user, "300:0.NA/TEST");
        assert_eq!(secret, b"pa:ss");
        assert!(matches!(basic("!!"), Err(Refusal::Malformed(_))));
        let no_colon = base64::engine::general_purpose::STANDARD.encode("user");
        assert!(matches!(basic(&no_colon), Err(Refusal::Malformed(_))));
    }
}
