//! `hdl create HANDLE --value INDEX:TYPE:DATA ... [--overwrite] [--server ADDR]`.

use std::ffi::OsString;

use clap::Args;
use hdl::client::{AdminRequest, Overwrite};
use hdl::codec::Response;
use hdl::values::HandleValue;

use super::connect::{ServerArg, Target, runtime};
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
    server: ServerArg,
}

/// Creates the handle and prints its name as the server gave it.
pub fn run(args: &CreateArgs) -> anyhow::Result<()> {
    let overwrite = if args.overwrite {
        Overwrite::Replace
    } else {
        Overwrite::Refuse
    };
    let response = runtime()?.block_on(async {
        let target = Target::new(&args.handle, &args.server).await?;
        let request = AdminRequest::Create {
            handle: target.handle.clone(),
            values: args.values.clone(),
            overwrite,
        };
        let response = target.client.admin(request).await?;
        anyhow::Ok((target.handle, response))
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
