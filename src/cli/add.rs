//! `hdl add HANDLE --value INDEX:TYPE:DATA ... [--overwrite]
//! [--server ADDR | --root HOST:PORT | --config FILE]`: adds values at free indexes
//! (or replaces taken ones with `--overwrite`).

use std::ffi::OsString;

use crate::client::{AdminRequest, Overwrite};
use crate::names::Handle;
use crate::values::HandleValue;
use clap::Args;

use super::admin_arg::AuthArgs;
use super::connect::{AdminServerArg, send_admin};
use super::value_arg::parse_value;

/// Arguments of `hdl add`.
#[derive(Debug, Args)]
pub struct AddArgs {
    /// The handle.
    handle: OsString,
    /// A value to add, `INDEX:TYPE:DATA` (repeatable, at least one).
    #[arg(long = "value", value_name = "INDEX:TYPE:DATA", required = true, value_parser = parse_value)]
    values: Vec<HandleValue>,
    /// Replace a value whose index is taken instead of failing.
    #[arg(long)]
    overwrite: bool,
    #[command(flatten)]
    server: AdminServerArg,
    #[command(flatten)]
    auth: AuthArgs,
}

impl AddArgs {
    /// The handle argument.
    pub fn handle(&self) -> &OsString {
        &self.handle
    }

    /// The request for `handle`.
    pub fn request(&self, handle: Handle) -> AdminRequest {
        AdminRequest::AddValues {
            handle,
            values: self.values.clone(),
            overwrite: if self.overwrite {
                Overwrite::Replace
            } else {
                Overwrite::Refuse
            },
        }
    }
}

/// Adds the values.
pub fn run(args: &AddArgs) -> anyhow::Result<()> {
    let (handle, _) = send_admin(&args.handle, &args.server, &args.auth, |handle| {
        args.request(handle)
    })?;
    println!("added {} values to {handle}", args.values.len());
    Ok(())
}
