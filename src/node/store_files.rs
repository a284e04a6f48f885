//! A stopped node's handle store, offline (`hdl store`): where it is under the data
//! directory, how full its tables' pages are, and compacting it.
//!
//! The work is the storage layer's ([`crate::storage::compact`]); this module only
//! knows where a node keeps the files ([`super::groups`]). Both calls are refused while
//! the node runs: redb locks the files.

use std::path::{Path, PathBuf};

use crate::replication::GroupId;
pub use crate::storage::{Compacted, StorageError, TableFill};
use crate::storage::{compact, table_fill};

use super::groups::{GroupsError, HANDLE_STORE_FILE, find_set, group_dir};

/// The files of the replica set a data directory holds.
#[derive(Debug, Clone)]
pub struct SetFiles {
    /// The handle store.
    pub store: PathBuf,
}

impl SetFiles {
    /// The files of the replica set whose directory `data_dir` holds, if any.
    pub fn find(data_dir: &Path) -> Result<Option<SetFiles>, GroupsError> {
        Ok(find_set(data_dir)?.map(|set| {
            let dir = group_dir(data_dir, GroupId::Set(set));
            SetFiles {
                store: dir.join(HANDLE_STORE_FILE),
            }
        }))
    }

    /// How full the pages of each table of the store are.
    pub fn fill(&self) -> Result<Vec<TableFill>, StorageError> {
        table_fill(&self.store)
    }

    /// Rebuilds the store in key order.
    pub fn compact_store(&self) -> Result<Compacted, StorageError> {
        compact(&self.store)
    }
}
