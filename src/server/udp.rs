//! The Handle protocol over UDP (digest §1.3): requests of one or more datagrams,
//! answers cut into 492-octet pieces.
//!
//! Multi-datagram requests are reassembled per (peer, request id); partial requests
//! are bounded in number and dropped after [`REASSEMBLY_TIMEOUT`]. Each complete
//! request is answered on its own task, so a slow write never holds up resolution.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::UdpSocket;
use tokio::sync::Semaphore;
use tracing::{debug, warn};

use crate::codec::{ENVELOPE_LEN, Envelope, MAX_DATAGRAM_LEN, Reassembler};
use crate::service::Caller;

use super::responder::{Reply, Responder};

/// How long the pieces of an incomplete request are kept.
pub const REASSEMBLY_TIMEOUT: Duration = Duration::from_secs(5);

/// At most this many requests are being reassembled at once.
const MAX_PARTIAL_REQUESTS: usize = 1024;

/// At most this many requests are answered at once; more are answered at once with
/// "server busy" (RC 3) so the client retries.
const MAX_IN_FLIGHT: usize = 4096;

/// Receives datagrams until the task is dropped.
pub async fn serve(socket: UdpSocket, responder: Responder) {
    let socket = Arc::new(socket);
    let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let mut partial = Partial::default();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let (len, peer) = match socket.recv_from(&mut buffer).await {
            Ok(received) => received,
            Err(error) => {
                warn!(%error, "receiving a datagram failed");
                continue;
            }
        };
        let Some(request) = partial.take(peer, &buffer[..len]) else {
            continue;
        };
        let Ok(permit) = Arc::clone(&in_flight).try_acquire_owned() else {
            debug!(%peer, "too many requests in flight; answering busy");
            send_reply(&socket, peer, responder.busy(&request)).await;
            continue;
        };
        let socket = Arc::clone(&socket);
        let responder = responder.clone();
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
        for datagram in message.encode_datagrams() {
            if let Err(error) = socket.send_to(&datagram, peer).await {
                debug!(%peer, %error, "sending a datagram failed");
                return;
            }
        }
    }
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
