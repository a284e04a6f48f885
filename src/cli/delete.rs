//! `hdl delete HANDLE [--server ADDR]`.

use std::ffi::OsString;

use clap::Args;
use hdl::client::AdminRequest;

use super::admin_arg::AuthArgs;
use super::connect::{ServerArg, Target, runtime};

/// Arguments of `hdl delete`.
#[derive(Debug, Args)]
pub struct DeleteArgs {
    /// The handle to delete.
    handle: OsString,
    #[command(flatten)]
    server: ServerArg,
    #[command(flatten)]
    auth: AuthArgs,
}

/// Deletes the handle.
pub fn run(args: &DeleteArgs) -> anyhow::Result<()> {
    let handle = runtime()?.block_on(async {
        let target = Target::new(&args.handle, &args.server)
            .await?
            .authenticated(&args.auth)?;
        let request = AdminRequest::Delete {
            handle: target.handle.clone(),
        };
        target.client.admin(request).await?;
        anyhow::Ok(target.handle)
    })?;
    println!("deleted {handle}");
    Ok(())
}
