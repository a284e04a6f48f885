//! The Handle protocol over UDP (digest §1.3): requests of one or more datagrams,
//! answers cut into 492-octet pieces.
//!
//! Multi-datagram requests are reassembled per (peer, request id); partial requests
//! are bounded in number and dropped after [`REASSEMBLY_TIMEOUT`]. Each complete
//! request is answered on its own task, so a slow write never holds up resolution.
//!
//! On shutdown ([`super::drain`]) the datagrams already queued on the socket are still
//! taken, then the socket is read no more; the requests in flight are answered by the
//! drain's deadline.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::pin::pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::UdpSocket;
use tokio::sync::Semaphore;
use tracing::{debug, info, warn};

use crate::codec::{ENVELOPE_LEN, Envelope, MAX_DATAGRAM_LEN, Reassembler};
use crate::service::Caller;

use super::drain::{self, Draining};
use super::responder::{Reply, Responder};

/// How long the pieces of an incomplete request are kept.
pub const REASSEMBLY_TIMEOUT: Duration = Duration::from_secs(5);

/// At most this many requests are being reassembled at once.
const MAX_PARTIAL_REQUESTS: usize = 1024;

/// At most this many requests are answered at once; more are answered at once with
/// "server busy" (RC 3) so the client retries.
const MAX_IN_FLIGHT: u32 = 4096;

/// Receives datagrams until the drain begins, then answers those in flight by its
/// deadline.
pub async fn serve(socket: UdpSocket, responder: Responder, draining: Draining) {
    let mut receiver = Receiver {
        socket: Arc::new(socket),
        responder,
        in_flight: Arc::new(Semaphore::new(MAX_IN_FLIGHT as usize)),
        partial: Partial::default(),
    };
    let mut buffer = vec![0u8; 64 * 1024];
    // Received first, the signal polled only when no datagram is waiting: under load
    // the loop costs one atomic load more per datagram, not a lock.
    let mut stop = pin!(draining.started());
    let deadline = loop {
        if draining.has_started() {
            break stop.await;
        }
        let received = tokio::select! {
            biased;
            received = receiver.socket.recv_from(&mut buffer) => received,
            deadline = &mut stop => break deadline,
        };
        match received {
            Ok((len, peer)) => receiver.take(peer, &buffer[..len]).await,
            Err(error) => warn!(%error, "receiving a datagram failed"),
        }
    };
    match queued(&receiver.socket) {
        Ok(queued) => {
            for _ in 0..MAX_IN_FLIGHT {
                let Ok((len, peer)) = queued.recv_from(&mut buffer) else {
                    break;
                };
                receiver.take(peer, &buffer[..len]).await;
            }
        }
        Err(error) => warn!(%error, "cannot take the queued datagrams"),
    }
    // The socket stays open only as long as the answers in flight need it.
    let Receiver { in_flight, .. } = receiver;
    let left = drain::settled(&in_flight, MAX_IN_FLIGHT, deadline).await;
    if left > 0 {
        info!(left, "UDP drain deadline passed; requests left unanswered");
    }
}

/// The socket again, to take the datagrams already queued without waiting (a plain
/// non-blocking receive: tokio's would wait for the reactor to report them).
fn queued(socket: &UdpSocket) -> std::io::Result<std::net::UdpSocket> {
    Ok(std::net::UdpSocket::from(
        socket.as_fd().try_clone_to_owned()?,
    ))
}

/// The receiving end of the socket.
struct Receiver {
    socket: Arc<UdpSocket>,
    responder: Responder,
    /// One permit per request being answered.
    in_flight: Arc<Semaphore>,
    partial: Partial,
}

impl Receiver {
    /// Takes one datagram from `peer`: once it completes a request, answers it on a
    /// task of its own (or at once with "server busy" when too many are in flight).
    async fn take(&mut self, peer: SocketAddr, datagram: &[u8]) {
        let Some(request) = self.partial.take(peer, datagram) else {
            return;
        };
        let Ok(permit) = Arc::clone(&self.in_flight).try_acquire_owned() else {
            debug!(%peer, "too many requests in flight; answering busy");
            send_reply(&self.socket, peer, self.responder.busy(&request)).await;
            return;
        };
        let socket = Arc::clone(&self.socket);
        let responder = self.responder.clone();
        tokio::spawn(async move {
            let caller = Caller::anonymous(peer.ip());
            let reply = responder.respond(caller, &request).await;
            send_reply(&socket, peer, reply).await;
            drop(permit);
        });
    }
}

async fn send_reply(socket: &UdpSocket, peer: SocketAddr, reply: Reply) {
    let messages = match reply {
        Reply::One(message) => vec![message],
        Reply::Sealed(sealed) => {
            send_datagrams(socket, peer, sealed.encode_datagrams()).await;
            return;
        }
        Reply::List(mut pages) => {
            let mut messages = Vec::new();
            while let Some(message) = pages.next_page().await {
                messages.push(message);
            }
            messages
        }
        Reply::Nothing => Vec::new(),
    };
    for message in messages {
        if !send_datagrams(socket, peer, message.encode_datagrams()).await {
            return;
        }
    }
}

/// Sends `datagrams` to `peer` in order; whether every one was sent.
async fn send_datagrams(socket: &UdpSocket, peer: SocketAddr, datagrams: Vec<Vec<u8>>) -> bool {
    for datagram in datagrams {
        if let Err(error) = socket.send_to(&datagram, peer).await {
            debug!(%peer, %error, "sending a datagram failed");
            return false;
        }
    }
    true
}

/// Requests whose datagrams have not all arrived.
#[derive(Default)]
struct Partial {
    requests: HashMap<(SocketAddr, u32), (Reassembler, Instant)>,
}

impl Partial {
    /// Takes one datagram; returns a whole request once it is complete. A datagram too
    /// short for an envelope is dropped; one whose envelope says the message fits in
    /// it is a whole request by itself (and is answered even when malformed).
    fn take(&mut self, peer: SocketAddr, datagram: &[u8]) -> Option<Vec<u8>> {
        let envelope = Envelope::peek(datagram).ok()?;
        let whole = ENVELOPE_LEN + envelope.message_length as usize;
        if datagram.len() >= whole || datagram.len() > MAX_DATAGRAM_LEN {
            return Some(datagram.to_vec());
        }
        self.expire();
        let key = (peer, envelope.request_id);
        if !self.requests.contains_key(&key) && self.requests.len() >= MAX_PARTIAL_REQUESTS {
            return None;
        }
        let (reassembler, _) = self
            .requests
            .entry(key)
            .or_insert_with(|| (Reassembler::new(), Instant::now()));
        match reassembler.push(datagram) {
            Ok(Some(message)) => {
                self.requests.remove(&key);
                Some(message)
            }
            Ok(None) => None,
            Err(error) => {
                debug!(%peer, %error, "dropping a bad datagram");
                None
            }
        }
    }

    fn expire(&mut self) {
        let now = Instant::now();
        self.requests
            .retain(|_, (_, started)| now.duration_since(*started) < REASSEMBLY_TIMEOUT);
    }
}
