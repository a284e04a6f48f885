//! The Raft groups of one node and where their files live.
//!
//! A node belongs to two groups: its replica set (the first set, whose machine holds
//! handles) and the metadata group (whose machine holds the cluster map). Each keeps
//! its files in a directory of its own under `<data_dir>/groups/` — `set-1/`
//! (`handles.redb`, the Raft log, the current snapshot) and `map/` (`map.redb`, its
//! log and snapshot) — and both answer on the node's one peer port over one set of
//! links. A data directory written before groups had directories (its files at the
//! top) is moved into `groups/set-1/` once, at start.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::Config;
use crate::placement::{FIRST_SET, MapGroup};
use crate::replication::{
    Bootstrap, Group, GroupError, GroupHost, GroupId, GroupSettings, HandleSet, LOG_FILE,
    SNAPSHOT_FILE,
};
use crate::storage::Store;

/// The file, in a replica set's directory, that holds its handles.
pub const HANDLE_STORE_FILE: &str = "handles.redb";

/// Where a node keeps its groups.
const GROUPS_DIR: &str = "groups";

/// This node's groups.
#[derive(Debug, Clone)]
pub struct Groups {
    /// Its member of its replica set.
    pub set: Group<HandleSet>,
    /// The store the set's machine applies to, which resolution reads.
    pub store: Arc<Store>,
    /// Its member of the metadata group.
    pub map: MapGroup,
}

/// Why the groups could not start.
#[derive(Debug, thiserror::Error)]
pub enum GroupsError {
    /// A group directory could not be made, or an old layout moved.
    #[error("data directory {path}: {source}")]
    Layout {
        /// The path.
        path: PathBuf,
        /// What the file system said.
        source: io::Error,
    },
    /// The handle store could not be opened.
    #[error("cannot open the store {path}: {source}")]
    Store {
        /// The store file.
        path: PathBuf,
        /// Why.
        source: crate::storage::StorageError,
    },
    /// A group could not start.
    #[error("cannot start {group}: {source}")]
    Group {
        /// The group.
        group: GroupId,
        /// Why.
        source: Box<GroupError>,
    },
}

/// How `config` runs the groups.
pub fn settings(config: &Config) -> GroupSettings {
    let cluster = &config.cluster;
    GroupSettings {
        id: cluster.node_id,
        bootstrap: if cluster.bootstrap {
            Bootstrap::Alone
        } else {
            Bootstrap::Wait
        },
        heartbeat_ms: cluster.heartbeat_ms,
        election_min_ms: cluster.election_timeout_min_ms,
        election_max_ms: cluster.election_timeout_max_ms,
        snapshot_every: cluster.snapshot_every,
        keep_after_snapshot: cluster.keep_after_snapshot,
    }
}

/// Opens and starts this node's groups under `data_dir` on `host`.
pub async fn start_groups(
    settings: &GroupSettings,
    data_dir: &Path,
    host: &GroupHost,
) -> Result<Groups, GroupsError> {
    let set_id = GroupId::Set(FIRST_SET);
    let set_dir = group_dir(data_dir, set_id);
    let map_dir = group_dir(data_dir, GroupId::Map);
    let layout = (data_dir.to_owned(), set_dir.clone(), map_dir.clone());
    let store = tokio::task::spawn_blocking(move || {
        let (data_dir, set_dir, map_dir) = layout;
        make_dir(&map_dir)?;
        move_old_layout(&data_dir, &set_dir)?;
        let path = set_dir.join(HANDLE_STORE_FILE);
        Store::open(&path).map_err(|source| GroupsError::Store { path, source })
    })
    .await
    .map_err(|error| group_error(set_id, error.into()))??;
    let store = Arc::new(store);
    let set = Group::start(settings, set_id, Arc::clone(&store), &set_dir, host.clone())
        .await
        .map_err(|source| group_error(set_id, source))?;
    let map = MapGroup::start(settings, &map_dir, host.clone())
        .await
        .map_err(|source| group_error(GroupId::Map, source))?;
    Ok(Groups { set, store, map })
}

fn group_error(group: GroupId, source: GroupError) -> GroupsError {
    GroupsError::Group {
        group,
        source: Box::new(source),
    }
}

/// The directory of `group` under `data_dir`.
pub fn group_dir(data_dir: &Path, group: GroupId) -> PathBuf {
    data_dir.join(GROUPS_DIR).join(group.dir_name())
}

fn make_dir(path: &Path) -> Result<(), GroupsError> {
    fs::create_dir_all(path).map_err(|source| GroupsError::Layout {
        path: path.to_owned(),
        source,
    })
}

/// Moves a replica set's files from the top of `data_dir` (the layout before groups)
/// into `set_dir`, once: only when `set_dir` holds no store yet.
fn move_old_layout(data_dir: &Path, set_dir: &Path) -> Result<(), GroupsError> {
    make_dir(set_dir)?;
    let old_store = data_dir.join(HANDLE_STORE_FILE);
    if !old_store.exists() || set_dir.join(HANDLE_STORE_FILE).exists() {
        return Ok(());
    }
    // The store goes last: until it has moved, a restart moves whatever is left.
    for file in [LOG_FILE, SNAPSHOT_FILE, HANDLE_STORE_FILE] {
        let from = data_dir.join(file);
        if from.exists() {
            let to = set_dir.join(file);
            fs::rename(&from, &to).map_err(|source| GroupsError::Layout { path: from, source })?;
        }
    }
    let sync = |dir: &Path| fs::File::open(dir).and_then(|dir| dir.sync_all());
    for dir in [set_dir, data_dir] {
        sync(dir).map_err(|source| GroupsError::Layout {
            path: dir.to_owned(),
            source,
        })?;
    }
    tracing::info!(to = %set_dir.display(), "moved the replica set's files into their group directory");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_old_layout_moves_into_the_set_directory_once() {
        let dir = tempfile::tempdir().unwrap();
        for file in [HANDLE_STORE_FILE, LOG_FILE, SNAPSHOT_FILE] {
            fs::write(dir.path().join(file), file).unwrap();
        }
        let set_dir = group_dir(dir.path(), GroupId::Set(FIRST_SET));
        move_old_layout(dir.path(), &set_dir).unwrap();
        for file in [HANDLE_STORE_FILE, LOG_FILE, SNAPSHOT_FILE] {
            assert!(!dir.path().join(file).exists(), "{file} left behind");
            assert_eq!(fs::read_to_string(set_dir.join(file)).unwrap(), file);
        }
        // A store at the top again (a stray copy) is left alone once the set has one.
        fs::write(dir.path().join(HANDLE_STORE_FILE), "stray").unwrap();
        move_old_layout(dir.path(), &set_dir).unwrap();
        assert_eq!(
            fs::read_to_string(set_dir.join(HANDLE_STORE_FILE)).unwrap(),
            HANDLE_STORE_FILE
        );
    }
}
