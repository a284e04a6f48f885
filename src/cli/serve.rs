//! `hdl serve`: runs one node until SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use hdl::config::Config;
use hdl::server::HandleListeners;
use hdl::service::Service;
use hdl::storage::Store;
use tokio::signal::unix::{SignalKind, signal};

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
    Ok(config)
}

async fn serve(config: Config, service: Service) -> anyhow::Result<()> {
    let listeners = HandleListeners::bind(config.handle.listen).await?;
    let address = listeners.local_addr()?;
    println!("listening handle={address}");
    std::io::Write::flush(&mut std::io::stdout())?;
    tracing::info!(%address, "serving the Handle protocol");
    listeners
        .serve(service, &config, shutdown_signal()?)
        .await?;
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
