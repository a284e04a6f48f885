//! `hdl backup`, the node's side: the cluster map as of now, and a replica set's
//! snapshot data as of now, handed out in chunks.
//!
//! Owns [`BackupCall`], [`BackupAnswer`] (carried in [`super::calls::NodeCall::Backup`]
//! and [`super::calls::NodeAnswer::Backup`]) and [`BackupDesk`], which keeps the
//! snapshots being read. Only peers that proved the cluster secret reach here; a
//! backup holds every value, secret keys included, as a member's store does.
//!
//! A snapshot is taken after the set's read index ([`crate::replication::Group::ensure_fresh_read`]),
//! so it holds every write acknowledged before it was asked for, from one read
//! snapshot of the store (writes go on meanwhile), written by the same code as the
//! snapshots a set sends its members ([`crate::replication::snapshot_data_now`]) into
//! an unnamed file in the set's directory, which is read in chunks and freed once the
//! last chunk is read, the backup is closed, or it is left idle.
//!
//! Bounds: at most [`BACKUPS`] snapshots are kept at once (each takes as much disk as
//! the store); one left for [`IDLE`] is dropped; a chunk is at most [`CHUNK`] octets.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::bulk::{lock, random};
use super::groups::group_dir;
use crate::placement::{ClusterMap, MapGroup};
use crate::replication::types::LogId;
use crate::replication::{GroupId, NodeId, SetId, snapshot_data_now};
use crate::routing::LocalSet;

/// Snapshots kept for backups at once.
pub const BACKUPS: usize = 4;
/// How long a snapshot nobody reads is kept.
pub const IDLE: Duration = Duration::from_secs(300);
/// The most octets one chunk holds (well under a peer frame's 64 MiB).
pub const CHUNK: u32 = 4 << 20;

/// What `hdl backup` asks of a node.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum BackupCall {
    /// The cluster map as of now: read once this node has applied the metadata
    /// group's read index, so every change committed before the call is in it.
    Map,
    /// Take the snapshot data of `set`'s store as of now (a member of another set
    /// refuses).
    Open {
        /// The set the caller means.
        set: SetId,
    },
    /// The octets of an opened snapshot from `offset` (at most [`CHUNK`]); the last
    /// chunk closes it.
    Read {
        /// The snapshot.
        id: u64,
        /// Where to read from.
        offset: u64,
    },
    /// Drop an opened snapshot.
    Close {
        /// The snapshot.
        id: u64,
    },
}

/// The answer to a [`BackupCall`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum BackupAnswer {
    /// The cluster map as of the call.
    Map(ClusterMap),
    /// The snapshot taken.
    Opened(Opened),
    /// Octets of a snapshot.
    Bytes(Vec<u8>),
    /// The snapshot is dropped (or was gone already).
    Closed,
    /// The call was refused or failed.
    Refused(String),
}

/// A snapshot taken for a backup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Opened {
    /// Names it in later calls.
    pub id: u64,
    /// The member it was taken at.
    pub member: NodeId,
    /// The last log position its store had applied.
    pub applied: Option<LogId>,
    /// Its octets.
    pub length: u64,
}

/// A snapshot being read.
#[derive(Debug)]
struct Taken {
    data: Arc<File>,
    length: u64,
    used: Instant,
}

/// The snapshots of a node's backups.
#[derive(Debug)]
pub struct BackupDesk {
    data_dir: PathBuf,
    taken: Mutex<HashMap<u64, Taken>>,
}

impl BackupDesk {
    /// The desk of the node whose data directory is `data_dir`.
    pub fn new(data_dir: PathBuf) -> BackupDesk {
        BackupDesk {
            data_dir,
            taken: Mutex::default(),
        }
    }

    /// Answers `call` with the node's set `local` (`None`: it belongs to none yet) and
    /// its member of the metadata group, `map`.
    pub async fn answer(
        &self,
        local: Option<LocalSet>,
        map: &MapGroup,
        call: BackupCall,
    ) -> BackupAnswer {
        let answer = match call {
            BackupCall::Map => fresh_map(map).await.map(BackupAnswer::Map),
            BackupCall::Open { set } => self.open(local, set).await.map(BackupAnswer::Opened),
            BackupCall::Read { id, offset } => self.read(id, offset).await.map(BackupAnswer::Bytes),
            BackupCall::Close { id } => {
                lock(&self.taken).remove(&id);
                Ok(BackupAnswer::Closed)
            }
        };
        answer.unwrap_or_else(BackupAnswer::Refused)
    }

    async fn open(&self, local: Option<LocalSet>, set: SetId) -> Result<Opened, String> {
        let local = local.ok_or("this node belongs to no replica set yet")?;
        if local.id != set {
            return Err(format!(
                "this node is a member of replica set {}, not {}",
                local.id.0, set.0
            ));
        }
        self.room()?;
        local
            .group
            .ensure_fresh_read()
            .await
            .map_err(|error| format!("cannot read replica set {} fresh: {error}", set.0))?;
        let (store, dir) = (local.store, group_dir(&self.data_dir, GroupId::Set(set)));
        let taken = tokio::task::spawn_blocking(move || {
            let (meta, data) = snapshot_data_now(&store, &dir)?;
            let length = data
                .metadata()
                .map_err(crate::replication::Error::SnapshotData)?;
            Ok::<_, crate::replication::Error>((meta, data, length.len()))
        })
        .await
        .map_err(|error| error.to_string())?;
        let (meta, data, length) = taken.map_err(|error| error.to_string())?;
        let id = u64::from_be_bytes(random()?);
        self.room()?;
        let used = Instant::now();
        let data = Arc::new(data);
        lock(&self.taken).insert(id, Taken { data, length, used });
        Ok(Opened {
            id,
            member: local.group.status().id,
            applied: meta.last_log_id,
            length,
        })
    }

    /// Refuses when [`BACKUPS`] snapshots are kept, after dropping those left idle.
    fn room(&self) -> Result<(), String> {
        let mut taken = lock(&self.taken);
        taken.retain(|_, taken| taken.used.elapsed() < IDLE);
        if taken.len() >= BACKUPS {
            return Err(format!(
                "{BACKUPS} backups are being taken from this node already: try again later"
            ));
        }
        Ok(())
    }

    async fn read(&self, id: u64, offset: u64) -> Result<Vec<u8>, String> {
        let (data, length) = {
            let mut taken = lock(&self.taken);
            let found = taken.get_mut(&id).filter(|t| t.used.elapsed() < IDLE);
            let found = found.ok_or("no such backup (finished, or idle for too long)")?;
            found.used = Instant::now();
            (Arc::clone(&found.data), found.length)
        };
        let count = length
            .checked_sub(offset)
            .ok_or_else(|| format!("offset {offset} is past the snapshot's {length} octets"))?
            .min(u64::from(CHUNK));
        let bytes = tokio::task::spawn_blocking(move || {
            let mut bytes = vec![0; usize::try_from(count).map_err(std::io::Error::other)?];
            data.read_exact_at(&mut bytes, offset).map(|()| bytes)
        })
        .await
        .map_err(|error| error.to_string())?
        .map_err(|error| format!("cannot read the snapshot: {error}"))?;
        if offset + count == length {
            lock(&self.taken).remove(&id);
        }
        Ok(bytes)
    }
}

/// The cluster map once this node has applied every change committed before now.
async fn fresh_map(map: &MapGroup) -> Result<ClusterMap, String> {
    map.group()
        .ensure_fresh_read()
        .await
        .map_err(|error| format!("cannot read the cluster map fresh: {error}"))?;
    let current = map.map().map_err(|error| error.to_string())?;
    Ok(Arc::unwrap_or_clone(current))
}
