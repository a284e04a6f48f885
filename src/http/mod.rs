//! The HTTP edge of a node: the Handle.Net-compatible JSON API (`/api/…`), the web
//! proxy (`/<handle>`), the front page, `/status` and `/metrics`.
//!
//! Owns the HTTP and HTTPS sockets. Depends on [`crate::service`] for every answer
//! (through an `Arc<dyn Handler>`, never the concrete service), [`crate::restjson`]
//! for the value JSON, [`crate::names`] for proxy references, [`crate::auth`] for the
//! REST answers, [`crate::config`] and [`crate::metrics`]; never on storage,
//! replication, the client or the Handle protocol edge. Every error it answers
//! becomes a response code and a status in one module (`codes`; this edge's refused
//! outcome is `answer::Refusal`). Administration goes through `api::administer` and
//! nowhere else. Nothing that arrives here is unwrapped: a malformed path, query or
//! body is answered 400 and changes nothing.
//!
//! Sessions of the REST API (`/api/sessions`) live in this node's memory only
//! ([`sessions`]): a client whose requests reach another member authenticates there.
//!
//! HTTP and HTTPS listen on separate ports (`[http] listen` and `https_listen`); the
//! HTTPS one exists only when a certificate is configured or `self_signed` is set.
//! Each listener bounds its connections, in all and per source, and how long a
//! client may take to send a request ([`limits`]).

mod answer;
mod api;
mod auth;
mod authorization;
mod codes;
mod html;
mod limits;
mod list;
mod loc;
mod pages;
mod proxy;
mod query;
mod search;
mod session_api;
pub mod sessions;
mod tls;

use std::convert::Infallible;
use std::future::{Future, poll_fn};
use std::net::SocketAddr;
use std::ops::Deref;
use std::path::Path;
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use axum::body::{Bytes, HttpBody};
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, Method, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{BoxError, Extension, Router};
use thiserror::Error;
use tokio::net::TcpListener;
use tokio::time::Instant;
use tower::{Service, ServiceExt as _};

pub use auth::Channel;
pub use sessions::SessionTable;

use crate::auth::guesses::Guesses;
use crate::auth::work_budget::WorkBudget;
use crate::auth::{Identity, SecretForms};
use crate::config::HttpConfig;
use crate::metrics::{Metrics, Protocol};
use crate::service::{self, Handler};

/// Why the HTTP listeners could not start.
#[derive(Debug, Error)]
pub enum HttpError {
    /// A socket could not be bound.
    #[error("cannot listen on {address} ({what}): {source}")]
    Bind {
        /// The address asked for.
        address: SocketAddr,
        /// "HTTP" or "HTTPS".
        what: &'static str,
        /// Why.
        source: std::io::Error,
    },
    /// A certificate or key file could not be read, written or used.
    #[error("TLS: {0}")]
    Tls(String),
}

/// What every request handler shares, behind one `Arc`: handlers take it by value
/// (the `State` extractor, the edge's two direct routes), so a clone is one count,
/// not one per field.
#[derive(Debug, Clone)]
pub struct HttpState(Arc<HttpShared>);

impl HttpState {
    /// The state of a node's HTTP edge.
    pub fn new(shared: HttpShared) -> HttpState {
        HttpState(Arc::new(shared))
    }
}

impl Deref for HttpState {
    type Target = HttpShared;

    fn deref(&self) -> &HttpShared {
        &self.0
    }
}

/// The fields of [`HttpState`].
#[derive(Debug)]
pub struct HttpShared {
    /// What answers every request.
    pub handler: Arc<dyn Handler>,
    /// The node's metrics.
    pub metrics: Arc<Metrics>,
    /// How this node describes itself on `/status`.
    pub node: NodeInfo,
    /// Whether credentials over plain HTTP from loopback are honoured.
    pub allow_plain_auth_from_loopback: bool,
    /// The sessions of `/api/sessions`.
    pub sessions: Arc<Mutex<SessionTable>>,
    /// Failed Basic credentials, per source and identity.
    pub guesses: Arc<Mutex<Guesses<Identity>>>,
    /// Key-check time each source may still make this edge spend.
    pub work: Arc<Mutex<WorkBudget>>,
    /// Which forms of secret-key answer are checked.
    pub secret_forms: SecretForms,
}

/// The facts about the node that `/status` shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// The node's id in its replica set.
    pub id: u64,
    /// The Handle protocol address.
    pub handle: SocketAddr,
    /// The HTTP address.
    pub http: SocketAddr,
    /// The HTTPS address, when there is one.
    pub https: Option<SocketAddr>,
    /// The address of its replica-set peer listener (a caching resolver has none).
    pub peer: Option<SocketAddr>,
}

/// The bound HTTP (and HTTPS) sockets of a node, with what bounds their connections.
#[derive(Debug)]
pub struct HttpListeners {
    http: TcpListener,
    https: Option<(std::net::TcpListener, axum_server::tls_rustls::RustlsConfig)>,
    config: HttpConfig,
}

impl HttpListeners {
    /// Binds the HTTP listener and, when TLS is configured, the HTTPS one (reading or,
    /// with `self_signed`, first generating the certificate under `data_dir`).
    pub async fn bind(config: &HttpConfig, data_dir: &Path) -> Result<HttpListeners, HttpError> {
        let http = TcpListener::bind(config.listen)
            .await
            .map_err(|source| bind_error(config.listen, "HTTP", source))?;
        let https = match tls::server_config(config, data_dir)? {
            None => None,
            Some(tls) => {
                let address = config.https_listen;
                let listener = std::net::TcpListener::bind(address)
                    .and_then(|listener| listener.set_nonblocking(true).map(|()| listener))
                    .map_err(|source| bind_error(address, "HTTPS", source))?;
                Some((listener, tls))
            }
        };
        Ok(HttpListeners {
            http,
            https,
            config: config.clone(),
        })
    }

    /// The HTTP address.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.http.local_addr()
    }

    /// The HTTPS address, when HTTPS is on.
    pub fn https_addr(&self) -> std::io::Result<Option<SocketAddr>> {
        self.https
            .as_ref()
            .map(|(listener, _)| listener.local_addr())
            .transpose()
    }

    /// Serves until `shutdown` resolves, then stops accepting, lets the requests in
    /// flight finish and closes idle connections, within `drain`.
    pub async fn serve(
        self,
        state: HttpState,
        shutdown: impl Future<Output = ()> + Send + 'static,
        drain: Duration,
    ) -> std::io::Result<()> {
        let timeouts = limits::Timeouts::of(&self.config);
        let bounded = |channel| {
            let edge = Arc::new(Edge::of_listener(state.clone(), channel, timeouts.request));
            tower::service_fn(move |peer: SocketAddr| {
                std::future::ready(Ok::<_, Infallible>(edge.clone().serving(peer)))
            })
        };
        let handle = axum_server::Handle::new();
        let mut plain = axum_server::from_tcp(self.http.into_std()?)?
            .acceptor(limits::Limited::of(&self.config))
            .handle(handle.clone());
        read_headers_within(plain.http_builder(), timeouts.headers);
        let plain = tokio::spawn(plain.serve(bounded(Channel::Http)));
        let https = match self.https {
            None => None,
            Some((listener, tls)) => {
                let limited = limits::Limited::of(&self.config);
                let mut server = axum_server::tls_rustls::from_tcp_rustls(listener, tls)?
                    .map(|tls| tls.acceptor(limited))
                    .handle(handle.clone());
                read_headers_within(server.http_builder(), timeouts.headers);
                Some(tokio::spawn(server.serve(bounded(Channel::Https))))
            }
        };
        shutdown.await;
        handle.graceful_shutdown(Some(drain));
        let served = async {
            plain.await.map_err(std::io::Error::other)??;
            if let Some(https) = https {
                https.await.map_err(std::io::Error::other)??;
            }
            Ok::<(), std::io::Error>(())
        };
        // The handle closes what is left at the drain deadline; this bounds the wait
        // should a task not notice.
        match tokio::time::timeout(drain + Duration::from_secs(1), served).await {
            Ok(served) => served,
            Err(_) => {
                tracing::info!("HTTP drain deadline passed; connections left");
                Ok(())
            }
        }
    }
}

/// Makes HTTP/1 connections send each request's headers within `timeout` (hyper
/// needs a timer for it).
fn read_headers_within(
    builder: &mut hyper_util::server::conn::auto::Builder<hyper_util::rt::TokioExecutor>,
    timeout: Duration,
) {
    builder
        .http1()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(timeout);
}

/// The HTTP edge of one listener: what every request on it passes once, in front of
/// every route (anything else is a proxy reference). Each connection is served by
/// [`Edge::serving`], which knows its peer: no request carries it in its extensions
/// but those the router answers.
pub struct Edge {
    state: HttpState,
    channel: Channel,
    request_timeout: Duration,
    routes: Router,
}

impl Edge {
    /// The edge of a listener on `channel`, which answers every request within
    /// `request_timeout` (else 408).
    pub fn of_listener(state: HttpState, channel: Channel, request_timeout: Duration) -> Edge {
        Edge {
            routes: routes(state.clone()),
            state,
            channel,
            request_timeout,
        }
    }

    /// The service answering the requests of a connection from `peer`. Hyper clones
    /// it for every request: one count of the shared edge.
    pub fn serving<B>(
        self: Arc<Edge>,
        peer: SocketAddr,
    ) -> impl Service<
        Request<B>,
        Response = Response,
        Error = Infallible,
        Future = impl Future<Output = Result<Response, Infallible>> + Send + 'static,
    > + Clone
    + Send
    + 'static
    where
        B: HttpBody<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        tower::service_fn(move |request| {
            let edge = self.clone();
            async move { Ok(edge.answer(peer, request).await) }
        })
    }

    /// What every request passes once. A CORS preflight (`OPTIONS`, any path) is
    /// answered at once; any other request is authenticated ([`auth::authenticate`]),
    /// answered within the request timeout (else 408) by [`Edge::dispatch`], opened to
    /// every origin ([`readable_by_any_origin`]) and counted in the metrics, by route
    /// kind and HTTP status.
    async fn answer<B>(&self, peer: SocketAddr, request: Request<B>) -> Response
    where
        B: HttpBody<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        if request.method() == Method::OPTIONS {
            return preflight();
        }
        let started = Instant::now();
        let route = Route::of(request.method(), request.uri().path());
        let dispatch =
            |request, caller, session| self.dispatch(route, peer, request, caller, session);
        let answer = pin!(auth::authenticate(
            &self.state,
            self.channel,
            peer,
            request,
            dispatch
        ));
        let mut response = within(started + self.request_timeout, answer).await;
        readable_by_any_origin(response.headers_mut());
        let status = u32::from(response.status().as_u16());
        self.state
            .metrics
            .record(Protocol::Http, route.label(), status, started.elapsed());
        response
    }

    /// Answers an authenticated request. What nearly every request is, a resolution
    /// through the API or the proxy (`GET`), goes straight to its handler, as the
    /// router would send it; anything else goes through the router, with the
    /// listener's [`Channel`], the peer's [`ConnectInfo`], the
    /// [`Caller`](service::Caller) and the [`auth::RequestSession`] in its extensions.
    /// The router's matching, its path parameters and boxed route, and four
    /// extensions cost more than the rest of a redirect's own work.
    async fn dispatch<B>(
        &self,
        route: Route,
        peer: SocketAddr,
        request: Request<B>,
        caller: service::Caller,
        session: auth::RequestSession,
    ) -> Response
    where
        B: HttpBody<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let get = request.method() == Method::GET;
        match route {
            Route::ApiGet if get && api::names_a_handle(request.uri().path()) => {
                let uri = request.into_parts().0.uri;
                api::get(State(self.state.clone()), Extension(caller), uri).await
            }
            Route::Proxy if get => {
                let uri = request.into_parts().0.uri;
                proxy::resolve(State(self.state.clone()), Method::GET, uri).await
            }
            _ => {
                let mut request = request;
                let extensions = request.extensions_mut();
                extensions.insert(self.channel);
                extensions.insert(ConnectInfo(peer));
                extensions.insert(caller);
                extensions.insert(session);
                // Boxed: the router's future is large and rare, and every request's
                // future (moved into hyper's connection) is as large as its largest step.
                let answered = Box::pin(self.routes.clone().oneshot(request)).await;
                answered.unwrap_or_else(|never| match never {})
            }
        }
    }
}

/// Every route but the two [`Edge::dispatch`] answers itself (which the router
/// answers as well: a `HEAD`, a path the edge does not take).
fn routes(state: HttpState) -> Router {
    Router::new()
        .route("/", get(pages::front))
        .route("/status", get(pages::status))
        .route("/metrics", get(pages::metrics))
        .route("/api/prefixes", get(list::prefixes))
        .route("/api/handles", get(list::handles))
        .route("/api/sessions", post(session_api::open))
        .route(
            "/api/sessions/this",
            get(session_api::show)
                .put(session_api::confirm)
                .post(session_api::confirm)
                .delete(session_api::close),
        )
        .route(
            "/api/handles/{*handle}",
            get(api::get).put(api::put).delete(api::delete),
        )
        .fallback(proxy::resolve)
        .with_state(state)
}

/// `answer`, or an empty 408 when it is not ready by `deadline`. The timer is armed
/// only when the first poll leaves the answer pending: most answers need no wait
/// (a resolution is a store read), and a timer costs its entry in the runtime's
/// wheel and its removal. The answer is pinned where the caller made it: moved in,
/// it would take its room twice in the caller's future, which hyper moves whole.
async fn within<A>(deadline: Instant, mut answer: Pin<&mut A>) -> Response
where
    A: Future<Output = Response>,
{
    if let Poll::Ready(response) = poll_fn(|cx| Poll::Ready(answer.as_mut().poll(cx))).await {
        return response;
    }
    tokio::time::timeout_at(deadline, answer)
        .await
        .unwrap_or_else(|_| StatusCode::REQUEST_TIMEOUT.into_response())
}

/// The CORS of the edge (permissive, without credentials, as the Handle.Net proxy's):
/// any origin may read every answer and every header of it.
fn readable_by_any_origin(headers: &mut HeaderMap) {
    let any = HeaderValue::from_static("*");
    headers.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, any.clone());
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, any);
}

/// The answer to a CORS preflight: any origin, method and request header.
fn preflight() -> Response {
    let mut response = Response::default();
    let headers = response.headers_mut();
    let any = HeaderValue::from_static("*");
    headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, any.clone());
    headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, any.clone());
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, any);
    response
}

/// What a request asks for, as the router decides it: its metrics `op` label, and
/// whether [`dispatch`] answers it without the router.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    Front,
    Status,
    Metrics,
    ApiPrefixes,
    ApiList,
    ApiSessions,
    ApiGet,
    ApiPut,
    ApiDelete,
    ApiOther,
    /// Anything else: a proxy reference (the router's fallback).
    Proxy,
}

impl Route {
    /// The route of `method path`.
    fn of(method: &Method, path: &str) -> Route {
        match (method.as_str(), path) {
            (_, "/") => Route::Front,
            (_, "/status") => Route::Status,
            (_, "/metrics") => Route::Metrics,
            (_, "/api/prefixes") => Route::ApiPrefixes,
            (_, "/api/handles") => Route::ApiList,
            (_, path) if path.starts_with("/api/sessions") => Route::ApiSessions,
            ("GET" | "HEAD", path) if path.starts_with("/api/handles/") => Route::ApiGet,
            ("PUT", path) if path.starts_with("/api/handles/") => Route::ApiPut,
            ("DELETE", path) if path.starts_with("/api/handles/") => Route::ApiDelete,
            (_, path) if path.starts_with("/api/") => Route::ApiOther,
            _ => Route::Proxy,
        }
    }

    /// The metrics `op` label.
    fn label(self) -> &'static str {
        match self {
            Route::Front => "front",
            Route::Status => "status",
            Route::Metrics => "metrics",
            Route::ApiPrefixes => "api_prefixes",
            Route::ApiList => "api_list",
            Route::ApiSessions => "api_sessions",
            Route::ApiGet => "api_get",
            Route::ApiPut => "api_put",
            Route::ApiDelete => "api_delete",
            Route::ApiOther => "api_other",
            Route::Proxy => "proxy",
        }
    }
}

fn bind_error(address: SocketAddr, what: &'static str, source: std::io::Error) -> HttpError {
    HttpError::Bind {
        address,
        what,
        source,
    }
}

#[cfg(test)]
mod tests;
