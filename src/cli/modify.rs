//! `hdl modify HANDLE --value INDEX:TYPE:DATA ...
//! [--server ADDR | --root HOST:PORT | --config FILE]`: replaces the values at those
//! indexes.

use std::ffi::OsString;

use crate::client::AdminRequest;
use crate::names::Handle;
use crate::values::HandleValue;
use clap::Args;

use super::admin_arg::AuthArgs;
use super::connect::{AdminServerArg, send_admin};
use super::value_arg::parse_value;

/// Arguments of `hdl modify`.
#[derive(Debug, Args)]
pub struct ModifyArgs {
    /// The handle.
    handle: OsString,
    /// A replacement value, `INDEX:TYPE:DATA` (repeatable, at least one).
    #[arg(long = "value", value_name = "INDEX:TYPE:DATA", required = true, value_parser = parse_value)]
    values: Vec<HandleValue>,
    #[command(flatten)]
    server: AdminServerArg,
    #[command(flatten)]
    auth: AuthArgs,
}

impl ModifyArgs {
    /// The handle argument.
    pub fn handle(&self) -> &OsString {
        &self.handle
    }

    /// The request for `handle`.
    pub fn request(&self, handle: Handle) -> AdminRequest {
        AdminRequest::ModifyValues {
            handle,
            values: self.values.clone(),
        }
    }
}

/// Replaces the values.
pub fn run(args: &ModifyArgs) -> anyhow::Result<()> {
    let (handle, _) = send_admin(&args.handle, &args.server, &args.auth, |handle| {
        args.request(handle)
    })?;
    println!("modified {} values of {handle}", args.values.len());
    Ok(())
}
