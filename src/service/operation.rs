//! What a client asks the service to change: an [`Operation`], built by the edges and
//! the CLI, never a log entry.
//!
//! Owns [`Operation`] and the one conversion from a validated, authorised operation
//! to the replicated log's command ([`log_command`]); nothing else in the crate above
//! the replication layer builds a log command. The service validates and timestamps
//! an operation ([`Operation::prepare`]), authorises it (module `authorise`), then
//! converts it and proposes the command.
//!
//! A handle's size is its values' octets in the RFC 3652 value list encoding
//! ([`value_list_len`]); [`Operation::size_after`] is what a create, add or modify
//! would make it, which the service bounds before proposing the write.
//!
//! A write a client may send again is proposed under a request id derived from who
//! sent it, the client's name for it and the operation ([`Operation::request_id`]),
//! so the set answers a second proposal with the first one's result.

use sha2::{Digest, Sha256};

use crate::names::Handle;
use crate::replication::guard::Basis;
use crate::replication::{HandleCommand, RequestId};
use crate::values::{HandleValue, ValueIndex, value_list_len};

pub use crate::storage::{ExistingHandle, ExistingValue};

use super::{Caller, ClientRequest, Error};

/// Heads what [`Operation::request_id`] hashes: a new form of the id is a new label.
const REQUEST_ID_LABEL: &[u8] = b"hdl client request 1\0";

/// One administrative change a client asked for.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Operation {
    /// Create a handle with these values.
    Create {
        /// The handle, as written by the client.
        handle: Handle,
        /// Its values (the server stamps their timestamps).
        values: Vec<HandleValue>,
        /// Whether an existing handle is replaced or the create refused.
        existing: ExistingHandle,
    },
    /// Delete a handle and its values.
    Delete {
        /// The handle.
        handle: Handle,
    },
    /// Add values.
    AddValues {
        /// The handle.
        handle: Handle,
        /// The values to add.
        values: Vec<HandleValue>,
        /// Whether a value whose index is taken is refused or replaced (the
        /// OverwriteWhenExists flag).
        existing: ExistingValue,
    },
    /// Replace values with the same indexes.
    ModifyValues {
        /// The handle.
        handle: Handle,
        /// The new values.
        values: Vec<HandleValue>,
    },
    /// Remove values by index.
    RemoveValues {
        /// The handle.
        handle: Handle,
        /// The indexes to remove.
        indexes: Vec<ValueIndex>,
    },
    /// Serve a naming authority here (OC_HOME_NA).
    HomePrefix {
        /// The prefix, as written.
        prefix: String,
    },
    /// Stop serving a naming authority (OC_UNHOME_NA).
    UnhomePrefix {
        /// The prefix.
        prefix: String,
    },
}

impl Operation {
    /// The handle the operation changes; `None` for prefix operations.
    pub fn handle(&self) -> Option<&Handle> {
        match self {
            Operation::Create { handle, .. }
            | Operation::Delete { handle }
            | Operation::AddValues { handle, .. }
            | Operation::ModifyValues { handle, .. }
            | Operation::RemoveValues { handle, .. } => Some(handle),
            Operation::HomePrefix { .. } | Operation::UnhomePrefix { .. } => None,
        }
    }

    /// The handle whose slot decides which replica set carries the operation out: the
    /// handle it changes, or the prefix handle `0.NA/<prefix>` of a prefix it homes or
    /// unhomes.
    pub fn routing_handle(&self) -> Result<Handle, Error> {
        match self {
            Operation::HomePrefix { prefix } | Operation::UnhomePrefix { prefix } => {
                crate::names::prefix_handle(prefix).map_err(Error::InvalidHandle)
            }
            Operation::Create { handle, .. }
            | Operation::Delete { handle }
            | Operation::AddValues { handle, .. }
            | Operation::ModifyValues { handle, .. }
            | Operation::RemoveValues { handle, .. } => Ok(handle.clone()),
        }
    }

    /// The request id the replica set knows this operation by when `caller` sends it
    /// under the client's name `request`: the first 8 octets of a SHA-256 over the
    /// caller, the name and the operation as the client sent it (its postcard
    /// encoding, before the server stamps it). The same caller sending the same
    /// operation under the same name gets the same id; a different caller, name or
    /// operation another one, but for a 2^-64 chance.
    pub fn request_id(&self, caller: &Caller, request: ClientRequest) -> RequestId {
        let mut digest = Sha256::new();
        digest.update(REQUEST_ID_LABEL);
        for part in [postcard::to_stdvec(caller), postcard::to_stdvec(self)] {
            // Encoding into a Vec fails only for a type serde cannot describe;
            // neither is one, and an empty part still yields a well-defined id.
            let part = part.unwrap_or_default();
            digest.update((part.len() as u64).to_be_bytes());
            digest.update(part);
        }
        digest.update(request.0.to_be_bytes());
        let digest = digest.finalize();
        let mut head = [0; 8];
        head.copy_from_slice(&digest[..8]);
        RequestId(u64::from_be_bytes(head))
    }

    /// The value indexes of its handle the operation writes or removes (none for a
    /// create or delete, which replace or drop the whole handle).
    pub fn touched_indexes(&self) -> Vec<ValueIndex> {
        match self {
            Operation::AddValues { values, .. } | Operation::ModifyValues { values, .. } => {
                values.iter().map(|value| value.index).collect()
            }
            Operation::RemoveValues { indexes, .. } => indexes.clone(),
            Operation::Create { .. }
            | Operation::Delete { .. }
            | Operation::HomePrefix { .. }
            | Operation::UnhomePrefix { .. } => Vec::new(),
        }
    }

    /// The octets the values of the handle would take once this operation is carried
    /// out on `current` (its values now; `None` when it does not exist): for a create,
    /// its values; for an add or a modify, the current values but those it replaces,
    /// and its own. `None` for an operation that cannot make a handle larger, or one
    /// that would be refused as it stands (an add or modify on a missing handle).
    pub(super) fn size_after(&self, current: Option<&[HandleValue]>) -> Option<usize> {
        match (self, current) {
            (Operation::Create { values, .. }, _) => Some(value_list_len(values)),
            (
                Operation::AddValues { values, .. } | Operation::ModifyValues { values, .. },
                Some(current),
            ) => {
                let kept = current
                    .iter()
                    .filter(|old| values.iter().all(|new| new.index != old.index))
                    .map(HandleValue::encoded_len);
                let added = values.iter().map(HandleValue::encoded_len);
                Some(4 + kept.chain(added).sum::<usize>())
            }
            _ => None,
        }
    }

    /// This operation with every value it writes checked and stamped with `now`, as
    /// the reference server does: the server's clock, not the client's, dates a
    /// change.
    pub(super) fn prepare(mut self, now: u32) -> Result<Operation, Error> {
        let values = match &mut self {
            Operation::Create { values, .. }
            | Operation::AddValues { values, .. }
            | Operation::ModifyValues { values, .. } => values,
            _ => return Ok(self),
        };
        for value in values.iter_mut() {
            value.validate().map_err(|reason| Error::InvalidValue {
                index: value.index,
                reason,
            })?;
            value.timestamp = now;
        }
        Ok(self)
    }
}

/// The replicated log's command carrying out `operation`, prepared and authorised on
/// `basis`: applied only if what the authorisation read still holds.
pub(super) fn guarded_command(operation: Operation, basis: Vec<Basis>) -> HandleCommand {
    HandleCommand::Guarded {
        basis,
        command: Box::new(log_command(operation)),
    }
}

/// The replicated log's command carrying out `operation`, which has been prepared
/// and authorised: the one place a log command is built from a client's request.
pub(super) fn log_command(operation: Operation) -> HandleCommand {
    match operation {
        Operation::Create {
            handle,
            values,
            existing,
        } => HandleCommand::Create {
            handle,
            values,
            existing,
        },
        Operation::Delete { handle } => HandleCommand::Delete { handle },
        Operation::AddValues {
            handle,
            values,
            existing,
        } => HandleCommand::AddValues {
            handle,
            values,
            existing,
        },
        Operation::ModifyValues { handle, values } => {
            HandleCommand::ModifyValues { handle, values }
        }
        Operation::RemoveValues { handle, indexes } => {
            HandleCommand::RemoveValues { handle, indexes }
        }
        Operation::HomePrefix { prefix } => HandleCommand::HomePrefix { prefix },
        Operation::UnhomePrefix { prefix } => HandleCommand::UnhomePrefix { prefix },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(index: u32, text: &str) -> HandleValue {
        HandleValue::new(index, "URL", text)
    }

    #[test]
    fn the_size_after_a_write_counts_replaced_values_once() {
        let handle = Handle::parse("TEST/size").unwrap();
        let current = [url(1, "https://a.example/"), url(2, "https://b.example/")];
        let add = Operation::AddValues {
            handle: handle.clone(),
            values: vec![url(2, "https://longer.example/"), url(3, "x")],
            existing: ExistingValue::Replace,
        };
        let after = [
            url(1, "https://a.example/"),
            url(2, "https://longer.example/"),
            url(3, "x"),
        ];
        assert_eq!(add.size_after(Some(&current)), Some(value_list_len(&after)));
        assert_eq!(add.size_after(None), None);
        let create = Operation::Create {
            handle: handle.clone(),
            values: after.to_vec(),
            existing: ExistingHandle::Overwrite,
        };
        assert_eq!(
            create.size_after(Some(&current)),
            Some(value_list_len(&after))
        );
        let remove = Operation::RemoveValues {
            handle,
            indexes: vec![ValueIndex(1)],
        };
        assert_eq!(remove.size_after(Some(&current)), None);
    }
}
