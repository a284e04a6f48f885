//! `hdl bench restart`: what clients see while a replica set restarts one member at a
//! time.
//!
//! Runs the set of a cluster file as `hdl cluster up` does (forming it if new), creates
//! a seed handle, keeps `--writers` writers creating fresh handles (each create timed
//! from its sending to its acknowledgement, the client's own retries included) and
//! `--readers` readers resolving the seed over UDP (each resolution asks the members
//! in a rotating order, so a stopped member is passed over), and after `--settle`
//! seconds restarts every node `--rounds` times as `hdl cluster restart` does
//! ([`rolling_restart`]: leaders last, each handing off as it stops), then lets the
//! load run `--settle` seconds more. Prints each step, then the resolutions and how
//! many failed, the creates that failed, how long the acknowledged ones waited (p50,
//! p99, worst) among those sent or acknowledged while a restart ran and over the
//! whole run, the primary and its term before and after, and how many acknowledged
//! creates resolve once every member has caught up.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::client::Client;
use crate::names::Handle;
use crate::placement::FIRST_SET_GROUP;
use crate::values::ValueSelection;
use anyhow::{Context, bail};
use clap::Args;
use hdrhistogram::Histogram;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::bench::{histogram, micros_since};
use super::bench_failover::{Resolutions, form_for_bench, probe, resolve_until};
use super::bench_write::numbered_create;
use super::cluster_up::LocalClusterArgs;
use super::local_set::LocalSet;
use super::rolling_restart::rolling_restart;

/// Creates a writer makes at most, so that what it remembers stays bounded.
const MAX_CREATES: u64 = 1_000_000;
/// Checks of acknowledged creates made at once afterwards.
const CHECKERS: usize = 16;

/// Arguments of `hdl bench restart`.
#[derive(Debug, Args)]
pub struct RestartBench {
    #[command(flatten)]
    set: LocalClusterArgs,
    /// How many rolling restarts, one after another.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    rounds: u32,
    /// Concurrent writers.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(0..=1000))]
    writers: u32,
    /// Concurrent readers.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(0..=1000))]
    readers: u32,
    /// Seconds of load before the first restart and after the last.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(0..=600))]
    settle: u64,
    /// The prefix of the created handles.
    #[arg(long, default_value = "BENCH")]
    prefix: String,
}

/// What one writer did.
struct Written {
    /// How long each acknowledged create waited, in microseconds.
    waits: Histogram<u64>,
    /// The same of the creates sent or acknowledged while a restart ran.
    waits_restarting: Histogram<u64>,
    /// The handles acknowledged.
    acknowledged: Vec<Handle>,
    /// Creates that failed, and why the first did.
    failed: u64,
    first_failure: Option<String>,
}

/// Runs the benchmark and stops the set it started, whatever the outcome.
pub async fn run(bench: &RestartBench) -> anyhow::Result<()> {
    LocalSet::run_with(bench.set.load()?, async |set| measure(set, bench).await).await
}

async fn measure(set: &mut LocalSet, bench: &RestartBench) -> anyhow::Result<()> {
    let (credentials, servers) = form_for_bench(set, &bench.prefix).await?;
    let seed = Handle::parse(&format!("{}/restart-seed", bench.prefix)).context("--prefix")?;
    let client = Client::new(servers.clone()).with_credentials(credentials.clone());
    probe(&client, &seed).await?;
    // A resolution reads the member's applied state: every member holds the seed
    // before the readers ask for it.
    let everyone: Vec<usize> = (0..set.nodes.len()).collect();
    set.await_caught_up(FIRST_SET_GROUP, &everyone).await?;
    let before = primary_and_term(set).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let restarting = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(Resolutions::default());
    let mut readers = JoinSet::new();
    for _ in 0..bench.readers {
        let (servers, seed) = (servers.clone(), seed.clone());
        let (stop, reads) = (Arc::clone(&stop), Arc::clone(&reads));
        readers.spawn(async move { resolve_until(servers, &seed, &stop, &reads).await });
    }
    let run: u32 = rand::random();
    let mut writers = JoinSet::new();
    for task in 0..bench.writers {
        let client = Client::new(rotated(&servers, task)).with_credentials(credentials.clone());
        let prefix = format!("{}/r-{run:08x}-{task}", bench.prefix);
        let flags = Flags {
            stop: Arc::clone(&stop),
            restarting: Arc::clone(&restarting),
        };
        writers.spawn(async move { write_until(&client, &prefix, &flags).await });
    }
    let settle = Duration::from_secs(bench.settle);
    tokio::time::sleep(settle).await;
    let mut say = |line: String| println!("{line}");
    restarting.store(true, Ordering::Relaxed);
    for round in 1..=bench.rounds {
        println!("round {round}:");
        rolling_restart(set, &mut say).await?;
    }
    restarting.store(false, Ordering::Relaxed);
    tokio::time::sleep(settle).await;
    stop.store(true, Ordering::Relaxed);
    while let Some(done) = readers.join_next().await {
        done.context("a reader failed")??;
    }
    let mut written = Vec::new();
    while let Some(done) = writers.join_next().await {
        written.push(done.context("a writer failed")??);
    }
    let after = primary_and_term(set).await?;
    report(&reads, &written, before, after)?;
    set.await_caught_up(FIRST_SET_GROUP, &everyone).await?;
    let acknowledged: Vec<Handle> = written.into_iter().flat_map(|w| w.acknowledged).collect();
    let missing = missing(&Client::new(servers), acknowledged.clone()).await?;
    println!(
        "after:  {} of {} acknowledged creates resolve",
        acknowledged.len() - missing,
        acknowledged.len()
    );
    if missing > 0 {
        bail!("{missing} acknowledged creates are missing");
    }
    Ok(())
}

/// `servers` from the `task`-th on (modulo their number), the others after.
fn rotated(servers: &[SocketAddr], task: u32) -> Vec<SocketAddr> {
    let mut order = servers.to_vec();
    order.rotate_left(usize::try_from(task).unwrap_or(0) % servers.len().max(1));
    order
}

/// Set 1's primary and its term (bounded wait).
async fn primary_and_term(set: &LocalSet) -> anyhow::Result<(u64, u64)> {
    let primary = set.primary_id().await?;
    let peer = set.nodes[set.index_of(primary)?].plan.peer;
    Ok((primary, set.set_status(peer).await?.term))
}

/// What a writer watches: when to stop, and whether a restart runs.
struct Flags {
    stop: Arc<AtomicBool>,
    restarting: Arc<AtomicBool>,
}

/// Creates `<prefix>-<n>` for n = 0, 1, … until told to stop (at most
/// [`MAX_CREATES`]), timing each.
async fn write_until(client: &Client, prefix: &str, flags: &Flags) -> anyhow::Result<Written> {
    let mut written = Written {
        waits: histogram()?,
        waits_restarting: histogram()?,
        acknowledged: Vec::new(),
        failed: 0,
        first_failure: None,
    };
    let restarting = || flags.restarting.load(Ordering::Relaxed);
    for n in 0..MAX_CREATES {
        if flags.stop.load(Ordering::Relaxed) {
            break;
        }
        let request = numbered_create(prefix, n)?;
        let handle = Handle::parse(&format!("{prefix}-{n}"))?;
        let (sent, sent_restarting) = (Instant::now(), restarting());
        match client.admin(request).await {
            Ok(_) => {
                let waited = micros_since(sent);
                written.waits.saturating_record(waited);
                if sent_restarting || restarting() {
                    written.waits_restarting.saturating_record(waited);
                }
                written.acknowledged.push(handle);
            }
            Err(error) => {
                written.failed += 1;
                written
                    .first_failure
                    .get_or_insert_with(|| error.to_string());
            }
        }
    }
    Ok(written)
}

/// Prints what readers and writers saw, and the primary before and after.
fn report(
    reads: &Resolutions,
    written: &[Written],
    (was, was_term): (u64, u64),
    (is, is_term): (u64, u64),
) -> anyhow::Result<()> {
    let (mut waits, mut waits_restarting) = (histogram()?, histogram()?);
    for writer in written {
        waits.add(&writer.waits)?;
        waits_restarting.add(&writer.waits_restarting)?;
    }
    let failed: u64 = written.iter().map(|w| w.failed).sum();
    println!(
        "reads:  {} resolutions, {} failed",
        reads.done.load(Ordering::Relaxed),
        reads.failed.load(Ordering::Relaxed)
    );
    println!("writes: {failed} failed");
    println!("  during the restarts: {}", waited(&waits_restarting));
    println!("  the whole run:       {}", waited(&waits));
    if let Some(first) = written.iter().find_map(|w| w.first_failure.as_ref()) {
        println!("first failed write: {first}");
    }
    println!(
        "primary of set 1: node {was} in term {was_term} before, node {is} in term {is_term} after"
    );
    Ok(())
}

/// `N acknowledged, wait p50 …, p99 …, worst …` of a histogram of microseconds.
fn waited(waits: &Histogram<u64>) -> String {
    let millis = |micros: u64| micros as f64 / 1000.0;
    format!(
        "{} acknowledged, wait p50 {:.1} ms, p99 {:.1} ms, worst {:.1} ms",
        waits.len(),
        millis(waits.value_at_quantile(0.5)),
        millis(waits.value_at_quantile(0.99)),
        millis(waits.max())
    )
}

/// How many of `handles` no member resolves.
async fn missing(client: &Client, handles: Vec<Handle>) -> anyhow::Result<usize> {
    let shares = handles.chunks(handles.len().div_ceil(CHECKERS).max(1));
    let mut checks = JoinSet::new();
    for share in shares {
        let (client, share) = (client.clone(), share.to_vec());
        checks.spawn(async move {
            let all = ValueSelection::all();
            let mut missing = 0;
            for handle in &share {
                let found = client.resolve(handle, &all, crate::client::Transport::Auto);
                if found.await.is_err() {
                    missing += 1;
                }
            }
            missing
        });
    }
    let mut missing = 0;
    while let Some(counted) = checks.join_next().await {
        missing += counted.context("a check failed")?;
    }
    Ok(missing)
}
