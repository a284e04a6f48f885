//! `hdl create HANDLE --value INDEX:TYPE:DATA ... [--overwrite]
//! [--server ADDR | --root HOST:PORT | --config FILE]
//! [--auth INDEX:HANDLE --key FILE | --secret-file FILE]`.
//!
//! As the reference admin tool does, a create by an authenticated administrator that
//! gives no HS_ADMIN value adds one naming that administrator (at the first free index
//! from 100, with the J9 default permissions `011111110011`), so that whoever creates
//! a handle can change it afterwards.

use std::ffi::OsString;

use crate::auth::Identity;
use crate::client::{AdminRequest, Overwrite};
use crate::codec::Response;
use crate::names::Handle;
use crate::values::{
    AdminPermissions, AdminRecord, HandleValue, KnownType, ValueIndex, default_permissions,
};
use clap::Args;

use super::admin_arg::AuthArgs;
use super::connect::{AdminServerArg, send_admin};
use super::value_arg::parse_value;

/// Arguments of `hdl create`.
#[derive(Debug, Args)]
pub struct CreateArgs {
    /// The handle to create.
    handle: OsString,
    /// A value, `INDEX:TYPE:DATA` (repeatable, at least one); for HS_ADMIN, DATA is
    /// `INDEX:PERMISSIONS:HANDLE`, e.g. `100:HS_ADMIN:300:111111111111:0.NA/TEST`.
    #[arg(long = "value", value_name = "INDEX:TYPE:DATA", required = true, value_parser = parse_value)]
    values: Vec<HandleValue>,
    /// Replace the handle's values if it exists already.
    #[arg(long)]
    overwrite: bool,
    #[command(flatten)]
    server: AdminServerArg,
    #[command(flatten)]
    auth: AuthArgs,
}

/// Creates the handle and prints its name as the server gave it.
pub fn run(args: &CreateArgs) -> anyhow::Result<()> {
    let response = send_admin(&args.handle, &args.server, &args.auth, |handle| {
        args.request(handle, args.auth.identity())
    })?;
    let created = match response {
        (_, Response::CreateHandle { handle: Some(name) }) => {
            String::from_utf8_lossy(&name).into_owned()
        }
        (handle, _) => handle.to_string(),
    };
    println!("created {created}");
    Ok(())
}

impl CreateArgs {
    /// The handle argument.
    pub fn handle(&self) -> &OsString {
        &self.handle
    }

    /// The create of `handle`, naming `creator` as its administrator when no
    /// HS_ADMIN value is given.
    pub fn request(&self, handle: Handle, creator: Option<&Identity>) -> AdminRequest {
        let overwrite = if self.overwrite {
            Overwrite::Replace
        } else {
            Overwrite::Refuse
        };
        AdminRequest::Create {
            handle,
            values: with_creator(&self.values, creator),
            overwrite,
        }
    }
}

/// The J9 admin tool's default HS_ADMIN permissions: everything but listing handles
/// and adding or deleting derived prefixes.
const DEFAULT_ADMIN_PERMISSIONS: &str = "011111110011";

/// `values`, with an HS_ADMIN naming `creator` when none is given.
pub(super) fn with_creator(values: &[HandleValue], creator: Option<&Identity>) -> Vec<HandleValue> {
    let mut values = values.to_vec();
    let has_admin = values
        .iter()
        .any(|value| value.known_type() == Some(KnownType::HsAdmin));
    let (Some(creator), false) = (creator, has_admin) else {
        return values;
    };
    let permissions = DEFAULT_ADMIN_PERMISSIONS
        .parse::<AdminPermissions>()
        .unwrap_or(AdminPermissions::ALL);
    let record = AdminRecord {
        permissions,
        admin_handle: creator.handle.clone(),
        admin_index: creator.index,
        legacy_padding: false,
    };
    let index = (100..)
        .find(|&index| values.iter().all(|value| value.index != ValueIndex(index)))
        .unwrap_or(u32::MAX);
    values.push(HandleValue {
        permissions: default_permissions("HS_ADMIN"),
        ..HandleValue::new(index, "HS_ADMIN", record.encode())
    });
    values
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_creator_is_named_unless_an_admin_is_given() {
        let creator = Identity {
            handle: "0.NA/TEST".into(),
            index: 300,
        };
        let url = HandleValue::new(100, "URL", "https://example.org/");
        let values = with_creator(std::slice::from_ref(&url), Some(&creator));
        assert_eq!(values.len(), 2);
        assert_eq!(values[1].index, ValueIndex(101));
        let record = AdminRecord::decode(&values[1].data).unwrap();
        assert_eq!(record.admin_handle, "0.NA/TEST");
        assert_eq!(record.admin_index, 300);
        assert!(!record.permissions.contains(AdminPermissions::LIST_HANDLES));
        assert!(record.permissions.contains(AdminPermissions::ADD_VALUE));
        assert_eq!(with_creator(std::slice::from_ref(&url), None).len(), 1);
        let admin = values[1].clone();
        assert_eq!(with_creator(&[url, admin], Some(&creator)).len(), 2);
    }
}
