//! Handle protocol sessions on the server edge (digest §3.8, §8.6): setting one up,
//! admitting the messages sent in it, ending it.
//!
//! Owns the glue between the [`Responder`], the [`super::sessions::SessionTable`]
//! and the pure key exchange and MACs of [`crate::auth::session`]. A setup naming an
//! identity is challenged like an administrative request (the challenge id becomes
//! the session id); a message with a non-zero envelope SessionId (but an answer to a
//! challenge or a setup) must name a live session and carry a valid `HS_MAC` with a
//! new counter, and is then carried out as the session's identity — permissions are
//! still checked per request by the service. An anonymous session grants nothing: its
//! administrative requests are challenged as outside a session.
//!
//! Encrypted messages (EC) are opened and sealed around all this, by
//! [`super::encryption`]. Not done: key exchange modes 2 and 3 (answered 504), and MACs
//! on the pages of a list answer.

use std::net::IpAddr;
use std::sync::PoisonError;
use std::time::Instant;

use crate::auth::{SessionKey, session_credential};
use crate::codec::{
    Body, ENVELOPE_LEN, Message, OpFlags, Request, Response, SessionSetup, SessionSetupAnswer,
};
use crate::service::Caller;

use super::codes::Refusal;
use super::exchange::Exchange;
use super::responder::{Reply, Responder};
use super::sessions::Admitted;

/// Whether `request`, sent with a non-zero SessionId, belongs to that session (the
/// SessionId of an answer to a challenge is the challenge id; a setup starts afresh).
pub(super) fn in_session(request: &Request) -> bool {
    !matches!(
        request,
        Request::ChallengeResponse(_) | Request::SessionSetup(_)
    )
}

impl Responder {
    /// Answers a session setup from `source`: agrees the key and opens the session,
    /// anonymous until an identity answers a challenge sent in it (an identity the
    /// setup names is not trusted; the reference server never challenges a setup).
    pub(super) async fn set_up_session(
        &self,
        exchange: Exchange,
        setup: &SessionSetup,
        source: IpAddr,
    ) -> Message {
        let agreed = self.handler.key_exchange(setup.exchange.clone()).await;
        let (key, data) = match agreed {
            Ok(Ok(agreed)) => agreed,
            Ok(Err(error)) => return Refusal::from(error).into_message(&exchange),
            Err(busy) => return Refusal::from(busy).into_message(&exchange),
        };
        let opened = self
            .sessions()
            .open(key, source, setup.timeout, Instant::now());
        match opened {
            Ok(id) => exchange
                .in_session(id)
                .success(Response::SessionSetup(SessionSetupAnswer {
                    mode: setup.exchange.mode(),
                    data,
                })),
            Err(refusal) => Refusal::from(refusal).into_message(&exchange),
        }
    }

    /// Admits a message sent in a session and answers it; a refused message is
    /// answered with the session error and changes nothing.
    pub(super) async fn in_session(
        &self,
        caller: Caller,
        exchange: Exchange,
        message: Message,
    ) -> Reply {
        let raw = message.raw_header_and_body().unwrap_or_default();
        let admitted = self.sessions().admit(
            &message.envelope,
            message.credential.as_ref(),
            raw,
            Instant::now(),
        );
        let admitted = match admitted {
            Ok(admitted) => admitted,
            Err(refusal) => return Reply::One(Refusal::from(refusal).into_message(&exchange)),
        };
        let raw = raw.to_vec();
        let Body::Request(request) = message.body else {
            return Reply::Nothing;
        };
        let certify = exchange.flags().contains(OpFlags::CT);
        let reply = match request {
            Request::SessionTerminate { .. } => {
                self.sessions()
                    .terminate(exchange.session_id(), Instant::now());
                Reply::One(exchange.success(Response::Done))
            }
            request => {
                let caller = match &admitted.identity {
                    Some(identity) => Caller::Administrator {
                        identity: identity.clone(),
                    },
                    None => caller,
                };
                let session = Some(exchange.session_id());
                self.answer_request(caller, exchange, Some(raw), session, request)
                    .await
            }
        };
        match reply {
            Reply::One(response) if certify => Reply::One(with_mac(response, &admitted)),
            other => other,
        }
    }

    pub(super) fn sessions(&self) -> std::sync::MutexGuard<'_, super::sessions::SessionTable> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// `response` with an `HS_MAC` credential made with the session's key and the
/// request's counter (digest §8.6). A response in a version without session MACs
/// goes unsigned.
fn with_mac(mut response: Message, admitted: &Admitted) -> Message {
    let bytes = response.encode();
    let header_and_body = bytes
        .get(ENVELOPE_LEN..bytes.len().saturating_sub(4))
        .unwrap_or_default();
    let key: &SessionKey = &admitted.key;
    response.credential =
        session_credential(key, &response.envelope, admitted.counter, header_and_body).ok();
    response
}
