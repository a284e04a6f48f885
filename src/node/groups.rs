//! The Raft groups of one node and where their files live.
//!
//! A node belongs to the metadata group (whose machine holds the cluster map) and to
//! at most one replica set (whose machine holds handles). Each group keeps its files
//! in a directory of its own under `<data_dir>/groups/` — `map/` (`map.redb` and its
//! log) and `set-<k>/` for replica set k (`handles.redb` and the Raft log; an earlier
//! release also kept its current snapshot there, which the state machine removes at
//! start) — and all answer on the node's one peer port over one set of
//! links. The set directory is what says which set a node belongs to: a node with
//! none belongs to no set yet ([`find_set`]). A data directory written before groups
//! had directories (its files at the top) is moved into `groups/set-1/` once, at
//! start.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::Config;
use crate::placement::{FIRST_SET, MapGroup};
use crate::replication::{
    Bootstrap, Group, GroupError, GroupHost, GroupId, GroupSettings, HandleSet, Keep,
    SNAPSHOT_FILE, SetId,
};
use crate::storage::log::EARLIER_LOG_FILE;
use crate::storage::{CacheSizes, IndexedTypes, Store, sync_dir};

/// The file, in a replica set's directory, that holds its handles.
pub const HANDLE_STORE_FILE: &str = "handles.redb";

/// Where a node keeps its groups.
const GROUPS_DIR: &str = "groups";

/// Why the groups could not start.
#[derive(Debug, thiserror::Error)]
pub enum GroupsError {
    /// A group directory could not be made or read, or an old layout moved.
    #[error("data directory {path}: {source}")]
    Layout {
        /// The path.
        path: PathBuf,
        /// What the file system said.
        source: io::Error,
    },
    /// The data directory holds the directories of more than one replica set.
    #[error("data directory {path} holds replica sets {first} and {second}: a node belongs to one")]
    SeveralSets {
        /// The groups directory.
        path: PathBuf,
        /// One set found.
        first: u32,
        /// Another.
        second: u32,
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

/// How `config` runs the groups (its `bootstrap` applies to the metadata group and to
/// the first replica set; every other set waits to be formed).
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
        keep: Keep {
            after_snapshot: cluster.keep_after_snapshot,
            for_members: cluster.keep_for_members,
        },
        caches: CacheSizes {
            store: config.storage.cache_mib << 20,
            map: config.storage.log_cache_mib << 20,
        },
    }
}

/// Opens and starts the metadata group under `data_dir` on `host`, first moving an
/// old layout's replica set files into `groups/set-1/`.
pub async fn start_map(
    settings: &GroupSettings,
    data_dir: &Path,
    host: &GroupHost,
) -> Result<MapGroup, GroupsError> {
    let map_dir = group_dir(data_dir, GroupId::Map);
    let layout = (data_dir.to_owned(), map_dir.clone());
    tokio::task::spawn_blocking(move || {
        let (data_dir, map_dir) = layout;
        make_dir(&map_dir)?;
        move_old_layout(&data_dir, &group_dir(&data_dir, GroupId::Set(FIRST_SET)))
    })
    .await
    .map_err(|error| group_error(GroupId::Map, error.into()))??;
    MapGroup::start(settings, &map_dir, host.clone())
        .await
        .map_err(|source| group_error(GroupId::Map, source))
}

/// The replica set whose directory `data_dir` holds, if any.
pub fn find_set(data_dir: &Path) -> Result<Option<SetId>, GroupsError> {
    let groups = data_dir.join(GROUPS_DIR);
    let layout = |source| GroupsError::Layout {
        path: groups.clone(),
        source,
    };
    let entries = match fs::read_dir(&groups) {
        Ok(entries) => entries,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(layout(error)),
    };
    let mut found: Option<SetId> = None;
    for entry in entries {
        let name = entry.map_err(layout)?.file_name();
        let Some(set) = name.to_str().and_then(set_of_dir) else {
            continue;
        };
        if let Some(first) = found {
            let (first, second) = (first.0.min(set.0), first.0.max(set.0));
            let path = groups.clone();
            return Err(GroupsError::SeveralSets {
                path,
                first,
                second,
            });
        }
        found = Some(set);
    }
    Ok(found)
}

/// The set whose directory is named `name` (`set-<k>`, as [`GroupId::dir_name`]).
fn set_of_dir(name: &str) -> Option<SetId> {
    let id = name.strip_prefix("set-")?.parse().ok()?;
    (GroupId::Set(SetId(id)).dir_name() == name).then_some(SetId(id))
}

/// Opens the store of replica set `set` under `data_dir` (making its directory: from
/// now on the node belongs to it), its value index holding the types `indexed`, and
/// starts the set's group on `host`.
pub async fn start_set(
    settings: &GroupSettings,
    data_dir: &Path,
    set: SetId,
    host: &GroupHost,
    indexed: IndexedTypes,
) -> Result<(Group<HandleSet>, Arc<Store>), GroupsError> {
    let group = GroupId::Set(set);
    let set_dir = group_dir(data_dir, group);
    let (dir, cache) = (set_dir.clone(), settings.caches.store);
    let store = tokio::task::spawn_blocking(move || {
        make_dir(&dir)?;
        let path = dir.join(HANDLE_STORE_FILE);
        Store::open_with(&path, cache, indexed)
            .map_err(|source| GroupsError::Store { path, source })
    })
    .await
    .map_err(|error| group_error(group, error.into()))??;
    let store = Arc::new(store);
    let started = Group::start(settings, group, Arc::clone(&store), &set_dir, host.clone()).await;
    let started = started.map_err(|source| group_error(group, source))?;
    Ok((started, store))
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
/// into `set_dir`, once: only when there is a store at the top and `set_dir` holds
/// none yet.
fn move_old_layout(data_dir: &Path, set_dir: &Path) -> Result<(), GroupsError> {
    let old_store = data_dir.join(HANDLE_STORE_FILE);
    if !old_store.exists() || set_dir.join(HANDLE_STORE_FILE).exists() {
        return Ok(());
    }
    make_dir(set_dir)?;
    // The store goes last: until it has moved, a restart moves whatever is left.
    for file in [EARLIER_LOG_FILE, SNAPSHOT_FILE, HANDLE_STORE_FILE] {
        let from = data_dir.join(file);
        if from.exists() {
            let to = set_dir.join(file);
            fs::rename(&from, &to).map_err(|source| GroupsError::Layout { path: from, source })?;
        }
    }
    for dir in [set_dir, data_dir] {
        sync_dir(dir).map_err(|source| GroupsError::Layout {
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
        for file in [HANDLE_STORE_FILE, EARLIER_LOG_FILE, SNAPSHOT_FILE] {
            fs::write(dir.path().join(file), file).unwrap();
        }
        let set_dir = group_dir(dir.path(), GroupId::Set(FIRST_SET));
        move_old_layout(dir.path(), &set_dir).unwrap();
        for file in [HANDLE_STORE_FILE, EARLIER_LOG_FILE, SNAPSHOT_FILE] {
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

    #[test]
    fn a_node_belongs_to_the_one_set_whose_directory_it_holds() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(find_set(dir.path()).unwrap(), None);
        move_old_layout(dir.path(), &group_dir(dir.path(), GroupId::Set(FIRST_SET))).unwrap();
        make_dir(&group_dir(dir.path(), GroupId::Map)).unwrap();
        make_dir(&dir.path().join(GROUPS_DIR).join("set-07")).unwrap();
        assert_eq!(
            find_set(dir.path()).unwrap(),
            None,
            "no store moved, no set"
        );
        make_dir(&group_dir(dir.path(), GroupId::Set(SetId(2)))).unwrap();
        assert_eq!(find_set(dir.path()).unwrap(), Some(SetId(2)));
        make_dir(&group_dir(dir.path(), GroupId::Set(SetId(3)))).unwrap();
        let error = find_set(dir.path()).unwrap_err().to_string();
        assert!(error.contains("replica sets 2 and 3"), "{error}");
    }
}
