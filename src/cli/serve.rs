//! `hdl serve`: runs one node, a member of its replica set, until SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use hdl::auth::Identity;
use hdl::config::Config;
use hdl::http::{HttpListeners, HttpState, NodeInfo, SessionTable};
use hdl::metrics::Metrics;
use hdl::replication::network::read_or_create_secret_file;
use hdl::replication::{Bootstrap, PublicAddresses, Replica, ReplicaSettings};
use hdl::resolver::Resolver;
use hdl::server::{HandleListeners, advertised_handle_addr};
use hdl::service::{AuthPolicy, Service};
use hdl::storage::Store;
use tokio::net::TcpListener;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

/// How long the edges have, after SIGINT or SIGTERM, to answer what they had accepted.
const DRAIN_DEADLINE: Duration = Duration::from_secs(5);

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
}

/// Loads the configuration, opens the store, starts the replica, binds and serves.
pub fn run(args: &ServeArgs) -> anyhow::Result<()> {
    let config = load_config(args)?;
    let bootstrap = args.admin.bootstrap()?;
    if bootstrap.is_some() && !config.cluster.bootstrap {
        anyhow::bail!(
            "--admin-key/--admin-secret-file need a node that forms its own set; use them with `hdl cluster init` instead"
        );
    }
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("cannot create data directory {}", config.data_dir.display()))?;
    let store = Store::open(&config.store_path())
        .with_context(|| format!("cannot open store {}", config.store_path().display()))?;
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let mut policy = AuthPolicy {
        server_admins: config.auth.server_admin_identities()?,
    };
    policy
        .server_admins
        .extend(args.server_admins.iter().cloned());
    runtime.block_on(serve(config, Arc::new(store), policy, bootstrap))
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
    config.validate()?;
    Ok(config)
}

fn replica_settings(config: &Config) -> ReplicaSettings {
    let cluster = &config.cluster;
    ReplicaSettings {
        id: cluster.node_id,
        bootstrap: if cluster.bootstrap {
            Bootstrap::Alone
        } else {
            Bootstrap::Wait
        },
        heartbeat_ms: cluster.heartbeat_ms,
        election_min_ms: cluster.election_timeout_min_ms,
        election_max_ms: cluster.election_timeout_max_ms,
        snapshot_every: cluster.snapshot_every,
        keep_after_snapshot: cluster.keep_after_snapshot,
    }
}

async fn serve(
    config: Config,
    store: Arc<Store>,
    policy: AuthPolicy,
    bootstrap: Option<super::admin_arg::Bootstrap>,
) -> anyhow::Result<()> {
    let secret = read_or_create_secret_file(&config.secret_path())?;
    let listeners = HandleListeners::bind(config.handle.listen).await?;
    let handle = listeners.local_addr()?;
    let peers = TcpListener::bind(config.cluster.peer_listen)
        .await
        .with_context(|| format!("cannot listen for peers on {}", config.cluster.peer_listen))?;
    let peer = peers.local_addr()?;
    let advertised = advertised_handle_addr(&config.site, handle);
    let settings = replica_settings(&config);
    let http = HttpListeners::bind(&config.http, &config.data_dir).await?;
    let public = PublicAddresses {
        handle: advertised,
        http: Some(http.local_addr()?),
    };
    let replica = Replica::start(
        &settings,
        Arc::clone(&store),
        &config.data_dir,
        peers,
        public,
        secret,
    )
    .await
    .context("cannot start the replica")?;
    let mut service = Service::new(store, replica.clone(), policy);
    if !config.resolver.ghr.is_empty() {
        service = service.with_resolver(Resolver::new(config.resolver.ghr.clone()));
    }
    if let Some(bootstrap) = bootstrap {
        create_bootstrap_admin(&service, &bootstrap).await?;
    }
    let node = NodeInfo {
        id: settings.id,
        handle,
        http: http.local_addr()?,
        https: http.https_addr()?,
        peer,
    };
    announce(&node)?;
    tracing::info!(?node, "serving");
    let metrics = Arc::new(Metrics::new());
    let (stop, stopped) = watch::channel(false);
    let state = HttpState {
        service: service.clone(),
        metrics: Arc::clone(&metrics),
        node,
        allow_plain_auth_from_loopback: config.http.allow_plain_auth_from_loopback,
        sessions: Arc::new(Mutex::new(SessionTable::new(
            config.auth.max_sessions,
            Duration::from_secs(config.auth.session_lifetime_secs),
        ))),
    };
    let http = tokio::spawn(http.serve(state, until(stopped.clone()), DRAIN_DEADLINE));
    let signal = shutdown_signal()?;
    tokio::spawn(async move {
        signal.await;
        let _ = stop.send(true);
    });
    listeners
        .serve(service, &config, metrics, until(stopped), DRAIN_DEADLINE)
        .await?;
    http.await??;
    replica.shutdown().await?;
    Ok(())
}

/// Prints the one line that says the node is up:
/// `listening handle=<addr> http=<addr> peer=<addr>[ https=<addr>]`.
fn announce(node: &NodeInfo) -> anyhow::Result<()> {
    let mut line = format!(
        "listening handle={} http={} peer={}",
        node.handle, node.http, node.peer
    );
    if let Some(https) = node.https {
        line.push_str(&format!(" https={https}"));
    }
    println!("{line}");
    std::io::Write::flush(&mut std::io::stdout())?;
    Ok(())
}

/// Resolves once `stopped` turns true (or its sender is gone).
async fn until(mut stopped: watch::Receiver<bool>) {
    let _ = stopped.wait_for(|stop| *stop).await;
}

/// Creates the bootstrap administrator's prefix handles that do not exist yet.
async fn create_bootstrap_admin(
    service: &Service,
    bootstrap: &super::admin_arg::Bootstrap,
) -> anyhow::Result<()> {
    let created = service
        .bootstrap(&bootstrap.admin, &bootstrap.prefixes)
        .await
        .context("cannot create the bootstrap administrator")?;
    for handle in created {
        tracing::info!(%handle, "created the bootstrap administrator's prefix handle");
    }
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
