//! Sending a snapshot to a member: openraft's `RaftNetwork::full_snapshot` over one
//! group's connection, in chunks that the member's `Raft::install_snapshot` assembles.
//!
//! openraft's own sender gives every chunk, the last included, the same short timeout
//! (`install_snapshot_timeout`, 200 ms), and starts the whole snapshot over when one
//! times out. The member answers the last chunk only once it has installed the whole
//! snapshot, which for a store of millions of handles takes seconds to minutes: the
//! leader sent its snapshot again and again, and the chunks of the attempts it gave
//! up piled up in its link to a member too busy to read them (3.5 GiB at 10 M
//! handles). Here one chunk is in flight at a time (the next one is read from disk
//! meanwhile), each within [`CHUNK_TIMEOUT`] and sent again up to [`CHUNK_TRIES`]
//! times when it fails; the last waits as long as an install of the snapshot's size
//! may take ([`install_patience`]). Sending stops as soon as openraft cancels it (the
//! replication stream closed: the member was removed, this node no longer leads, or
//! it stops).
//!
//! The wire message is openraft's `InstallSnapshotRequest`, as before, so the member
//! may run an earlier release. May depend on openraft's network types and on
//! [`GroupConnection`]; touches no storage but the snapshot file it is given.

use std::fs::File;
use std::future::Future;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{
    Fatal, InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, ReplicationClosed,
    StreamingError,
};
use openraft::network::RPCOption;
use openraft::raft::{InstallSnapshotRequest, SnapshotResponse};
use openraft::{StorageError, StorageIOError, Vote};

use super::client::GroupConnection;
use super::message::{GroupAnswer, GroupCall};
use crate::replication::machine::Machine;
use crate::replication::types::{Snapshot, SnapshotMeta};
use crate::replication::{GroupConfig, NodeId};

/// Octets of snapshot data a chunk carries: large enough that the round trip of each
/// is a small part of its time, small beside [`super::stream::MAX_HELD_OCTETS`].
pub const SNAPSHOT_CHUNK: usize = 8 << 20;

/// How long the member may take to store one chunk (not the last).
pub const CHUNK_TIMEOUT: Duration = Duration::from_secs(10);

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
    let file = Arc::new(snapshot.snapshot.into_std().await);
    let len = file
        .metadata()
        .map_err(|error| read_error::<M>(&meta, &error))?
        .len();
    let mut cancel = std::pin::pin!(cancel);
    let mut restarts = 0;
    loop {
        let sent = tokio::select! {
            closed = &mut cancel => return Err(closed.into()),
            sent = send_from_start(connection, &vote, &meta, &file, len) => sent,
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

/// One pass over the snapshot, from its first chunk.
async fn send_from_start<M: Machine>(
    connection: &GroupConnection<M>,
    vote: &Vote<NodeId>,
    meta: &SnapshotMeta,
    file: &Arc<File>,
    len: u64,
) -> Result<SnapshotResponse<NodeId>, Sent<M>> {
    let mut offset = 0;
    let read = |offset| tokio::task::spawn_blocking(read_chunk(Arc::clone(file), offset, len));
    let mut next = read(offset);
    loop {
        let data = next
            .await
            .map_err(io::Error::other)
            .and_then(|read| read)
            .map_err(|error| Sent::Failed(Box::new(read_error::<M>(meta, &error))))?;
        let end = offset + data.len() as u64;
        let done = end >= len;
        // Read ahead while this chunk travels; past the end, an empty read.
        next = read(end);
        let request = InstallSnapshotRequest {
            vote: *vote,
            meta: meta.clone(),
            offset,
            data,
            done,
        };
        let timeout = if done {
            install_patience(len)
        } else {
            CHUNK_TIMEOUT
        };
        let response = send_chunk(connection, request, timeout).await?;
        if done || response.vote > *vote {
            return Ok(SnapshotResponse::new(response.vote));
        }
        offset = end;
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

/// Reads the chunk of `file` (of `len` octets) at `offset`.
fn read_chunk(file: Arc<File>, offset: u64, len: u64) -> impl FnOnce() -> io::Result<Vec<u8>> {
    move || {
        let size = usize::try_from(len.saturating_sub(offset))
            .unwrap_or(usize::MAX)
            .min(SNAPSHOT_CHUNK);
        let mut data = vec![0; size];
        file.read_exact_at(&mut data, offset)?;
        Ok(data)
    }
}

fn read_error<M: Machine>(meta: &SnapshotMeta, error: &io::Error) -> SendError<M> {
    let error = StorageIOError::read_snapshot(Some(meta.signature()), error);
    StorageError::from(error).into()
}

#[cfg(test)]
mod tests {
    use super::*;

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
