//! `hdl resolve REF [--server ADDR] [--type T]... [--index I]... [--json] [--udp|--tcp]
//! [--every-value --auth INDEX:HANDLE --key FILE | --secret-file FILE]`: asks a handle
//! server for a handle's values; with `--every-value`, non-public and administrative
//! ones too (PO clear over TCP, answered to an administrator allowed READ_VALUE).

use std::ffi::OsString;

use clap::Args;
use hdl::client::Transport;
use hdl::values::{ValueIndex, ValueSelection};

use super::admin_arg::AuthArgs;
use super::connect::{ServerArg, Target, TransportArg, runtime};
use super::output::{resolution_json, value_line};
use super::value_arg::parse_index;

/// Arguments of `hdl resolve`.
#[derive(Debug, Args)]
pub struct ResolveArgs {
    /// The handle, in any form `hdl parse` accepts; `hdl://server[:port]/handle`
    /// also picks the server.
    reference: OsString,
    #[command(flatten)]
    server: ServerArg,
    /// Only values of this type (repeatable; `URL.` also matches `URL.*` subtypes).
    #[arg(long = "type", value_name = "TYPE")]
    types: Vec<String>,
    /// Only the value at this index (repeatable; with --type, values matching either).
    #[arg(long = "index", value_name = "INDEX", value_parser = parse_index)]
    indexes: Vec<u32>,
    /// Print the Handle.Net REST JSON object instead of one line per value.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    transport: TransportArg,
    /// Ask for every selected value, non-public and administrative ones included
    /// (needs an administrator allowed READ_VALUE when one of them is not public).
    #[arg(long)]
    every_value: bool,
    #[command(flatten)]
    auth: AuthArgs,
}

/// Resolves and prints the values.
pub fn run(args: &ResolveArgs) -> anyhow::Result<()> {
    let selection = ValueSelection {
        indexes: args.indexes.iter().copied().map(ValueIndex).collect(),
        types: args.types.clone(),
    };
    let transport = args.transport.transport(Transport::Auto);
    let resolution = runtime()?.block_on(async {
        let target = Target::new(&args.reference, &args.server)
            .await?
            .authenticated(&args.auth)?;
        let resolution = if args.every_value {
            target
                .client
                .resolve_every_value(&target.handle, &selection)
                .await?
        } else {
            target
                .client
                .resolve(&target.handle, &selection, transport)
                .await?
        };
        anyhow::Ok(resolution)
    })?;
    if args.json {
        let json = resolution_json(resolution.handle.as_str(), &resolution.values);
        println!("{json}");
    } else {
        for value in &resolution.values {
            println!("{}", value_line(value));
        }
    }
    Ok(())
}
