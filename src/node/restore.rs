//! `hdl restore FILE --data-dir D`: a new data directory made from a backup file
//! ([`crate::replication::backup`]), from which a lone `hdl serve` answers exactly the
//! handles the backup holds; and, at that node's first start, what finishes it
//! ([`settle`]).
//!
//! Owns [`restore`], [`settle`] and the marker file [`RESTORED_MARKER`]. Nothing is
//! written before the whole backup is verified (length, header, every record, the
//! checksum), nor into a directory that holds anything. The directory is made beside,
//! as `D.restoring` (private, as a node's data directory), synced, and renamed to `D`
//! once complete: an interrupted restore leaves no `D` that looks whole, a failed one
//! removes what it made.
//!
//! What is written is replica set 1's store (`groups/set-1/handles.redb`) holding every
//! handle of the backup: of each set's section, the handles whose slot the backup's
//! ring gives that set (a copy a slot move left behind at another set is not taken),
//! with their prefixes (handle counts recounted from the handles kept, homed where any
//! set had them homed) and documents. It is not sliced: the node slices it to the
//! ring it makes, as it does any store that held handles before a ring. Not written:
//! the sets' slot states and journals (the ring is the new cluster's own), the
//! remembered request results (no retry meant for the old cluster reaches the new
//! one), and any Raft state. The node forms its set of itself at first start, as a
//! lone node does on a new directory (so the membership records the addresses it
//! really serves on); since its log then holds none of the restored handles, it
//! snapshots its store and purges its log before it serves ([`settle`], while the
//! marker is there), so a member that joins later receives the handles as that
//! snapshot rather than an empty log.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::data_dir::{self, DataDirError};
use super::groups::{HANDLE_STORE_FILE, group_dir};
use crate::placement::FIRST_SET;
use crate::replication::backup::{self, BackupError, BackupHeader};
use crate::replication::{Group, GroupError, GroupId, HandleSet, SetId};
use crate::storage::{
    ImageImport, ImageRecord, PrefixRecord, StorageError, Store, slot_of, sync_dir,
};

/// The file, in the restored set's directory, that says its node has not yet
/// snapshotted the restored store and purged its log.
pub const RESTORED_MARKER: &str = "restored-from-backup";

/// How long the first start of a restored node may take to snapshot its store and
/// purge its log (each).
pub const SETTLE_PATIENCE: Duration = Duration::from_secs(600);

/// Why a restore failed (nothing is left of what it made).
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// The backup file could not be opened.
    #[error("cannot open the backup {path}: {problem}")]
    Open {
        /// The file.
        path: PathBuf,
        /// Why.
        problem: io::Error,
    },
    /// The backup is damaged, truncated or not a backup.
    #[error("{path}: {problem}")]
    Backup {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        problem: BackupError,
    },
    /// The data directory holds something already.
    #[error("data directory {path} is not empty: a restore makes a new one")]
    NotEmpty {
        /// The directory.
        path: PathBuf,
    },
    /// A directory left by an interrupted restore is in the way.
    #[error("{path} exists (left by an interrupted restore?): remove it and restore again")]
    Leftover {
        /// The directory.
        path: PathBuf,
    },
    /// The data directory could not be made.
    #[error(transparent)]
    DataDir(#[from] DataDirError),
    /// A file or directory could not be written.
    #[error("cannot write {path}: {problem}")]
    Write {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        problem: io::Error,
    },
    /// The store could not be written, or a record of the backup does not fit it.
    #[error("cannot restore into {path}: {problem}")]
    Store {
        /// The store file.
        path: PathBuf,
        /// Why.
        problem: StorageError,
    },
}

/// What a restore wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restored {
    /// The backup's header.
    pub header: BackupHeader,
    /// Handles written.
    pub handles: u64,
    /// Handle copies not taken: their slot belonged to another set.
    pub left: u64,
}

/// Makes the data directory `data_dir` (absent or empty) from the backup `file`.
pub fn restore(file: &Path, data_dir: &Path) -> Result<Restored, RestoreError> {
    let backup_error = |problem| RestoreError::Backup {
        path: file.to_owned(),
        problem,
    };
    let mut input = File::open(file).map_err(|problem| RestoreError::Open {
        path: file.to_owned(),
        problem,
    })?;
    let header = backup::verify(&mut input).map_err(backup_error)?.header;
    let new = data_dir::is_new(data_dir).map_err(|problem| RestoreError::Write {
        path: data_dir.to_owned(),
        problem,
    })?;
    if !new {
        return Err(RestoreError::NotEmpty {
            path: data_dir.to_owned(),
        });
    }
    let mut partial = data_dir.as_os_str().to_owned();
    partial.push(".restoring");
    let partial = PathBuf::from(partial);
    if partial.exists() {
        return Err(RestoreError::Leftover { path: partial });
    }
    data_dir::prepare(&partial, false)?;
    let written = write_set(&mut input, &partial, &header).map_err(|error| match error {
        Failure::Backup(problem) => backup_error(problem),
        Failure::Restore(error) => error,
    });
    let placed = written.and_then(|merged| {
        place(&partial, data_dir)?;
        Ok(Restored {
            header,
            handles: merged.handles,
            left: merged.left,
        })
    });
    if placed.is_err() {
        // Ours: made above, under a name nothing else uses.
        let _ = fs::remove_dir_all(&partial);
    }
    placed
}

/// Why writing the set failed: the backup (changed since it was verified), or the
/// writing.
enum Failure {
    Backup(BackupError),
    Restore(RestoreError),
}

impl From<BackupError> for Failure {
    fn from(error: BackupError) -> Failure {
        Failure::Backup(error)
    }
}

fn write_failure(path: &Path) -> impl Fn(io::Error) -> Failure {
    let path = path.to_owned();
    move |problem| {
        Failure::Restore(RestoreError::Write {
            path: path.clone(),
            problem,
        })
    }
}

/// Writes set 1's store from the backup `input` (whose header is `header`), and the
/// marker, under `dir`, synced.
fn write_set(input: &mut File, dir: &Path, header: &BackupHeader) -> Result<Merge, Failure> {
    let set_dir = group_dir(dir, GroupId::Set(FIRST_SET));
    fs::create_dir_all(&set_dir).map_err(write_failure(&set_dir))?;
    let path = set_dir.join(HANDLE_STORE_FILE);
    let store_failure = |problem| {
        Failure::Restore(RestoreError::Store {
            path: path.clone(),
            problem,
        })
    };
    let store = Store::open(&path).map_err(store_failure)?;
    let mut batch = store.write().map_err(store_failure)?;
    let mut merge = Merge {
        owners: header.owners.clone(),
        prefixes: BTreeMap::new(),
        handles: 0,
        left: 0,
    };
    let mut import = batch.import().map_err(store_failure)?;
    backup::read_records(input, |set, record| {
        merge.put(&mut import, set, record).map_err(store_failure)
    })?;
    merge.put_prefixes(&mut import).map_err(store_failure)?;
    import.finish().map_err(store_failure)?;
    batch.commit().map_err(store_failure)?;
    drop(store);
    let marker = set_dir.join(RESTORED_MARKER);
    write_synced(
        &marker,
        b"made by hdl restore; the node's first start finishes it\n",
    )
    .map_err(write_failure(&marker))?;
    let groups = set_dir.parent().unwrap_or(dir);
    for synced in [set_dir.as_path(), groups, dir] {
        sync_dir(synced).map_err(write_failure(synced))?;
    }
    Ok(merge)
}

/// The sections of a backup going into one store.
#[derive(Debug)]
struct Merge {
    /// The backup's ring: the owner of each slot (empty: one section, all its own).
    owners: Vec<SetId>,
    /// Every prefix, by folded name: its records merged, its handles counted.
    prefixes: BTreeMap<String, Prefix>,
    /// Handles written.
    handles: u64,
    /// Handle copies not taken.
    left: u64,
}

/// A prefix of the restored store.
#[derive(Debug, Default)]
struct Prefix {
    /// Its spelling, from the first set's record of it.
    display: Option<String>,
    /// Handles kept under it.
    count: u64,
    /// Whether any set had it homed.
    homed: bool,
}

impl Merge {
    /// Writes `record` of `set`'s section, if the restored store keeps it.
    fn put(
        &mut self,
        import: &mut ImageImport<'_>,
        set: SetId,
        record: ImageRecord,
    ) -> Result<(), StorageError> {
        match record {
            ImageRecord::Handle(key, bytes) => {
                if !self.owns(set, &key) {
                    self.left += 1;
                    return Ok(());
                }
                let prefix = key.split_once('/').map_or(key.as_str(), |(p, _)| p);
                self.prefixes.entry(prefix.to_owned()).or_default().count += 1;
                import.put(ImageRecord::Handle(key, bytes))?;
                self.handles += 1;
            }
            ImageRecord::Prefix(key, bytes) => {
                let record =
                    PrefixRecord::decode(&bytes).map_err(|source| StorageError::Corrupt {
                        key: key.clone(),
                        source,
                    })?;
                let prefix = self.prefixes.entry(key).or_default();
                prefix.display.get_or_insert(record.display);
                prefix.homed |= record.homed;
            }
            ImageRecord::Document(..) => import.put(record)?,
            // The new cluster's ring, moves and request results are its own.
            ImageRecord::SlotCount(_)
            | ImageRecord::SlotState(..)
            | ImageRecord::Recent(_)
            | ImageRecord::Journal(..) => {}
        }
        Ok(())
    }

    /// Whether the backup's ring gives the slot of the handle `key` to `set`.
    fn owns(&self, set: SetId, key: &str) -> bool {
        let Ok(count) = u32::try_from(self.owners.len()) else {
            return false;
        };
        if count == 0 {
            return true;
        }
        let slot = usize::try_from(slot_of(key, count).0).ok();
        slot.and_then(|slot| self.owners.get(slot)) == Some(&set)
    }

    /// Writes every prefix record, each counting the handles kept under it.
    fn put_prefixes(&mut self, import: &mut ImageImport<'_>) -> Result<(), StorageError> {
        for (key, prefix) in std::mem::take(&mut self.prefixes) {
            let record = PrefixRecord {
                // A handle whose prefix no set recorded: its folded name spells it.
                display: prefix.display.unwrap_or_else(|| key.clone()),
                handle_count: prefix.count,
                homed: prefix.homed,
            };
            if !record.is_empty() {
                import.put(ImageRecord::Prefix(key, record.encode()))?;
            }
        }
        Ok(())
    }
}

/// Renames the complete `partial` directory to `data_dir` (an empty directory there is
/// replaced) and syncs the rename.
fn place(partial: &Path, data_dir: &Path) -> Result<(), RestoreError> {
    let failed = |problem| RestoreError::Write {
        path: data_dir.to_owned(),
        problem,
    };
    fs::rename(partial, data_dir).map_err(failed)?;
    let parent = match data_dir.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    sync_dir(parent).map_err(failed)
}

fn write_synced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = File::create(path)?;
    io::Write::write_all(&mut file, bytes)?;
    file.sync_all()
}

/// Why a restored node could not finish its restore at first start.
#[derive(Debug, thiserror::Error)]
pub enum SettleError {
    /// The node was started to wait for a set rather than form its own.
    #[error(
        "data directory {path} was made by hdl restore: start it as a lone node first \
         (without --no-bootstrap); it forms its replica set alone, and other nodes then join that set"
    )]
    NeedsBootstrap {
        /// The data directory.
        path: PathBuf,
    },
    /// The snapshot or the purge did not happen.
    #[error("cannot finish the restore of {path}: {problem}")]
    Compact {
        /// The data directory.
        path: PathBuf,
        /// Why.
        problem: Box<GroupError>,
    },
    /// The marker could not be removed.
    #[error("cannot finish the restore of {path}: {problem}")]
    Marker {
        /// The marker file.
        path: PathBuf,
        /// Why.
        problem: io::Error,
    },
}

/// Whether replica set `set`'s directory under `data_dir` holds a restored store its
/// node has not finished ([`settle`]).
pub fn unsettled(data_dir: &Path, set: SetId) -> bool {
    group_dir(data_dir, GroupId::Set(set))
        .join(RESTORED_MARKER)
        .exists()
}

/// Finishes the restore of the set `group` of the node whose data directory is
/// `data_dir`, formed by this node alone: snapshots its store, purges its log, then
/// removes the marker. Interrupted, it is done again at the next start.
pub async fn settle(
    group: &Group<HandleSet>,
    data_dir: &Path,
    set: SetId,
) -> Result<(), SettleError> {
    group
        .snapshot_and_purge(SETTLE_PATIENCE)
        .await
        .map_err(|problem| SettleError::Compact {
            path: data_dir.to_owned(),
            problem: Box::new(problem),
        })?;
    let set_dir = group_dir(data_dir, GroupId::Set(set));
    let marker = set_dir.join(RESTORED_MARKER);
    let removed = fs::remove_file(&marker).and_then(|()| sync_dir(&set_dir));
    removed.map_err(|problem| SettleError::Marker {
        path: marker,
        problem,
    })?;
    tracing::info!(
        set = set.0,
        "the restored store is snapshotted and the log purged behind it"
    );
    Ok(())
}
