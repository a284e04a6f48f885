//! `hdl serve`: runs one node until SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use hdl::config::Config;
use hdl::http::{HttpListeners, HttpState, NodeInfo};
use hdl::metrics::Metrics;
use hdl::server::HandleListeners;
use hdl::service::Service;
use hdl::storage::Store;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

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
}

/// Loads the configuration, opens the store, binds and serves.
pub fn run(args: &ServeArgs) -> anyhow::Result<()> {
    let config = load_config(args)?;
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("cannot create data directory {}", config.data_dir.display()))?;
    let store = Store::open(&config.store_path())
        .with_context(|| format!("cannot open store {}", config.store_path().display()))?;
    let service = Service::new(Arc::new(store));
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(serve(config, service))
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
    Ok(config)
}

/// Binds every listener, announces them on one stdout line
/// (`listening handle=<addr> http=<addr>[ https=<addr>]`), then serves until a signal.
async fn serve(config: Config, service: Service) -> anyhow::Result<()> {
    let handle = HandleListeners::bind(config.handle.listen).await?;
    let http = HttpListeners::bind(&config.http, &config.data_dir).await?;
    let node = NodeInfo {
        handle: handle.local_addr()?,
        http: http.local_addr()?,
        https: http.https_addr()?,
    };
    let mut line = format!("listening handle={} http={}", node.handle, node.http);
    if let Some(https) = node.https {
        line.push_str(&format!(" https={https}"));
    }
    println!("{line}");
    std::io::Write::flush(&mut std::io::stdout())?;
    tracing::info!(?node, "serving");
    let metrics = Arc::new(Metrics::new());
    let (stop, stopped) = watch::channel(false);
    let state = HttpState {
        service: service.clone(),
        metrics: Arc::clone(&metrics),
        node,
    };
    let http = tokio::spawn(http.serve(state, until(stopped.clone())));
    let handle = handle.serve(service, &config, metrics, until(stopped));
    let signal = shutdown_signal()?;
    tokio::spawn(async move {
        signal.await;
        let _ = stop.send(true);
    });
    handle.await?;
    http.await??;
    Ok(())
}

/// Resolves once `stopped` turns true (or its sender is gone).
async fn until(mut stopped: watch::Receiver<bool>) {
    let _ = stopped.wait_for(|stop| *stop).await;
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
