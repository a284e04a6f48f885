//! What bounds the HTTP edge's connections: how many each listener serves at once, in
//! all and per source address ([`Limited`], the listeners' acceptor: a connection
//! beyond either is closed at once), and how long a client may take to send a
//! request's headers and its whole request ([`Timeouts`], applied by the server's
//! HTTP/1 builder and the router).
//!
//! Owns the connection counts only; never reads a request.

use std::collections::HashMap;
use std::future::{Ready, ready};
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum_server::accept::Accept;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tracing::debug;

use crate::config::HttpConfig;

/// How long a client may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// To send a request's headers.
    pub headers: Duration,
    /// To send its body and get its answer.
    pub request: Duration,
}

impl Timeouts {
    /// The timeouts `config` sets.
    pub fn of(config: &HttpConfig) -> Timeouts {
        Timeouts {
            headers: Duration::from_secs(config.header_timeout_secs),
            request: Duration::from_secs(config.request_timeout_secs),
        }
    }
}

/// The connections a listener holds open, in all and per source address.
#[derive(Debug, Default)]
struct Open {
    total: u32,
    per_source: HashMap<IpAddr, u32>,
}

/// An acceptor admitting a connection only while the listener holds fewer than
/// `total` connections and its source fewer than `per_source`.
#[derive(Debug, Clone)]
pub struct Limited {
    total: u32,
    per_source: u32,
    open: Arc<Mutex<Open>>,
}

impl Limited {
    /// The acceptor `config`'s limits make, for one listener.
    pub fn of(config: &HttpConfig) -> Limited {
        Limited {
            total: config.max_connections,
            per_source: config.connections_per_source,
            open: Arc::default(),
        }
    }

    /// A slot for one more connection from `source`, if the limits allow one.
    fn admit(&self, source: IpAddr) -> Option<Slot> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let from_source = open.per_source.get(&source).copied().unwrap_or(0);
        if open.total >= self.total || from_source >= self.per_source {
            return None;
        }
        open.total += 1;
        open.per_source.insert(source, from_source + 1);
        Some(Slot {
            open: Arc::clone(&self.open),
            source,
        })
    }
}

impl<S> Accept<TcpStream, S> for Limited {
    type Stream = Counted;
    type Service = S;
    type Future = Ready<io::Result<(Counted, S)>>;

    fn accept(&self, stream: TcpStream, service: S) -> Self::Future {
        let admitted = stream.peer_addr().and_then(|peer| {
            self.admit(peer.ip()).ok_or_else(|| {
                debug!(%peer, "HTTP connection refused: too many open");
                io::Error::other("too many connections")
            })
        });
        ready(admitted.map(|slot| {
            (
                Counted {
                    stream,
                    _slot: slot,
                },
                service,
            )
        }))
    }
}

/// One open connection, counted until dropped.
#[derive(Debug)]
struct Slot {
    open: Arc<Mutex<Open>>,
    source: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.total = open.total.saturating_sub(1);
        if let Some(count) = open.per_source.get_mut(&self.source) {
            *count -= 1;
            if *count == 0 {
                open.per_source.remove(&self.source);
            }
        }
    }
}

/// A connection the listener counts while it is open.
#[derive(Debug)]
pub struct Counted {
    stream: TcpStream,
    _slot: Slot,
}

impl AsyncRead for Counted {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}
