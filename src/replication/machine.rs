//! The seam between a group and what it replicates: a [`Machine`] says what its log
//! entries carry and how one is applied to a write batch of the group's store ([`OpenBatch`]).
//!
//! Everything else a group needs from its state — applying entries in order in one
//! durable batch with the applied marker, remembering results to apply a request once,
//! snapshots — is the same for every machine and lives in [`super::StateMachine`].
//! A machine's command is its log format: it is versioned by the machine (variants are
//! never changed or removed, a new form of a command is a new variant), because a
//! node must read every entry its log still holds after an upgrade.

use std::fmt::Debug;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::storage::{OpenBatch, StorageError};

/// A replicated state machine, as a type: its log command, its output, and how the one
/// becomes the other.
pub trait Machine: Send + Sync + 'static {
    /// What a log entry carries.
    type Command: Serialize
        + DeserializeOwned
        + Clone
        + Debug
        + PartialEq
        + Eq
        + Send
        + Sync
        + 'static;
    /// What applying a command answers: a success or a deterministic refusal, the same
    /// on every replica.
    type Output: Serialize
        + DeserializeOwned
        + Clone
        + Debug
        + PartialEq
        + Eq
        + Send
        + Sync
        + 'static;

    /// What the machine holds, for logs and errors ("handles", "the cluster map").
    const NAME: &'static str;

    /// Applies `command` to `batch` (the command stays the log's entry's: what the
    /// store keeps of it is copied). The batch holds its tables open across the
    /// entries of one apply ([`OpenBatch`]). A refusal is an output and must leave the batch as
    /// it was; an error means the store failed, and the node stops rather than let its
    /// replica diverge. Must be deterministic: no clock, no randomness, nothing but the
    /// command and the batch.
    fn apply(
        batch: &mut OpenBatch<'_>,
        command: &Self::Command,
    ) -> Result<Self::Output, StorageError>;

    /// Whether `output` settles the request it answers. A request proposed again
    /// within the window is answered with its settled output and changes nothing; an
    /// output that does not settle (a refusal that changed nothing and may not recur,
    /// such as permissions changed under the write) is not remembered, so the request
    /// may be proposed again under the same id and carried out then. Every output
    /// settles unless the machine says otherwise.
    fn settles(_output: &Self::Output) -> bool {
        true
    }
}
