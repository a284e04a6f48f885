//! Admin commands as data, and their deterministic application to a [`WriteBatch`].
//!
//! A [`Command`] is what a replicated log carries: applying the same commands in the
//! same order to the same store gives the same store and the same [`CommandResult`]s on
//! every replica, because a command holds everything it needs (its values carry their
//! timestamps; nothing here reads a clock). Refusals are results, not failures.

use serde::{Deserialize, Serialize};

use super::batch::{CreateOutcome, ExistingHandle, ExistingValue, WriteBatch};
use super::error::{Refusal, StorageError};
use crate::names::Handle;
use crate::values::{HandleValue, ValueIndex};

/// One administrative change to the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// Create a handle with these values.
    Create {
        /// The handle, as written by the client.
        handle: Handle,
        /// Its values, timestamps already assigned.
        values: Vec<HandleValue>,
        /// Whether an existing handle is replaced or refused.
        existing: ExistingHandle,
    },
    /// Delete a handle and its values.
    Delete {
        /// The handle.
        handle: Handle,
    },
    /// Add values with new indexes.
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
    /// Mark a naming authority as served here.
    HomePrefix {
        /// The prefix, as written.
        prefix: String,
    },
    /// Stop serving a naming authority.
    UnhomePrefix {
        /// The prefix.
        prefix: String,
    },
}

/// What applying a command did: a success or a deterministic refusal.
pub type CommandResult = Result<Applied, Refusal>;

/// A command that changed the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Applied {
    /// A create made a new handle.
    Created,
    /// A create with overwrite replaced an existing handle.
    Replaced,
    /// Any other command.
    Done,
}

impl From<CreateOutcome> for Applied {
    fn from(outcome: CreateOutcome) -> Self {
        match outcome {
            CreateOutcome::Created => Applied::Created,
            CreateOutcome::Replaced => Applied::Replaced,
        }
    }
}

impl WriteBatch {
    /// Applies `command`. A refusal is returned as `Ok(Err(_))` and leaves the batch
    /// unchanged; `Err(_)` means the store failed and the batch must be dropped.
    pub fn apply(&mut self, command: Command) -> Result<CommandResult, StorageError> {
        let outcome = match command {
            Command::Create {
                handle,
                values,
                existing,
            } => self.create(&handle, values, existing).map(Applied::from),
            Command::Delete { handle } => self.delete(&handle).map(|()| Applied::Done),
            Command::AddValues {
                handle,
                values,
                existing,
            } => self
                .add_values(&handle, values, existing)
                .map(|()| Applied::Done),
            Command::ModifyValues { handle, values } => {
                self.modify_values(&handle, values).map(|()| Applied::Done)
            }
            Command::RemoveValues { handle, indexes } => self
                .remove_values(&handle, &indexes)
                .map(|()| Applied::Done),
            Command::HomePrefix { prefix } => self.home_prefix(&prefix).map(|()| Applied::Done),
            Command::UnhomePrefix { prefix } => self.unhome_prefix(&prefix).map(|()| Applied::Done),
        };
        match outcome {
            Ok(applied) => Ok(Ok(applied)),
            Err(StorageError::Refused(refusal)) => Ok(Err(refusal)),
            Err(failure) => Err(failure),
        }
    }
}
