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
use std::future::Future;
use std::net::SocketAddr;
use std::ops::Deref;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::ServiceExt as _;
use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use axum::{BoxError, Router};
use thiserror::Error;
use tokio::net::TcpListener;
use tower::{Service, ServiceBuilder};
use tower_http::cors::CorsLayer;
use tower_http::timeout::TimeoutLayer;

pub use auth::Channel;
pub use sessions::SessionTable;

use crate::auth::guesses::Guesses;
use crate::auth::work_budget::WorkBudget;
use crate::auth::{Identity, SecretForms};
use crate::config::HttpConfig;
use crate::metrics::{Metrics, Protocol};
use crate::service::Handler;

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

/// What every request handler shares, behind one `Arc`: the service stack, and with
/// it this state, is cloned for every request (hyper's service adapter, the
/// middleware, the `State` extractor), so a clone is one count, not one per field.
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
            ServiceBuilder::new()
                .layer(TimeoutLayer::with_status_code(
                    StatusCode::REQUEST_TIMEOUT,
                    timeouts.request,
                ))
                .map_request(with_axum_body)
                .service(router(state.clone(), channel))
                .into_make_service_with_connect_info::<SocketAddr>()
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

/// Every route of a listener on `channel` (anything else is a proxy reference),
/// behind what every request passes once: CORS, then [`edge`].
pub fn router(
    state: HttpState,
    channel: Channel,
) -> impl Service<
    Request,
    Response = Response,
    Error = Infallible,
    Future = impl Future<Output = Result<Response, Infallible>> + Send + 'static,
> + Clone
+ Send
+ Sync
+ 'static {
    let routes = Router::new()
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
        .with_state(state.clone());
    // Layered around the whole router, not route by route (`Router::layer`), so a
    // request clones no boxed route on its way in.
    ServiceBuilder::new()
        .layer(CorsLayer::permissive().allow_credentials(false))
        .layer(middleware::from_fn_with_state(
            Edge { state, channel },
            edge,
        ))
        .service(routes)
}

/// A request as the server reads it, with the body type the router takes.
fn with_axum_body<B>(request: axum::http::Request<B>) -> Request
where
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    request.map(Body::new)
}

/// What [`edge`] knows of its listener.
#[derive(Clone)]
struct Edge {
    state: HttpState,
    channel: Channel,
}

/// Authenticates the request ([`auth::authenticate`], which puts its caller in its
/// extensions, with the listener's [`Channel`]) and counts its answer in the metrics,
/// by route kind and HTTP status.
async fn edge(
    State(edge): State<Edge>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    mut request: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let op = operation_label(request.method().as_str(), request.uri().path());
    request.extensions_mut().insert(edge.channel);
    let response = auth::authenticate(&edge.state, edge.channel, peer, request, next).await;
    let status = u32::from(response.status().as_u16());
    edge.state
        .metrics
        .record(Protocol::Http, op, status, started.elapsed());
    response
}

/// The metrics `op` label of a request.
fn operation_label(method: &str, path: &str) -> &'static str {
    match (method, path) {
        (_, "/") => "front",
        (_, "/status") => "status",
        (_, "/metrics") => "metrics",
        (_, "/api/prefixes") => "api_prefixes",
        (_, "/api/handles") => "api_list",
        (_, path) if path.starts_with("/api/sessions") => "api_sessions",
        ("GET" | "HEAD", path) if path.starts_with("/api/handles/") => "api_get",
        ("PUT", path) if path.starts_with("/api/handles/") => "api_put",
        ("DELETE", path) if path.starts_with("/api/handles/") => "api_delete",
        (_, path) if path.starts_with("/api/") => "api_other",
        _ => "proxy",
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
