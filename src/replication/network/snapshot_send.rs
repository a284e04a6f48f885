//! Sending a snapshot to a member: openraft's `RaftNetwork::full_snapshot` over one
//! group's connection, in chunks that the member's `Raft::install_snapshot` assembles.
//!
//! openraft's own sender gives every chunk, the last included, the same short timeout
//! (`install_snapshot_timeout`, 200 ms), and starts the whole snapshot over when one
//! times out. The member answers the last chunk only once it has installed the whole
//! snapshot, which for a store of millions of handles takes seconds to minutes: the
//! leader sent its snapshot again and again, and the chunks of the attempts it gave
//! up piled up in its link to a member too busy to read them (3.5 GiB at 10 M
//! handles). Here one chunk is in flight at a time, each within [`CHUNK_TIMEOUT`] and
//! sent again up to [`CHUNK_TRIES`] times when it fails; the last waits as long as an
//! install of the snapshot's size may take ([`install_patience`]). Sending stops as
//! soon as openraft cancels it (the replication stream closed: the member was removed,
//! this node no longer leads, or it stops).
//!
//! The snapshot is a view of this member's store ([`StoreImage`]), kept in no file:
//! a blocking task writes its records into chunks as they are sent, a chunk ahead
//! ([`CHUNKS_AHEAD`]), and stops when the send does; a send started over writes the
//! same view again, the same bytes. The wire message is openraft's
//! `InstallSnapshotRequest`, as before, so the member may run an earlier release. May
//! depend on openraft's network types and on [`GroupConnection`]; touches no storage
//! but the view it is given.

use std::future::Future;
use std::io::{self, Write};
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{
    Fatal, InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, ReplicationClosed,
    StreamingError,
};
use openraft::network::RPCOption;
use openraft::raft::{InstallSnapshotRequest, SnapshotResponse};
use openraft::{AnyError, StorageError, StorageIOError, Vote};
use tokio::sync::mpsc;

use super::client::GroupConnection;
use super::message::{GroupAnswer, GroupCall};
use crate::replication::machine::Machine;
use crate::replication::snapshot_data::{SnapshotData, StoreImage};
use crate::replication::types::{Snapshot, SnapshotMeta};
use crate::replication::{Error, GroupConfig, NodeId};

/// Octets of snapshot data a chunk carries: large enough that the round trip of each
/// is a small part of its time, small beside [`super::stream::MAX_HELD_OCTETS`].
pub const SNAPSHOT_CHUNK: usize = 8 << 20;

/// How long the member may take to store one chunk (not the last).
pub const CHUNK_TIMEOUT: Duration = Duration::from_secs(10);

/// How many chunks wait, written, while one is sent (besides the one being written):
/// writing goes on while a chunk travels, and at most three chunks are in memory.
const CHUNKS_AHEAD: usize = 1;

/// How many times a chunk is sent before the snapshot is given up (openraft starts it
/// over later); a chunk sent twice is written twice at the same offset.
pub const CHUNK_TRIES: u32 = 3;

/// How many times the snapshot is started over when the member lost its beginning.
const RESTARTS: u32 = 2;

/// The least time an install is given, whatever the snapshot's size.
const INSTALL_FLOOR: Duration = Duration::from_secs(60);

/// The slowest install the patience allows for, in octets of snapshot a second: far
/// below any measured (several MiB/s on a loaded two-core machine).
const INSTALL_SLOWEST: u64 = 256 << 10;

/// How long the member may take to answer the last chunk: it installs the whole
/// snapshot, `len` octets, first.
pub fn install_patience(len: u64) -> Duration {
    INSTALL_FLOOR + Duration::from_secs(len / INSTALL_SLOWEST)
}

/// The error openraft takes from sending a snapshot.
type SendError<M> = StreamingError<GroupConfig<M>, Fatal<NodeId>>;

/// The error of one chunk's call.
type ChunkError =
    RPCError<NodeId, crate::replication::Node, RaftError<NodeId, InstallSnapshotError>>;

/// Sends `snapshot` to the member behind `connection` as the leader of `vote`, until
/// the member has installed it, answered with a newer vote, or `cancel` resolves.
pub(super) async fn send_snapshot<M: Machine>(
    connection: &GroupConnection<M>,
    vote: Vote<NodeId>,
    snapshot: Snapshot<M>,
    cancel: impl Future<Output = ReplicationClosed>,
) -> Result<SnapshotResponse<NodeId>, SendError<M>> {
    let meta = snapshot.meta;
    let image = match *snapshot.snapshot {
        SnapshotData::Store(image) => Arc::new(image),
        SnapshotData::Received(_) => {
            let error = Error::SnapshotKind {
                found: "a snapshot received from a leader",
                wanted: "sent on",
            };
            return Err(read_error::<M>(&meta, error));
        }
    };
    let mut cancel = std::pin::pin!(cancel);
    let mut restarts = 0;
    loop {
        let sent = tokio::select! {
            closed = &mut cancel => return Err(closed.into()),
            sent = send_from_start(connection, &vote, &meta, &image) => sent,
        };
        match sent {
            Err(Sent::Restart) if restarts < RESTARTS => restarts += 1,
            Err(Sent::Restart) => {
                let error = io::Error::other("the member lost the snapshot's beginning");
                return Err(NetworkError::new(&error).into());
            }
            Err(Sent::Failed(error)) => return Err(*error),
            Ok(response) => return Ok(response),
        }
    }
}

/// Why one pass over the snapshot stopped.
enum Sent<M: Machine> {
    /// The member no longer holds the chunks sent so far: start over.
    Restart,
    /// Give up.
    Failed(Box<SendError<M>>),
}

impl<M: Machine> Sent<M> {
    fn failed(error: SendError<M>) -> Self {
        Sent::Failed(Box::new(error))
    }
}

/// One pass over the snapshot, from its first chunk.
async fn send_from_start<M: Machine>(
    connection: &GroupConnection<M>,
    vote: &Vote<NodeId>,
    meta: &SnapshotMeta,
    image: &Arc<StoreImage>,
) -> Result<SnapshotResponse<NodeId>, Sent<M>> {
    let mut chunks = write_chunks(Arc::clone(image));
    let mut offset = 0;
    loop {
        let Chunk { data, last } = next_chunk(&mut chunks, meta).await?;
        let end = offset + data.len() as u64;
        let request = InstallSnapshotRequest {
            vote: *vote,
            meta: meta.clone(),
            offset,
            data,
            done: last,
        };
        let timeout = if last {
            install_patience(end)
        } else {
            CHUNK_TIMEOUT
        };
        let response = send_chunk(connection, request, timeout).await?;
        if last || response.vote > *vote {
            return Ok(SnapshotResponse::new(response.vote));
        }
        offset = end;
    }
}

/// Octets of snapshot data, and whether they are the last.
struct Chunk {
    data: Vec<u8>,
    last: bool,
}

/// Starts writing `image` into chunks of [`SNAPSHOT_CHUNK`] octets on a blocking
/// task, which stops once the receiver is dropped.
fn write_chunks(image: Arc<StoreImage>) -> mpsc::Receiver<Result<Chunk, Error>> {
    let (chunks, received) = mpsc::channel(CHUNKS_AHEAD);
    tokio::task::spawn_blocking(move || {
        let out = ChunkWriter {
            chunks: chunks.clone(),
            chunk: Vec::with_capacity(SNAPSHOT_CHUNK),
        };
        let written = image
            .write_to(out)
            .and_then(|out| out.finish().map_err(Error::SnapshotData));
        if let Err(error) = written {
            // A receiver gone has stopped the send: nothing to tell.
            let _ = chunks.blocking_send(Err(error));
        }
    });
    received
}

/// The next chunk of the view.
async fn next_chunk<M: Machine>(
    chunks: &mut mpsc::Receiver<Result<Chunk, Error>>,
    meta: &SnapshotMeta,
) -> Result<Chunk, Sent<M>> {
    let error = match chunks.recv().await {
        Some(Ok(chunk)) => return Ok(chunk),
        Some(Err(error)) => error,
        None => Error::SnapshotData(io::Error::other(
            "the task writing the snapshot ended before its last chunk",
        )),
    };
    Err(Sent::failed(read_error::<M>(meta, error)))
}

/// Cuts what is written into chunks of [`SNAPSHOT_CHUNK`] octets: a full chunk is
/// passed on (waiting while [`CHUNKS_AHEAD`] wait) once more octets follow it, so
/// that the last one, passed on by [`ChunkWriter::finish`], is known to be the last.
struct ChunkWriter {
    chunks: mpsc::Sender<Result<Chunk, Error>>,
    chunk: Vec<u8>,
}

impl ChunkWriter {
    fn pass_on(&mut self, last: bool) -> io::Result<()> {
        let data = std::mem::replace(&mut self.chunk, Vec::with_capacity(SNAPSHOT_CHUNK));
        self.chunks
            .blocking_send(Ok(Chunk { data, last }))
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the snapshot send stopped"))
    }

    /// Passes on the last chunk.
    fn finish(mut self) -> io::Result<()> {
        self.pass_on(true)
    }
}

impl Write for ChunkWriter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if self.chunk.len() == SNAPSHOT_CHUNK && !bytes.is_empty() {
            self.pass_on(false)?;
        }
        let taken = bytes.len().min(SNAPSHOT_CHUNK - self.chunk.len());
        self.chunk.extend_from_slice(&bytes[..taken]);
        Ok(taken)
    }

    /// Chunks are passed on when full: nothing waits in between.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Sends one chunk, again after a failure, up to [`CHUNK_TRIES`] times in all.
async fn send_chunk<M: Machine>(
    connection: &GroupConnection<M>,
    request: InstallSnapshotRequest<GroupConfig<M>>,
    timeout: Duration,
) -> Result<openraft::raft::InstallSnapshotResponse<NodeId>, Sent<M>> {
    let option = RPCOption::new(timeout);
    let mut tries = 0;
    loop {
        tries += 1;
        let call = GroupCall::InstallSnapshot(request.clone());
        let answer = connection
            .rpc(call, &option, |answer| match answer {
                GroupAnswer::InstallSnapshot(answer) => Ok(answer),
                other => Err(other.kind()),
            })
            .await;
        match answer {
            Ok(response) => return Ok(response),
            Err(error) => match failure::<M>(error) {
                Failure::Again(_) if tries < CHUNK_TRIES => {}
                Failure::Again(error) => return Err(Sent::Failed(error)),
                Failure::Restart => return Err(Sent::Restart),
                Failure::Final(error) => return Err(Sent::Failed(error)),
            },
        }
    }
}

/// What a failed chunk calls for.
enum Failure<M: Machine> {
    /// A transient failure: send the chunk again (or give up with this error).
    Again(Box<SendError<M>>),
    /// The member has not the chunks before this one.
    Restart,
    /// Give up at once.
    Final(Box<SendError<M>>),
}

fn failure<M: Machine>(error: ChunkError) -> Failure<M> {
    match error {
        RPCError::Timeout(error) => Failure::Again(Box::new(error.into())),
        RPCError::Unreachable(error) => Failure::Again(Box::new(error.into())),
        RPCError::Network(error) => Failure::Again(Box::new(error.into())),
        RPCError::PayloadTooLarge(error) => {
            Failure::Final(Box::new(NetworkError::new(&error).into()))
        }
        RPCError::RemoteError(RemoteError {
            source: RaftError::APIError(InstallSnapshotError::SnapshotMismatch(_)),
            ..
        }) => Failure::Restart,
        RPCError::RemoteError(RemoteError {
            target,
            target_node,
            source: RaftError::Fatal(fatal),
        }) => Failure::Final(Box::new(
            RemoteError {
                target,
                target_node,
                source: fatal,
            }
            .into(),
        )),
    }
}

fn read_error<M: Machine>(meta: &SnapshotMeta, error: Error) -> SendError<M> {
    let error = StorageIOError::read_snapshot(Some(meta.signature()), AnyError::new(&error));
    StorageError::from(error).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The chunks `writes` cut into: their lengths and whether each says it is last.
    fn cut(writes: &[usize]) -> Vec<(usize, bool)> {
        let (chunks, mut received) = mpsc::channel(8);
        let mut out = ChunkWriter {
            chunks,
            chunk: Vec::new(),
        };
        for &length in writes {
            out.write_all(&vec![7; length]).unwrap();
        }
        out.finish().unwrap();
        let mut cut = Vec::new();
        while let Some(chunk) = received.blocking_recv() {
            let chunk = chunk.unwrap();
            cut.push((chunk.data.len(), chunk.last));
        }
        cut
    }

    #[test]
    fn writes_are_cut_into_full_chunks_and_only_the_last_says_so() {
        assert_eq!(cut(&[5]), [(5, true)]);
        assert_eq!(
            cut(&[SNAPSHOT_CHUNK - 1, 1, SNAPSHOT_CHUNK + 3]),
            [(SNAPSHOT_CHUNK, false), (SNAPSHOT_CHUNK, false), (3, true)]
        );
        assert_eq!(
            cut(&[2 * SNAPSHOT_CHUNK]),
            [(SNAPSHOT_CHUNK, false), (SNAPSHOT_CHUNK, true)]
        );
    }

    #[test]
    fn an_install_is_given_time_by_the_snapshots_size() {
        assert_eq!(install_patience(0), INSTALL_FLOOR);
        let ten_gib = 10u64 << 30;
        assert_eq!(
            install_patience(ten_gib),
            INSTALL_FLOOR + Duration::from_secs(40 * 1024)
        );
    }
}
