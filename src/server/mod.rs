//! The network edges of a node: the Handle protocol on TCP and UDP.
//!
//! Owns the sockets. Binds them, prints nothing (the binary announces the addresses),
//! and serves until the shutdown future resolves, then drains (`drain`): stops
//! accepting and answers the requests already received, by a deadline. Depends on [`crate::codec`] for the
//! wire, [`crate::auth`] for challenges and session MACs, [`crate::service`] for what
//! to answer (through an `Arc<dyn Handler>`, never the concrete service),
//! [`crate::config`] for settings and [`crate::metrics`]; never on storage,
//! replication, the client or the HTTP edge. Every error it answers becomes a response
//! code in one module (`codes`, with this edge's refused outcome, `Refusal`).

pub mod answer_cache;
mod certify;
mod challenges;
mod codes;
mod drain;
mod encryption;
mod exchange;
mod requests;
mod responder;
mod session_requests;
mod sessions;
mod source_share;
mod tcp;
mod udp;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;
use tokio::net::{TcpListener, UdpSocket};
use tokio::task::JoinSet;

pub use answer_cache::{AnswerCache, AnswerCacheLimits};
pub use exchange::ResponseSettings;
pub use responder::{LIST_PAGE_LEN, Responder};

use crate::auth::SigningKey;
use crate::config::Config;
use crate::metrics::Metrics;
use crate::service::Handler;

/// Why the listeners could not start.
#[derive(Debug, Error)]
pub enum ServerError {
    /// A socket could not be bound.
    #[error("cannot listen on {address} ({transport}): {source}")]
    Bind {
        /// The address asked for.
        address: SocketAddr,
        /// "TCP" or "UDP".
        transport: &'static str,
        /// Why.
        source: std::io::Error,
    },
}

/// The bound Handle protocol sockets of a node.
#[derive(Debug)]
pub struct HandleListeners {
    tcp: TcpListener,
    udp: UdpSocket,
}

/// What the Handle edge answers with.
#[derive(Debug)]
pub struct Answering {
    /// Carries requests out.
    pub handler: Arc<dyn Handler>,
    /// Records every answer.
    pub metrics: Arc<Metrics>,
    /// Signs certified answers.
    pub server_key: Arc<SigningKey>,
    /// Kept answers to plain UDP resolutions; `None` keeps none (a handler whose
    /// answers no store commit announces, such as a caching resolver's, must have
    /// none).
    pub answer_cache: Option<Arc<AnswerCache>>,
}

impl HandleListeners {
    /// Binds TCP and UDP on the same address. With port 0, TCP picks a free port and
    /// UDP takes the same one (retrying a few times if another socket holds it).
    pub async fn bind(address: SocketAddr) -> Result<HandleListeners, ServerError> {
        const ATTEMPTS: usize = 16;
        let mut last_error = None;
        for _ in 0..ATTEMPTS {
            let tcp = TcpListener::bind(address)
                .await
                .map_err(|source| bind_error(address, "TCP", source))?;
            let bound = tcp
                .local_addr()
                .map_err(|source| bind_error(address, "TCP", source))?;
            match UdpSocket::bind(bound).await {
                Ok(udp) => return Ok(HandleListeners { tcp, udp }),
                Err(source) if address.port() == 0 => last_error = Some(source),
                Err(source) => return Err(bind_error(address, "UDP", source)),
            }
        }
        let source = last_error.unwrap_or_else(|| std::io::Error::other("no free port"));
        Err(bind_error(address, "UDP", source))
    }

    /// The address both sockets are bound to.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.tcp.local_addr()
    }

    /// Serves the Handle protocol as `answering` says until `shutdown` resolves; then
    /// stops accepting and answers what was received within `drain`, and returns.
    pub async fn serve(
        self,
        answering: Answering,
        config: &Config,
        shutdown: impl Future<Output = ()>,
        drain: Duration,
    ) -> std::io::Result<()> {
        let settings = ResponseSettings::from_config(config);
        let Answering {
            handler,
            metrics,
            server_key,
            answer_cache,
        } = answering;
        let responder = Responder::new(handler, settings, metrics).with_server_key(server_key);
        let limits = tcp::TcpLimits {
            timeout: Duration::from_secs(config.handle.tcp_idle_timeout_secs),
            per_source: config.handle.tcp_connections_per_source,
        };
        let (start, draining) = drain::channel();
        let mut loops = JoinSet::new();
        loops.spawn(tcp::serve(
            self.tcp,
            responder.clone(),
            limits,
            draining.clone(),
        ));
        let udp_limits = udp::UdpLimits::from_config(&config.handle);
        loops.spawn(udp::serve(
            self.udp,
            responder.for_datagrams(),
            udp_limits,
            answer_cache,
            draining,
        ));
        shutdown.await;
        start.begin(drain);
        while let Some(ended) = loops.join_next().await {
            ended.map_err(std::io::Error::other)?;
        }
        Ok(())
    }
}

fn bind_error(address: SocketAddr, transport: &'static str, source: std::io::Error) -> ServerError {
    ServerError::Bind {
        address,
        transport,
        source,
    }
}

#[cfg(test)]
mod tests;
