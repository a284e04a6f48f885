//! `hdl serve`: runs one node, a member of its replica set, until SIGINT or SIGTERM,
//! then hands the primary of each group it leads to another member and drains; it
//! says on stderr what came of each hand-off.
//!
//! Parses the arguments and the configuration file; [`crate::node::Node`] does the rest.
//! A node that forms a set of itself (no `--no-bootstrap`) with no administrator given
//! makes one in a new data directory ([`super::default_admin`]) and prints, after its
//! `listening` line, the options that authenticate as it. With `--exit-with-parent`
//! it ends when the process that started it does (what `hdl cluster up` asks of its
//! nodes). With `--cache` (or `[cache] enabled`) it runs a caching resolver instead
//! ([`crate::node::CacheNode`]): no store, every resolution through the GHR of `--root`.
//! Either way it first runs itself again in place (same process, same arguments) with
//! the allocator settings its environment lacks ([`super::allocator`]).

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::pin::pin;

use crate::auth::Identity;
use crate::config::Config;
use crate::node::{Addresses, CacheNode, FirstAdmin, Node, Settings};
use anyhow::{Context, bail};
use clap::Args;
use rustix::process::{Pid, Signal, getppid, set_parent_process_death_signal};
use tokio::signal::unix::{SignalKind, signal};

use super::admin_arg::DataDir;

/// Arguments of `hdl serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// TOML configuration file (see the `config` module docs for every field and its
    /// default). Without it, every default applies.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Directory of the node's store; overrides `data_dir` of the config.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Handle protocol address (TCP and UDP); overrides `[handle] listen`.
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// HTTP address (JSON API, proxy, /status, /metrics); overrides `[http] listen`.
    #[arg(long)]
    http: Option<SocketAddr>,
    /// This node's id in its replica set; overrides `[cluster] node_id`.
    #[arg(long)]
    node_id: Option<u64>,
    /// Peer listener address; overrides `[cluster] peer_listen`.
    #[arg(long)]
    peer: Option<SocketAddr>,
    /// Cluster secret file; overrides `[cluster] secret_file`.
    #[arg(long)]
    secret_file: Option<PathBuf>,
    /// Do not form a set of this node alone on first start: wait for
    /// `hdl cluster init` or `hdl cluster add-secondary`.
    #[arg(long)]
    no_bootstrap: bool,
    #[command(flatten)]
    admin: super::admin_arg::BootstrapArgs,
    /// A server administrator, `INDEX:HANDLE` (repeatable); added to
    /// `[auth] server_admins`.
    #[arg(long = "server-admin", value_name = "INDEX:HANDLE", value_parser = super::admin_arg::parse_identity)]
    server_admins: Vec<Identity>,
    /// The server key (RSA private key, PEM, as `hdl keygen` writes it) that signs
    /// certified answers; default `<data-dir>/server_key.pem`, made on first start.
    #[arg(long, value_name = "FILE.pem")]
    server_key: Option<PathBuf>,
    /// Run a caching resolver: no store of its own, every handle resolved through
    /// the Global Handle Registry (`--root`) and cached by its TTL (`[cache]` of the
    /// config); administration is refused. Sets `[cache] enabled`.
    #[arg(long)]
    cache: bool,
    /// A server of the Global Handle Registry, HOST:PORT (repeatable); replaces
    /// `[resolver] ghr`. A caching resolver needs one.
    #[arg(long, value_name = "HOST:PORT")]
    root: Vec<String>,
    /// End (SIGKILL) when the process PID, this one's parent, ends; refuse to start
    /// when PID is not its parent (it has ended already). `hdl cluster up` passes its
    /// own pid, so that its nodes never outlive it. Linux only.
    #[arg(long, value_name = "PID")]
    exit_with_parent: Option<u32>,
}

/// Loads the configuration, starts the node, announces its addresses and serves until
/// SIGINT or SIGTERM, then drains and stops (see [`crate::node`]).
pub fn run(args: &ServeArgs) -> anyhow::Result<()> {
    super::allocator::run_again_with_node_settings();
    if let Some(parent) = args.exit_with_parent {
        exit_with_parent(parent)?;
    }
    let config = load_config(args)?;
    if config.cache.enabled {
        return run_cache(args, config);
    }
    // A node that forms its own set may make its administrator; one that waits to
    // be joined gets it from `hdl cluster init`.
    let data_dir = config.cluster.bootstrap.then_some(DataDir {
        path: &config.data_dir,
        allow_shared: config.allow_shared_data_dir,
    });
    let admin = args.admin.administrator(data_dir)?;
    let first_admin = admin.as_ref().map(|admin| FirstAdmin {
        admin: admin.bootstrap.admin.clone(),
        prefixes: admin.bootstrap.prefixes.clone(),
    });
    let settings = Settings {
        config,
        server_admins: args.server_admins.clone(),
        first_admin,
        server_key: args.server_key.clone(),
    };
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(async {
        // Watched before the node starts: a signal during the start ends it there.
        let mut shutdown = pin!(shutdown_signal()?);
        let node = tokio::select! {
            node = Node::start(settings) => node?,
            () = &mut shutdown => return Ok(()),
        };
        announce(node.addresses())?;
        if let Some(admin) = &admin {
            admin.print_options()?;
        }
        for report in node.run(shutdown).await? {
            if report.led() {
                eprintln!("hdl serve: {report}");
            }
        }
        Ok(())
    })
}

/// Runs a caching resolver configured by `config` until SIGINT or SIGTERM.
fn run_cache(args: &ServeArgs, config: Config) -> anyhow::Result<()> {
    if args.admin.is_given() || !args.server_admins.is_empty() || args.no_bootstrap {
        bail!(
            "a caching resolver has no store and no administrators: \
             --admin-key, --admin-secret-file, --prefix, --server-admin and \
             --no-bootstrap do not apply with --cache"
        );
    }
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(async {
        let mut shutdown = pin!(shutdown_signal()?);
        let node = tokio::select! {
            node = CacheNode::start(config, args.server_key.clone()) => node?,
            () = &mut shutdown => return Ok(()),
        };
        announce(node.addresses())?;
        node.run(shutdown).await?;
        Ok(())
    })
}

/// The addresses of the `--root` servers.
fn root_addresses(roots: &[String]) -> anyhow::Result<Vec<SocketAddr>> {
    let mut addresses = Vec::new();
    for root in roots {
        let found = root
            .to_socket_addrs()
            .with_context(|| format!("--root {root}: not a reachable HOST:PORT"))?;
        addresses.extend(found);
    }
    Ok(addresses)
}

fn load_config(args: &ServeArgs) -> anyhow::Result<Config> {
    let mut config = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read config {}", path.display()))?;
            Config::from_toml(&text).with_context(|| format!("in {}", path.display()))?
        }
        None => Config::default(),
    };
    if let Some(dir) = &args.data_dir {
        config.data_dir.clone_from(dir);
    }
    if let Some(listen) = args.listen {
        config.handle.listen = listen;
    }
    if let Some(http) = args.http {
        config.http.listen = http;
    }
    let cluster = &mut config.cluster;
    cluster.node_id = args.node_id.unwrap_or(cluster.node_id);
    cluster.peer_listen = args.peer.unwrap_or(cluster.peer_listen);
    if let Some(file) = &args.secret_file {
        cluster.secret_file = Some(file.clone());
    }
    cluster.bootstrap &= !args.no_bootstrap;
    config.cache.enabled |= args.cache;
    if !args.root.is_empty() {
        config.resolver.ghr = root_addresses(&args.root)?;
    }
    Ok(config)
}

/// Has the kernel SIGKILL this process when its parent `parent` ends (Linux's
/// `PR_SET_PDEATHSIG`), then checks that `parent` still is its parent: had it ended
/// before the request, this process would have a new parent and never get the signal.
fn exit_with_parent(parent: u32) -> anyhow::Result<()> {
    set_parent_process_death_signal(Some(Signal::KILL))
        .context("cannot ask to end with the parent process")?;
    let expected = i32::try_from(parent).ok().and_then(Pid::from_raw);
    if getppid() != expected || expected.is_none() {
        bail!("process {parent} is not this one's parent (it has ended): not starting");
    }
    Ok(())
}

/// Prints the one line that says the node is up:
/// `listening handle=<addr> http=<addr>[ peer=<addr>][ https=<addr>]` (no peer on a
/// caching resolver).
fn announce(addresses: Addresses) -> anyhow::Result<()> {
    println!("listening {addresses}");
    std::io::Write::flush(&mut std::io::stdout())?;
    Ok(())
}

/// Resolves on the first SIGINT or SIGTERM.
fn shutdown_signal() -> anyhow::Result<impl Future<Output = ()>> {
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
    })
}
