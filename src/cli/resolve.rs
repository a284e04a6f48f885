//! `hdl resolve REF [--server ADDR] [--type T]... [--index I]... [--json] [--udp|--tcp]
//! [--every-value --auth INDEX:HANDLE --key FILE | --secret-file FILE]`: asks a handle
//! server for a handle's values; with `--every-value`, non-public and administrative
//! ones too (PO clear over TCP, answered to an administrator allowed READ_VALUE).
//! With `--verify [--server-pubkey FILE]`, asks with CT and refuses (non-zero exit)
//! an answer whose server signature is missing or wrong; the key is the server's
//! entry in its own site information, or the one given.
//!
//! With `--root HOST:PORT` (or `--config FILE`, whose `[resolver] ghr` names the
//! registry) the handle is resolved globally: the Global Handle Registry there is
//! asked for the prefix's service, whose server the site's hash picks is asked in turn
//! (module [`crate::resolver`]); an HS_ALIAS is followed unless `--no-follow`, and
//! `--trace` prints each step on stderr.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::auth::VerifyingKey;
use crate::client::{Client, ServerKeys, Transport};
use crate::names::Handle;
use crate::resolver::{Aliases, Resolver, Step};
use crate::values::{HandleValue, ValueIndex, ValueSelection};
use anyhow::Context;
use clap::Args;

use super::admin_arg::AuthArgs;
use super::connect::{
    Registry, RootArg, ServerArg, Target, TransportArg, parse_reference, runtime,
};
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
    #[arg(long, conflicts_with = "global")]
    every_value: bool,
    #[command(flatten)]
    auth: AuthArgs,
    /// Ask for a certified answer (CT) and check the server's signature on it: an
    /// answer that is unsigned or whose signature does not match is refused. The key
    /// is the server's own entry in its get-site-info answer, unless
    /// --server-pubkey gives it.
    #[arg(long, conflicts_with_all = ["every_value", "global"])]
    verify: bool,
    /// The server's public key for --verify: HS_PUBKEY data, raw (as J9's
    /// `pubkey.bin`) or in hex.
    #[arg(long, value_name = "FILE", requires = "verify")]
    server_pubkey: Option<PathBuf>,
    /// Resolve globally, starting at a Global Handle Registry: its prefix handle names
    /// the service asked (follows HS_SERV, referrals, HS_ALIAS).
    #[command(flatten)]
    root: RootArg,
    /// With --root or --config: print each step of the resolution on stderr.
    #[arg(long, requires = "global")]
    trace: bool,
    /// With --root or --config: answer an alias's own values instead of following its
    /// HS_ALIAS.
    #[arg(long, requires = "global")]
    no_follow: bool,
}

/// Resolves and prints the values.
pub fn run(args: &ResolveArgs) -> anyhow::Result<()> {
    let selection = ValueSelection {
        indexes: args.indexes.iter().copied().map(ValueIndex).collect(),
        types: args.types.clone(),
    };
    let runtime = runtime()?;
    if let Some(registry) = runtime.block_on(args.root.registry())? {
        return resolve_globally(&runtime, args, registry, &selection);
    }
    let transport = args.transport.transport(Transport::Auto);
    let resolution = runtime.block_on(async {
        let target = Target::new(&args.reference, &args.server)
            .await?
            .authenticated(&args.auth)?;
        let resolution = if args.verify {
            let keys = server_keys(&target.client, args.server_pubkey.as_deref()).await?;
            target
                .client
                .resolve_certified(&target.handle, &selection, transport, &keys)
                .await?
        } else if args.every_value {
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
    print_values(args, &resolution.handle, &resolution.values);
    Ok(())
}

/// Resolves through the Global Handle Registry `registry` and prints the values of the
/// handle the aliases lead to (or of the alias, with --no-follow).
fn resolve_globally(
    runtime: &tokio::runtime::Runtime,
    args: &ResolveArgs,
    registry: Registry,
    selection: &ValueSelection,
) -> anyhow::Result<()> {
    let aliases = if args.no_follow {
        Aliases::Show
    } else {
        Aliases::Follow
    };
    let resolved = runtime.block_on(async {
        let handle = parse_reference(&args.reference)?.handle;
        let mut resolver = Resolver::new(registry.servers);
        if args.trace {
            resolver = resolver.with_trace(Arc::new(|step: &Step| eprintln!("trace: {step}")));
        }
        anyhow::Ok(
            resolver
                .resolve_following(&handle, selection, aliases)
                .await?,
        )
    })?;
    let Some(handle) = resolved.chain.last() else {
        anyhow::bail!("the resolution named no handle");
    };
    print_values(args, handle, &resolved.values);
    Ok(())
}

/// Prints `values` of `handle`: REST JSON with --json, else one line each.
fn print_values(args: &ResolveArgs, handle: &Handle, values: &[HandleValue]) {
    if args.json {
        println!("{}", resolution_json(handle.as_str(), values));
    } else {
        for value in values {
            println!("{}", value_line(value));
        }
    }
}

/// The key to check each server's answers with: the one in `file`, or each server's
/// own (from its site information).
async fn server_keys(client: &Client, file: Option<&Path>) -> anyhow::Result<ServerKeys> {
    let given = file.map(read_public_key).transpose()?;
    let mut keys = ServerKeys::new();
    for &server in client.servers() {
        let key = match &given {
            Some(key) => key.clone(),
            None => client.server_key(server).await?,
        };
        keys.insert(server, key);
    }
    Ok(keys)
}

/// HS_PUBKEY data from `path`, raw or as hex text.
fn read_public_key(path: &Path) -> anyhow::Result<VerifyingKey> {
    let octets = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let text: Vec<u8> = octets
        .iter()
        .copied()
        .filter(|octet| !octet.is_ascii_whitespace())
        .collect();
    let data = if !text.is_empty() && text.iter().all(u8::is_ascii_hexdigit) {
        hex_octets(&text)
    } else {
        octets
    };
    VerifyingKey::from_hs_pubkey(&data)
        .with_context(|| format!("{} holds no usable HS_PUBKEY", path.display()))
}

fn hex_octets(digits: &[u8]) -> Vec<u8> {
    digits
        .chunks(2)
        .filter_map(|pair| u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok())
        .collect()
}
