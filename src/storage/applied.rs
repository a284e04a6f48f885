//! What a change did to the store, as the replicated state machine reports it.

use serde::{Deserialize, Serialize};

use super::batch::CreateOutcome;
use super::bulk::PutOutcome;

/// A change that was applied to the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Applied {
    /// A create made a new handle.
    Created,
    /// A create with overwrite replaced an existing handle.
    Replaced,
    /// Any other change.
    Done,
    /// What a bulk put of whole handles did to them (appended last: the variants
    /// before it keep their postcard tags in remembered results).
    Imported(ImportTally),
}

impl From<CreateOutcome> for Applied {
    fn from(outcome: CreateOutcome) -> Self {
        match outcome {
            CreateOutcome::Created => Applied::Created,
            CreateOutcome::Replaced => Applied::Replaced,
        }
    }
}

/// How many handles of a bulk put came to each [`PutOutcome`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportTally {
    /// Handles that did not exist.
    pub created: u64,
    /// Handles whose other values were replaced.
    pub replaced: u64,
    /// Handles that had these very values.
    pub unchanged: u64,
    /// Handles left with other values.
    pub differing: u64,
    /// Puts the store refused.
    pub refused: u64,
}

impl ImportTally {
    /// Counts one more put that came to `outcome`.
    pub fn count(&mut self, outcome: PutOutcome) {
        let counter = match outcome {
            PutOutcome::Created => &mut self.created,
            PutOutcome::Replaced => &mut self.replaced,
            PutOutcome::Unchanged => &mut self.unchanged,
            PutOutcome::Differs => &mut self.differing,
            PutOutcome::Refused => &mut self.refused,
        };
        *counter += 1;
    }

    /// Both tallies added up.
    pub fn add(&mut self, other: ImportTally) {
        self.created += other.created;
        self.replaced += other.replaced;
        self.unchanged += other.unchanged;
        self.differing += other.differing;
        self.refused += other.refused;
    }
}
