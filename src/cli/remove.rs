//! `hdl remove HANDLE --index I... [--server ADDR | --root HOST:PORT | --config FILE]`:
//! removes values by index.

use std::ffi::OsString;

use crate::client::AdminRequest;
use crate::names::Handle;
use crate::values::ValueIndex;
use clap::Args;

use super::admin_arg::AuthArgs;
use super::connect::{AdminServerArg, send_admin};
use super::value_arg::parse_index;

/// Arguments of `hdl remove`.
#[derive(Debug, Args)]
pub struct RemoveArgs {
    /// The handle.
    handle: OsString,
    /// The index of a value to remove (repeatable, at least one).
    #[arg(long = "index", value_name = "INDEX", required = true, value_parser = parse_index)]
    indexes: Vec<u32>,
    #[command(flatten)]
    server: AdminServerArg,
    #[command(flatten)]
    auth: AuthArgs,
}

impl RemoveArgs {
    /// The handle argument.
    pub fn handle(&self) -> &OsString {
        &self.handle
    }

    /// The request for `handle`.
    pub fn request(&self, handle: Handle) -> AdminRequest {
        AdminRequest::RemoveValues {
            handle,
            indexes: self.indexes.iter().copied().map(ValueIndex).collect(),
        }
    }
}

/// Removes the values.
pub fn run(args: &RemoveArgs) -> anyhow::Result<()> {
    let (handle, _) = send_admin(&args.handle, &args.server, &args.auth, |handle| {
        args.request(handle)
    })?;
    println!("removed {} values from {handle}", args.indexes.len());
    Ok(())
}
