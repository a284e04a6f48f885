//! The node's UDP socket as the receiving thread and the answering tasks share it.
//!
//! The receiving thread blocks in `recvfrom`, as a bare echo server does: one system
//! call a datagram while they come, and a sleep in the kernel while none do, where a
//! socket on tokio's reactor costs a read that finds nothing and an `epoll_wait` as
//! well, and wakes the reactor for every datagram. So the socket is in blocking mode
//! and is not registered with tokio at all. Every send asks the kernel not to wait
//! (`MSG_DONTWAIT`), wherever it is made; one that would wait (the socket's send
//! buffer is full) is made on tokio's blocking pool instead, waiting at most
//! [`SEND_PATIENCE`], so neither the thread nor a runtime worker is ever held up.
//!
//! The thread wakes at least every [`IDLE_WAKE`] to see whether the drain has begun,
//! and [`ServerSocket::stop_receiving`] wakes it at once: after `shutdown(SHUT_RD)` a
//! Linux UDP socket still gives up the datagrams already queued, then returns at once
//! instead of waiting.
//!
//! Owns nothing but the socket: what a datagram means is the receiver's.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustix::net::{RecvFlags, SendFlags, Shutdown};
use tokio::net::UdpSocket;
use tracing::debug;

/// The longest the receiving thread sleeps in `recvfrom` without a datagram.
const IDLE_WAKE: Duration = Duration::from_millis(250);

/// The longest a send that found the socket's buffer full waits for room.
const SEND_PATIENCE: Duration = Duration::from_secs(1);

/// The receive buffer asked of the kernel (which caps it at `net.core.rmem_max`): a
/// burst of requests waits there while the thread takes them, where the default
/// (208 KiB, a few hundred small datagrams) drops most of a burst of a thousand.
const RECEIVE_BUFFER: usize = 4 << 20;

/// The bound socket, shared by the receiving thread and the answers it gives.
#[derive(Debug, Clone)]
pub(super) struct ServerSocket(Arc<std::net::UdpSocket>);

impl ServerSocket {
    /// Takes `socket` off tokio's reactor and into blocking mode.
    pub(super) fn new(socket: UdpSocket) -> io::Result<ServerSocket> {
        let socket = socket.into_std()?;
        if let Err(error) =
            rustix::net::sockopt::set_socket_recv_buffer_size(&socket, RECEIVE_BUFFER)
        {
            debug!(%error, "the UDP receive buffer keeps its default size");
        }
        socket.set_nonblocking(false)?;
        socket.set_read_timeout(Some(IDLE_WAKE))?;
        socket.set_write_timeout(Some(SEND_PATIENCE))?;
        Ok(ServerSocket(Arc::new(socket)))
    }

    /// Waits for the next datagram, at most [`IDLE_WAKE`]: its length and sender, or
    /// `None` when none came (the wait ended, was interrupted, or receiving stopped).
    pub(super) fn receive(&self, buffer: &mut [u8]) -> io::Result<Option<(usize, SocketAddr)>> {
        match self.receive_with(buffer, RecvFlags::empty()) {
            Err(error) if nothing_came(&error) => Ok(None),
            received => received,
        }
    }

    /// The next datagram already queued, without waiting; `None` when there is none.
    pub(super) fn receive_queued(&self, buffer: &mut [u8]) -> Option<(usize, SocketAddr)> {
        self.receive_with(buffer, RecvFlags::DONTWAIT).ok()?
    }

    /// One `recvfrom`. A socket shut for reading answers an empty queue with no
    /// datagram and no sender (std's `recv_from` would panic on the short address):
    /// `None`, as for a sender that is not an IP address.
    fn receive_with(
        &self,
        buffer: &mut [u8],
        flags: RecvFlags,
    ) -> io::Result<Option<(usize, SocketAddr)>> {
        let (len, _, sender) = rustix::net::recvfrom(&*self.0, buffer, flags)?;
        let sender = sender.and_then(|sender| SocketAddr::try_from(sender).ok());
        Ok(sender.map(|sender| (len, sender)))
    }

    /// Wakes the receiving thread and makes every later wait on an empty socket return
    /// at once; datagrams already queued can still be taken.
    pub(super) fn stop_receiving(&self) {
        // An unconnected UDP socket answers ENOTCONN, but Linux marks it shut for
        // reading and wakes its readers all the same.
        let _ = rustix::net::shutdown(&*self.0, Shutdown::Read);
    }

    /// Sends `datagram` to `peer` if the socket's buffer has room for it now.
    pub(super) fn try_send(&self, datagram: &[u8], peer: SocketAddr) -> io::Result<()> {
        rustix::net::sendto(&*self.0, datagram, SendFlags::DONTWAIT, &peer)?;
        Ok(())
    }

    /// Sends `datagrams` to `peer` in order, until one fails; those that find the
    /// socket's buffer full are sent from tokio's blocking pool.
    pub(super) async fn send(&self, peer: SocketAddr, mut datagrams: Vec<Vec<u8>>) {
        for (sent, datagram) in datagrams.iter().enumerate() {
            match self.try_send(datagram, peer) {
                Ok(()) => {}
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    let rest = datagrams.split_off(sent);
                    self.send_waiting(peer, rest).await;
                    return;
                }
                Err(error) => {
                    debug!(%peer, %error, "sending a datagram failed");
                    return;
                }
            }
        }
    }

    /// Sends `datagrams` from the blocking pool, each waiting at most
    /// [`SEND_PATIENCE`] for room.
    async fn send_waiting(&self, peer: SocketAddr, datagrams: Vec<Vec<u8>>) {
        let socket = Arc::clone(&self.0);
        let sending = tokio::task::spawn_blocking(move || {
            for datagram in datagrams {
                socket.send_to(&datagram, peer)?;
            }
            Ok::<_, io::Error>(())
        });
        match sending.await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => debug!(%peer, %error, "sending a datagram failed"),
            Err(error) => debug!(%peer, %error, "a send on the blocking pool did not finish"),
        }
    }
}

/// Whether a receive ended without a datagram: its timeout passed, or a signal came.
fn nothing_came(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn bound() -> (ServerSocket, std::net::UdpSocket) {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let client = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        client.connect(socket.local_addr().unwrap()).unwrap();
        (ServerSocket::new(socket).unwrap(), client)
    }

    #[tokio::test]
    async fn a_datagram_is_received_with_its_sender_and_answered() {
        let (socket, client) = bound().await;
        client.send(b"ping").unwrap();
        let mut buffer = [0u8; 64];
        let (len, peer) = socket.receive(&mut buffer).unwrap().unwrap();
        assert_eq!(
            (&buffer[..len], peer),
            (&b"ping"[..], client.local_addr().unwrap())
        );
        socket
            .send(peer, vec![b"one".to_vec(), b"two".to_vec()])
            .await;
        for expected in [&b"one"[..], b"two"] {
            let len = client.recv(&mut buffer).unwrap();
            assert_eq!(&buffer[..len], expected);
        }
    }

    #[tokio::test]
    async fn stopping_leaves_the_queued_datagrams_and_then_returns_at_once() {
        let (socket, client) = bound().await;
        client.send(b"queued").unwrap();
        // The datagram is in the socket's queue before the stop.
        let mut buffer = [0u8; 64];
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while rustix::net::recv(
            &*socket.0,
            &mut buffer,
            RecvFlags::PEEK | RecvFlags::DONTWAIT,
        )
        .is_err()
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the datagram never arrived"
            );
            std::thread::yield_now();
        }
        socket.stop_receiving();
        let (len, _) = socket.receive_queued(&mut buffer).unwrap();
        assert_eq!(&buffer[..len], b"queued");
        assert_eq!(socket.receive_queued(&mut buffer), None);
        let waited = std::time::Instant::now();
        assert_eq!(socket.receive(&mut buffer).unwrap(), None);
        assert!(waited.elapsed() < IDLE_WAKE / 2, "{:?}", waited.elapsed());
    }

    #[tokio::test]
    async fn an_idle_receive_returns_nothing_after_its_wake() {
        let (socket, _client) = bound().await;
        let mut buffer = [0u8; 64];
        assert_eq!(socket.receive(&mut buffer).unwrap(), None);
    }
}
