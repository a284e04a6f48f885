//! Who sends an HTTP request (Handle.Net reference §1.2, "Authentication over REST"):
//! `Authorization: Basic` with the user `index%3Ahandle` and the HS_SECKEY secret as
//! the password, or `Authorization: Handle` naming a session of `/api/sessions` and,
//! to authenticate it, answering its nonce (a signature or MAC of `nonce ‖ cnonce`,
//! read by [`super::authorization`], checked by the service like a binary-protocol
//! answer).
//!
//! Owns [`Channel`] and [`authenticate`], which hands the request's [`Caller`] and
//! session ([`RequestSession`]) on with it (the edge puts them into its extensions
//! for the router's handlers).
//! Credentials (sessions included) are honoured over HTTPS, and over plain HTTP only
//! from a loopback address when `[http] allow_plain_auth_from_loopback` is set;
//! elsewhere they are sent to HTTPS (307 to the same path on the HTTPS port) or,
//! without an HTTPS listener, refused (401), never silently ignored. Missing credentials, or
//! a session nobody has authenticated, make an anonymous caller, whose writes the
//! service refuses with RC_AUTHEN_NEEDED (HTTP 401). Every 401 carries
//! `WWW-Authenticate: Handle sessionId=…, nonce=…` where credentials are honoured
//! (the request's own session, or one opened for the occasion while the table has
//! room) and `WWW-Authenticate: Basic realm="hdl"`. A verified answer uses up the
//! session's nonce; the response's `Authentication-Info` tells the next one. Does not
//! touch the session table beyond [`super::sessions::SessionTable`]'s methods, and
//! never checks a signature while holding its lock.

use std::net::{IpAddr, SocketAddr};
use std::sync::{MutexGuard, PoisonError};
use std::time::Instant;

use axum::http::uri::Authority;
use axum::http::{HeaderMap, HeaderValue, Request, StatusCode, header};
use axum::response::Response;
use base64::Engine;
use tracing::warn;

use super::HttpState;
use super::answer::{Format, Refusal};
use super::authorization::{HandleAuthorization, ParamError, parse_handle};
use super::codes::RequestKind;
use super::sessions::{SessionId, SessionRefusal, SessionTable, SessionView};
use crate::auth::guesses::{Exhausted, Guesses, TooManyGuesses};
use crate::auth::work_budget::WorkBudget;
use crate::auth::{AuthType, Identity, RestAnswer};
use crate::config::parse_identity;
use crate::service::{Caller, Error as ServiceError, measure_key_checks};

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

/// The session a request named in `Authorization: Handle sessionId=…`, if any (an
/// extension set by [`authenticate`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestSession(pub Option<SessionId>);

/// Why credentials were not accepted.
#[derive(Debug, thiserror::Error)]
pub(super) enum CredentialRefusal {
    #[error("credentials are honoured only over HTTPS")]
    Insecure,
    #[error("malformed Authorization header: {0}")]
    Malformed(&'static str),
    #[error("malformed Authorization header: {0}")]
    Parameters(#[from] ParamError),
    #[error("{0}")]
    Session(#[from] SessionRefusal),
    #[error("too many authentications in progress; try again")]
    Busy,
    #[error("{0}")]
    Guessing(#[from] TooManyGuesses),
    #[error("{message}")]
    Refused {
        message: String,
        /// The session whose (fresh) nonce the challenge should name.
        session: Option<SessionId>,
    },
}

impl CredentialRefusal {
    fn session(&self) -> Option<&SessionId> {
        match self {
            CredentialRefusal::Refused { session, .. } => session.as_ref(),
            _ => None,
        }
    }
}

/// Who a request's credentials say sent it.
struct Credentials {
    caller: Caller,
    session: Option<SessionId>,
    /// The session after an answer was verified (with its next nonce).
    answered: Option<SessionView>,
}

impl Credentials {
    fn plain(caller: Caller) -> Self {
        Credentials {
            caller,
            session: None,
            answered: None,
        }
    }
}

/// Hands the request, its [`Caller`] and its [`RequestSession`] to `answer`, or
/// answers 401.
pub async fn authenticate<A, B>(
    state: &HttpState,
    channel: Channel,
    peer: SocketAddr,
    request: Request<B>,
    answer: impl FnOnce(Request<B>, Caller, RequestSession) -> A,
) -> Response
where
    A: Future<Output = Response>,
{
    let honoured = honoured(state, peer, channel);
    let header = request.headers().get(header::AUTHORIZATION).cloned();
    let now = Instant::now();
    let credentials = match header {
        None => Credentials::plain(Caller::anonymous(peer.ip())),
        Some(_) if !honoured => return insecure(state, &request),
        // Boxed: checking credentials takes a future several times the size of the
        // rest, and every request's future is as large as its largest step.
        Some(value) => match Box::pin(credentials(state, &value, peer, now)).await {
            Ok(credentials) => credentials,
            Err(refusal @ (CredentialRefusal::Busy | CredentialRefusal::Guessing(_))) => {
                return refused(&refusal);
            }
            Err(refusal) => return unauthorised(state, &refusal, Some(peer.ip())),
        },
    };
    let session = credentials.session;
    let answered = answer(request, credentials.caller, RequestSession(session.clone()));
    let mut response = answered.await;
    if response.status() == StatusCode::UNAUTHORIZED {
        let honoured_from = honoured.then_some(peer.ip());
        challenge(
            state,
            response.headers_mut(),
            session.as_ref(),
            honoured_from,
        );
    } else if let Some(view) = credentials.answered {
        let info = format!("Handle {}", challenge_params(&view));
        if let Ok(value) = HeaderValue::from_str(&info) {
            response.headers_mut().insert(
                header::HeaderName::from_static("authentication-info"),
                value,
            );
        }
    }
    response
}

/// Whether credentials from `peer` over `channel` are honoured.
pub fn honoured(state: &HttpState, peer: SocketAddr, channel: Channel) -> bool {
    channel == Channel::Https || (state.allow_plain_auth_from_loopback && peer.ip().is_loopback())
}

/// What `check` (a key check for `peer`) gives, if `peer`'s budget of key-check time
/// admits it; the time it ran is charged to `peer` unless it proved an administrator.
async fn within_budget<T, E>(
    state: &HttpState,
    peer: SocketAddr,
    check: impl Future<Output = Result<T, E>>,
) -> Result<Result<T, E>, CredentialRefusal> {
    let source = peer.ip();
    if !work(state).admits(source, Instant::now()) {
        return Err(CredentialRefusal::Busy);
    }
    let (outcome, spent) = measure_key_checks(source, check).await;
    if outcome.is_ok() {
        return Ok(outcome);
    }
    if work(state).charge(source, spent, Instant::now()) {
        warn!(%peer, "an address used its share of key checks: its next are refused until it refills");
    }
    Ok(outcome)
}

/// The work budget, even if a thread panicked while holding it.
fn work(state: &HttpState) -> MutexGuard<'_, WorkBudget> {
    state.work.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The failed-credentials book, even if a thread panicked while holding it.
fn guesses(state: &HttpState) -> MutexGuard<'_, Guesses<Identity>> {
    state.guesses.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The session table, even if a thread panicked while holding it (its invariants
/// hold between method calls).
pub fn sessions(state: &HttpState) -> MutexGuard<'_, SessionTable> {
    state
        .sessions
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

async fn credentials(
    state: &HttpState,
    value: &HeaderValue,
    peer: SocketAddr,
    now: Instant,
) -> Result<Credentials, CredentialRefusal> {
    if value.len() > MAX_AUTHORIZATION_LEN {
        return Err(CredentialRefusal::Malformed("too long"));
    }
    let text = value
        .to_str()
        .map_err(|_| CredentialRefusal::Malformed("not ASCII"))?;
    let (scheme, rest) = text.trim().split_once(' ').unwrap_or((text, ""));
    if scheme.eq_ignore_ascii_case("Handle") {
        return match parse_handle(rest)? {
            HandleAuthorization::Nothing => Ok(Credentials::plain(Caller::anonymous(peer.ip()))),
            HandleAuthorization::Session(session) => in_session(state, session, peer, now),
            HandleAuthorization::Answer { session, answer } => {
                answered(state, session, answer, peer, now).await
            }
        };
    }
    if !scheme.eq_ignore_ascii_case("Basic") {
        return Err(CredentialRefusal::Malformed("unknown scheme"));
    }
    let (user, secret) = basic(rest.trim())?;
    let identity =
        parse_identity(&user).ok_or(CredentialRefusal::Malformed("user is not index:handle"))?;
    guesses(state).admit(peer.ip(), &identity, now)?;
    let checked = within_budget(state, peer, state.handler.verify_secret(&identity, &secret));
    match checked.await? {
        Ok(identity) => Ok(Credentials::plain(Caller::Administrator { identity })),
        Err(error) => {
            let exhausted = guesses(state).failed(peer.ip(), &identity, now);
            if exhausted != Exhausted::Neither {
                warn!(%peer, ?identity, ?exhausted, "failed Basic credentials: budget used up");
            }
            Err(CredentialRefusal::Refused {
                message: error.to_string(),
                session: None,
            })
        }
    }
}

/// A request in `session`: its identity, or anonymous while nobody has answered.
fn in_session(
    state: &HttpState,
    session: SessionId,
    peer: SocketAddr,
    now: Instant,
) -> Result<Credentials, CredentialRefusal> {
    let view = sessions(state).view(&session, now)?;
    let caller = match view.identity {
        Some(identity) => Caller::Administrator { identity },
        None => Caller::anonymous(peer.ip()),
    };
    Ok(Credentials {
        caller,
        session: Some(session),
        answered: None,
    })
}

/// Checks `answer` against the session's nonce (used up whatever the outcome) off
/// the async workers, then authenticates the session.
async fn answered(
    state: &HttpState,
    session: SessionId,
    answer: RestAnswer,
    peer: SocketAddr,
    now: Instant,
) -> Result<Credentials, CredentialRefusal> {
    let nonce = sessions(state).take_nonce(&session, now)?;
    let challenge = answer.challenge(&nonce, now);
    let claimed = answer.challenge_answer();
    if claimed.auth_type == AuthType::SecretKey
        && let Err(weak) = state.secret_forms.admit(&claimed.answer, challenge.version)
    {
        return Err(CredentialRefusal::Refused {
            message: weak.to_string(),
            session: Some(session.clone()),
        });
    }
    let checked = within_budget(
        state,
        peer,
        state.handler.verify_answer(&challenge, &claimed),
    );
    let identity = match checked.await? {
        Ok(identity) => identity,
        Err(ServiceError::Busy) => return Err(CredentialRefusal::Busy),
        Err(error) => {
            return Err(CredentialRefusal::Refused {
                message: error.to_string(),
                session: Some(session.clone()),
            });
        }
    };
    let view = sessions(state).authenticate(&session, identity.clone(), now)?;
    Ok(Credentials {
        caller: Caller::Administrator { identity },
        session: Some(session),
        answered: Some(view),
    })
}

/// The percent-decoded user and the password of Basic credentials.
fn basic(encoded: &str) -> Result<(String, Vec<u8>), CredentialRefusal> {
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|_| CredentialRefusal::Malformed("not base64"))?;
    let colon = decoded
        .iter()
        .position(|&b| b == b':')
        .ok_or(CredentialRefusal::Malformed(
            "no ':' between user and password",
        ))?;
    let user = percent_encoding::percent_decode(&decoded[..colon])
        .decode_utf8()
        .map_err(|_| CredentialRefusal::Malformed("user is not UTF-8"))?
        .into_owned();
    Ok((user, decoded[colon + 1..].to_vec()))
}

/// Credentials over plain HTTP where they are not honoured: a redirect to the same
/// request over HTTPS, as the reference server does (pyhandle follows it), or 401
/// where there is no HTTPS listener or no `Host` to name. 307 for every method, so a
/// client keeps the method and body (302 would turn a PUT into a GET).
fn insecure<B>(state: &HttpState, request: &Request<B>) -> Response {
    match https_location(state, request) {
        Some(location) => {
            let mut response = refused(&CredentialRefusal::Insecure);
            *response.status_mut() = StatusCode::TEMPORARY_REDIRECT;
            response.headers_mut().insert(header::LOCATION, location);
            response
        }
        None => unauthorised(state, &CredentialRefusal::Insecure, None),
    }
}

/// `https://HOST:PORT/path?query` of `request`: the host it named, this node's
/// HTTPS port.
fn https_location<B>(state: &HttpState, request: &Request<B>) -> Option<HeaderValue> {
    let port = state.node.https?.port();
    let host = request.headers().get(header::HOST)?.to_str().ok()?;
    let authority = host.parse::<Authority>().ok()?;
    let target = request
        .uri()
        .path_and_query()
        .map_or("/", |path| path.as_str());
    HeaderValue::from_str(&format!("https://{}:{port}{target}", authority.host())).ok()
}

/// The answer refusing credentials: 503 when they could not be checked now (the
/// client should try again), else 401.
fn refused(refusal: &CredentialRefusal) -> Response {
    Refusal::from(refusal).answer(RequestKind::Other, None, &Format::default())
}

/// 401, with the challenges; `honoured_from` is the caller's address where its
/// credentials are honoured.
fn unauthorised(
    state: &HttpState,
    refusal: &CredentialRefusal,
    honoured_from: Option<IpAddr>,
) -> Response {
    let mut response = refused(refusal);
    challenge(
        state,
        response.headers_mut(),
        refusal.session(),
        honoured_from,
    );
    response
}

/// Adds the challenges to a 401: where credentials are honoured (`honoured_from`,
/// the caller's address), `Handle` with the nonce of `session` (or of a session
/// opened now for that address, when it is unknown and the table has room), then
/// `Basic`.
fn challenge(
    state: &HttpState,
    headers: &mut HeaderMap,
    session: Option<&SessionId>,
    honoured_from: Option<IpAddr>,
) {
    if let Some(source) = honoured_from {
        let now = Instant::now();
        let mut table = sessions(state);
        let view = session
            .and_then(|id| table.view(id, now).ok())
            .or_else(|| table.open(source, now).ok());
        drop(table);
        let handle = view.map(|view| format!("Handle {}", challenge_params(&view)));
        if let Some(value) = handle.and_then(|text| HeaderValue::from_str(&text).ok()) {
            headers.append(header::WWW_AUTHENTICATE, value);
        }
    }
    headers.append(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"hdl\""),
    );
}

/// `sessionId="…", nonce="…"` of a session.
pub fn challenge_params(view: &SessionView) -> String {
    let nonce = base64::engine::general_purpose::STANDARD.encode(&view.nonce);
    format!("sessionId=\"{}\", nonce=\"{nonce}\"", view.id.0)
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
        assert!(matches!(basic("!!"), Err(CredentialRefusal::Malformed(_))));
        let no_colon = base64::engine::general_purpose::STANDARD.encode("user");
        assert!(matches!(
            basic(&no_colon),
            Err(CredentialRefusal::Malformed(_))
        ));
    }
}
