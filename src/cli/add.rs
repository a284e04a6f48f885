//! `hdl add HANDLE --value INDEX:TYPE:DATA ... [--server ADDR]`: adds values at free
//! indexes.

use std::ffi::OsString;

use clap::Args;
use hdl::client::AdminRequest;
use hdl::values::HandleValue;

use super::connect::{ServerArg, Target, runtime};
use super::value_arg::parse_value;

/// Arguments of `hdl add`.
#[derive(Debug, Args)]
pub struct AddArgs {
    /// The handle.
    handle: OsString,
    /// A value to add, `INDEX:TYPE:DATA` (repeatable, at least one).
    #[arg(long = "value", value_name = "INDEX:TYPE:DATA", required = true, value_parser = parse_value)]
    values: Vec<HandleValue>,
    #[command(flatten)]
    server: ServerArg,
}

/// Adds the values.
pub fn run(args: &AddArgs) -> anyhow::Result<()> {
    let handle = runtime()?.block_on(async {
        let target = Target::new(&args.handle, &args.server).await?;
        let request = AdminRequest::AddValues {
            handle: target.handle.clone(),
            values: args.values.clone(),
        };
        target.client.admin(request).await?;
        anyhow::Ok(target.handle)
    })?;
    println!("added {} values to {handle}", args.values.len());
    Ok(())
}
