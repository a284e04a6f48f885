//! Turns one request's bytes into its response messages.
//!
//! Owns the mapping from Handle protocol requests to [`Handler`] calls and back. Every
//! request gets an answer with the right response code, except bytes too short to
//! hold an envelope (nobody to answer). Nothing here panics on network input.
//!
//! A resolution of a handle not held here is answered with the referral the service
//! gives (RC 302 or 303), or 301 for a prefix not served here (digest §3.9, §9).
//! Administrative requests (100–105, and homing 300–302) from a caller who has not authenticated are
//! challenged ([`Challenges`]), and so are resolutions with PO clear that pick values
//! that are not public (digest §3.2); the answer (200) is verified by the service and
//! the original request carried out as the identity that answered (digest §8.1).
//! Requests inside a session (digest §3.8) are admitted and set up in
//! [`super::session_requests`]; what requests mean for the store is in
//! [`super::requests`]. Every reply leaves through [`Responder::respond`] (pages of a
//! listing through [`ListReply::next_page`]), where certified answers are signed with
//! the server key ([`super::certify`]).

use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use crate::auth::guesses::{Exhausted, Guesses};
use crate::auth::work_budget::WorkBudget;
use crate::auth::{AuthError, AuthType, Challenge, ChallengeAnswer, Identity, SigningKey};
use crate::codec::{
    self, AuthAnswer, Body, CodecError, HandleValues, Message, OpFlags, Request, ResolutionRequest,
    Response, ResponseCode, Sealed, VerifyRequest,
};
use crate::metrics::{Metrics, Protocol};
use crate::names::{Handle, PREFIX_AUTHORITY};
use crate::service::{
    Answered, Applied, Caller, ClientRequest, Error, Freshness, Handler, Operation, PrivateRead,
    Referral, Resolution, forgive_key_checks, measure_key_checks, resolve_or_refer_noting,
};
use crate::values::HandleValue;

use super::certify::{certify, must_sign};
use super::challenges::{self, Challenges};
use super::codes::Refusal;
use super::exchange::{Exchange, ResponseSettings};
use super::requests::{
    Done, admin_operation, is_administrative, list_prefix, may_check_keys, parse_resolution,
};
use super::session_requests::in_session;
use super::sessions::SessionTable;

/// How many handles one message of a list answer carries, as the reference server.
pub const LIST_PAGE_LEN: usize = 50;

/// What to send back for one request.
#[derive(Debug)]
pub enum Reply {
    /// One response message.
    One(Message),
    /// One response message, encrypted with its session's key.
    Sealed(Sealed),
    /// A list-handles answer, sent page by page (continuous responses, digest §2.3).
    List(ListReply),
    /// Nothing can be answered (no readable envelope).
    Nothing,
}

/// A secret key a verify request names: its handle (upper-cased) and index.
type KeyOfAnswer = (Vec<u8>, u32);

/// Answers requests for one node.
#[derive(Debug, Clone)]
pub struct Responder {
    pub(super) handler: Arc<dyn Handler>,
    pub(super) settings: ResponseSettings,
    challenges: Arc<Challenges>,
    pub(super) sessions: Arc<Mutex<SessionTable>>,
    /// Failed secret-key checks for other servers (OC 201), per source and key.
    guesses: Arc<Mutex<Guesses<KeyOfAnswer>>>,
    /// Key-check time each anonymous source may still make this node spend.
    work: Arc<Mutex<WorkBudget>>,
    metrics: Arc<Metrics>,
    /// Signs certified answers; `None` signs nothing (tests of other things).
    server_key: Option<Arc<SigningKey>>,
}

impl Responder {
    /// A responder answering from `handler`, recording every answer in `metrics`.
    pub fn new(
        handler: Arc<dyn Handler>,
        settings: ResponseSettings,
        metrics: Arc<Metrics>,
    ) -> Self {
        Responder {
            handler,
            challenges: Arc::new(Challenges::new(
                challenges::STREAM_LIMITS,
                settings.challenge_lifetime,
            )),
            sessions: Arc::new(Mutex::new(SessionTable::new(
                settings.max_sessions,
                settings.session_lifetime,
            ))),
            guesses: Arc::default(),
            work: Arc::default(),
            settings,
            metrics,
            server_key: None,
        }
    }

    /// The metrics every answer is recorded in.
    pub(super) fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// This responder for datagrams: the same in all but its challenges, which go in
    /// a book of their own (a flood of forged datagrams cannot fill the one TCP
    /// callers are challenged from).
    pub fn for_datagrams(&self) -> Self {
        Responder {
            challenges: Arc::new(Challenges::new(
                challenges::DATAGRAM_LIMITS,
                self.settings.challenge_lifetime,
            )),
            ..self.clone()
        }
    }

    /// This responder, signing certified answers with `key`.
    pub fn with_server_key(self, key: Arc<SigningKey>) -> Self {
        Responder {
            server_key: Some(key),
            ..self
        }
    }

    /// The reply to one complete message (envelope included) from `caller`, counted
    /// in the metrics by operation and response code (a list answer as its first
    /// page's code: success unless the listing was refused).
    pub async fn respond(&self, caller: Caller, bytes: &[u8]) -> Reply {
        self.respond_noting(caller, bytes).await.0
    }

    /// [`Responder::respond`], and how the reply was answered: [`Answered::FromStore`]
    /// only for a resolution in the clear, outside a session, with PO set, answered
    /// from this node's own store at once (what the UDP edge's answer cache keeps).
    pub async fn respond_noting(&self, caller: Caller, bytes: &[u8]) -> (Reply, Answered) {
        let started = Instant::now();
        let (reply, answered) = match self.opened(bytes) {
            Ok(bytes) => {
                let (reply, answered) = self.answer_message(caller, &bytes).await;
                if self.must_certify(&reply) {
                    (self.certified(reply).await, Answered::Otherwise)
                } else {
                    (reply, answered)
                }
            }
            Err(refused) => (*refused, Answered::Otherwise),
        };
        let answered_as = match &reply {
            Reply::One(message) => Some((message.header.opcode, message.header.response_code)),
            Reply::Sealed(_) => None,
            Reply::List(_) => Some((codec::OpCode::ListHandles, ResponseCode::Success)),
            Reply::Nothing => None,
        };
        if let Some((opcode, code)) = answered_as {
            self.metrics.record(
                Protocol::Handle,
                opcode.label(),
                code.to_u32(),
                started.elapsed(),
            );
        }
        (self.sealed(reply), answered)
    }

    /// Whether [`Responder::certified`] signs `reply` (most it does not: the test saves
    /// moving them through it): an answer that must be signed, a listing asked with CT,
    /// when this server has a key.
    fn must_certify(&self, reply: &Reply) -> bool {
        self.server_key.is_some()
            && match reply {
                Reply::One(answer) => must_sign(answer),
                Reply::List(list) => list.exchange.flags().contains(OpFlags::CT),
                Reply::Sealed(_) | Reply::Nothing => false,
            }
    }

    /// `reply` with its answer signed when it must be; a listing, told to sign its
    /// pages when it was asked with CT.
    async fn certified(&self, reply: Reply) -> Reply {
        let key = self.server_key.as_ref();
        let Some(key) = key.filter(|_| self.must_certify(&reply)) else {
            return reply;
        };
        match reply {
            Reply::One(answer) => Reply::One(certify(key, answer).await),
            Reply::List(mut list) => {
                list.server_key = Some(Arc::clone(key));
                Reply::List(list)
            }
            other => other,
        }
    }

    async fn answer_message(&self, caller: Caller, bytes: &[u8]) -> (Reply, Answered) {
        let message = match Message::decode(bytes) {
            Ok(message) => message,
            Err(error) => return (self.undecodable(&error), Answered::Otherwise),
        };
        let exchange = Exchange::of_request(&message, self.settings);
        let Body::Request(request) = &message.body else {
            let text = "a server takes requests, not responses";
            let refusal = exchange.error(ResponseCode::ProtocolError, text);
            return (Reply::One(refusal), Answered::Otherwise);
        };
        if message.envelope.session_id != 0 && in_session(request) {
            let reply = Box::pin(self.in_session(caller, exchange, message)).await;
            return (reply, Answered::Otherwise);
        }
        // Kept only for a request that may be challenged: a resolution with PO set
        // (nearly all) needs no copy of itself.
        let raw = may_be_challenged(&exchange, request)
            .then(|| message.raw_header_and_body().map(<[u8]>::to_vec))
            .flatten();
        let Body::Request(request) = message.body else {
            return (Reply::Nothing, Answered::Otherwise);
        };
        match request {
            // A resolution no challenge can stop (one with PO set: nearly all) is
            // answered at once; the steps between are for the other requests, and
            // each moved the request and its exchange along.
            Request::Resolution(resolution) if raw.is_none() => {
                let (answer, answered) = self.resolve(&caller, &exchange, resolution).await;
                (Reply::One(answer), answered)
            }
            request => {
                let reply = self
                    .answer_request(caller, exchange, raw, None, request)
                    .await;
                (reply, Answered::Otherwise)
            }
        }
    }

    /// Answers a request outside a session, or inside `session` once it is admitted:
    /// an administrative request from an anonymous caller whose header and body were
    /// `raw` is challenged (inside a session, with the session's id: the session
    /// belongs to whoever answers), an answer to a challenge verified, anything else
    /// carried out for `caller`.
    pub(super) async fn answer_request(
        &self,
        caller: Caller,
        exchange: Exchange,
        raw: Option<Vec<u8>>,
        session: Option<u32>,
        request: Request,
    ) -> Reply {
        if let (Caller::Anonymous { address }, Some(raw)) = (&caller, &raw) {
            match self.needs_administrator(&exchange, &request).await {
                Ok(true) => {
                    let challenge = self
                        .challenges
                        .challenge(*address, &exchange, raw, session, request);
                    return Reply::One(challenge);
                }
                Ok(false) => {}
                Err(rejection) => return Reply::One(rejection.into_message(&exchange)),
            }
        }
        // Only what may check a key is budgeted: a resolution takes no lock here.
        let Some(source) = address(&caller).filter(|_| may_check_keys(&request)) else {
            return self.dispatch(caller, exchange, request).await;
        };
        if !self.work().admits(source, Instant::now()) {
            let text = "this address has used its share of key checks; try again in a few seconds";
            return Reply::One(exchange.error(ResponseCode::ServerTooBusy, text));
        }
        let (reply, spent) =
            measure_key_checks(source, self.dispatch(caller, exchange, request)).await;
        if self.work().charge(source, spent, Instant::now()) {
            tracing::info!(%source, "an address used its share of key checks: its next are refused until it refills");
        }
        reply
    }

    /// Answers a request that needs no challenge: a challenge's answer is verified,
    /// anything else carried out for `caller`.
    async fn dispatch(&self, caller: Caller, exchange: Exchange, request: Request) -> Reply {
        match request {
            Request::ChallengeResponse(answer) => {
                let challenge_id = exchange.session_id();
                Box::pin(self.answered(&caller, exchange, challenge_id, answer)).await
            }
            other => self.perform(caller, exchange, other).await,
        }
    }

    fn work(&self) -> std::sync::MutexGuard<'_, WorkBudget> {
        self.work.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `request` from an anonymous caller must be challenged: administration
    /// always, a resolution with PO clear when it selects values that are not public
    /// (digest §3.2); or why it is refused outright.
    async fn needs_administrator(
        &self,
        exchange: &Exchange,
        request: &Request,
    ) -> Result<bool, Refusal> {
        match request {
            request if is_administrative(request) => Ok(true),
            Request::Resolution(resolution) if !exchange.flags().contains(OpFlags::PO) => {
                // A malformed request is refused by the resolution itself.
                let Ok((handle, selection)) = parse_resolution(resolution) else {
                    return Ok(false);
                };
                let needed = self.handler.private_read(&handle, &selection).await?;
                Ok(needed == PrivateRead::Administrator)
            }
            _ => Ok(false),
        }
    }

    /// Carries out `request` for `caller`.
    async fn perform(&self, caller: Caller, exchange: Exchange, request: Request) -> Reply {
        match request {
            Request::ListHandles { prefix } => self.list(caller, exchange, &prefix),
            Request::ListHomedNas { .. } => {
                Reply::One(Box::pin(self.list_homed(&caller, &exchange)).await)
            }
            other => Reply::One(self.answer(caller, &exchange, other).await),
        }
    }

    /// The answer to a challenge (OC 200, digest §8.1 steps 4–5): the pending request
    /// carried out as the identity that answered, or why not. A challenge sent in a
    /// session makes the session the identity's, unless it is somebody's already.
    async fn answered(
        &self,
        caller: &Caller,
        exchange: Exchange,
        challenge_id: u32,
        answer: AuthAnswer,
    ) -> Reply {
        let Some(address) = address(caller) else {
            let text = "an authenticated caller has no challenge to answer";
            return Reply::One(exchange.error(ResponseCode::AuthenticationTimeout, text));
        };
        let (challenge, pending) = match self.challenges.take(challenge_id, address) {
            Ok(taken) => taken,
            Err(error) => return Reply::One(Refusal::from(error).into_message(&exchange)),
        };
        let exchange = exchange.resuming(pending.opcode, pending.flags, pending.request_name);
        match self.identity_of(&challenge, answer).await {
            Ok(identity) => {
                // A proven administrator's checks are not its address's to pay for.
                forgive_key_checks();
                if let Some(session) = pending.session {
                    let now = Instant::now();
                    if !self.sessions().authenticate(session, identity.clone(), now) {
                        tracing::info!(
                            session,
                            ?identity,
                            "a session stays with its first administrator"
                        );
                    }
                }
                let administrator = Caller::Administrator { identity };
                self.perform(administrator, exchange, pending.request).await
            }
            Err(error) => Reply::One(Refusal::from(error).into_message(&exchange)),
        }
    }

    /// Who answered `challenge` with `answer`: a secret-key answer must be of a form
    /// this node checks before any key is looked up.
    async fn identity_of(
        &self,
        challenge: &Challenge,
        answer: AuthAnswer,
    ) -> Result<Identity, Error> {
        let answer = ChallengeAnswer::from_wire(answer).map_err(Error::Authentication)?;
        if answer.auth_type == AuthType::SecretKey {
            self.settings
                .secret_forms
                .admit(&answer.answer, challenge.version)
                .map_err(Error::Authentication)?;
        }
        self.handler.verify_answer(challenge, &answer).await
    }

    /// Checks a secret-key answer for another server (OC 201): the caller picks the
    /// nonce, so each request tests one guess of the secret; failures are counted
    /// per source and per key, and past either budget the check is not made (RC 3,
    /// try later).
    async fn verify_for_other_server(
        &self,
        caller: &Caller,
        exchange: &Exchange,
        request: &VerifyRequest,
    ) -> Message {
        let source = address(caller).unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        let key = (request.key_handle.to_ascii_uppercase(), request.key_index);
        if let Err(refused) = self.guesses().admit(source, &key, Instant::now()) {
            return exchange.error(ResponseCode::ServerTooBusy, refused.to_string());
        }
        let version = exchange.version();
        // A malformed answer is not valid (below); one of a form not checked is refused.
        if let Err(weak @ AuthError::WeakAnswer { .. }) =
            self.settings.secret_forms.admit(&request.answer, version)
        {
            return Refusal::from(Error::Authentication(weak)).into_message(exchange);
        }
        match self.handler.verify_for_other_server(request, version).await {
            Ok(valid) => {
                if !valid {
                    let exhausted = self.guesses().failed(source, &key, Instant::now());
                    if exhausted != Exhausted::Neither {
                        tracing::warn!(%source, index = key.1, ?exhausted, "failed secret-key checks: budget used up");
                    }
                }
                exchange.success(Response::Verification { valid })
            }
            Err(error) => Refusal::from(error).into_message(exchange),
        }
    }

    /// The failed-checks book, even if a thread panicked while holding it.
    fn guesses(&self) -> std::sync::MutexGuard<'_, Guesses<KeyOfAnswer>> {
        self.guesses.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The reply to a request the node has no capacity to serve now: RC_SERVER_BUSY
    /// (3), so the client retries rather than waits for an answer that never comes.
    pub fn busy(&self, bytes: &[u8]) -> Reply {
        let Some(exchange) = self.exchange_of(bytes) else {
            return Reply::Nothing;
        };
        Reply::One(exchange.error(ResponseCode::ServerTooBusy, "server busy; try again"))
    }

    /// The reply to request `bytes` whose answer is larger than the `limit` octets an
    /// edge sends (over UDP): RC_ERROR (2) saying to ask over TCP, on which J9 and hdl
    /// clients turn to TCP at once. Built from the request alone (it was carried out
    /// already), then signed and sealed as its answer would be; a session MAC is
    /// not made again, so an answer asked for with CT in a session is signed with the
    /// server key, which J9 checks as well.
    pub async fn too_large(&self, bytes: &[u8], limit: usize) -> Reply {
        let opened = match self.opened(bytes) {
            Ok(opened) => opened,
            Err(refused) => return *refused,
        };
        let Some(exchange) = self.exchange_of(&opened) else {
            return Reply::Nothing;
        };
        let text = format!(
            "the answer is larger than the {limit} octets this server sends over UDP; \
             ask over TCP"
        );
        let refusal = Reply::One(exchange.error(ResponseCode::Error, text));
        self.sealed(self.certified(refusal).await)
    }

    /// The exchange of request `bytes` (decodable or not), when there is an envelope to
    /// answer.
    fn exchange_of(&self, bytes: &[u8]) -> Option<Exchange> {
        match Message::decode(bytes) {
            Ok(message) => Some(Exchange::of_request(&message, self.settings)),
            Err(error) => Exchange::of_undecodable(&error, self.settings),
        }
    }

    fn undecodable(&self, error: &CodecError) -> Reply {
        let Some(exchange) = Exchange::of_undecodable(error, self.settings) else {
            return Reply::Nothing;
        };
        let code = match error {
            CodecError::UnsupportedOperation { .. } => ResponseCode::OperationNotSupported,
            _ => ResponseCode::ProtocolError,
        };
        Reply::One(exchange.error(code, error.to_string()))
    }

    /// The answer to `request` for `caller`. The rarer requests' futures are boxed: a
    /// datagram's answer is moved into a task when it must wait, and copying the
    /// state of the largest request with every one made 13 % of a resolution's CPU.
    async fn answer(&self, caller: Caller, exchange: &Exchange, request: Request) -> Message {
        let result = match request {
            Request::Resolution(resolution) => {
                return self.resolve(&caller, exchange, resolution).await.0;
            }
            Request::GetSiteInfo { .. } => {
                let site = self.handler.site_info().await.encode();
                return exchange.success(Response::SiteInfo { site });
            }
            Request::VerifyResponse(request) => {
                return Box::pin(self.verify_for_other_server(&caller, exchange, &request)).await;
            }
            Request::ChallengeResponse(_) => {
                let text = "a challenge answer names no pending challenge";
                return exchange.error(ResponseCode::AuthenticationTimeout, text);
            }
            Request::SessionSetup(setup) => {
                let source = address(&caller).unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
                return Box::pin(self.set_up_session(exchange.clone(), &setup, source)).await;
            }
            Request::SessionTerminate { .. } | Request::SessionExchangeKey { .. } => {
                let text = "no session: the envelope SessionId names none";
                return exchange.error(ResponseCode::SessionFailed, text);
            }
            Request::CreateHandle(body) if exchange.flags().contains(OpFlags::MINT) => {
                Box::pin(self.mint(&caller, &body.handle, body.values)).await
            }
            admin => match admin_operation(exchange.flags(), admin) {
                Ok(operation) => {
                    let request = ClientRequest(exchange.request_name());
                    Box::pin(self.administer(caller, operation, request)).await
                }
                Err(rejection) => Err(rejection),
            },
        };
        match result {
            Ok(response) => response.into_message(exchange),
            Err(rejection) => rejection.into_message(exchange),
        }
    }

    /// Resolution from this member's applied state; with the AT flag, only after it
    /// has applied every write acknowledged before the request. With PO clear an
    /// administrator allowed READ_VALUE gets every selected value; anyone else (or PO
    /// set) the public ones. A handle that does not exist may be derived by its
    /// prefix's template; the protocol has no mark for such an answer. Says how it
    /// was answered.
    async fn resolve(
        &self,
        caller: &Caller,
        exchange: &Exchange,
        request: ResolutionRequest,
    ) -> (Message, Answered) {
        let flags = exchange.flags();
        let freshness = if flags.contains(OpFlags::AT) {
            Freshness::Authoritative
        } else {
            Freshness::Local
        };
        let every_value = !flags.contains(OpFlags::PO) && address(caller).is_none();
        let (handle, selection) = match parse_resolution(&request) {
            Ok(parsed) => parsed,
            Err(rejection) => return (rejection.into_message(exchange), Answered::Otherwise),
        };
        let reader = every_value.then_some(caller);
        let (outcome, answered) =
            resolve_or_refer_noting(&*self.handler, reader, &handle, &selection, freshness).await;
        let answer = match outcome {
            Ok(Resolution::Values(resolved)) => {
                exchange.success(Response::Resolution(HandleValues {
                    handle: request.handle,
                    values: resolved.record.values,
                }))
            }
            Ok(Resolution::Referred(referral)) => referred(exchange, referral),
            Err(error) => Refusal::from(error).into_message(exchange),
        };
        (answer, answered)
    }

    /// The prefix handles of the prefixes homed here (OC 302), for a server
    /// administrator, in one message.
    async fn list_homed(&self, caller: &Caller, exchange: &Exchange) -> Message {
        match self.handler.list_prefixes(caller).await {
            Ok(prefixes) => {
                let handles = prefixes
                    .into_iter()
                    .filter(|record| record.homed)
                    .map(|record| format!("{PREFIX_AUTHORITY}/{}", record.display).into_bytes())
                    .collect();
                exchange.success(Response::ListHandles { handles })
            }
            Err(error) => Refusal::from(error).into_message(exchange),
        }
    }

    /// Carries out `operation` as the write the client named `request`: sent again
    /// under that name, it is answered as the first time ([`Handler::administer_request`]).
    async fn administer(
        &self,
        caller: Caller,
        operation: Operation,
        request: ClientRequest,
    ) -> Result<Done, Refusal> {
        let created = match &operation {
            Operation::Create { handle, .. } => Some(handle.as_str().as_bytes().to_vec()),
            _ => None,
        };
        let applied = self
            .handler
            .administer_request(&caller, operation, request)
            .await?;
        Ok(match (applied, created) {
            (Applied::Done | Applied::Imported(_), _) | (_, None) => Done::Plain,
            (Applied::Created, Some(handle)) => Done::Created(handle, OpFlags::NONE),
            (Applied::Replaced, Some(handle)) => Done::Created(handle, OpFlags::OW),
        })
    }

    /// A create with MINT: the handle `base` names followed by a random UUID.
    async fn mint(
        &self,
        caller: &Caller,
        base: &[u8],
        values: Vec<HandleValue>,
    ) -> Result<Done, Refusal> {
        let base = std::str::from_utf8(base)
            .map_err(|_| Refusal::new(ResponseCode::InvalidHandle, "handle is not UTF-8"))?;
        let (handle, _created) = self.handler.mint(caller, base, values).await?;
        Ok(Done::Created(
            handle.as_str().as_bytes().to_vec(),
            OpFlags::NONE,
        ))
    }

    fn list(&self, caller: Caller, exchange: Exchange, prefix: &[u8]) -> Reply {
        match list_prefix(prefix) {
            Ok(prefix) => Reply::List(ListReply {
                handler: Arc::clone(&self.handler),
                caller,
                exchange,
                prefix,
                after: None,
                finished: false,
                server_key: None,
            }),
            Err(rejection) => Reply::One(rejection.into_message(&exchange)),
        }
    }
}

/// The pages of a list-handles answer; each page reads the store afresh after the
/// last handle sent, so a long listing holds no snapshot open.
#[derive(Debug)]
pub struct ListReply {
    handler: Arc<dyn Handler>,
    caller: Caller,
    exchange: Exchange,
    prefix: String,
    after: Option<Handle>,
    finished: bool,
    /// Signs each page, when the listing was asked with CT.
    server_key: Option<Arc<SigningKey>>,
}

impl ListReply {
    /// The next message, or `None` after the last one (the one without CN); signed
    /// when the listing was asked with CT.
    pub async fn next_page(&mut self) -> Option<Message> {
        let page = self.unsigned_page().await?;
        Some(match &self.server_key {
            Some(key) => certify(key, page).await,
            None => page,
        })
    }

    async fn unsigned_page(&mut self) -> Option<Message> {
        if self.finished {
            return None;
        }
        let page = self
            .handler
            .list_handles(
                &self.caller,
                &self.prefix,
                self.after.as_ref(),
                LIST_PAGE_LEN + 1,
            )
            .await;
        let mut handles = match page {
            Ok(handles) => handles,
            Err(error) => {
                self.finished = true;
                return Some(Refusal::from(error).into_message(&self.exchange));
            }
        };
        let more = handles.len() > LIST_PAGE_LEN;
        handles.truncate(LIST_PAGE_LEN);
        self.after = handles.last().and_then(|last| Handle::parse(last).ok());
        self.finished = !more || self.after.is_none();
        let flags = if self.finished {
            OpFlags::NONE
        } else {
            OpFlags::CN
        };
        let handles = handles.into_iter().map(String::into_bytes).collect();
        let response = Response::ListHandles { handles };
        Some(self.exchange.reply(ResponseCode::Success, response, flags))
    }
}

/// Whether `request` from an anonymous caller may be challenged
/// ([`Responder::needs_administrator`] says when it is): administration, and a
/// resolution with PO clear.
fn may_be_challenged(exchange: &Exchange, request: &Request) -> bool {
    is_administrative(request)
        || (matches!(request, Request::Resolution(_)) && !exchange.flags().contains(OpFlags::PO))
}

/// The network address of a caller who has not authenticated.
fn address(caller: &Caller) -> Option<IpAddr> {
    match caller {
        Caller::Anonymous { address } => Some(*address),
        Caller::Administrator { .. } => None,
    }
}

/// The answer for a handle that lives where `referral` says (digest §3.9, §9).
fn referred(exchange: &Exchange, referral: Referral) -> Message {
    let (code, referral) = match referral {
        Referral::Service { handle, values } => (
            ResponseCode::ServiceReferral,
            codec::Referral {
                handle: handle.as_str().as_bytes().to_vec(),
                values: Some(values),
            },
        ),
        Referral::Prefix { values } => (
            ResponseCode::PrefixReferral,
            codec::Referral {
                handle: Vec::new(),
                values: Some(values),
            },
        ),
    };
    exchange.reply(code, Response::Referral(referral), OpFlags::NONE)
}
