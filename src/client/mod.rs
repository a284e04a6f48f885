//! A Handle protocol client: resolution, site information, administration and
//! listing, over UDP and TCP (digest §1, §3).
//!
//! Owns [`Client`] and its settings, [`Transport`], [`Resolution`], [`AdminRequest`],
//! [`Credentials`], [`ClientError`], the [`ResolutionDatagram`] a load generator sends, and the `Authorization: Handle` headers an
//! HTTP client sends ([`authorization`]). Depends on [`crate::codec`], [`crate::names`],
//! [`crate::values`] and the pure [`crate::auth`] core, and on tokio for sockets and
//! timers: like the server, it is an edge.
//!
//! Behaviour, after J9's `HandleResolver`:
//! - Servers are asked in the order given; a server that gives no usable answer (a
//!   timeout, a socket error, an undecodable or foreign answer) is followed by the
//!   next. A response code, success or error, is an answer and ends the search.
//! - [`Transport::Auto`] asks each server over UDP first, resending on the schedule
//!   of [`ClientConfig::udp_waits`] (J9: 500, 1000, 1500 ms), then over TCP; an
//!   RC_ERROR (2) answer over UDP goes to TCP at once, as J9 does (an hdl server
//!   answers so when the answer is larger than it sends over UDP).
//!   Administration and listing always use TCP. A client with [`Credentials`]
//!   answers a challenge (RC_AUTHEN_NEEDED) on the same connection (digest §8.1);
//!   one made [`Client::with_session`] authenticates once and sends its
//!   administrative requests in a session, signed with the session key (§3.8).
//! - Every request gets a fresh RequestId drawn from `rand`'s thread-local CSPRNG: a
//!   positive 31-bit value, as J9 draws it, so that an off-path sender cannot guess
//!   it; answers with another RequestId are dropped.
//! - [`Client::resolve_certified`] asks with CT and refuses an answer whose server
//!   signature does not check out with that server's key.
//! - Responses are bounded by `codec::MAX_MESSAGE_LEN`, listings by the caller's
//!   count; every wait has a deadline.

mod admin;
pub mod authorization;
mod certified;
mod credentials;
mod error;
mod message;
mod pool;
mod session;
mod tcp;
mod udp;
mod verify;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::timeout;

pub use admin::{AdminRequest, Overwrite};
pub use certified::{ServerKeys, check_signature};
pub use credentials::{AnswerError, Credentials, Key};
pub use error::{AttemptError, ClientError, Mismatch, describe};
pub use message::ResolutionDatagram;

use message::{Answer, Outgoing, Problem};
use pool::Pool;
use session::SessionSlot;
use tcp::Connection;

use crate::clock::unix_now;
use crate::codec::{Message, OpFlags, Request, ResolutionRequest, Response, ResponseCode};
use crate::names::{self, Handle};
use crate::values::{HandleValue, SiteInfo, ValueSelection};

/// The Handle protocol's port for UDP and TCP (IANA `hdl-srv`).
pub const DEFAULT_PORT: u16 = 2641;

/// How many times [`Client::admin`] sends one write that got no answer or a busy one.
pub const ADMIN_ATTEMPTS: u32 = 3;

/// The pause before [`Client::admin`] sends a write again, times the attempt.
pub const ADMIN_PAUSE: Duration = Duration::from_millis(250);

/// How a request travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// UDP only.
    Udp,
    /// TCP only.
    Tcp,
    /// UDP, then TCP if UDP gave no usable answer (J9's order).
    Auto,
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Transport::Udp => "UDP",
            Transport::Tcp => "TCP",
            Transport::Auto => "UDP, then TCP",
        })
    }
}

impl Transport {
    /// The transports to try, in order.
    fn sequence(self) -> &'static [Transport] {
        match self {
            Transport::Udp => &[Transport::Udp],
            Transport::Tcp => &[Transport::Tcp],
            Transport::Auto => &[Transport::Udp, Transport::Tcp],
        }
    }
}

/// Timing of a [`Client`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientConfig {
    /// How long to wait after each UDP send; one send per entry. Default: J9's
    /// schedule, 500 ms, 1000 ms, 1500 ms.
    pub udp_waits: Vec<Duration>,
    /// How long one TCP exchange may take, connecting included; for a listing, how
    /// long each message may take. Default: 10 s.
    pub tcp_timeout: Duration,
    /// Whether a TCP connection is kept for the next request to its server
    /// ([`pool`]); false: one connection per request, as J9 clients open. Default: true.
    pub keep_connections: bool,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            udp_waits: [500, 1000, 1500].map(Duration::from_millis).to_vec(),
            tcp_timeout: Duration::from_secs(10),
            keep_connections: true,
        }
    }
}

/// The values a resolution returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolution {
    /// The handle, as the server echoed it.
    pub handle: Handle,
    /// The values, in the server's order.
    pub values: Vec<HandleValue>,
}

/// A client of one handle service, given as a list of server addresses.
#[derive(Debug, Clone)]
pub struct Client {
    servers: Vec<SocketAddr>,
    config: ClientConfig,
    credentials: Option<Arc<Credentials>>,
    session: Option<Arc<SessionSlot>>,
    /// Connections kept for the next TCP request, shared by the client's clones.
    pool: Arc<Pool>,
}

impl Client {
    /// A client of `servers` with the default [`ClientConfig`].
    pub fn new(servers: Vec<SocketAddr>) -> Self {
        Client::with_config(servers, ClientConfig::default())
    }

    /// A client of `servers` with `config`.
    pub fn with_config(servers: Vec<SocketAddr>, config: ClientConfig) -> Self {
        Client {
            servers,
            config,
            credentials: None,
            session: None,
            pool: Arc::default(),
        }
    }

    /// This client, answering challenges as `credentials` (administration and
    /// listing need them).
    pub fn with_credentials(self, credentials: Credentials) -> Self {
        Client {
            credentials: Some(Arc::new(credentials)),
            ..self
        }
    }

    /// This client, sending administrative requests inside one authenticated session
    /// (opened on first use with the credentials, opened again once if lost) instead
    /// of answering a challenge for each (digest §3.8).
    pub fn with_session(self) -> Self {
        Client {
            session: Some(Arc::new(SessionSlot::default())),
            ..self
        }
    }

    /// This client, opening a TCP connection for each request when `per_request`
    /// (see [`ClientConfig::keep_connections`]).
    pub fn with_connection_per_request(mut self, per_request: bool) -> Self {
        self.config.keep_connections &= !per_request;
        self
    }

    /// The servers, in the order they are asked.
    pub fn servers(&self) -> &[SocketAddr] {
        &self.servers
    }

    /// Resolves `handle`: the values `selection` picks that the server may show.
    pub async fn resolve(
        &self,
        handle: &Handle,
        selection: &ValueSelection,
        transport: Transport,
    ) -> Result<Resolution, ClientError> {
        self.resolve_flagged(handle, selection, transport, OpFlags::J9_DEFAULT)
            .await
    }

    /// [`Client::resolve`] with the AT flag: the server answers with every write it
    /// acknowledged before the request applied (a caching resolver passes a client's
    /// AT on).
    pub async fn resolve_authoritatively(
        &self,
        handle: &Handle,
        selection: &ValueSelection,
        transport: Transport,
    ) -> Result<Resolution, ClientError> {
        let flags = OpFlags::J9_DEFAULT.with(OpFlags::AT);
        self.resolve_flagged(handle, selection, transport, flags)
            .await
    }

    async fn resolve_flagged(
        &self,
        handle: &Handle,
        selection: &ValueSelection,
        transport: Transport,
        flags: OpFlags,
    ) -> Result<Resolution, ClientError> {
        let request = resolution_request(handle, selection);
        let answer = self.ask(&request, flags, transport).await?;
        resolution_of(answer)
    }

    /// Resolves `handle` with PO clear, over TCP (in the session of a client made
    /// [`with_session`](Client::with_session)): as an administrator allowed READ_VALUE,
    /// every value `selection` picks, non-public and administrative ones included. A
    /// server challenges this when a picked value is not public, so it needs
    /// credentials then.
    pub async fn resolve_every_value(
        &self,
        handle: &Handle,
        selection: &ValueSelection,
    ) -> Result<Resolution, ClientError> {
        let request = resolution_request(handle, selection);
        let flags = OpFlags::J9_DEFAULT.without(OpFlags::PO);
        let answer = match &self.session {
            Some(slot) => {
                self.ask_in_session(slot, &request, flags, new_request_id())
                    .await?
            }
            None => self.ask(&request, flags, Transport::Tcp).await?,
        };
        resolution_of(answer)
    }

    /// The HS_SITE record of the first server that answers.
    pub async fn site_info(&self) -> Result<SiteInfo, ClientError> {
        let request = Request::GetSiteInfo {
            handle: b"/".to_vec(),
        };
        match self
            .ask(&request, OpFlags::J9_DEFAULT, Transport::Auto)
            .await?
        {
            Response::SiteInfo { site } => {
                SiteInfo::decode(&site).map_err(ClientError::InvalidSiteInfo)
            }
            other => Err(unexpected("get-site-info", &other)),
        }
    }

    /// Sends an administrative request over TCP; the success response
    /// ([`Response::CreateHandle`] for a create, [`Response::Done`] otherwise).
    ///
    /// A request that no server answered, or that was answered "server too busy",
    /// may still have been carried out: it is sent again, up to [`ADMIN_ATTEMPTS`]
    /// times in all, [`ADMIN_PAUSE`] times the attempt apart, under the same
    /// RequestId, which an hdl server takes as the same request and answers with its
    /// first result rather than carrying it out twice. The error of a write that may
    /// have been carried out never says it reached no server.
    pub async fn admin(&self, request: AdminRequest) -> Result<Response, ClientError> {
        let (request, flags) = request.into_wire();
        let request_id = new_request_id();
        let mut delivered_unanswered = None;
        let mut attempt = 1;
        loop {
            let answered = match &self.session {
                Some(slot) => self.ask_in_session(slot, &request, flags, request_id).await,
                None => {
                    self.ask_as(&request, flags, Transport::Tcp, request_id)
                        .await
                }
            };
            match answered {
                Err(error) if attempt < ADMIN_ATTEMPTS && may_have_been_done(&error) => {
                    if !never_delivered(&error) {
                        delivered_unanswered = Some(error);
                    }
                    tokio::time::sleep(ADMIN_PAUSE * attempt).await;
                    attempt += 1;
                }
                // A connection refused last says nothing of an earlier attempt that
                // may have been carried out: that attempt's error is the answer.
                Err(error) if never_delivered(&error) => {
                    return Err(delivered_unanswered.unwrap_or(error));
                }
                answered => return answered,
            }
        }
    }

    /// The handles under `prefix` (`10.1000` or the prefix handle `0.NA/10.1000`),
    /// read over TCP from the series of messages that answers a list request. More
    /// than `limit` handles is an error.
    pub async fn list_handles(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<String>, ClientError> {
        let request = Request::ListHandles {
            prefix: prefix_handle(prefix)?.into_bytes(),
        };
        let mut last = None;
        for (attempts, &server) in (1..).zip(&self.servers) {
            let outgoing = outgoing(&request, OpFlags::J9_DEFAULT);
            match self.list_from(server, outgoing, limit).await {
                Ok(outcome) => return outcome,
                Err(error) => last = Some((attempts, error)),
            }
        }
        Err(no_answer(last))
    }

    /// Asks each server over each transport of `transport` until one answers.
    async fn ask(
        &self,
        request: &Request,
        flags: OpFlags,
        transport: Transport,
    ) -> Result<Response, ClientError> {
        self.ask_as(request, flags, transport, new_request_id())
            .await
    }

    /// [`Client::ask`], every attempt under RequestId `request_id`: one request,
    /// however many times it is sent.
    async fn ask_as(
        &self,
        request: &Request,
        flags: OpFlags,
        transport: Transport,
        request_id: u32,
    ) -> Result<Response, ClientError> {
        let mut last = None;
        let mut attempts = 0;
        for &server in &self.servers {
            for &wire in transport.sequence() {
                attempts += 1;
                let flags = self.flags_over(wire, flags);
                let outgoing = Outgoing::new(request.clone(), flags, request_id, unix_now());
                match self.exchange(server, wire, outgoing).await {
                    Ok(message) => return Answer::of(message).map(|answer| answer.response),
                    Err(error) => last = Some((attempts, error)),
                }
            }
        }
        Err(no_answer(last))
    }

    /// `flags` for a request sent over `wire`: with KC over TCP when connections are
    /// kept, as a server may close a connection after answering a request without it.
    fn flags_over(&self, wire: Transport, flags: OpFlags) -> OpFlags {
        if wire == Transport::Tcp && self.config.keep_connections {
            flags.with(OpFlags::KC)
        } else {
            flags
        }
    }

    /// One request to one server over UDP or TCP (never `Auto` here).
    async fn exchange(
        &self,
        server: SocketAddr,
        wire: Transport,
        outgoing: Outgoing,
    ) -> Result<Message, AttemptError> {
        if wire == Transport::Udp {
            return udp::exchange(server, &outgoing, &self.config.udp_waits).await;
        }
        self.tcp_exchange(server, outgoing, self.credentials.as_deref())
            .await
    }

    /// One request to one server over TCP, answering a challenge with
    /// `credentials`, within the TCP timeout: on a kept connection to it if one is
    /// open, else (or when the server closed that one before reading the request) on
    /// a new one, which is kept after for the next request.
    async fn tcp_exchange(
        &self,
        server: SocketAddr,
        outgoing: Outgoing,
        credentials: Option<&Credentials>,
    ) -> Result<Message, AttemptError> {
        let exchange = async {
            let mut lost = None;
            if let Some(kept) = self.kept_connection(server) {
                match self.exchange_on(kept, outgoing.clone(), credentials).await {
                    // Closed under the request: usually closed idle before it came,
                    // but the server may have died after carrying it out.
                    Err(error @ (AttemptError::Closed { .. } | AttemptError::Io { .. })) => {
                        lost = Some(error);
                    }
                    answered => return answered,
                }
            }
            let fresh = async {
                let connection = Connection::open(server).await?;
                self.exchange_on(connection, outgoing, credentials).await
            };
            // A request sent on a kept connection that then failed may have been
            // carried out: if the new connection fails too, that is the error (never
            // "not delivered"), so a write is not taken for one that never happened.
            fresh.await.map_err(|error| lost.unwrap_or(error))
        };
        timeout(self.config.tcp_timeout, exchange)
            .await
            .unwrap_or(Err(AttemptError::Timeout {
                server,
                transport: Transport::Tcp,
            }))
    }

    /// An open connection to `server` kept from an earlier request, when connections
    /// are kept.
    fn kept_connection(&self, server: SocketAddr) -> Option<Connection> {
        self.config
            .keep_connections
            .then(|| self.pool.take(server))
            .flatten()
    }

    /// One request on `connection`, answering a challenge with `credentials`; the
    /// connection is kept for the next request after a whole answer, when
    /// connections are kept.
    async fn exchange_on(
        &self,
        mut connection: Connection,
        outgoing: Outgoing,
        credentials: Option<&Credentials>,
    ) -> Result<Message, AttemptError> {
        let (message, _) = tcp::request(&mut connection, outgoing, credentials).await?;
        if self.config.keep_connections {
            self.pool.keep(connection);
        }
        Ok(message)
    }

    /// One list request to one server: the outer error means "try the next server",
    /// the inner result is the answer.
    async fn list_from(
        &self,
        server: SocketAddr,
        outgoing: Outgoing,
        limit: usize,
    ) -> Result<Result<Vec<String>, ClientError>, AttemptError> {
        let timed_out = || AttemptError::Timeout {
            server,
            transport: Transport::Tcp,
        };
        let deadline = self.config.tcp_timeout;
        let mut connection = timeout(deadline, Connection::open(server))
            .await
            .map_err(|_| timed_out())??;
        let credentials = self.credentials.as_deref();
        let (mut message, answered) = timeout(
            deadline,
            tcp::request(&mut connection, outgoing, credentials),
        )
        .await
        .map_err(|_| timed_out())??;
        let mut handles = Vec::new();
        // Each message but the last carries at least one handle in practice; the
        // bound also stops a server that sends empty pages forever.
        for _ in 0..=limit {
            match add_page(message, &mut handles, limit) {
                Ok(true) => {}
                Ok(false) => return Ok(Ok(handles)),
                Err(error) => return Ok(Err(error)),
            }
            let answer = timeout(deadline, connection.next_message())
                .await
                .map_err(|_| timed_out())??;
            message = answered
                .check(&answer)
                .map_err(|p| attempt_problem(server, p))?;
        }
        Ok(Err(ClientError::TooManyHandles { limit }))
    }
}

/// Adds one list message's handles; whether more messages follow (CN).
fn add_page(
    message: Message,
    handles: &mut Vec<String>,
    limit: usize,
) -> Result<bool, ClientError> {
    let answer = Answer::of(message)?;
    let Response::ListHandles { handles: page } = answer.response else {
        return Err(unexpected("list-handles", &answer.response));
    };
    if handles.len() + page.len() > limit {
        return Err(ClientError::TooManyHandles { limit });
    }
    for handle in page {
        let handle = Handle::from_utf8(&handle).map_err(ClientError::InvalidHandle)?;
        handles.push(handle.as_str().to_owned());
    }
    Ok(answer.flags.contains(OpFlags::CN))
}

/// The prefix handle for `prefix`: `0.NA/<prefix>` unless it is one already.
fn prefix_handle(prefix: &str) -> Result<String, ClientError> {
    if names::named_prefix(prefix).is_some() {
        return Ok(prefix.to_owned());
    }
    let handle = names::prefix_handle(prefix).map_err(ClientError::InvalidHandle)?;
    Ok(handle.as_str().to_owned())
}

/// A fresh message for `request`.
fn outgoing(request: &Request, flags: OpFlags) -> Outgoing {
    Outgoing::new(request.clone(), flags, new_request_id(), unix_now())
}

/// Whether a write that ended in `error` may have been carried out although its
/// answer said nothing of it: no server answered, or one answered "server too busy"
/// (a primary that took longer than its patience may still commit it).
fn may_have_been_done(error: &ClientError) -> bool {
    match error {
        ClientError::NoAnswer { .. } => true,
        ClientError::Server { code, .. } => *code == ResponseCode::ServerTooBusy,
        _ => false,
    }
}

/// Whether `error` says the request reached no server: every connection was refused.
fn never_delivered(error: &ClientError) -> bool {
    let ClientError::NoAnswer { last, .. } = error else {
        return false;
    };
    matches!(last.as_ref(), AttemptError::Io { source, .. }
        if source.kind() == std::io::ErrorKind::ConnectionRefused)
}

/// A random positive 31-bit RequestId (J9: `Math.abs(random.nextInt())`, never 0).
fn new_request_id() -> u32 {
    rand::random_range(1..=0x7fff_ffff)
}

fn attempt_problem(server: SocketAddr, problem: Problem) -> AttemptError {
    match problem {
        Problem::Codec(source) => AttemptError::Codec { server, source },
        Problem::Mismatch(problem) => AttemptError::NotOurs { server, problem },
        Problem::Sealed(source) => AttemptError::Sealed { server, source },
    }
}

fn no_answer(last: Option<(usize, AttemptError)>) -> ClientError {
    match last {
        Some((attempts, last)) => ClientError::NoAnswer {
            attempts,
            last: Box::new(last),
        },
        None => ClientError::NoServers,
    }
}

/// The resolution request for what `selection` picks of `handle`.
fn resolution_request(handle: &Handle, selection: &ValueSelection) -> Request {
    Request::Resolution(ResolutionRequest {
        handle: handle.as_str().as_bytes().to_vec(),
        indexes: selection.indexes.clone(),
        types: selection
            .types
            .iter()
            .map(|t| t.as_bytes().to_vec())
            .collect(),
    })
}

/// The values of a resolution answer.
fn resolution_of(answer: Response) -> Result<Resolution, ClientError> {
    match answer {
        Response::Resolution(found) => Ok(Resolution {
            handle: Handle::from_utf8(&found.handle).map_err(ClientError::InvalidHandle)?,
            values: found.values,
        }),
        other => Err(unexpected("resolution", &other)),
    }
}

fn unexpected(expected: &'static str, response: &Response) -> ClientError {
    let found = match response {
        Response::Resolution(_) => "resolution",
        Response::SiteInfo { .. } => "site information",
        Response::CreateHandle { .. } => "create",
        Response::Done => "done",
        Response::ListHandles { .. } => "handle list",
        Response::Referral(_) => "referral",
        Response::Challenge { .. } => "challenge",
        Response::Verification { .. } => "verification",
        Response::SessionSetup(_) => "session setup",
        Response::Error(_) => "error",
    };
    ClientError::UnexpectedResponse { expected, found }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_become_prefix_handles_once() {
        let prefix_handle = |prefix| prefix_handle(prefix).unwrap();
        assert_eq!(prefix_handle("10.1000"), "0.NA/10.1000");
        assert_eq!(prefix_handle("0.na/10.1000"), "0.na/10.1000");
        assert_eq!(prefix_handle("0.NAX"), "0.NA/0.NAX");
        assert_eq!(prefix_handle("日本"), "0.NA/日本");
    }

    #[test]
    fn request_ids_are_positive_31_bit() {
        for _ in 0..1000 {
            let id = new_request_id();
            assert!(id > 0 && id <= 0x7fff_ffff);
        }
    }

    #[tokio::test]
    async fn a_client_without_servers_says_so() {
        let client = Client::new(vec![]);
        let err = client.site_info().await.unwrap_err();
        assert!(matches!(err, ClientError::NoServers));
    }

    #[tokio::test]
    async fn a_silent_server_times_out_and_the_next_is_asked() {
        // A bound UDP socket that never answers, then a closed TCP port.
        let silent = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let config = ClientConfig {
            udp_waits: vec![Duration::from_millis(20), Duration::from_millis(20)],
            tcp_timeout: Duration::from_secs(5),
            ..ClientConfig::default()
        };
        let client = Client::with_config(vec![silent.local_addr().unwrap()], config);
        let handle = Handle::parse("TEST/1").unwrap();
        let err = client
            .resolve(&handle, &ValueSelection::all(), Transport::Auto)
            .await
            .unwrap_err();
        let ClientError::NoAnswer { attempts, last } = err else {
            panic!("{err}");
        };
        assert_eq!(attempts, 2);
        assert!(matches!(
            *last,
            AttemptError::Io {
                transport: Transport::Tcp,
                ..
            }
        ));
    }

    /// A server over TCP that answers the requests it reads with `answers`, one
    /// connection each, in order; the RequestIds it was sent.
    async fn scripted_server(
        answers: Vec<(ResponseCode, Response)>,
    ) -> (SocketAddr, tokio::task::JoinHandle<Vec<u32>>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let served = tokio::spawn(async move {
            let mut request_ids = Vec::new();
            for (code, response) in answers {
                let (mut stream, _) = listener.accept().await.unwrap();
                let mut bytes = vec![0; crate::codec::ENVELOPE_LEN];
                stream.read_exact(&mut bytes).await.unwrap();
                let length = crate::codec::Envelope::peek(&bytes).unwrap().message_length;
                let mut rest = vec![0; length as usize];
                stream.read_exact(&mut rest).await.unwrap();
                bytes.extend(rest);
                let request = Message::decode(&bytes).unwrap();
                request_ids.push(request.envelope.request_id);
                let header = crate::codec::Header {
                    response_code: code,
                    flags: OpFlags::NONE,
                    ..request.header
                };
                let body = crate::codec::Body::Response {
                    digest: None,
                    response,
                };
                let reply = Message::new(request.envelope, header, body);
                stream.write_all(&reply.encode()).await.unwrap();
            }
            request_ids
        });
        (address, served)
    }

    #[tokio::test]
    async fn a_write_answered_busy_is_sent_again_under_the_same_request_id() {
        let busy = || {
            let text = crate::codec::ErrorResponse {
                message: "the primary took too long".into(),
                indexes: None,
            };
            (ResponseCode::ServerTooBusy, Response::Error(text))
        };
        let created = (
            ResponseCode::Success,
            Response::CreateHandle { handle: None },
        );
        let (server, served) = scripted_server(vec![busy(), busy(), created]).await;
        let client = Client::new(vec![server]);
        let create = AdminRequest::Create {
            handle: Handle::parse("TEST/again").unwrap(),
            values: Vec::new(),
            overwrite: Overwrite::Refuse,
        };
        let answer = client.admin(create.clone()).await.unwrap();
        assert!(matches!(answer, Response::CreateHandle { .. }));
        let request_ids = served.await.unwrap();
        assert_eq!(request_ids.len(), ADMIN_ATTEMPTS as usize);
        assert!(request_ids.iter().all(|id| *id == request_ids[0]));

        // Busy past the attempts: the answer is busy, each attempt the same request.
        let (server, served) = scripted_server(vec![busy(), busy(), busy()]).await;
        let client = Client::new(vec![server]);
        let error = client.admin(create).await.unwrap_err();
        assert!(matches!(
            error,
            ClientError::Server {
                code: ResponseCode::ServerTooBusy,
                ..
            }
        ));
        let request_ids = served.await.unwrap();
        assert!(request_ids.iter().all(|id| *id == request_ids[0]));
    }
}
