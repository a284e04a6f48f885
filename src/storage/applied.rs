//! What a change did to the store, as the replicated state machine reports it.

use serde::{Deserialize, Serialize};

use super::batch::CreateOutcome;

/// A change that was applied to the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Applied {
    /// A create made a new handle.
    Created,
    /// A create with overwrite replaced an existing handle.
    Replaced,
    /// Any other change.
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
