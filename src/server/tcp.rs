//! The Handle protocol over TCP (digest §1.4): one envelope-framed message after
//! another on a connection; continuous (CN) answers for list-handles.
//!
//! A connection is served until the peer closes it, it stays idle past the configured
//! timeout, or it sends a message longer than 256 KiB (answered, then closed: the rest
//! of the stream cannot be framed). The reference server closes after one request;
//! serving more costs nothing and lets clients reuse connections.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tracing::{debug, warn};

use crate::codec::{ENVELOPE_LEN, Frame, next_frame};
use crate::service::Caller;

use super::responder::{Reply, Responder};

/// At most this many connections are served at once; more wait to be accepted.
const MAX_CONNECTIONS: usize = 4096;

/// Accepts connections until the task is dropped.
pub async fn serve(listener: TcpListener, responder: Responder, idle_timeout: Duration) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(permit) = Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                warn!(%error, "accepting a TCP connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let responder = responder.clone();
        tokio::spawn(async move {
            if let Err(error) = connection(stream, peer, &responder, idle_timeout).await {
                debug!(%peer, %error, "TCP connection ended");
            }
            drop(permit);
        });
    }
}

async fn connection(
    mut stream: TcpStream,
    peer: SocketAddr,
    responder: &Responder,
    idle_timeout: Duration,
) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let caller = Caller::anonymous(peer.ip());
    let mut buffer = Vec::with_capacity(1024);
    loop {
        let frame = match read_frame(&mut stream, &mut buffer, idle_timeout).await? {
            Some(frame) => frame,
            None => return Ok(()),
        };
        match frame {
            Ok(len) => {
                let reply = responder.respond(caller.clone(), &buffer[..len]).await;
                write_reply(&mut stream, reply).await?;
                buffer.drain(..len);
            }
            Err(envelope_bytes) => {
                let reply = responder.respond(caller.clone(), &envelope_bytes).await;
                write_reply(&mut stream, reply).await?;
                return stream.shutdown().await;
            }
        }
    }
}

/// Reads until `buffer` starts with a whole message: `Ok(len)` of it, `Err(envelope)`
/// when the message is too long to take (its envelope, to answer it), `None` when the
/// peer closed or went idle between messages.
async fn read_frame(
    stream: &mut TcpStream,
    buffer: &mut Vec<u8>,
    idle_timeout: Duration,
) -> std::io::Result<Option<Result<usize, Vec<u8>>>> {
    loop {
        match next_frame(buffer) {
            Frame::Ready { len } => return Ok(Some(Ok(len))),
            Frame::TooLarge { .. } => return Ok(Some(Err(buffer[..ENVELOPE_LEN].to_vec()))),
            Frame::Incomplete { needed } => {
                let start = buffer.len();
                buffer.resize(start + needed.max(1), 0);
                let read = tokio::time::timeout(idle_timeout, stream.read(&mut buffer[start..]));
                let count = match read.await {
                    Ok(result) => result?,
                    Err(_elapsed) => 0,
                };
                buffer.truncate(start + count);
                if count == 0 {
                    return Ok(None);
                }
            }
        }
    }
}

async fn write_reply(stream: &mut TcpStream, reply: Reply) -> std::io::Result<()> {
    match reply {
        Reply::One(message) => stream.write_all(&message.encode()).await,
        Reply::List(mut pages) => {
            while let Some(message) = pages.next_page().await {
                stream.write_all(&message.encode()).await?;
            }
            Ok(())
        }
        Reply::Nothing => Ok(()),
    }
}
