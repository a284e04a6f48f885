//! `hdl bench scale --handles N`: what one node holding N handles costs.
//!
//! Runs a set of one node as `hdl bench import` does (its own data directory, ports from
//! `--base-port`), whose snapshots come about twice while the store is built, then:
//! 1. builds the store: N handles `<prefix>/import-<n>` (`hdl bench import`'s values),
//!    made as they are sent, through the set's log in `hdl import`'s batches;
//! 2. reports the node's resident memory once it has settled (and its peak so far), and
//!    the disk its files take beside the RFC 3652 encoded size of the handles' names
//!    and values;
//! 3. SIGKILLs the node and times its restart: until it listens, and until it answers;
//! 4. resolves at `--rate` a second (open loop, UDP, hits and misses apart), with the
//!    node's CPU per answer, and reports its memory then: the steady state of a node
//!    holding N handles, its caches warm;
//! 5. starts a second node and adds it as a learner, which catches up from the
//!    snapshot, while a writer creates handles: the time it took, the octets of
//!    snapshot data the learner received (its `/metrics`) over that time, and the
//!    first node's greatest resident memory meanwhile;
//! 6. stops the nodes and prints how full the pages of the first node's store are, table
//!    by table, then compacts it (`hdl store compact`) and prints them and the disk again.
//!
//! `--skip catch-up` and `--skip compaction` leave steps 5 and 6 out, for a store whose
//! second copy would not fit on the disk.
//!
//! Memory is read from `/proc/<pid>/status` (Linux). The nodes are stopped afterwards
//! whatever the outcome; the data directory is removed unless given.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::client::{Client, Transport};
use crate::cluster_file::ClusterFile;
use crate::names::Handle;
use crate::placement::{ClusterAdmin, FIRST_SET, FIRST_SET_GROUP, Via, Vote};
use crate::replication::network::read_secret_file;
use crate::replication::{AdminClient, Node};
use crate::values::{Writer, encode_value_list};
use anyhow::{Context, bail};
use clap::Args;
use tokio::sync::mpsc;

use super::bench::{Load, Names, offer};
use super::bench_failover::{bench_administrator, write_until};
use super::bench_import::{ONE_NODE, bench_dir, bench_handle};
use super::bulk_link::BulkLink;
use super::cluster_calls::join_set;
use super::cluster_up::GRACE;
use super::import::{Format, ImportOptions, Item, Put, Summary, send_items};
use super::local_set::LocalSet;
use super::store::{compact_set, fill_of, print_fill, set_files};

/// How long a bulk call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(600);
/// How long a restarted node may take to answer, and a learner to catch up.
const PATIENCE: Duration = Duration::from_secs(600);
/// How long the node is left alone before its memory is read.
const SETTLE: Duration = Duration::from_secs(2);
/// How often memory is sampled while a learner catches up.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// Arguments of `hdl bench scale`.
#[derive(Debug, Args)]
pub struct ScaleBench {
    /// Handles to build the store of.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u32).range(1..=1_000_000_000))]
    handles: u32,
    /// The data directory; default a new directory under the system's temporary
    /// directory, removed afterwards.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// The base port of the nodes (pick one below 32768).
    #[arg(long, default_value_t = 25_000)]
    base_port: u16,
    /// The prefix of the handles.
    #[arg(long, default_value = "BENCH")]
    prefix: String,
    /// Resolutions offered a second.
    #[arg(long, default_value_t = 50_000, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    rate: u32,
    /// Seconds of resolution.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    duration: u64,
    /// A configuration file for the nodes (`[storage]` caches, say); its `[cluster]`
    /// snapshot settings are the bench's own.
    #[arg(long)]
    node_config: Option<PathBuf>,
    /// Steps to leave out (repeatable): `catch-up` (step 5) needs as much disk again
    /// for the learner's store, `compaction` (step 6) for the compacted copy.
    #[arg(long, value_enum)]
    skip: Vec<Step>,
}

/// The steps `--skip` can leave out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Step {
    /// A learner catching up from the snapshot (step 5).
    CatchUp,
    /// Page fill and compaction of the stopped store (step 6).
    Compaction,
}

/// Runs the benchmark.
pub async fn run(bench: &ScaleBench) -> anyhow::Result<()> {
    let (dir, temporary) = bench_dir(bench.data_dir.as_deref(), "scale");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut file = ClusterFile::from_toml(ONE_NODE).context("the one-node cluster")?;
    file.data_dir.clone_from(&dir);
    file.base_port = bench.base_port;
    file.node_config = Some(write_node_config(bench, &dir)?);
    file.validate()?;
    let mut first = LocalSet::launch(file.clone()).await?;
    let mut second = None;
    let outcome = measure(bench, &mut first, &mut second, &file).await;
    first.stop_all(GRACE).await;
    if let Some(mut second) = second {
        second.stop_all(GRACE).await;
    }
    let outcome = match outcome {
        Ok(encoded) if !bench.skip.contains(&Step::Compaction) => {
            compacted(&first.nodes[0].plan.data_dir, encoded)
        }
        outcome => outcome.map(drop),
    };
    if temporary && outcome.is_ok() {
        std::fs::remove_dir_all(&dir)
            .with_context(|| format!("cannot remove {}", dir.display()))?;
    }
    outcome
}

/// Handles a batch of the build holds: about 200 batches in all, 500 to 10,000 each.
fn batch_size(handles: u32) -> u32 {
    (handles / 200).clamp(500, 10_000)
}

/// The nodes' configuration: `--node-config`'s, with snapshots about twice over the
/// build (and the log kept short behind them, so that a learner needs the snapshot).
fn write_node_config(bench: &ScaleBench, dir: &Path) -> anyhow::Result<PathBuf> {
    let mut text = match &bench.node_config {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?,
        None => String::new(),
    };
    if text.contains("[cluster]") {
        bail!("--node-config must not hold [cluster]: the bench sets its snapshot settings");
    }
    let entries = u64::from(bench.handles.div_ceil(batch_size(bench.handles)));
    let every = (entries / 2).max(2);
    text.push_str(&format!(
        "\n[cluster]\nsnapshot_every = {every}\nkeep_after_snapshot = 1\n"
    ));
    let path = dir.join("bench-node.toml");
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// Runs steps 1 to 5 (see the module docs); returns the encoded size of the handles.
async fn measure(
    bench: &ScaleBench,
    first: &mut LocalSet,
    second: &mut Option<LocalSet>,
    file: &ClusterFile,
) -> anyhow::Result<u64> {
    let (bootstrap, credentials) = bench_administrator(&bench.prefix)?;
    first.form(Some(&bootstrap)).await?;
    let pid = first.nodes[0].pid().context("the node is not running")?;
    let encoded = build(bench, first, &file.secret_path(), &credentials).await?;
    tokio::time::sleep(SETTLE).await;
    let memory = Memory::of(pid)?;
    println!(
        "memory after the build: {} MiB resident, {} MiB at most",
        memory.resident >> 20,
        memory.peak >> 20
    );
    print_disk("disk", &first.nodes[0].plan.data_dir, encoded)?;
    let server = first.nodes[0].plan.handle;
    let client = Arc::new(Client::new(vec![server]).with_credentials(credentials.clone()));
    let hits = Names::new(format!("{}/import-", bench.prefix), bench.handles)?;
    let misses = Names::new(format!("{}/absent-", bench.prefix), bench.handles)?;
    restart(first, &client, &hits).await?;
    let pid = first.nodes[0].pid().context("the node is not running")?;
    let load = Load {
        concurrency: 64,
        duration: Duration::from_secs(bench.duration),
        miss_percent: 10,
        rate: Some(bench.rate),
        transport: Transport::Udp,
        server_pid: Some(pid),
    };
    offer(&client, &hits, &misses, &load).await?;
    tokio::time::sleep(SETTLE).await;
    let memory = Memory::of(pid)?;
    println!(
        "memory in steady state (restarted, then the resolutions above): {} MiB resident, {} MiB at most",
        memory.resident >> 20,
        memory.peak >> 20
    );
    if bench.skip.contains(&Step::CatchUp) {
        return Ok(encoded);
    }
    let joined = catch_up(first, second, file, &client, &bench.prefix).await?;
    println!(
        "catch-up: a new learner caught up in {:.2} s under writes, installing {} snapshot(s); {} MiB of snapshot received, {:.0} MiB/s; the first node held at most {} MiB meanwhile, the learner {} MiB",
        joined.took.as_secs_f64(),
        joined.installed.count,
        joined.installed.octets >> 20,
        joined.installed.octets as f64 / 1_048_576.0 / joined.took.as_secs_f64().max(1e-3),
        joined.peak_resident >> 20,
        joined.learner_peak >> 20
    );
    Ok(encoded)
}

/// Step 6, the nodes stopped: how full the pages of the first node's store are, table by
/// table, before and after `hdl store compact`, and the disk its files then take.
fn compacted(data_dir: &Path, encoded: u64) -> anyhow::Result<()> {
    let files = set_files(data_dir)?;
    println!("the first node's store, stopped:");
    print_fill(&fill_of(&files)?);
    compact_set(&files)?;
    print_fill(&fill_of(&files)?);
    print_disk("disk after compaction", data_dir, encoded)
}

/// Prints the octets the files under `data_dir` take against `encoded`.
fn print_disk(label: &str, data_dir: &Path, encoded: u64) -> anyhow::Result<()> {
    let disk = Disk::of(data_dir)?;
    println!(
        "{label}: {} MiB in the node's files ({} MiB apparent) for {} MiB of encoded names and values: {:.2}×",
        disk.allocated >> 20,
        disk.apparent >> 20,
        encoded >> 20,
        disk.allocated as f64 / encoded.max(1) as f64
    );
    Ok(())
}

/// Puts every handle through the set's log; returns their encoded size.
async fn build(
    bench: &ScaleBench,
    set: &LocalSet,
    secret_path: &Path,
    credentials: &crate::client::Credentials,
) -> anyhow::Result<u64> {
    let client = AdminClient::new(read_secret_file(secret_path)?, CALL_TIMEOUT);
    let peer = set.nodes[0].plan.peer;
    let link = Arc::new(BulkLink::with(client, credentials.clone(), peer).await?);
    let options = ImportOptions {
        format: Some(Format::Jsonl),
        overwrite: false,
        batch: batch_size(bench.handles),
    };
    let (sender, items) = mpsc::channel(4);
    let (prefix, handles, batch) = (bench.prefix.clone(), bench.handles, options.batch);
    let generator = std::thread::spawn(move || generate(&prefix, handles, batch, &sender));
    let started = Instant::now();
    let mut summary = Summary::default();
    let sent = send_items(
        &link,
        items,
        u64::from(handles),
        &options,
        Format::Jsonl,
        &mut summary,
    )
    .await;
    let encoded = generator
        .join()
        .map_err(|_| anyhow::anyhow!("the generator failed"))??;
    sent?;
    println!("build: {}", summary.line(started.elapsed()));
    if summary.tally.created != u64::from(handles) {
        bail!("{} handles were not created", handles);
    }
    Ok(encoded)
}

/// Sends `count` handles `<prefix>/import-<n>` in items of `batch`, the handles made so
/// far standing for the octets read; returns the encoded size of their names and values.
fn generate(
    prefix: &str,
    count: u32,
    batch: u32,
    sender: &mpsc::Sender<Item>,
) -> anyhow::Result<u64> {
    let mut encoded = 0u64;
    let mut puts = Vec::with_capacity(batch as usize);
    for n in 0..count {
        let (name, values) = bench_handle(prefix, n);
        let mut writer = Writer::new();
        encode_value_list(&values, &mut writer);
        encoded += (name.len() + writer.len()) as u64;
        let handle = Handle::parse(&name).context("invalid --prefix")?;
        puts.push(Put::new(n as usize + 1, handle, values));
        if puts.len() == batch as usize || n + 1 == count {
            let full = std::mem::replace(&mut puts, Vec::with_capacity(batch as usize));
            if sender
                .blocking_send(Item::Puts(full, u64::from(n) + 1))
                .is_err()
            {
                bail!("the import stopped");
            }
        }
    }
    Ok(encoded)
}

/// SIGKILLs the set's node and starts it again: prints how long until it listened and
/// until it answered a resolution of one of `hits`.
async fn restart(set: &mut LocalSet, client: &Client, hits: &Names) -> anyhow::Result<()> {
    set.kill(0).await?;
    let started = Instant::now();
    set.start(0).await?;
    let listening = started.elapsed();
    let handle = hits.random()?;
    let all = crate::values::ValueSelection::all();
    loop {
        if client.resolve(&handle, &all, Transport::Udp).await.is_ok() {
            break;
        }
        if started.elapsed() > PATIENCE {
            bail!("the restarted node did not answer within {PATIENCE:?}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    println!(
        "restart: SIGKILLed; listening after {:.2} s, answering after {:.2} s",
        listening.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// What adding a learner came to.
struct Joined {
    took: Duration,
    peak_resident: u64,
    /// The most the learner was ever resident, read once it caught up.
    learner_peak: u64,
    /// The snapshots the learner installed.
    installed: Installed,
}

/// Snapshots a node installed, as its `/metrics` counts them.
#[derive(Debug, PartialEq, Eq)]
struct Installed {
    count: u64,
    /// Octets of snapshot data received for them.
    octets: u64,
}

/// Starts a second node in `file`'s directory and adds it to the set as a learner,
/// which catches up, while a writer creates handles under `prefix`.
async fn catch_up(
    first: &LocalSet,
    second: &mut Option<LocalSet>,
    file: &ClusterFile,
    client: &Arc<Client>,
    prefix: &str,
) -> anyhow::Result<Joined> {
    first.primary_id().await?;
    let mut learner_file = file.clone();
    learner_file.nodes[0].id = 2;
    learner_file.nodes[0].handle_offset = 1;
    learner_file.nodes[0].peer_offset = 11;
    learner_file.nodes[0].http_offset = 21;
    let learner = second.insert(LocalSet::launch(learner_file).await?);
    let plan = &learner.nodes[0].plan;
    let node = Node {
        handle: plan.handle,
        peer: plan.peer,
        http: Some(plan.http),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (client, stop) = (Arc::clone(client), Arc::clone(&stop));
        let prefix = format!("{prefix}/while-joining-{:08x}", rand::random::<u32>());
        tokio::spawn(async move { write_until(&client, &prefix, &stop).await })
    };
    let pid = first.nodes[0]
        .pid()
        .context("the first node is not running")?;
    let sampler = {
        let stop = Arc::clone(&stop);
        tokio::spawn(async move { greatest_resident(pid, &stop).await })
    };
    let primary = first.nodes[0].plan.peer;
    let via = Via {
        set: primary,
        map: primary,
    };
    let started = Instant::now();
    join_set(first.admin.client(), plan.peer, FIRST_SET).await?;
    let joined = tokio::time::timeout(PATIENCE, async {
        first
            .admin
            .join(FIRST_SET, via, 2, &node, Vote::Learner)
            .await
            .context("cannot add the learner")?;
        caught_up(&first.admin, primary, plan.peer).await
    })
    .await;
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    writer.await.context("the writer failed")??;
    let peak_resident = sampler.await.context("the sampler failed")??;
    joined.context("the learner did not catch up in time")??;
    let learner_pid = learner.nodes[0]
        .pid()
        .context("the learner is not running")?;
    Ok(Joined {
        learner_peak: Memory::of(learner_pid)?.peak,
        installed: snapshots_installed(plan.http).await?,
        took,
        peak_resident,
    })
}

/// Returns once the member at `learner` has applied what the primary at `primary` had
/// logged when asked.
async fn caught_up(
    admin: &ClusterAdmin,
    primary: SocketAddr,
    learner: SocketAddr,
) -> anyhow::Result<()> {
    let target = admin.status(primary, FIRST_SET_GROUP).await?.last_log;
    loop {
        let applied = admin.status(learner, FIRST_SET_GROUP).await?.applied;
        if applied >= target {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The snapshots the node serving HTTP at `http` says it installed (its `/metrics`).
async fn snapshots_installed(http: SocketAddr) -> anyhow::Result<Installed> {
    let url = format!("http://{http}/metrics");
    let metrics = reqwest::get(&url)
        .await
        .and_then(reqwest::Response::error_for_status)
        .with_context(|| format!("cannot read {url}"))?
        .text()
        .await
        .with_context(|| format!("cannot read {url}"))?;
    let counter = |name: &str| {
        metrics
            .lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
            .and_then(|count| count.trim().parse().ok())
            .with_context(|| format!("{url} has no {name}"))
    };
    Ok(Installed {
        count: counter("hdl_raft_snapshots_installed_total")?,
        octets: counter("hdl_raft_snapshot_octets_installed_total")?,
    })
}

/// The greatest resident memory of process `pid`, sampled until `stop`.
async fn greatest_resident(pid: u32, stop: &AtomicBool) -> anyhow::Result<u64> {
    let mut greatest = 0;
    while !stop.load(Ordering::Relaxed) {
        greatest = greatest.max(Memory::of(pid)?.resident);
        tokio::time::sleep(SAMPLE_EVERY).await;
    }
    Ok(greatest)
}

/// A process's memory, in octets.
#[derive(Debug, PartialEq, Eq)]
struct Memory {
    /// Resident now (`VmRSS`).
    resident: u64,
    /// The most it was ever resident (`VmHWM`).
    peak: u64,
}

impl Memory {
    fn of(pid: u32) -> anyhow::Result<Memory> {
        let path = format!("/proc/{pid}/status");
        let status =
            std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
        Memory::parse(&status).with_context(|| format!("{path} has no VmRSS or VmHWM"))
    }

    /// From `/proc/<pid>/status`: its `VmRSS:` and `VmHWM:` lines, in kB.
    fn parse(status: &str) -> Option<Memory> {
        let field = |name: &str| -> Option<u64> {
            let line = status.lines().find_map(|line| line.strip_prefix(name))?;
            let kb = line.trim().strip_suffix("kB")?.trim().parse::<u64>().ok()?;
            Some(kb * 1024)
        };
        Some(Memory {
            resident: field("VmRSS:")?,
            peak: field("VmHWM:")?,
        })
    }
}

/// The octets the files under a directory take.
#[derive(Debug, Default)]
struct Disk {
    /// Allocated on disk (blocks).
    allocated: u64,
    /// Their lengths.
    apparent: u64,
}

impl Disk {
    fn of(dir: &Path) -> anyhow::Result<Disk> {
        use std::os::unix::fs::MetadataExt;
        let mut disk = Disk::default();
        let mut pending = vec![dir.to_owned()];
        while let Some(dir) = pending.pop() {
            let entries = std::fs::read_dir(&dir)
                .with_context(|| format!("cannot read {}", dir.display()))?;
            for entry in entries {
                let entry = entry.with_context(|| format!("cannot read {}", dir.display()))?;
                let meta = entry.metadata()?;
                if meta.is_dir() {
                    pending.push(entry.path());
                } else {
                    disk.allocated += meta.blocks() * 512;
                    disk.apparent += meta.len();
                }
            }
        }
        Ok(disk)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_read_from_a_status_file_in_octets() {
        let status = "Name:\thdl\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\nThreads:\t7\n";
        assert_eq!(
            Memory::parse(status),
            Some(Memory {
                resident: 100 << 20,
                peak: 200 << 20
            })
        );
        assert_eq!(Memory::parse("VmRSS:\t12 kB\n"), None);
        assert_eq!(Memory::parse("VmRSS:\tlots\nVmHWM:\t1 kB\n"), None);
    }

    #[test]
    fn this_process_has_some_memory() {
        let memory = Memory::of(std::process::id()).unwrap();
        assert!(memory.resident > 0 && memory.peak >= memory.resident);
    }

    #[test]
    fn a_build_takes_about_two_hundred_batches_within_bounds() {
        assert_eq!(batch_size(1_000), 500);
        assert_eq!(batch_size(1_000_000), 5_000);
        assert_eq!(batch_size(100_000_000), 10_000);
    }
}
