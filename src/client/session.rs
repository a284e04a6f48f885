//! Handle protocol sessions on the client (digest §3.8, §8.6): authenticate once,
//! then send administrative requests signed with the session key and never
//! challenged.
//!
//! Owns [`SessionSlot`], the session a [`Client`] holds. A session is opened with a
//! Diffie-Hellman key exchange (J9's default) naming the client's [`Credentials`]; the
//! server does not trust that name: it challenges the first administrative request
//! sent in the session, the client answers on the same connection, and the session
//! is the answerer's from then on. A request the server refuses with a session error (500–505: lost, expired, or
//! refused MAC) makes the client open a new session and send it again, once.
//!
//! A session has one pending challenge at a time (its answer names the session), so
//! requests sent at once in a new session would each be challenged and all but the
//! last challenge forgotten: until the session is proven (a request in it was
//! carried out or refused for what it asked, not for who asked), its requests go one
//! at a time; after that, any number at once.

use std::net::SocketAddr;
use std::sync::{Mutex, PoisonError};

use super::message::{Answer, Outgoing};
use super::{Client, ClientError, Credentials, Transport, new_request_id, no_answer};
use crate::auth::{ClientKeyExchange, SessionKey};
use crate::client::AttemptError;
use crate::clock::unix_now;
use crate::codec::{Message, OpFlags, Request, Response, ResponseCode, SessionSetup};

/// The session a client holds, if any.
#[derive(Debug, Default)]
pub struct SessionSlot {
    session: Mutex<Option<OpenSession>>,
    /// Held by the request that may be challenged, while the session is unproven.
    unproven: tokio::sync::Mutex<()>,
}

/// A session with one server.
#[derive(Debug)]
struct OpenSession {
    server: SocketAddr,
    id: u32,
    key: SessionKey,
    counter: u32,
    /// Whether the server has admitted a request in it as the administrator's.
    proven: bool,
}

impl SessionSlot {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<OpenSession>> {
        self.session.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next message of the session, signed, with the server and the session's
    /// id; `None` without a session.
    fn next_message(
        &self,
        request: &Request,
        flags: OpFlags,
        request_id: u32,
    ) -> Result<Option<(SocketAddr, u32, Outgoing)>, ClientError> {
        let mut slot = self.lock();
        let Some(session) = slot.as_mut() else {
            return Ok(None);
        };
        session.counter = session.counter.wrapping_add(1);
        let outgoing = Outgoing::signed(
            request.clone(),
            flags,
            (request_id, session.id),
            unix_now(),
            (&session.key, session.counter),
        )?;
        Ok(Some((session.server, session.id, outgoing)))
    }

    /// Whether a session is held and proven.
    fn is_proven(&self) -> bool {
        self.lock().as_ref().is_some_and(|session| session.proven)
    }

    /// Notes that session `id`, if still held, is proven.
    fn prove(&self, id: u32) {
        if let Some(session) = self.lock().as_mut().filter(|session| session.id == id) {
            session.proven = true;
        }
    }

    /// Waits until this request may be sent: at once in a proven session; otherwise
    /// when no other request of the session may be being challenged (the guard).
    async fn admit(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        if self.is_proven() {
            return None;
        }
        let guard = self.unproven.lock().await;
        (!self.is_proven()).then_some(guard)
    }
}

/// Whether `code` says the session is gone or refused the message.
fn is_session_error(code: ResponseCode) -> bool {
    code.to_u32() >= ResponseCode::SessionTimeout.to_u32()
}

/// Whether an administrative request answered `code` in a session was admitted as
/// the administrator's: carried out, or refused for what it asked (after the
/// challenge, which the server sends before looking at the request).
fn proves_session(code: ResponseCode) -> bool {
    matches!(code.to_u32(), 1 | 100..=303 | 400 | 401)
}

impl Client {
    /// Opens an authenticated session with the first server that grants one,
    /// replacing any session held; later [`Client::admin`] requests of a client made
    /// [`with_session`](Client::with_session) go through it.
    pub async fn open_session(&self) -> Result<(), ClientError> {
        let credentials = self
            .credentials
            .as_deref()
            .ok_or(ClientError::NoCredentials)?;
        let slot = self.session.as_deref().ok_or(ClientError::NoCredentials)?;
        let exchange = ClientKeyExchange::diffie_hellman()?;
        let request = Request::SessionSetup(SessionSetup {
            timeout: 0,
            identity_handle: credentials.identity.handle.as_bytes().to_vec(),
            identity_index: credentials.identity.index,
            exchange: exchange.offer(),
        });
        let mut last = None;
        for (attempts, &server) in (1..).zip(&self.servers) {
            let outgoing = Outgoing::new(
                request.clone(),
                self.flags_over(Transport::Tcp, OpFlags::J9_DEFAULT),
                new_request_id(),
                unix_now(),
            );
            match self.setup_with(server, outgoing, credentials).await {
                Ok(message) => {
                    let id = message.envelope.session_id;
                    let Response::SessionSetup(answer) = Answer::of(message)?.response else {
                        return Err(ClientError::UnexpectedResponse {
                            expected: "session setup",
                            found: "another response",
                        });
                    };
                    let key = exchange.finish(&answer)?;
                    *slot.lock() = Some(OpenSession {
                        server,
                        id,
                        key,
                        counter: 0,
                        proven: false,
                    });
                    return Ok(());
                }
                Err(error) => last = Some((attempts, error)),
            }
        }
        Err(no_answer(last))
    }

    async fn setup_with(
        &self,
        server: SocketAddr,
        outgoing: Outgoing,
        credentials: &Credentials,
    ) -> Result<Message, AttemptError> {
        self.tcp_exchange(server, outgoing, Some(credentials)).await
    }

    /// Sends `request` in the session, opening one first if none is held, and once
    /// more in a new session if the server refuses it with a session error.
    pub(super) async fn ask_in_session(
        &self,
        slot: &SessionSlot,
        request: &Request,
        flags: OpFlags,
        request_id: u32,
    ) -> Result<Response, ClientError> {
        let flags = self.flags_over(Transport::Tcp, flags);
        let mut refused = None;
        for _ in 0..2 {
            let _challengeable = slot.admit().await;
            let (server, id, outgoing) = match slot.next_message(request, flags, request_id)? {
                Some(next) => next,
                None => {
                    self.open_session().await?;
                    slot.next_message(request, flags, request_id)?
                        .ok_or(ClientError::NoCredentials)?
                }
            };
            let message = self
                .tcp_exchange(server, outgoing, self.credentials.as_deref())
                .await
                .map_err(|error| no_answer(Some((1, error))))?;
            let code = message.header.response_code;
            if proves_session(code) {
                slot.prove(id);
            }
            if !is_session_error(code) {
                return Answer::of(message).map(|answer| answer.response);
            }
            *slot.lock() = None;
            refused = Some(Answer::of(message));
        }
        match refused {
            Some(Err(error)) => Err(error),
            _ => Err(ClientError::NoServers),
        }
    }
}
