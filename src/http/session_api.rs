//! `/api/sessions` and `/api/sessions/this` (`HANDLE-NET-REFERENCE.md` §1.2): open a
//! session, show it, confirm it is authenticated, close it.
//!
//! Owns the four handlers and the session JSON `{"sessionId","nonce","authenticated"
//! [,"id"]}` (the nonce in base64). The answer itself is checked by the
//! edge ([`super::auth`]) before these run; they only read and change the table
//! through [`super::sessions::SessionTable`], and do nothing slow under its lock.

use std::net::SocketAddr;
use std::time::Instant;

use axum::Extension;
use axum::extract::{ConnectInfo, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{Value, json};

use super::HttpState;
use super::answer::{Format, Refusal};
use super::auth::{Channel, RequestSession, honoured, sessions};
use super::codes::RequestKind;
use super::sessions::{SessionId, SessionRefusal, SessionView};
use crate::codec::ResponseCode;
use crate::service::Caller;

/// `POST /api/sessions`: a new session (201), already authenticated when the request
/// carried Basic credentials.
pub async fn open(
    State(state): State<HttpState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Extension(channel): Extension<Channel>,
    Extension(caller): Extension<Caller>,
) -> Response {
    if !honoured(&state, peer, channel) {
        let refusal = Refusal::new(
            ResponseCode::AuthenticationNeeded,
            "sessions are honoured only over HTTPS",
        );
        return refusal.answer(RequestKind::Other, None, &Format::default());
    }
    let now = Instant::now();
    let mut table = sessions(&state);
    let opened = table.open(peer.ip(), now).and_then(|view| match caller {
        Caller::Administrator { identity } => table.authenticate(&view.id, identity, now),
        Caller::Anonymous { .. } => Ok(view),
    });
    drop(table);
    match opened {
        Ok(view) => Format::default().answer(StatusCode::CREATED, &session_json(&view)),
        Err(error) => failed(error),
    }
}

/// `GET /api/sessions/this`: the request's session.
pub async fn show(
    State(state): State<HttpState>,
    Extension(session): Extension<RequestSession>,
) -> Response {
    match this(&state, &session) {
        Ok(view) => Format::default().answer(StatusCode::OK, &session_json(&view)),
        Err(error) => failed(error),
    }
}

/// `PUT` or `POST /api/sessions/this`: the session once the request's `Authorization:
/// Handle` answer authenticated it (the edge checked it); 401 while nobody has.
pub async fn confirm(
    State(state): State<HttpState>,
    Extension(session): Extension<RequestSession>,
) -> Response {
    match this(&state, &session) {
        Ok(view) if view.identity.is_some() => {
            Format::default().answer(StatusCode::OK, &session_json(&view))
        }
        Ok(_) => Refusal::new(
            ResponseCode::AuthenticationNeeded,
            "the session is not authenticated: answer its nonce",
        )
        .answer(RequestKind::Other, None, &Format::default()),
        Err(error) => failed(error),
    }
}

/// `DELETE /api/sessions/this`: 204, and the session is gone.
pub async fn close(
    State(state): State<HttpState>,
    Extension(session): Extension<RequestSession>,
) -> Response {
    let closed = match &session.0 {
        Some(id) => sessions(&state).close(id, Instant::now()),
        None => false,
    };
    if closed {
        StatusCode::NO_CONTENT.into_response()
    } else {
        failed(SessionRefusal::Unknown)
    }
}

fn this(state: &HttpState, session: &RequestSession) -> Result<SessionView, SessionRefusal> {
    let id: &SessionId = session.0.as_ref().ok_or(SessionRefusal::Unknown)?;
    sessions(state).view(id, Instant::now())
}

fn failed(error: SessionRefusal) -> Response {
    Refusal::from(error).answer(RequestKind::Other, None, &Format::default())
}

/// The session as the reference server shows it.
fn session_json(view: &SessionView) -> Value {
    let nonce = base64::engine::general_purpose::STANDARD.encode(&view.nonce);
    let mut body = json!({
        "sessionId": view.id.0,
        "nonce": nonce,
        "authenticated": view.identity.is_some(),
    });
    if let Some(identity) = &view.identity {
        body["id"] = json!(format!("{}:{}", identity.index, identity.handle));
    }
    body
}
