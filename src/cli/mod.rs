//! The `hdl` command line: argument parsing and one module per subcommand.
//!
//! The edge of the program: the only place that prints, reads arguments and turns
//! errors into messages and exit codes (with `anyhow`). It calls the library and holds
//! no logic of its own beyond presentation.
//!
//! It is the library's top layer rather than the binary's own code: the binary only
//! calls [`run`]. Awaited from another crate, the library's async functions would be
//! compiled there again, with the generic code under them (tokio's tasks, openraft's
//! core, axum's services).

mod add;
mod admin_arg;
mod allocator;
mod backup;
mod batch;
mod bench;
mod bench_auth;
mod bench_chaos;
mod bench_close;
mod bench_cpu;
mod bench_failover;
mod bench_http;
mod bench_import;
mod bench_restart;
mod bench_scale;
mod bench_udp_load;
mod bench_write;
mod bulk_link;
mod cluster;
mod cluster_calls;
mod cluster_status;
mod cluster_up;
mod connect;
mod create;
mod default_admin;
mod delete;
mod export;
mod genericbatch;
mod home;
mod http_session;
mod import;
mod keygen;
mod launcher_control;
mod list;
mod local_set;
mod modify;
mod output;
mod parse;
mod remove;
mod reshard;
mod resolve;
mod restore;
mod rolling_restart;
mod search;
mod serve;
mod store;
mod value_arg;
mod whole_file;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// hdl: a replicated Handle System server, client and tools.
#[derive(Debug, Parser)]
#[command(name = "hdl", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Parse a handle or handle reference (hdl:, hdl://server/, info:hdl/, urn:hdl:,
    /// proxy URL, encoding@ and type= modifiers) and show its parts.
    Parse(parse::ParseArgs),
    /// Run a handle server node: the Handle protocol on TCP and UDP, HTTP (JSON API,
    /// web proxy, /status, /metrics), and the peer protocol of its replica set.
    Serve(serve::ServeArgs),
    /// Resolve a handle: print its values (text, or REST JSON with --json).
    Resolve(resolve::ResolveArgs),
    /// Create a handle with values.
    Create(create::CreateArgs),
    /// Delete a handle.
    Delete(delete::DeleteArgs),
    /// Add values to a handle.
    Add(add::AddArgs),
    /// Replace values of a handle, matched by index.
    Modify(modify::ModifyArgs),
    /// Remove values of a handle by index.
    Remove(remove::RemoveArgs),
    /// List the handles under a prefix.
    List(list::ListArgs),
    /// Tell a server it serves a prefix (server administrators only).
    Home(home::HomeArgs),
    /// Tell a server it no longer serves a prefix (server administrators only).
    Unhome(home::HomeArgs),
    /// List the prefixes a server was told it serves (server administrators only).
    Homed(home::HomedArgs),
    /// Print a server's site information as the hex data of an HS_SITE value.
    Site(home::SiteArgs),
    /// Find handles by value (reverse lookup: URL=https://example.org/*), over a
    /// node's JSON API.
    Search(search::SearchArgs),
    /// Run administrative commands from a file, one a line, in one authenticated
    /// session.
    Batch(batch::BatchArgs),
    /// Write every handle of a running cluster (or of one prefix) as JSON Lines, from
    /// one snapshot of each replica set.
    Export(export::ExportArgs),
    /// Bulk-load handles (hdl export's JSON Lines, or a GenericBatch file) through
    /// each replica set's log; running it again changes nothing.
    Import(import::ImportArgs),
    /// Take a consistent backup of a running cluster (every replica set at one epoch
    /// of the cluster map, without stopping writes) into one file with a checksum.
    Backup(backup::BackupArgs),
    /// Make a new data directory from a backup, for `hdl serve` to answer the same
    /// handles as a new replica set; a damaged or truncated backup is refused.
    Restore(restore::RestoreArgs),
    /// A stopped node's handle store: how full its pages are (stats), or rebuild it in
    /// key order to give back half-empty pages (compact).
    Store(store::StoreArgs),
    /// Generate an administrator's RSA key pair: the private key to a PEM file, the
    /// HS_PUBKEY value to stdout.
    Keygen(keygen::KeygenArgs),
    /// Load tests against a running server.
    Bench(bench::BenchArgs),
    /// Form, change and inspect a replica set (init, add-secondary, remove, status),
    /// or run a local one (up).
    Cluster(cluster::ClusterArgs),
}

/// Runs the command line and returns the process exit code.
pub fn run() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    let result = match cli.command {
        Command::Parse(args) => parse::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Resolve(args) => resolve::run(&args),
        Command::Create(args) => create::run(&args),
        Command::Delete(args) => delete::run(&args),
        Command::Add(args) => add::run(&args),
        Command::Modify(args) => modify::run(&args),
        Command::Remove(args) => remove::run(&args),
        Command::List(args) => list::run(&args),
        Command::Home(args) => home::run(&args, home::Homing::Home),
        Command::Unhome(args) => home::run(&args, home::Homing::Unhome),
        Command::Homed(args) => home::run_homed(&args),
        Command::Site(args) => home::run_site(&args),
        Command::Search(args) => search::run(&args),
        Command::Batch(args) => batch::run(&args),
        Command::Export(args) => export::run(&args),
        Command::Import(args) => import::run(&args),
        Command::Backup(args) => backup::run(&args),
        Command::Restore(args) => restore::run(&args),
        Command::Store(args) => store::run(&args),
        Command::Keygen(args) => keygen::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Cluster(args) => cluster::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("hdl: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Logs go to stderr, filtered by `RUST_LOG` (default: warnings and errors).
fn init_logging() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
}
