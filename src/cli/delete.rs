//! `hdl delete HANDLE [--server ADDR | --root HOST:PORT | --config FILE]`.

use std::ffi::OsString;

use crate::client::AdminRequest;
use crate::names::Handle;
use clap::Args;

use super::admin_arg::AuthArgs;
use super::connect::{AdminServerArg, send_admin};

/// Arguments of `hdl delete`.
#[derive(Debug, Args)]
pub struct DeleteArgs {
    /// The handle to delete.
    handle: OsString,
    #[command(flatten)]
    server: AdminServerArg,
    #[command(flatten)]
    auth: AuthArgs,
}

impl DeleteArgs {
    /// The handle argument.
    pub fn handle(&self) -> &OsString {
        &self.handle
    }

    /// The request for `handle`.
    pub fn request(&self, handle: Handle) -> AdminRequest {
        AdminRequest::Delete { handle }
    }
}

/// Deletes the handle.
pub fn run(args: &DeleteArgs) -> anyhow::Result<()> {
    let (handle, _) = send_admin(&args.handle, &args.server, &args.auth, |handle| {
        args.request(handle)
    })?;
    println!("deleted {handle}");
    Ok(())
}
