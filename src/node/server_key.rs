//! The node's server key and what it knows of the other members' (digest §2.5, §6.2).
//!
//! Owns [`NodeKeys`], [`load_or_create`] (the key file: read it, or make a new RSA key there on
//! first start, mode 0600, never overwriting a file) and [`learn_member_keys`], the
//! task that asks every member of the cluster it knows of for its public key
//! ([`NodeCall::ServerKey`]) until it has them all, keeps checking for new members,
//! and asks every member again now and then (a member restarted on a new data
//! directory under the same id has a new key). Members' keys travel only in node
//! calls: no persisted record changes.

use std::collections::BTreeSet;
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;

use super::calls::{NodeAnswer, NodeCall, call_node};
use super::set::SetHost;
use crate::auth::{KeyError, SigningKey};
use crate::replication::admin::Member;
use crate::replication::{AdminClient, NodeId};
use crate::service::site::MemberKeys;

/// The key file's name in the data directory, when `--server-key` names none.
pub const SERVER_KEY_FILE: &str = "server_key.pem";

/// How often the node looks for members whose key it does not know.
const LEARN_EVERY: Duration = Duration::from_millis(500);
/// Every how many looks it asks every member, known or not (every 30 s).
const REFRESH_EVERY: u32 = 60;

/// Why the server key could not be had.
#[derive(Debug, Error)]
pub enum ServerKeyError {
    /// The file could not be read, created or written.
    #[error("server key {path}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file holds no usable key, or no key could be made.
    #[error("server key {path}: {source}")]
    Key {
        /// The file.
        path: PathBuf,
        /// Why.
        source: KeyError,
    },
}

/// The key in `path`; when there is no such file, a new key written there (PKCS#8
/// PEM, mode 0600). An existing file is never replaced: a bad one is an error.
pub fn load_or_create(path: &Path) -> Result<SigningKey, ServerKeyError> {
    let file_error = |source| ServerKeyError::File {
        path: path.to_owned(),
        source,
    };
    let key_error = |source| ServerKeyError::Key {
        path: path.to_owned(),
        source,
    };
    match std::fs::read_to_string(path) {
        Ok(pem) => return SigningKey::from_pem(&pem).map_err(key_error),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(file_error(error)),
    }
    let key = SigningKey::generate().map_err(key_error)?;
    let pem = key.to_pem().map_err(key_error)?;
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(file_error)?;
    file.write_all(pem.as_bytes()).map_err(file_error)?;
    file.sync_all().map_err(file_error)?;
    tracing::info!(path = %path.display(), "created the server key");
    Ok(key)
}

/// The node's server key, its public half and the book of members' keys.
#[derive(Debug)]
pub struct NodeKeys {
    /// Signs certified answers.
    pub signing: Arc<SigningKey>,
    /// Its public half, HS_PUBKEY data.
    pub public: Vec<u8>,
    /// The members' keys, knowing only this node's at first.
    pub members: Arc<MemberKeys>,
}

impl NodeKeys {
    /// The keys of node `id`, whose key is in (or made in) `file`
    /// ([`load_or_create`]).
    pub fn load_or_create(file: &Path, id: NodeId) -> Result<NodeKeys, ServerKeyError> {
        let signing = load_or_create(file)?;
        let public = signing.public_key().encode();
        let members = MemberKeys::with_own(id, public.clone());
        Ok(NodeKeys {
            signing: Arc::new(signing),
            public,
            members: Arc::new(members),
        })
    }
}

/// Asks, every half second, each member of the cluster map and of this node's set
/// whose key `keys` lacks for it (every 30 s, each member), with `client`; runs until
/// aborted.
pub async fn learn_member_keys(keys: Arc<MemberKeys>, sets: Arc<SetHost>, client: AdminClient) {
    let mut tick = tokio::time::interval(LEARN_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for looks in 1u32.. {
        tick.tick().await;
        let refresh = looks % REFRESH_EVERY == 0;
        for member in members_to_ask(&keys, &sets, refresh) {
            let answer = call_node(&client, member.node.peer, &NodeCall::ServerKey).await;
            match answer {
                Ok(NodeAnswer::ServerKey(key)) if !key.is_empty() => keys.insert(member.id, key),
                Ok(_) => {
                    tracing::debug!(member = member.id, "a member without a server key");
                }
                Err(error) => {
                    tracing::debug!(member = member.id, %error, "server key not learned yet")
                }
            }
        }
    }
}

/// Every member the node knows of (its set's, and every set's in the cluster map)
/// whose key is not in `keys` (with `every`, whether or not), each once.
fn members_to_ask(keys: &MemberKeys, sets: &SetHost, every: bool) -> Vec<Member> {
    let mut members: Vec<Member> = sets
        .map()
        .map()
        .map(|map| {
            map.sets
                .values()
                .flat_map(|set| set.members.values().cloned())
                .collect()
        })
        .unwrap_or_default();
    if let Some(local) = sets.local() {
        members.extend(local.group.members().0);
    }
    let mut seen = BTreeSet::<NodeId>::new();
    members.retain(|member| (every || !keys.knows(member.id)) && seen.insert(member.id));
    members
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_key_is_made_once_with_mode_0600_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(SERVER_KEY_FILE);
        let made = load_or_create(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let read = load_or_create(&path).unwrap();
        assert_eq!(read.public_key(), made.public_key());
    }

    #[test]
    fn a_bad_key_file_is_an_error_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(SERVER_KEY_FILE);
        std::fs::write(&path, "not a key").unwrap();
        assert!(matches!(
            load_or_create(&path),
            Err(ServerKeyError::Key { .. })
        ));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "not a key");
    }
}
