//! Where the service reads the handle records that decide a request — the target,
//! its prefix handle `0.NA/<prefix>`, HS_VLIST groups, key handles — when the ring of
//! hash slots spreads them over several replica sets.
//!
//! Owns [`RecordSource`], the seam through which records held by another replica set
//! are read (the routing layer installs one that asks the set owning the slot), the
//! check that this member's store answers reads of a handle ([`held_here`]), and
//! [`Records`], the records an authorisation check has fetched so far. A record is
//! read from this member's store only when the store answers reads of its slot; any
//! other is fetched from its owner, never taken from a stale local copy. Without a
//! source, such a record is [`Error::NotHere`].
//!
//! Authorisation checks are pure and synchronous (group look-ups recurse inside
//! [`crate::auth::authorise`]), so they run over [`Records`]: a look-up of a handle not
//! fetched yet reads as missing and is noted; the service fetches what was noted and
//! runs the check again, until nothing is missing or [`MAX_FETCHED`] records are held
//! (a check can only deny for want of a record).

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::Debug;

use async_trait::async_trait;

use crate::auth::permissions::MAX_GROUP_LOOKUPS;
use crate::names::Handle;
use crate::replication::guard::Basis;
use crate::replication::slot_of;
use crate::storage::{ReadSnapshot, Slice, Slot};
use crate::values::{HandleValue, ValueIndex, ValueSelection};

use super::{Error, Service};

/// The most records one authorisation check fetches: the group look-ups
/// [`crate::auth::authorise`] allows, the target and its prefix handle, and a margin.
pub const MAX_FETCHED: usize = MAX_GROUP_LOOKUPS + 4;

/// Reads handle records this member's store does not answer for.
#[async_trait]
pub trait RecordSource: Send + Sync + Debug {
    /// Every value of `handle` (HS_SECKEY and non-public ones included) as the replica
    /// set owning its slot holds it; `None` when it does not exist there.
    async fn values(&self, handle: &Handle) -> Result<Option<Vec<HandleValue>>, Error>;
}

/// The slot a router found for a handle in a ring of `slot_count` slots: what
/// [`held_here_in`] takes instead of hashing the handle again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoutedSlot {
    /// The ring's slot count in the router's map.
    pub slot_count: u32,
    /// The handle's slot in it.
    pub slot: Slot,
}

/// Whether the store behind `read` answers reads of `handle`: a whole store answers
/// every handle, a sliced one those of the slots it owns, exports or holds frozen;
/// [`Error::NotHere`] otherwise.
pub fn held_here(read: &ReadSnapshot, handle: &Handle) -> Result<(), Error> {
    held_here_in(read, handle, None)
}

/// [`held_here`] for a handle whose slot a router found (`routed`): reused when the
/// store's ring has the router's slot count, so one resolution hashes its handle once.
pub fn held_here_in(
    read: &ReadSnapshot,
    handle: &Handle,
    routed: Option<RoutedSlot>,
) -> Result<(), Error> {
    let Slice::Ring(count) = read.slice()? else {
        return Ok(());
    };
    let slot = match routed {
        Some(routed) if routed.slot_count == count => routed.slot,
        _ => slot_of(handle.key(), count),
    };
    match read.slot_state(slot)? {
        Some(state) if state.answers_reads() => Ok(()),
        _ => Err(Error::NotHere(slot)),
    }
}

/// The records an authorisation check has fetched, by folded key, and the handles it
/// asked for that were not fetched yet.
#[derive(Debug, Default)]
pub(super) struct Records {
    known: HashMap<String, (Handle, Option<Vec<HandleValue>>)>,
    missing: RefCell<Vec<Handle>>,
}

impl Records {
    /// The values of `handle` if fetched (`None` when it does not exist); a handle
    /// not fetched yet reads as missing and is noted.
    pub(super) fn values(&self, handle: &Handle) -> Option<Vec<HandleValue>> {
        match self.known.get(handle.key()) {
            Some((_, values)) => values.clone(),
            None => {
                let mut missing = self.missing.borrow_mut();
                if !missing.iter().any(|noted| noted.key() == handle.key()) {
                    missing.push(handle.clone());
                }
                None
            }
        }
    }

    fn take_missing(&mut self) -> Vec<Handle> {
        std::mem::take(self.missing.get_mut())
    }

    /// What a write to `target` touching `indexes` of it was authorised on: a
    /// [`Basis`] for each record fetched that the store behind `read` answers for
    /// (the others are not in this replica set's log to check again).
    pub(super) fn basis(
        &self,
        read: &ReadSnapshot,
        target: &Handle,
        indexes: &[ValueIndex],
    ) -> Result<Vec<Basis>, Error> {
        let mut basis = Vec::new();
        for (handle, values) in self.known.values() {
            match held_here(read, handle) {
                Ok(()) => {}
                Err(Error::NotHere(_)) => continue,
                Err(other) => return Err(other),
            }
            let touched = if handle.key() == target.key() {
                indexes.to_vec()
            } else {
                Vec::new()
            };
            basis.push(Basis::of(handle.clone(), values.as_deref(), touched));
        }
        Ok(basis)
    }
}

impl Service {
    /// Every value of `handle` from this member's store, which must answer reads of
    /// its slot ([`Error::NotHere`] otherwise); `None` when it does not exist. What a
    /// forwarded record read is answered with.
    pub fn values_held_here(&self, handle: &Handle) -> Result<Option<Vec<HandleValue>>, Error> {
        let read = self.store.read()?;
        held_here(&read, handle)?;
        let record = read.get(handle, &ValueSelection::all())?;
        Ok(record.map(|record| record.values))
    }

    /// Every value of `handle` from wherever it lives: this member's store when it
    /// answers for the handle's slot, else the replica set owning it.
    pub(super) async fn values_of(
        &self,
        handle: &Handle,
    ) -> Result<Option<Vec<HandleValue>>, Error> {
        match (self.values_held_here(handle), &self.records) {
            (Err(Error::NotHere(_)), Some(source)) => source.values(handle).await,
            (held, _) => held,
        }
    }

    /// Runs `check` over the records it needs, fetching them (see the module docs).
    /// Returns the records the check read.
    pub(super) async fn authorised(
        &self,
        check: impl Fn(&Records) -> Result<(), Error>,
    ) -> Result<Records, Error> {
        let mut records = Records::default();
        loop {
            let outcome = check(&records);
            let missing = records.take_missing();
            if missing.is_empty() || records.known.len() >= MAX_FETCHED {
                return outcome.map(|()| records);
            }
            for handle in missing.into_iter().take(MAX_FETCHED) {
                let values = self.values_of(&handle).await?;
                records
                    .known
                    .insert(handle.key().to_owned(), (handle, values));
            }
        }
    }
}
