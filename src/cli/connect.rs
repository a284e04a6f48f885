//! What every client command shares: the `--server` option (and `--root` or
//! `--config`, the Global Handle Registry through which `hdl resolve` resolves and the
//! administrative commands find a primary server of the handle's service), the handle
//! argument (any reference `hdl parse` accepts, so `hdl://server/…` may name the
//! server), the address look-up and the async runtime.

use std::ffi::OsString;
use std::net::{Ipv6Addr, SocketAddr};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use crate::client::{AdminRequest, Client, DEFAULT_PORT, Transport};
use crate::codec::Response;
use crate::config::Config;
use crate::resolver::{Purpose, Resolver};
use anyhow::{Context, bail};
use clap::Args;

use super::admin_arg::AuthArgs;
use crate::names::{Handle, HandleRef};

/// The server used when neither `--server` nor an `hdl://` reference names one.
const DEFAULT_SERVER: &str = "127.0.0.1:2641";

/// The `--server` option.
#[derive(Debug, Args)]
pub struct ServerArg {
    /// The handle server, `HOST[:PORT]` or `[IPv6][:PORT]` (port 2641 if left out).
    /// Default: the server of an `hdl://` reference, else 127.0.0.1:2641.
    #[arg(long, value_name = "ADDR")]
    pub server: Option<String>,
}

/// The Global Handle Registry to start at: `--root HOST:PORT`, or the `[resolver] ghr`
/// servers of a node configuration file (`--config`), as `hdl serve` reads it.
#[derive(Debug, Args)]
#[group(id = "global", multiple = false, conflicts_with = "server")]
pub struct RootArg {
    /// Go through the Global Handle Registry server HOST:PORT (its prefix handles'
    /// HS_SITE/HS_SERV name each prefix's service), instead of --server.
    #[arg(long, value_name = "HOST:PORT")]
    pub root: Option<String>,
    /// As --root, with the Global Handle Registry servers of this node configuration
    /// file's `[resolver] ghr` (TOML, as `hdl serve --config` reads it).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// The Global Handle Registry a [`RootArg`] names: its servers and how to name it in
/// messages.
pub struct Registry {
    /// Its servers' addresses.
    pub servers: Vec<SocketAddr>,
    /// `HOST:PORT` as given, or the configuration file's `[resolver] ghr`.
    pub described: String,
}

impl RootArg {
    /// The registry asked for, if any: `--root`'s servers (looked up), or the
    /// configuration file's; a file that cannot be read or names none is an error.
    pub async fn registry(&self) -> anyhow::Result<Option<Registry>> {
        if let Some(root) = &self.root {
            return Ok(Some(Registry {
                servers: client_of(root).await?.servers().to_vec(),
                described: root.clone(),
            }));
        }
        let Some(path) = &self.config else {
            return Ok(None);
        };
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read config {}", path.display()))?;
        let config = Config::from_toml(&text).with_context(|| format!("in {}", path.display()))?;
        if config.resolver.ghr.is_empty() {
            bail!(
                "config {} names no Global Handle Registry: set [resolver] ghr = [\"HOST:PORT\"]",
                path.display()
            );
        }
        Ok(Some(Registry {
            servers: config.resolver.ghr,
            described: format!("the [resolver] ghr of {}", path.display()),
        }))
    }
}

/// Where an administrative command sends its request: `--server`, or with `--root`
/// (or `--config`) a primary server of the handle's service, found through the Global
/// Handle Registry.
#[derive(Debug, Args)]
pub struct AdminServerArg {
    #[command(flatten)]
    pub server: ServerArg,
    #[command(flatten)]
    pub root: RootArg,
}

/// The `--udp` and `--tcp` options.
#[derive(Debug, Args)]
pub struct TransportArg {
    /// Use UDP only.
    #[arg(long, conflicts_with = "tcp")]
    udp: bool,
    /// Use TCP only.
    #[arg(long)]
    tcp: bool,
}

impl TransportArg {
    /// The transport chosen, or `default` when neither option is given.
    pub fn transport(&self, default: Transport) -> Transport {
        match (self.udp, self.tcp) {
            (true, _) => Transport::Udp,
            (_, true) => Transport::Tcp,
            _ => default,
        }
    }
}

/// A handle argument and the client of the server it is to be sent to.
pub struct Target {
    /// The handle.
    pub handle: Handle,
    /// A client of the chosen server.
    pub client: Client,
}

impl Target {
    /// Parses `reference` and picks the server: `--server`, or the reference's own
    /// (`hdl://server/…`), or the default; naming two different ones is an error.
    pub async fn new(reference: &OsString, server: &ServerArg) -> anyhow::Result<Target> {
        let parsed = parse_reference(reference)?;
        let from_reference = parsed.server.map(|s| s.to_string());
        let chosen = match (&server.server, &from_reference) {
            (Some(option), Some(uri)) if option != uri => {
                bail!("the reference names server {uri} but --server names {option}; give one")
            }
            (Some(option), _) => option.as_str(),
            (None, Some(uri)) => uri.as_str(),
            (None, None) => DEFAULT_SERVER,
        };
        Ok(Target {
            handle: parsed.handle,
            client: client_of(chosen).await?,
        })
    }
}

impl Target {
    /// Parses `reference` and picks the server a change to it goes to: as
    /// [`Target::new`] with `--server`; with `--root` (or `--config`), a primary
    /// server of the handle's service as the Global Handle Registry describes it (the
    /// GHR itself for the handles it holds, `0.NA/…`). A reference naming its server
    /// cannot go with a GHR; a service without a primary site is an error.
    pub async fn for_change(reference: &OsString, to: &AdminServerArg) -> anyhow::Result<Target> {
        let Some(registry) = to.root.registry().await? else {
            return Target::new(reference, &to.server).await;
        };
        let parsed = parse_reference(reference)?;
        if let Some(server) = parsed.server {
            bail!("the reference names server {server} but a GHR is to be asked; give one");
        }
        let handle = parsed.handle;
        let through = &registry.described;
        let client = Resolver::new(registry.servers)
            .service_client(&handle, Purpose::Write)
            .await
            .with_context(|| {
                format!("cannot find where {handle} is administered through {through}")
            })?;
        if client.servers().is_empty() {
            bail!(
                "cannot find where {handle} is administered through {through}: the service of \
                 prefix {} has no primary site",
                handle.prefix()
            );
        }
        Ok(Target { handle, client })
    }
}

/// The handle reference `reference` (a handle, `hdl:…`, `hdl://server/…`, …).
pub fn parse_reference(reference: &OsString) -> anyhow::Result<HandleRef> {
    let bytes = reference.as_bytes();
    HandleRef::parse(bytes)
        .with_context(|| format!("invalid handle {:?}", String::from_utf8_lossy(bytes)))
}

impl Target {
    /// This target, its client answering challenges with the credentials of `auth`.
    pub fn authenticated(self, auth: &AuthArgs) -> anyhow::Result<Target> {
        Ok(Target {
            client: with_credentials(self.client, auth)?,
            ..self
        })
    }
}

/// Sends the administrative request `request` makes for the handle `reference` names,
/// to the server `to` picks ([`Target::for_change`]), as the administrator of `auth`;
/// the handle and the server's answer.
pub fn send_admin(
    reference: &OsString,
    to: &AdminServerArg,
    auth: &AuthArgs,
    request: impl FnOnce(Handle) -> AdminRequest,
) -> anyhow::Result<(Handle, Response)> {
    runtime()?.block_on(async {
        let target = Target::for_change(reference, to)
            .await?
            .authenticated(auth)?;
        let response = target.client.admin(request(target.handle.clone())).await?;
        anyhow::Ok((target.handle, response))
    })
}

/// `client`, answering challenges with the credentials of `auth` if any.
pub fn with_credentials(client: Client, auth: &AuthArgs) -> anyhow::Result<Client> {
    Ok(match auth.credentials()? {
        Some(credentials) => client.with_credentials(credentials),
        None => client,
    })
}

/// A client of `--server` (or the default server).
pub async fn client(server: &ServerArg) -> anyhow::Result<Client> {
    client_of(server.server.as_deref().unwrap_or(DEFAULT_SERVER)).await
}

/// A client of every address `server` resolves to.
pub async fn client_of(server: &str) -> anyhow::Result<Client> {
    let (host, port) = split_server(server)?;
    let addresses: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .with_context(|| format!("cannot find server {server:?}"))?
        .collect();
    if addresses.is_empty() {
        bail!("server {server:?} has no address");
    }
    Ok(Client::new(addresses))
}

/// Splits `HOST[:PORT]`, `[IPv6][:PORT]` or a bare IPv6 address.
fn split_server(server: &str) -> anyhow::Result<(&str, u16)> {
    let bad_port = || format!("invalid port in server {server:?}");
    if let Some(bracketed) = server.strip_prefix('[') {
        let (host, rest) = bracketed
            .split_once(']')
            .with_context(|| format!("no ']' in server {server:?}"))?;
        let port = match rest {
            "" => DEFAULT_PORT,
            _ => rest
                .strip_prefix(':')
                .and_then(|p| p.parse().ok())
                .with_context(bad_port)?,
        };
        return Ok((host, port));
    }
    if server.parse::<Ipv6Addr>().is_ok() {
        return Ok((server, DEFAULT_PORT));
    }
    match server.rsplit_once(':') {
        Some((host, port)) => Ok((host, port.parse().ok().with_context(bad_port)?)),
        None if server.is_empty() => bail!("empty server address"),
        None => Ok((server, DEFAULT_PORT)),
    }
}

/// A single-threaded runtime for one command.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_split_into_host_and_port() {
        assert_eq!(split_server("127.0.0.1:99").unwrap(), ("127.0.0.1", 99));
        assert_eq!(split_server("localhost").unwrap(), ("localhost", 2641));
        assert_eq!(split_server("[::1]:7").unwrap(), ("::1", 7));
        assert_eq!(split_server("[::1]").unwrap(), ("::1", 2641));
        assert_eq!(split_server("::1").unwrap(), ("::1", 2641));
        for bad in ["host:", "host:x", "host:70000", "[::1", "[::1]x", ""] {
            assert!(split_server(bad).is_err(), "{bad}");
        }
    }
}
