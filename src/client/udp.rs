//! One request over UDP (digest §1.3): send every datagram, wait, resend, following
//! the schedule the client is given (J9: 500 ms, 1000 ms, 1500 ms).
//!
//! Each exchange binds its own socket and connects it to the server, so only that
//! server's datagrams arrive (and an ICMP refusal ends the attempt at once).
//! Datagrams of another RequestId and pieces that do not fit are dropped, as J9 does;
//! a piece of a different response to the same request (a resend answered twice, with
//! another length) restarts the reassembly. Bounded: a response is at most
//! `MAX_MESSAGE_LEN` octets (the reassembler refuses more) and every wait has a
//! deadline.
//!
//! An answer with RC_ERROR (2) is no usable answer over UDP: the caller goes on to the
//! next transport at once, as J9 does (`HandleResolver.sendRequestToInterface` throws
//! on RC_ERROR and the protocol loop tries the next protocol). An hdl server answers
//! so when the real answer is larger than it sends over UDP.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use tokio::net::UdpSocket;
use tokio::time::{Instant, timeout_at};

use super::Transport;
use super::error::AttemptError;
use super::message::Outgoing;
use crate::codec::{
    Body, CodecError, Envelope, MAX_DATAGRAM_LEN, Message, Reassembler, Response, ResponseCode,
};

/// Sends `outgoing` to `server`, once per entry of `waits`, and returns the first
/// whole answer that passes [`Outgoing::check`].
pub async fn exchange(
    server: SocketAddr,
    outgoing: &Outgoing,
    waits: &[Duration],
) -> Result<Message, AttemptError> {
    let io = |source| AttemptError::Io {
        server,
        transport: Transport::Udp,
        source,
    };
    let socket = UdpSocket::bind(any_port_like(server)).await.map_err(io)?;
    socket.connect(server).await.map_err(io)?;
    let datagrams = outgoing.datagrams();
    let mut reassembler = Reassembler::new();
    for wait in waits {
        for datagram in &datagrams {
            socket.send(datagram).await.map_err(io)?;
        }
        let deadline = Instant::now() + *wait;
        let whole = receive_until(&socket, deadline, &mut reassembler, outgoing.request_id())
            .await
            .map_err(io)?;
        if let Some(whole) = whole {
            let answer = outgoing
                .check(&whole)
                .map_err(|problem| super::attempt_problem(server, problem))?;
            return usable(server, answer);
        }
    }
    Err(AttemptError::Timeout {
        server,
        transport: Transport::Udp,
    })
}

/// `answer`, unless it is RC_ERROR: then why it is no answer.
fn usable(server: SocketAddr, answer: Message) -> Result<Message, AttemptError> {
    if answer.header.response_code != ResponseCode::Error {
        return Ok(answer);
    }
    let message = match answer.body {
        Body::Response {
            response: Response::Error(error),
            ..
        } => error.message,
        _ => String::new(),
    };
    Err(AttemptError::ServerError {
        server,
        transport: Transport::Udp,
        message,
    })
}

/// The unspecified address of `server`'s family, any port.
fn any_port_like(server: SocketAddr) -> SocketAddr {
    match server {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    }
}

/// Receives until a whole answer to `request_id` is in or `deadline` passes.
async fn receive_until(
    socket: &UdpSocket,
    deadline: Instant,
    reassembler: &mut Reassembler,
    request_id: u32,
) -> std::io::Result<Option<Vec<u8>>> {
    let mut buf = [0u8; MAX_DATAGRAM_LEN];
    loop {
        let Ok(received) = timeout_at(deadline, socket.recv(&mut buf)).await else {
            return Ok(None);
        };
        if let Some(whole) = take(reassembler, request_id, &buf[..received?]) {
            return Ok(Some(whole));
        }
    }
}

/// Adds one datagram; the whole message once complete. Datagrams of other requests
/// and malformed pieces are dropped.
fn take(reassembler: &mut Reassembler, request_id: u32, datagram: &[u8]) -> Option<Vec<u8>> {
    match Envelope::peek(datagram) {
        Ok(envelope) if envelope.request_id == request_id => {}
        _ => return None,
    }
    match reassembler.push(datagram) {
        Ok(whole) => whole,
        Err(CodecError::ForeignDatagram { .. }) => {
            *reassembler = Reassembler::new();
            reassembler.push(datagram).ok().flatten()
        }
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{ENVELOPE_LEN, ProtocolVersion, split_datagrams};

    fn pieces(request_id: u32, len: usize) -> Vec<Vec<u8>> {
        let envelope = Envelope::new(ProtocolVersion::MAX_SUPPORTED, request_id);
        let payload: Vec<u8> = (0..len).map(|i| u8::try_from(i % 251).unwrap()).collect();
        split_datagrams(&envelope, &payload)
    }

    #[test]
    fn pieces_of_other_requests_and_garbage_are_dropped() {
        let ours = pieces(7, 1000);
        let theirs = pieces(8, 1000);
        let mut reassembler = Reassembler::new();
        assert_eq!(take(&mut reassembler, 7, &ours[0]), None);
        assert_eq!(take(&mut reassembler, 7, &theirs[1]), None);
        assert_eq!(take(&mut reassembler, 7, b"garbage"), None);
        assert_eq!(take(&mut reassembler, 7, &ours[1][..100]), None);
        assert_eq!(take(&mut reassembler, 7, &ours[1]), None);
        let whole = take(&mut reassembler, 7, &ours[2]).unwrap();
        assert_eq!(whole.len(), ENVELOPE_LEN + 1000);
    }

    #[test]
    fn a_second_response_of_another_length_restarts_reassembly() {
        let first = pieces(7, 1000);
        let second = pieces(7, 600);
        let mut reassembler = Reassembler::new();
        assert_eq!(take(&mut reassembler, 7, &first[0]), None);
        assert_eq!(take(&mut reassembler, 7, &second[1]), None);
        let whole = take(&mut reassembler, 7, &second[0]).unwrap();
        assert_eq!(whole.len(), ENVELOPE_LEN + 600);
    }
}
