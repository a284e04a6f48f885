//! `hdl home PREFIX`, `hdl unhome PREFIX` and `hdl homed` (each with `--server ADDR`
//! and a server administrator's `--auth`): tell a server it serves a prefix, that it
//! no longer does, or list the prefixes it serves (OC 300, 301, 302; digest §3.6).
//! `hdl site [--server ADDR]` prints the server's site information as the hex data of
//! an HS_SITE value, for the prefix handle a Global Handle Registry holds.

use crate::client::AdminRequest;
use crate::codec::Response;
use crate::names::prefix_handle;
use anyhow::bail;
use clap::Args;

use super::admin_arg::AuthArgs;
use super::connect::{ServerArg, client, runtime, with_credentials};

/// Arguments of `hdl home` and `hdl unhome`.
#[derive(Debug, Args)]
pub struct HomeArgs {
    /// The prefix, `10.5555` or its prefix handle `0.NA/10.5555`.
    prefix: String,
    #[command(flatten)]
    server: ServerArg,
    #[command(flatten)]
    auth: AuthArgs,
}

/// Arguments of `hdl homed`.
#[derive(Debug, Args)]
pub struct HomedArgs {
    #[command(flatten)]
    server: ServerArg,
    #[command(flatten)]
    auth: AuthArgs,
}

/// Arguments of `hdl site`.
#[derive(Debug, Args)]
pub struct SiteArgs {
    #[command(flatten)]
    server: ServerArg,
}

/// Whether `hdl home` or `hdl unhome` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Homing {
    /// `hdl home`.
    Home,
    /// `hdl unhome`.
    Unhome,
}

/// Homes or unhomes the prefix.
pub fn run(args: &HomeArgs, homing: Homing) -> anyhow::Result<()> {
    let bare = crate::names::named_prefix(&args.prefix).unwrap_or(&args.prefix);
    let prefix = prefix_handle(bare)?;
    let request = match homing {
        Homing::Home => AdminRequest::Home {
            prefix: prefix.clone(),
        },
        Homing::Unhome => AdminRequest::Unhome {
            prefix: prefix.clone(),
        },
    };
    send(&args.server, &args.auth, request)?;
    match homing {
        Homing::Home => println!("homed {prefix}"),
        Homing::Unhome => println!("unhomed {prefix}"),
    }
    Ok(())
}

/// Lists the prefix handles of the prefixes the server serves.
pub fn run_homed(args: &HomedArgs) -> anyhow::Result<()> {
    match send(&args.server, &args.auth, AdminRequest::ListHomed)? {
        Response::ListHandles { handles } => {
            for handle in handles {
                println!("{}", String::from_utf8_lossy(&handle));
            }
            Ok(())
        }
        other => bail!("the server answered {other:?} to a list of homed prefixes"),
    }
}

/// Prints the server's HS_SITE data in hex.
pub fn run_site(args: &SiteArgs) -> anyhow::Result<()> {
    let site = runtime()?
        .block_on(async { anyhow::Ok(client(&args.server).await?.site_info().await?) })?;
    let hex: String = site
        .encode()
        .iter()
        .map(|octet| format!("{octet:02x}"))
        .collect();
    println!("{hex}");
    Ok(())
}

/// Sends `request` to `--server` as the administrator of `auth`.
fn send(server: &ServerArg, auth: &AuthArgs, request: AdminRequest) -> anyhow::Result<Response> {
    runtime()?.block_on(async {
        let client = with_credentials(client(server).await?, auth)?;
        anyhow::Ok(client.admin(request).await?)
    })
}
