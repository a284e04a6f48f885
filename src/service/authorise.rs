//! Who may change what: each administrative [`Operation`] is broken into the exact
//! permissioned acts it performs (digest §6.1; Handle.Net reference §1.7) and each is
//! checked with [`auth::authorise`] against the handle records it names, as
//! [`Records`] holds them: fetched from wherever they live (module `records`: this
//! member's store, or the replica set owning their slot), never a stale copy.
//!
//! Owns [`AuthPolicy`] and the mapping from [`Operation`] to [`Act`]s:
//! * create → `ADD_HANDLE` (`ADD_DERIVED_PREFIX` for `0.NA/a.b`) on the prefix handle;
//!   replacing an existing handle (OverwriteWhenExists) also needs `DELETE_HANDLE` on it;
//! * delete → `DELETE_HANDLE`;
//! * add, modify, remove → `ADD_VALUE`, `MODIFY_VALUE`, `REMOVE_VALUE` per value, or
//!   the `*_ADMIN` bits when the value (old or new) is an HS_ADMIN; an add that
//!   replaces a taken index (OverwriteWhenExists) is a modification of that value;
//! * listing and counting → `LIST_HANDLES` on the prefix handle; reading non-public
//!   values → `READ_VALUE`; listing prefixes → server administrators only;
//! * a bulk import is a create per handle, a bulk export a listing per prefix and a
//!   read of the non-public values per handle;
//! * homing and unhoming a prefix → server administrators only.
//!
//! An anonymous caller is [`Error::AuthenticationNeeded`] before anything is read.
//! A check is pure: a record it needs and [`Records`] does not hold yet reads as
//! missing and is noted, so the service fetches it and checks again (module `records`).

use crate::auth::permissions::prefix_admin_handle;
use crate::auth::{self, Identity, Operation as Act};
use crate::names::{self, Handle};
use crate::values::{HandleValue, KnownType, ValueIndex};

use super::records::Records;
use super::{Caller, Error, ExistingHandle, ExistingValue, Operation};

/// Who administers this server beyond what HS_ADMIN values say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthPolicy {
    /// Server administrators: they may do everything (J9 `server_admins` with
    /// `server_admin_full_access`).
    pub server_admins: Vec<Identity>,
}

/// The identity of `caller`, or [`Error::AuthenticationNeeded`].
fn identity(caller: &Caller) -> Result<&Identity, Error> {
    match caller {
        Caller::Administrator { identity } => Ok(identity),
        Caller::Anonymous { .. } => Err(Error::AuthenticationNeeded),
    }
}

/// Checks that `caller` may carry out `operation`.
pub fn operation(
    policy: &AuthPolicy,
    records: &Records,
    caller: &Caller,
    operation: &Operation,
) -> Result<(), Error> {
    let check = Checker::of(policy, records, caller)?;
    match operation {
        Operation::Create {
            handle, existing, ..
        } => {
            check.on_prefix(handle, Act::create(handle))?;
            if *existing == ExistingHandle::Overwrite
                && let Some(values) = check.values(handle)
            {
                check.on_handle(&values, Act::DeleteHandle)?;
            }
            Ok(())
        }
        Operation::Delete { handle } => check.on_target(handle, |_| vec![Act::DeleteHandle]),
        Operation::AddValues {
            handle,
            values,
            existing,
        } => check.on_target(handle, |old| {
            values
                .iter()
                .map(|new| match (existing, find(old, new.index)) {
                    (ExistingValue::Replace, Some(old)) => modify(old, new),
                    _ if is_admin(new) => Act::AddAdminValue,
                    _ => Act::AddValue,
                })
                .collect()
        }),
        Operation::ModifyValues { handle, values } => check.on_target(handle, |old| {
            values
                .iter()
                .map(|new| find(old, new.index).map_or(Act::ModifyValue, |o| modify(o, new)))
                .collect()
        }),
        Operation::RemoveValues { handle, indexes } => check.on_target(handle, |old| {
            indexes
                .iter()
                .map(|&index| match find(old, index) {
                    Some(old) if is_admin(old) => Act::RemoveAdminValue,
                    _ => Act::RemoveValue,
                })
                .collect()
        }),
        Operation::HomePrefix { .. } | Operation::UnhomePrefix { .. } => check.server_admin(),
    }
}

/// Checks that `caller` may list the handles under `prefix`.
pub fn listing(
    policy: &AuthPolicy,
    records: &Records,
    caller: &Caller,
    prefix: &str,
) -> Result<(), Error> {
    let check = Checker::of(policy, records, caller)?;
    let prefix_handle = names::prefix_handle(prefix).map_err(|_| Error::HandleNotFound)?;
    let values = check.values(&prefix_handle).unwrap_or_default();
    check.authorise(Act::ListHandles, &[], &values)
}

/// Checks that `caller` may read the non-public values of `handle` (READ_VALUE); a
/// missing handle is [`Error::HandleNotFound`].
pub fn reading(
    policy: &AuthPolicy,
    records: &Records,
    caller: &Caller,
    handle: &Handle,
) -> Result<(), Error> {
    let check = Checker::of(policy, records, caller)?;
    check.on_target(handle, |_| vec![Act::ReadValue])
}

/// Checks that `caller` may read the non-public values of a handle holding `values`
/// (READ_VALUE, governed by its own HS_ADMIN values).
pub fn reading_values(
    policy: &AuthPolicy,
    records: &Records,
    caller: &Caller,
    values: &[HandleValue],
) -> Result<(), Error> {
    let check = Checker::of(policy, records, caller)?;
    check.on_handle(values, Act::ReadValue)
}

/// Checks that `caller` is a server administrator.
pub fn server_admin(policy: &AuthPolicy, records: &Records, caller: &Caller) -> Result<(), Error> {
    let check = Checker::of(policy, records, caller)?;
    check.server_admin()
}

fn find(values: &[HandleValue], index: ValueIndex) -> Option<&HandleValue> {
    values.iter().find(|value| value.index == index)
}

fn is_admin(value: &HandleValue) -> bool {
    value.known_type() == Some(KnownType::HsAdmin)
}

/// Replacing `old` by `new`: an admin modification if either is an HS_ADMIN.
fn modify(old: &HandleValue, new: &HandleValue) -> Act {
    if is_admin(old) || is_admin(new) {
        Act::ModifyAdminValue
    } else {
        Act::ModifyValue
    }
}

/// One identity's checks against one store snapshot.
struct Checker<'a> {
    policy: &'a AuthPolicy,
    records: &'a Records,
    identity: &'a Identity,
}

impl<'a> Checker<'a> {
    /// A checker for `caller`, who must be an authenticated administrator.
    fn of(
        policy: &'a AuthPolicy,
        records: &'a Records,
        caller: &'a Caller,
    ) -> Result<Checker<'a>, Error> {
        Ok(Checker {
            policy,
            records,
            identity: identity(caller)?,
        })
    }

    /// Every value of `handle` (HS_SECKEY and non-public ones included); `None` when
    /// it does not exist or is not fetched yet.
    fn values(&self, handle: &Handle) -> Option<Vec<HandleValue>> {
        self.records.values(handle)
    }

    /// The values of the handle named `text`, for group look-ups.
    fn lookup(&self, text: &str) -> Option<Vec<HandleValue>> {
        let handle = Handle::parse(text).ok()?;
        self.values(&handle)
    }

    fn authorise(
        &self,
        act: Act,
        target: &[HandleValue],
        prefix: &[HandleValue],
    ) -> Result<(), Error> {
        let lookup = |text: &str| self.lookup(text);
        auth::authorise(
            self.identity,
            act,
            target,
            prefix,
            &self.policy.server_admins,
            &lookup,
        )
        .map_err(Error::NotPermitted)
    }

    /// An act governed by the prefix handle of `handle`.
    fn on_prefix(&self, handle: &Handle, act: Act) -> Result<(), Error> {
        // A prefix handle too long to be a handle governs nothing: only server
        // administrators pass.
        let values = prefix_admin_handle(handle)
            .ok()
            .and_then(|prefix| self.values(&prefix))
            .unwrap_or_default();
        self.authorise(act, &[], &values)
    }

    /// An act governed by `values`, the target handle's.
    fn on_handle(&self, values: &[HandleValue], act: Act) -> Result<(), Error> {
        self.authorise(act, values, &[])
    }

    /// The acts `acts` picks from the target's values, each checked; a
    /// missing target is [`Error::HandleNotFound`], as J9 answers.
    fn on_target(
        &self,
        handle: &Handle,
        acts: impl FnOnce(&[HandleValue]) -> Vec<Act>,
    ) -> Result<(), Error> {
        let values = self.values(handle).ok_or(Error::HandleNotFound)?;
        for act in acts(&values) {
            self.on_handle(&values, act)?;
        }
        Ok(())
    }

    /// Server administrators only.
    fn server_admin(&self) -> Result<(), Error> {
        // No HS_ADMIN value applies, so only the server administrators can pass.
        self.authorise(Act::ListHandles, &[], &[])
    }
}
