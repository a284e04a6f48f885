//! Errors of the service layer.

use std::sync::Arc;

use thiserror::Error;

use crate::auth::{AuthError, AuthzError};
use crate::codec::ResponseCode;
use crate::names::NameError;
use crate::replication::GroupError;
use crate::resolver::ResolveError;
use crate::storage::{Refusal, Slot, StorageError};
use crate::values::ValueIndex;
use crate::values::types::InvalidValue;

/// Why a handle operation did not succeed.
#[derive(Debug, Error)]
pub enum Error {
    /// The handle does not exist.
    #[error("handle not found")]
    HandleNotFound,
    /// The prefix is neither served here nor known to this service (not homed, no
    /// handle under it, no prefix handle here).
    #[error("that prefix doesn't live here: this service does not serve {prefix}")]
    NotHomed {
        /// The prefix, as written.
        prefix: String,
    },
    /// The handle exists but has no value the request may see.
    #[error("no value matches the request")]
    ValuesNotFound,
    /// A value's data does not fit its type.
    #[error("value {index} is invalid: {reason}")]
    InvalidValue {
        /// The value's index.
        index: ValueIndex,
        /// What is wrong with it.
        reason: InvalidValue,
    },
    /// The store refused the change; nothing changed.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// The operation needs an authenticated administrator and the caller is anonymous.
    #[error("authentication needed")]
    AuthenticationNeeded,
    /// The authenticated administrator may not do this.
    #[error(transparent)]
    NotPermitted(AuthzError),
    /// The caller did not prove who they claim to be.
    #[error("authentication failed: {0}")]
    Authentication(AuthError),
    /// The key handle of an answer is not held by this service, and no other service
    /// can be asked for it (no resolver configured, or its prefix is this service's).
    #[error("cannot authenticate with {handle}: this service does not hold it")]
    KeyNotHeld {
        /// The key handle.
        handle: String,
    },
    /// The service holding the key handle could not be found or asked.
    #[error("cannot authenticate with {handle}: its service could not be asked: {reason}")]
    KeyService {
        /// The key handle.
        handle: String,
        /// Why.
        reason: String,
    },
    /// A selected value may be read by no one: neither public nor admin read.
    #[error("a selected value is readable by no one (neither public nor admin read)")]
    Unreadable,
    /// A handle the operation would make is not a valid handle.
    #[error("invalid handle: {0}")]
    InvalidHandle(NameError),
    /// Too many key checks are waiting for a free core; try again shortly.
    #[error("too many authentications in progress; try again")]
    Busy,
    /// The handle's slot is not one this replica set answers for now: another set owns
    /// it, or it is moving in.
    #[error("{0} is not answered here now")]
    NotHere(Slot),
    /// The replica set owning the handle's slot could not be reached, or gave no
    /// answer for the slot within the router's patience (a slot changing hands, a set
    /// down): the client tries again shortly.
    #[error("the replica set answering for {0} is unavailable now; try again")]
    Unavailable(Slot),
    /// This node belongs to no replica set yet, and the request needs one.
    #[error("this node belongs to no replica set yet")]
    NoSet,
    /// The node of another replica set that a request was forwarded to refused it with
    /// this response code (the kinds a router needs to tell apart keep their own
    /// variants).
    #[error("{message}")]
    Remote {
        /// The response code it answered.
        code: ResponseCode,
        /// Its message.
        message: String,
    },
    /// A search names no value type the store indexes.
    #[error("a search needs a TYPE=PATTERN of an indexed type; this server indexes {}", indexed_list(.indexed))]
    NotIndexed {
        /// The types indexed (folded).
        indexed: Vec<String>,
    },
    /// The HS_NAMESPACE (or a template it cites) that should derive a missing handle
    /// is malformed, or its derivation went past its bounds.
    #[error("the template in {handle} cannot be used: {reason}")]
    Template {
        /// The handle holding the namespace or cited template.
        handle: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The store failed.
    #[error("storage failure: {0}")]
    Storage(StorageError),
    /// The replica set could not carry out the write or the fresh read.
    #[error("replication: {0}")]
    Replication(Box<GroupError>),
    /// This server answers resolutions only (a caching resolver); `request` is for
    /// the handle's own service.
    #[error(
        "this server is a caching resolver: it answers resolutions only, not {request}; \
         send it to the handle's own service"
    )]
    ResolutionOnly {
        /// What was asked, for the message ("administration", "sessions", …).
        request: &'static str,
    },
    /// Resolution through the Global Handle Registry failed (shared by every caller
    /// that waited for the same upstream request).
    #[error("global resolution: {0}")]
    Upstream(Arc<ResolveError>),
    /// `limit` distinct resolutions wait for their services already.
    #[error("{limit} resolutions are waiting for their services already; try again")]
    TooManyPending {
        /// The bound.
        limit: usize,
    },
}

/// `indexed` for a message: the names, or that there are none.
fn indexed_list(indexed: &[String]) -> String {
    if indexed.is_empty() {
        "no type ([search] indexed_types is empty)".to_owned()
    } else {
        indexed.join(", ")
    }
}

impl From<GroupError> for Error {
    fn from(error: GroupError) -> Self {
        Error::Replication(Box::new(error))
    }
}

impl From<StorageError> for Error {
    fn from(error: StorageError) -> Self {
        match error {
            StorageError::Refused(refusal) => Error::Refused(refusal),
            other => Error::Storage(other),
        }
    }
}
