//! Who may do what: HS_ADMIN values, HS_VLIST admin groups, prefix administrators
//! and server administrators (digest §6.1, §6.4; Handle.Net reference §1.7).
//!
//! Owns [`Identity`], [`Operation`] with its required [`AdminPermissions`],
//! [`prefix_admin_handle`], [`authorise`] and [`admin_record`] (the one reading of an
//! HS_ADMIN value, shared with the values page). Depends on [`crate::names`] and
//! [`crate::values`]; handle values come from the caller and a lookup closure.
//!
//! The J9 rules followed (J9 `HandleServer.authenticateUser`, `adminHasPermission`,
//! `isAdminInGroup`, `doCreateHandle`, `doListHandles`):
//! * An HS_ADMIN value grants its permissions to the identity it names, or to every
//!   member of the HS_VLIST group it names, groups nesting. Index 0 in an HS_ADMIN
//!   value or a group member means any index of that handle (and is not expanded as a
//!   group). Handles compare ASCII-case-insensitively.
//! * Creating a handle, creating a derived prefix and listing handles are governed by
//!   the HS_ADMIN values of the prefix handle (`0.NA/<prefix>`, see
//!   [`prefix_admin_handle`]): an administrator of the prefix with `ADD_HANDLE` may
//!   create handles under it. Every other operation is governed by the HS_ADMIN
//!   values of the target handle alone; a prefix administrator has no implicit
//!   rights over handles that do not name it.
//! * Server administrators (from the configuration, J9 `server_admins` with
//!   `server_admin_full_access`) may do everything; they too may be groups.
//! * Undecodable HS_ADMIN or HS_VLIST data is skipped, as in J9.
//!
//! Invariants: group expansion stops at [`MAX_GROUP_DEPTH`] nested groups and
//! [`MAX_GROUP_LOOKUPS`] lookups, and each group is expanded once, so cycles end.

use std::collections::{HashMap, HashSet, VecDeque};

use crate::names::{Handle, NameError, fold_key, prefix_handle};
use crate::values::{AdminPermissions, AdminRecord, HandleValue, KnownType, ValueList};

use super::error::AuthzError;

/// How deeply HS_VLIST groups may nest below an HS_ADMIN value.
pub const MAX_GROUP_DEPTH: usize = 8;
/// How many group handles one authorisation may look up.
pub const MAX_GROUP_LOOKUPS: usize = 64;

/// An authenticated administrator, `index:handle`; as an administrator reference
/// (in HS_ADMIN or HS_VLIST data, or the server configuration) index 0 means any.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Identity {
    /// The handle holding the key, e.g. `0.NA/10.1000`.
    pub handle: String,
    /// The index of the key value.
    pub index: u32,
}

impl Identity {
    /// Whether this reference names `identity`.
    pub fn matches(&self, identity: &Identity) -> bool {
        (self.index == 0 || self.index == identity.index)
            && fold_key(&self.handle) == fold_key(&identity.handle)
    }
}

/// An administrative operation, by the permission it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// Create a handle (`ADD_HANDLE`, on the prefix handle).
    CreateHandle,
    /// Create a derived prefix handle `0.NA/a.b` (`ADD_DERIVED_PREFIX`, on `0.NA/a`).
    CreateDerivedPrefix,
    /// Delete a handle (`DELETE_HANDLE`).
    DeleteHandle,
    /// Add a value that is not HS_ADMIN (`ADD_VALUE`).
    AddValue,
    /// Change a value that is not HS_ADMIN (`MODIFY_VALUE`).
    ModifyValue,
    /// Remove a value that is not HS_ADMIN (`REMOVE_VALUE`).
    RemoveValue,
    /// Add an HS_ADMIN value (`ADD_ADMIN`).
    AddAdminValue,
    /// Change an HS_ADMIN value (`MODIFY_ADMIN`).
    ModifyAdminValue,
    /// Remove an HS_ADMIN value (`REMOVE_ADMIN`).
    RemoveAdminValue,
    /// List the handles under a prefix (`LIST_HANDLES`, on the prefix handle).
    ListHandles,
    /// Read values without public read (`READ_VALUE`).
    ReadValue,
}

impl Operation {
    /// The operation creating `target`: a derived prefix for `0.NA/a.b`, else a handle
    /// (J9 `Util.isSubNAHandle`).
    pub fn create(target: &Handle) -> Operation {
        if is_derived_prefix_handle(target) {
            Operation::CreateDerivedPrefix
        } else {
            Operation::CreateHandle
        }
    }

    /// The permission an HS_ADMIN value must grant.
    pub fn required(self) -> AdminPermissions {
        match self {
            Operation::CreateHandle => AdminPermissions::ADD_HANDLE,
            Operation::CreateDerivedPrefix => AdminPermissions::ADD_DERIVED_PREFIX,
            Operation::DeleteHandle => AdminPermissions::DELETE_HANDLE,
            Operation::AddValue => AdminPermissions::ADD_VALUE,
            Operation::ModifyValue => AdminPermissions::MODIFY_VALUE,
            Operation::RemoveValue => AdminPermissions::REMOVE_VALUE,
            Operation::AddAdminValue => AdminPermissions::ADD_ADMIN,
            Operation::ModifyAdminValue => AdminPermissions::MODIFY_ADMIN,
            Operation::RemoveAdminValue => AdminPermissions::REMOVE_ADMIN,
            Operation::ListHandles => AdminPermissions::LIST_HANDLES,
            Operation::ReadValue => AdminPermissions::READ_VALUE,
        }
    }

    /// Whether the prefix handle's HS_ADMIN values govern it (rather than the target
    /// handle's).
    pub fn governed_by_prefix(self) -> bool {
        matches!(
            self,
            Operation::CreateHandle | Operation::CreateDerivedPrefix | Operation::ListHandles
        )
    }
}

fn is_derived_prefix_handle(target: &Handle) -> bool {
    target.is_prefix_handle() && target.local_name().contains('.')
}

/// The handle whose HS_ADMIN values govern creating `target` (J9
/// `getZeroNAHandle`, `getParentNAOfNAHandle`), folded: `10.1000/x` → `0.NA/10.1000`;
/// the derived prefix `0.NA/10.1000` → its parent `0.NA/10`; the top-level prefix
/// `0.NA/10` → `0.NA/0.NA`. For listing, the prefix handle is the one listed.
/// An error only when the prefix handle would be longer than a handle may be.
pub fn prefix_admin_handle(target: &Handle) -> Result<Handle, NameError> {
    if is_derived_prefix_handle(target) {
        let local = fold_key(target.local_name());
        let parent = local
            .rsplit_once('.')
            .map_or(local.as_str(), |(parent, _)| parent);
        prefix_handle(parent)
    } else {
        prefix_handle(target.prefix_key())
    }
}

/// Whether `identity` may carry out `operation`.
///
/// `target_values` are the target handle's values and `prefix_admin_values` the
/// prefix handle's ([`prefix_admin_handle`]); only the HS_ADMIN values of the set that
/// governs the operation count ([`Operation::governed_by_prefix`]). `server_admins`
/// come from the configuration (empty unless they have full access). `lookup`
/// resolves a group handle to its values (`None`: no such handle).
///
/// Errors: [`AuthzError::NotAnAdmin`] when no applicable HS_ADMIN value names the
/// identity, [`AuthzError::InsufficientPermissions`] when some do but none grants the
/// permission, [`AuthzError::GroupTooDeep`] or [`AuthzError::TooManyGroups`] when groups
/// exceed the limits.
pub fn authorise(
    identity: &Identity,
    operation: Operation,
    target_values: &[HandleValue],
    prefix_admin_values: &[HandleValue],
    server_admins: &[Identity],
    lookup: &dyn Fn(&str) -> Option<Vec<HandleValue>>,
) -> Result<(), AuthzError> {
    let mut groups = Groups::new(identity, lookup);
    for admin in server_admins {
        if groups.names_identity(admin)? {
            return Ok(());
        }
    }
    let governing = if operation.governed_by_prefix() {
        prefix_admin_values
    } else {
        target_values
    };
    let required = operation.required();
    let mut held: Option<AdminPermissions> = None;
    for record in governing.iter().filter_map(admin_record) {
        let reference = Identity {
            handle: record.admin_handle,
            index: record.admin_index,
        };
        if groups.names_identity(&reference)? {
            if record.permissions.contains(required) {
                return Ok(());
            }
            held = Some(held.unwrap_or(AdminPermissions(0)).with(record.permissions));
        }
    }
    Err(match held {
        Some(held) => AuthzError::InsufficientPermissions { required, held },
        None => AuthzError::NotAnAdmin {
            handle: identity.handle.clone(),
            index: identity.index,
        },
    })
}

/// The HS_ADMIN record of `value`, if it is one and decodes.
pub fn admin_record(value: &HandleValue) -> Option<AdminRecord> {
    (value.known_type() == Some(KnownType::HsAdmin))
        .then(|| AdminRecord::decode(&value.data).ok())
        .flatten()
}

/// Group membership of one identity, with the lookups and answers of one
/// authorisation cached.
struct Groups<'a> {
    identity: &'a Identity,
    lookup: &'a dyn Fn(&str) -> Option<Vec<HandleValue>>,
    values: HashMap<String, Option<Vec<HandleValue>>>,
    answers: HashMap<(String, u32), bool>,
}

impl<'a> Groups<'a> {
    fn new(identity: &'a Identity, lookup: &'a dyn Fn(&str) -> Option<Vec<HandleValue>>) -> Self {
        Groups {
            identity,
            lookup,
            values: HashMap::new(),
            answers: HashMap::new(),
        }
    }

    /// Whether `reference` names the identity, directly or through nested groups
    /// (breadth first, each group expanded once).
    fn names_identity(&mut self, reference: &Identity) -> Result<bool, AuthzError> {
        let key = (fold_key(&reference.handle), reference.index);
        if let Some(&known) = self.answers.get(&key) {
            return Ok(known);
        }
        let mut queue = VecDeque::from([(reference.clone(), 0)]);
        let mut expanded = HashSet::new();
        let mut found = false;
        while let Some((member, depth)) = queue.pop_front() {
            if member.matches(self.identity) {
                found = true;
                break;
            }
            if member.index == 0 || !expanded.insert((fold_key(&member.handle), member.index)) {
                continue;
            }
            if depth == MAX_GROUP_DEPTH {
                return Err(AuthzError::GroupTooDeep {
                    handle: member.handle,
                    limit: MAX_GROUP_DEPTH,
                });
            }
            for next in self.members(&member)? {
                queue.push_back((next, depth + 1));
            }
        }
        self.answers.insert(key, found);
        Ok(found)
    }

    /// The members of the HS_VLIST value `group` names (none if it is not one).
    fn members(&mut self, group: &Identity) -> Result<Vec<Identity>, AuthzError> {
        let key = fold_key(&group.handle);
        if !self.values.contains_key(&key) {
            if self.values.len() == MAX_GROUP_LOOKUPS {
                return Err(AuthzError::TooManyGroups {
                    limit: MAX_GROUP_LOOKUPS,
                });
            }
            self.values
                .insert(key.clone(), (self.lookup)(&group.handle));
        }
        let values = self.values.get(&key).and_then(Option::as_ref);
        let list = values
            .into_iter()
            .flatten()
            .find(|v| v.index.0 == group.index && v.known_type() == Some(KnownType::HsVlist))
            .and_then(|v| ValueList::decode(&v.data).ok());
        Ok(list.map_or_else(Vec::new, |list| {
            list.0
                .into_iter()
                .map(|r| Identity {
                    handle: r.handle,
                    index: r.index.0,
                })
                .collect()
        }))
    }
}

#[cfg(test)]
#[path = "permissions_tests.rs"]
mod tests;
