//! Why a node could not start or stop cleanly.

use std::net::SocketAddr;

use thiserror::Error;

use crate::config::ConfigError;
use crate::http::HttpError;
use crate::replication::network::SecretFileError;
use crate::replication::{GroupError, GroupId};
use crate::server::ServerError;

/// Why [`super::Node::start`] or [`super::Node::run`] failed.
#[derive(Debug, Error)]
pub enum NodeError {
    /// A setting is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A bootstrap administrator was asked of a node that does not form its own set.
    #[error(
        "a bootstrap administrator (--admin-key, --admin-secret-file) needs a node that forms its own set; give it to `hdl cluster init` instead"
    )]
    FirstAdminWithoutOwnSet,
    /// The server key could not be read or made.
    #[error(transparent)]
    ServerKey(#[from] super::server_key::ServerKeyError),
    /// The data directory could not be made or is open to other users.
    #[error(transparent)]
    DataDir(#[from] super::data_dir::DataDirError),
    /// The cluster secret could not be read or created.
    #[error(transparent)]
    Secret(#[from] SecretFileError),
    /// A Handle protocol socket could not be bound.
    #[error(transparent)]
    Listen(#[from] ServerError),
    /// An HTTP or HTTPS socket could not be bound, or its certificate used.
    #[error(transparent)]
    Http(#[from] HttpError),
    /// The peer listener could not be bound.
    #[error("cannot listen for peers on {address}: {source}")]
    PeerListen {
        /// The address asked for.
        address: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The address of a bound socket could not be read.
    #[error("cannot read a bound socket's address: {0}")]
    Address(#[source] std::io::Error),
    /// The node's groups could not start.
    #[error(transparent)]
    Groups(#[from] super::groups::GroupsError),
    /// The node's replica set could not start.
    #[error(transparent)]
    Set(#[from] super::set::JoinError),
    /// The bootstrap administrator's prefix handles could not be created.
    #[error("cannot create the bootstrap administrator: {0}")]
    FirstAdmin(#[source] crate::service::Error),
    /// Serving (or a blocking task of the start) failed.
    #[error("serving failed: {0}")]
    Serve(#[source] std::io::Error),
    /// One of the node's groups stopped on a failure (of its storage): the node stops
    /// rather than answer from a store that can no longer change.
    #[error(
        "{group} failed ({source}); the node stops rather than serve a frozen store: \
         fix the cause (a full or failing disk?) and start it again"
    )]
    GroupFailed {
        /// The group.
        group: GroupId,
        /// Why it stopped.
        source: GroupError,
    },
    /// A group did not stop cleanly.
    #[error("a group did not stop cleanly: {0}")]
    StopGroup(#[source] GroupError),
}
