//! TCP connections kept open between requests to the same server, so that a client
//! sending many requests (a pipelined `hdl batch`, a benchmark) does not pay a
//! connection's setup and teardown for each.
//!
//! Owns [`Pool`]. A connection goes back to the pool only after a whole exchange
//! left nothing unread on it; one idle longer than [`REUSE_WITHIN`] (an hdl server
//! closes idle connections after 30 s by default), or found closed or holding
//! unsolicited octets when taken, is dropped. A server that closes after each
//! answer, as the reference server does, leaves nothing reusable: the next request
//! finds its connection closed and opens a new one, at the cost of one failed read.
//! Bounded: at most [`MAX_IDLE`] idle connections per server.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::tcp::Connection;

/// The longest a connection may have been idle to be used again.
pub const REUSE_WITHIN: Duration = Duration::from_secs(10);

/// The most idle connections kept per server.
pub const MAX_IDLE: usize = 128;

/// Idle connections, by server.
#[derive(Debug, Default)]
pub struct Pool {
    idle: Mutex<HashMap<SocketAddr, Vec<Idle>>>,
}

/// A connection and since when it is idle.
#[derive(Debug)]
struct Idle {
    connection: Connection,
    since: Instant,
}

impl Pool {
    /// The most recently used open connection to `server`, if any; stale ones
    /// found on the way are dropped.
    pub fn take(&self, server: SocketAddr) -> Option<Connection> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        let kept = idle.get_mut(&server)?;
        while let Some(Idle { connection, since }) = kept.pop() {
            if since.elapsed() <= REUSE_WITHIN && connection.is_idle_and_open() {
                return Some(connection);
            }
        }
        None
    }

    /// Keeps `connection`, whose last exchange is complete, for the next request to
    /// its server (unless [`MAX_IDLE`] are kept already).
    pub fn keep(&self, connection: Connection) {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        let kept = idle.entry(connection.server()).or_default();
        kept.retain(|idle| idle.since.elapsed() <= REUSE_WITHIN);
        if kept.len() < MAX_IDLE {
            kept.push(Idle {
                connection,
                since: Instant::now(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    async fn connected() -> (Connection, tokio::net::TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server = listener.local_addr().unwrap();
        let (connection, accepted) = tokio::join!(Connection::open(server), listener.accept());
        (connection.unwrap(), accepted.unwrap().0)
    }

    #[tokio::test]
    async fn an_open_connection_is_taken_again_and_only_once() {
        let pool = Pool::default();
        let (connection, _server_side) = connected().await;
        let server = connection.server();
        pool.keep(connection);
        assert!(pool.take(server).is_some());
        assert!(pool.take(server).is_none());
    }

    #[tokio::test]
    async fn a_connection_the_server_closed_is_dropped() {
        let pool = Pool::default();
        let (connection, server_side) = connected().await;
        let server = connection.server();
        pool.keep(connection);
        drop(server_side);
        // The FIN arrives within a loopback round trip.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(pool.take(server).is_none());
    }

    #[tokio::test]
    async fn a_connection_with_unsolicited_octets_is_dropped() {
        let pool = Pool::default();
        let (connection, mut server_side) = connected().await;
        let server = connection.server();
        pool.keep(connection);
        server_side.write_all(b"unasked").await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(pool.take(server).is_none());
    }

    #[tokio::test]
    async fn at_most_max_idle_are_kept_per_server() {
        let pool = Pool::default();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server = listener.local_addr().unwrap();
        let mut accepted = Vec::new();
        for _ in 0..MAX_IDLE + 2 {
            let (connection, stream) = tokio::join!(Connection::open(server), listener.accept());
            accepted.push(stream.unwrap().0);
            pool.keep(connection.unwrap());
        }
        let taken = std::iter::from_fn(|| pool.take(server)).count();
        assert_eq!(taken, MAX_IDLE);
    }
}
