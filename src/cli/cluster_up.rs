//! `hdl cluster up [FILE] [--data-dir DIR] [--base-port P]`: runs the replica sets a
//! cluster file describes (one in `cluster/local.toml`, two in
//! `cluster/sharded.toml`) on this machine until SIGINT or SIGTERM.
//!
//! Prints one `node <id> listening handle=… peer=…` line per node as it starts, then
//! `ready primary=<id>` (set 1's primary) once every set is formed (or found formed,
//! on a restart over the same data directory), the ring is made and every store
//! sliced to it, and every member of every set has caught up. Before `ready`, when no
//! administrator is given, it prints the options that authenticate as the one of the
//! data directory (made on a new one: [`super::default_admin`]):
//! `administrator: --auth 300:0.NA/ADMIN --key <data_dir>/admin.pem`. Once ready it
//! listens on `<data_dir>/launcher.sock` ([`super::launcher_control`]) for `hdl
//! cluster restart`, and restarts its nodes one at a time when asked
//! ([`super::rolling_restart`]), printing each step. On SIGINT or
//! SIGTERM it stops only its own children: SIGTERM, then SIGKILL after [`GRACE`], and
//! reaps them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cluster_file::ClusterFile;
use anyhow::Context;
use clap::Args;
use tokio::signal::unix::{SignalKind, signal};

use super::admin_arg::DataDir;
use super::launcher_control::{Caller, Control, ask_restart, last_line};
use super::local_set::LocalSet;
use super::rolling_restart::rolling_restart;

/// How long the nodes have to stop after SIGTERM before they are SIGKILLed.
pub const GRACE: Duration = Duration::from_secs(10);

/// The cluster file used when none is named.
pub const DEFAULT_FILE: &str = "cluster/local.toml";

/// Arguments of `hdl cluster up`.
#[derive(Debug, Args)]
pub struct UpArgs {
    /// The cluster file (see `src/cluster_file.rs` for every field and its default).
    #[arg(default_value = DEFAULT_FILE)]
    file: PathBuf,
    /// Directory of the set's data; overrides the file's `data_dir`.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// The port the nodes' ports are offsets from; overrides the file's `base_port`.
    #[arg(long)]
    base_port: Option<u16>,
    /// The bootstrap administrator, created when the set is new; without
    /// --admin-key or --admin-secret-file, that of the data directory.
    #[command(flatten)]
    admin: super::admin_arg::BootstrapArgs,
}

/// Which local cluster a benchmark runs: a cluster file and its overrides.
#[derive(Debug, Args)]
pub struct LocalClusterArgs {
    /// The cluster file of the set to run.
    #[arg(long, default_value = DEFAULT_FILE)]
    cluster: PathBuf,
    /// Directory of the set's data; overrides the file's `data_dir`.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// The port the nodes' ports are offsets from; overrides the file's `base_port`.
    #[arg(long)]
    base_port: Option<u16>,
}

impl LocalClusterArgs {
    /// The cluster file, overridden.
    pub fn load(&self) -> anyhow::Result<ClusterFile> {
        load(&self.cluster, self.data_dir.as_ref(), self.base_port)
    }
}

/// Arguments of `hdl cluster restart`.
#[derive(Debug, Args)]
pub struct RestartArgs {
    /// The cluster file the running `hdl cluster up` was given.
    #[arg(default_value = DEFAULT_FILE)]
    file: PathBuf,
    /// The data directory it was given, if it overrode the file's.
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

/// Asks the `hdl cluster up` running on the cluster file's data directory for a
/// rolling restart and prints its progress until it is done.
pub async fn restart(args: &RestartArgs) -> anyhow::Result<()> {
    let file = load(&args.file, args.data_dir.as_ref(), None)?;
    ask_restart(&file.data_dir, |line| println!("{line}")).await
}

/// Reads the cluster file at `path` and applies the overrides.
pub fn load(
    path: &Path,
    data_dir: Option<&PathBuf>,
    base_port: Option<u16>,
) -> anyhow::Result<ClusterFile> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read cluster file {}", path.display()))?;
    let mut file =
        ClusterFile::from_toml(&text).with_context(|| format!("in {}", path.display()))?;
    if let Some(dir) = data_dir {
        file.data_dir.clone_from(dir);
    }
    file.base_port = base_port.unwrap_or(file.base_port);
    file.validate()?;
    Ok(file)
}

/// Starts the set, forms it if needed, and runs until a signal.
pub async fn up(args: &UpArgs) -> anyhow::Result<()> {
    let file = load(&args.file, args.data_dir.as_ref(), args.base_port)?;
    let data_dir = file.data_dir.clone();
    let admin_dir = DataDir {
        path: &file.data_dir,
        // Only the nodes' own directories inside it must be private.
        allow_shared: true,
    };
    let admin = args.admin.administrator(Some(admin_dir))?;
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    let mut stop = async move || {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
    };
    let mut set = tokio::select! {
        set = LocalSet::launch(file) => set?,
        () = stop() => return Ok(()),
    };
    let formed = tokio::select! {
        formed = set.form(admin.as_ref().map(|admin| &admin.bootstrap)) => Some(formed),
        () = stop() => None,
    };
    let outcome = match formed {
        Some(Ok(primary)) => {
            if let Some(admin) = &admin {
                admin.print_options()?;
            }
            let control = Control::open(&data_dir).await;
            if let Err(error) = &control {
                eprintln!("hdl: {error:#}; `hdl cluster restart` cannot reach this launcher");
            }
            println!("ready primary={primary}");
            serve_restarts(&mut set, control.ok().as_ref(), &mut stop).await;
            Ok(())
        }
        Some(Err(error)) => Err(error),
        None => Ok(()),
    };
    set.stop_all(GRACE).await;
    outcome
}

/// Carries out the rolling restarts callers of the control socket ask for, one at a
/// time, each line of progress printed and told to its caller, until `stop` resolves
/// (which ends a restart half way: the caller is told, and the launcher stops every
/// node still running).
async fn serve_restarts(
    set: &mut LocalSet,
    control: Option<&Control>,
    stop: &mut impl AsyncFnMut(),
) {
    loop {
        let caller = tokio::select! {
            caller = next_caller(control) => caller,
            () = stop() => return,
        };
        let (lines, writer) = caller.progress();
        let mut say = |line: String| {
            println!("{line}");
            // A caller too slow to read misses lines, never holds the restart up.
            let _ = lines.try_send(line);
        };
        let (outcome, stopping) = tokio::select! {
            outcome = rolling_restart(set, &mut say) => (outcome, false),
            () = stop() => (Err(anyhow::anyhow!("the launcher was told to stop")), true),
        };
        let last = last_line(&outcome);
        println!("{last}");
        let _ = lines.try_send(last);
        drop(lines);
        // Bounded: the writer gives up on a caller that stopped reading.
        let _ = writer.await;
        if stopping {
            return;
        }
    }
}

/// The next caller asking for a restart; never, without a control socket.
async fn next_caller(control: Option<&Control>) -> Caller {
    match control {
        Some(control) => control.next_restart().await,
        None => std::future::pending().await,
    }
}
