//! Requests over TCP (digest §1.4), answered by one message or, for lists, by a
//! series of messages with CN set on all but the last; a connection may carry one
//! request after another ([`super::pool`]).
//!
//! Owns [`Connection`], which frames the octets it reads with `codec::next_frame`.
//! Bounded: a frame announcing more than `MAX_MESSAGE_LEN` octets is refused from its
//! envelope, before anything is buffered; the buffer never holds more than one frame
//! plus one read. Deadlines are the caller's.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::credentials::Credentials;
use super::error::AttemptError;
use super::message::Outgoing;
use super::{Transport, attempt_problem, new_request_id};
use crate::clock::unix_now;
use crate::codec::{
    Body, CodecError, Frame, MAX_MESSAGE_LEN, Message, Request, Response, next_frame,
};

/// A TCP connection to one server, with the octets read but not yet framed.
#[derive(Debug)]
pub struct Connection {
    server: SocketAddr,
    stream: TcpStream,
    buffer: Vec<u8>,
}

impl Connection {
    /// Connects to `server`.
    pub async fn open(server: SocketAddr) -> Result<Connection, AttemptError> {
        let stream = TcpStream::connect(server)
            .await
            .map_err(|source| io(server, source))?;
        // Requests go out whole in one write; do not hold them back.
        stream
            .set_nodelay(true)
            .map_err(|source| io(server, source))?;
        Ok(Connection {
            server,
            stream,
            buffer: Vec::new(),
        })
    }

    /// The server it is connected to.
    pub fn server(&self) -> SocketAddr {
        self.server
    }

    /// Whether nothing is left unread on the connection and the server has not
    /// closed it: it can carry another request.
    pub fn is_idle_and_open(&self) -> bool {
        let mut probe = [0; 1];
        self.buffer.is_empty()
            && matches!(self.stream.try_read(&mut probe),
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock)
    }

    /// Writes a whole message.
    pub async fn send(&mut self, message: &[u8]) -> Result<(), AttemptError> {
        self.stream
            .write_all(message)
            .await
            .map_err(|source| io(self.server, source))
    }

    /// Reads the next whole message (envelope included).
    pub async fn next_message(&mut self) -> Result<Vec<u8>, AttemptError> {
        loop {
            match next_frame(&self.buffer) {
                Frame::Ready { len } => return Ok(self.buffer.drain(..len).collect()),
                Frame::TooLarge { envelope } => {
                    return Err(AttemptError::Codec {
                        server: self.server,
                        source: CodecError::TooLong {
                            envelope,
                            length: envelope.message_length,
                            limit: MAX_MESSAGE_LEN,
                        },
                    });
                }
                Frame::Incomplete { needed } => {
                    self.buffer.reserve(needed);
                    let read = self
                        .stream
                        .read_buf(&mut self.buffer)
                        .await
                        .map_err(|source| io(self.server, source))?;
                    if read == 0 {
                        return Err(AttemptError::Closed {
                            server: self.server,
                        });
                    }
                }
            }
        }
    }
}

/// Sends `outgoing` on `connection` and reads its answer. When the answer is a
/// challenge (digest §8.1) and there are `credentials`, answers it on the same
/// connection (OC 200, envelope SessionId = the challenge id, the request's flags)
/// and reads the answer to that. Returns the answer and the request it answers,
/// against which the later messages of a list are checked.
pub async fn request(
    connection: &mut Connection,
    outgoing: Outgoing,
    credentials: Option<&Credentials>,
) -> Result<(Message, Outgoing), AttemptError> {
    let server = connection.server;
    connection.send(outgoing.bytes()).await?;
    let answer = connection.next_message().await?;
    let message = outgoing
        .check(&answer)
        .map_err(|problem| attempt_problem(server, problem))?;
    let (Some(credentials), true) = (credentials, is_challenge(&message)) else {
        return Ok((message, outgoing));
    };
    let body = credentials
        .answer(&message)
        .map_err(|source| AttemptError::Answer { server, source })?;
    let follow = Outgoing::in_session(
        Request::ChallengeResponse(body),
        outgoing.flags(),
        new_request_id(),
        unix_now(),
        message.envelope.session_id,
    )
    .in_session_of(&outgoing);
    connection.send(follow.bytes()).await?;
    let answer = connection.next_message().await?;
    let message = follow
        .check(&answer)
        .map_err(|problem| attempt_problem(server, problem))?;
    Ok((message, follow))
}

fn is_challenge(message: &Message) -> bool {
    matches!(
        message.body,
        Body::Response {
            response: Response::Challenge { .. },
            ..
        }
    )
}

fn io(server: SocketAddr, source: std::io::Error) -> AttemptError {
    AttemptError::Io {
        server,
        transport: Transport::Tcp,
        source,
    }
}
