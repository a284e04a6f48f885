//! `hdl bench import --handles N [--cluster FILE] [--data-dir DIR] [--base-port P]`:
//! the rate of `hdl import` into a fresh set of real `hdl serve` processes.
//!
//! Runs the set of a cluster file as `hdl cluster up` does (by default a set of one
//! node), bootstraps an administrator of `--prefix`, writes a JSON Lines file of N
//! handles `<prefix>/import-<n>` (a URL and an HS_ADMIN value each, as `hdl export`
//! writes them), reads and parses it with the very code of `hdl import` (timed apart:
//! the client's share), then sends the parsed handles as `hdl import` does and prints
//! the rate the set takes them at; then sends them again, when every handle is
//! unchanged, and prints that rate too. The set is stopped afterwards, whatever the
//! outcome.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cluster_file::ClusterFile;
use crate::replication::AdminClient;
use crate::replication::network::read_secret_file;
use crate::values::{AdminPermissions, AdminRecord, HandleValue};
use anyhow::{Context, bail};
use clap::Args;
use tokio::sync::mpsc;

use super::bench_failover::bench_administrator;
use super::bulk_link::BulkLink;
use super::cluster_up::{GRACE, load};
use super::import::{ImportOptions, Summary, open_reader, send_items};
use super::local_set::LocalSet;

/// How long a bulk call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(300);

/// Arguments of `hdl bench import`.
#[derive(Debug, Args)]
pub struct ImportBench {
    /// Handles to import.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u32).range(1..=100_000_000))]
    handles: u32,
    /// A cluster file to run (its first set is imported into); default one node.
    #[arg(long)]
    cluster: Option<PathBuf>,
    /// The data directory (the import file is written there too); default a new
    /// directory under the system's temporary directory, removed afterwards.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// The base port of the set's nodes (pick one below 32768).
    #[arg(long, default_value_t = 24_000)]
    base_port: u16,
    /// The prefix of the imported handles.
    #[arg(long, default_value = "BENCH")]
    prefix: String,
    #[command(flatten)]
    options: ImportOptions,
}

/// A set of one node, for `--cluster` left out.
pub(super) const ONE_NODE: &str =
    "[[node]]\nid = 1\nhandle_offset = 0\npeer_offset = 10\nhttp_offset = 20\n";

/// The data directory of a benchmark: `given`, or a new `hdl-bench-<name>-<random>` under
/// the system's temporary directory; and whether it is such a temporary one.
pub(super) fn bench_dir(given: Option<&Path>, name: &str) -> (PathBuf, bool) {
    match given {
        Some(dir) => (dir.to_owned(), false),
        None => {
            let name = format!("hdl-bench-{name}-{:016x}", rand::random::<u64>());
            (std::env::temp_dir().join(name), true)
        }
    }
}

/// Runs the benchmark.
pub async fn run(bench: &ImportBench) -> anyhow::Result<()> {
    let (dir, temporary) = bench_dir(bench.data_dir.as_deref(), "import");
    let mut file = match &bench.cluster {
        Some(path) => load(path, Some(&dir), Some(bench.base_port))?,
        None => ClusterFile::from_toml(ONE_NODE).context("the one-node cluster")?,
    };
    file.data_dir.clone_from(&dir);
    file.base_port = bench.base_port;
    file.validate()?;
    let secret_path = file.secret_path();
    let mut set = LocalSet::launch(file).await?;
    let outcome = measure(&set, bench, &dir, &secret_path).await;
    set.stop_all(GRACE).await;
    if temporary && outcome.is_ok() {
        std::fs::remove_dir_all(&dir)
            .with_context(|| format!("cannot remove {}", dir.display()))?;
    }
    outcome
}

async fn measure(
    set: &LocalSet,
    bench: &ImportBench,
    dir: &Path,
    secret_path: &Path,
) -> anyhow::Result<()> {
    let (bootstrap, credentials) = bench_administrator(&bench.prefix)?;
    set.form(Some(&bootstrap)).await?;
    let path = dir.join("import.jsonl");
    let written = Instant::now();
    write_handles(&path, &bench.prefix, bench.handles)?;
    println!(
        "wrote {} handles to {} in {:.1} s",
        bench.handles,
        path.display(),
        written.elapsed().as_secs_f64()
    );
    let client = AdminClient::new(read_secret_file(secret_path)?, CALL_TIMEOUT);
    let peer = set.nodes[0].plan.peer;
    let link = Arc::new(BulkLink::with(client, credentials, peer).await?);
    let parsing = Instant::now();
    let (reader, mut read, format) = open_reader(&path, &bench.options)?;
    let mut items = Vec::new();
    while let Some(item) = read.recv().await {
        items.push(item);
    }
    let _ = reader.join();
    println!(
        " parse: {} handles read and parsed in {:.2} s (one thread, not part of the runs below)",
        bench.handles,
        parsing.elapsed().as_secs_f64()
    );
    let size = std::fs::metadata(&path).map_or(0, |meta| meta.len());
    for run in ["import", "again"] {
        let (sender, receiver) = mpsc::channel(items.len().max(1));
        for item in &items {
            sender
                .try_send(item.clone())
                .context("queueing the items")?;
        }
        drop(sender);
        let mut summary = Summary::default();
        let started = Instant::now();
        send_items(&link, receiver, size, &bench.options, format, &mut summary).await?;
        println!("{run:>6}: {}", summary.line(started.elapsed()));
        let t = summary.tally;
        if t.differing + t.refused > 0 {
            bail!(
                "{} handles differed and {} were refused",
                t.differing,
                t.refused
            );
        }
    }
    Ok(())
}

/// Writes `count` handles `<prefix>/import-<n>` to `path`, as `hdl export` would.
fn write_handles(path: &Path, prefix: &str, count: u32) -> anyhow::Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("cannot write {}", path.display()))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    for n in 0..count {
        let (name, values) = bench_handle(prefix, n);
        let line = crate::restjson::export_json(&name, &values);
        serde_json::to_writer(&mut out, &line)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(())
}

/// Handle `<prefix>/import-<n>` of the benchmarks and its values: a URL and an
/// HS_ADMIN granting everything to `300:0.NA/<prefix>`, stamped at a fixed time.
pub(super) fn bench_handle(prefix: &str, n: u32) -> (String, Vec<HandleValue>) {
    let admin = AdminRecord {
        permissions: AdminPermissions::ALL,
        admin_handle: format!("0.NA/{prefix}"),
        admin_index: 300,
        legacy_padding: false,
    };
    let timestamp = 1_700_000_000;
    let values = vec![
        HandleValue {
            timestamp,
            ..HandleValue::new(1, "URL", format!("https://example.org/objects/{n}"))
        },
        HandleValue {
            timestamp,
            ..HandleValue::new(100, "HS_ADMIN", admin.encode())
        },
    ];
    (format!("{prefix}/import-{n}"), values)
}
