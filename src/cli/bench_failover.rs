//! `hdl bench failover`: how long a replica set takes writes again after its primary
//! dies.
//!
//! Launches the set of a cluster file as `hdl cluster up` does (forming it if new),
//! keeps `--concurrency` writers creating handles and one resolver resolving a seeded
//! handle (each resolution asks the members in a rotating order, so a dead member is
//! passed over for the next), then `--kills` times: SIGKILLs the primary, sends a
//! probe create at once (to every member in turn until one acknowledges it), and
//! records the time from the kill to that first acknowledged write; restarts the
//! killed node on its data and waits until it has caught up before the next kill.
//! Reports each kill, then the median, 90th percentile and worst recovery and the resolution errors.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::auth::{Identity, SecretKey};
use crate::client::{AdminRequest, Client, ClientConfig, Credentials, Key, Overwrite, Transport};
use crate::codec::ResponseCode;
use crate::names::{Handle, prefix_handle};
use crate::replication::NodeId;
use crate::replication::admin::Role;
use crate::service::bootstrap::{BootstrapAdmin, KEY_VALUE_INDEX};
use crate::values::{HandleValue, ValueSelection};
use anyhow::{Context, bail};
use clap::Args;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::admin_arg::Bootstrap;
use super::bench_write::numbered_create;
use super::cluster_up::LocalClusterArgs;
use super::local_set::LocalSet;

/// How long the set may take to take writes again, or a node to catch up.
const PATIENCE: Duration = Duration::from_secs(60);
/// Pause between polls and after a failed probe.
const STEP: Duration = Duration::from_millis(10);

/// Arguments of `hdl bench failover`.
#[derive(Debug, Args)]
pub struct FailoverBench {
    #[command(flatten)]
    set: LocalClusterArgs,
    /// How many times to kill the primary.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    kills: u32,
    /// Concurrent writers keeping the set under load.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    concurrency: u32,
    /// The prefix of the created handles.
    #[arg(long, default_value = "BENCH")]
    prefix: String,
}

/// Resolutions made by the resolver, and how many failed.
#[derive(Debug, Default)]
pub(super) struct Resolutions {
    pub done: AtomicU64,
    pub failed: AtomicU64,
}

/// What one kill came to.
#[derive(Debug)]
struct Round {
    killed: NodeId,
    recovery: Duration,
    new_primary: NodeId,
    resolutions: u64,
    failed: u64,
}

/// Runs the benchmark and stops the set it started, whatever the outcome.
pub async fn run(bench: &FailoverBench) -> anyhow::Result<()> {
    LocalSet::run_with(bench.set.load()?, async |set| measure(set, bench).await).await
}

async fn measure(set: &mut LocalSet, bench: &FailoverBench) -> anyhow::Result<()> {
    let (credentials, servers) = form_for_bench(set, &bench.prefix).await?;
    let client = Client::new(servers.clone()).with_credentials(credentials);
    let seed = Handle::parse(&format!("{}/failover-seed", bench.prefix)).context("--prefix")?;
    probe(&client, &seed).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(Resolutions::default());
    let mut load = JoinSet::new();
    let run: u32 = rand::random();
    for task in 0..bench.concurrency {
        let (client, stop) = (client.clone(), Arc::clone(&stop));
        let prefix = format!("{}/f-{run:08x}-{task}", bench.prefix);
        load.spawn(async move { write_until(&client, &prefix, &stop).await });
    }
    let (stopped, seen) = (Arc::clone(&stop), Arc::clone(&counts));
    load.spawn(async move { resolve_until(servers, &seed, &stopped, &seen).await });
    let mut rounds = Vec::new();
    for kill in 1..=bench.kills {
        let probe_name = format!("{}/probe-{run:08x}-{kill}", bench.prefix);
        let round = one_kill(set, &client, &Handle::parse(&probe_name)?, &counts).await;
        let round = round.with_context(|| format!("kill {kill}"))?;
        println!(
            "kill {kill:>3}: primary node {} SIGKILLed; first write acknowledged after {:>5} ms (new primary node {}); {} of {} resolutions failed meanwhile",
            round.killed,
            round.recovery.as_millis(),
            round.new_primary,
            round.failed,
            round.resolutions
        );
        rounds.push(round);
    }
    stop.store(true, Ordering::Relaxed);
    while load.join_next().await.is_some() {}
    summarise(&rounds);
    Ok(())
}

/// Kills the primary, times the first acknowledged write, restarts the node and
/// waits until it has caught up.
async fn one_kill(
    set: &mut LocalSet,
    client: &Client,
    probe_name: &Handle,
    counts: &Resolutions,
) -> anyhow::Result<Round> {
    let killed = set.primary_id().await?;
    let index = set.index_of(killed)?;
    let (done, failed) = (
        counts.done.load(Ordering::Relaxed),
        counts.failed.load(Ordering::Relaxed),
    );
    let killed_at = Instant::now();
    set.kill(index).await?;
    let acknowledged = probe(client, probe_name).await?;
    let recovery = acknowledged.duration_since(killed_at);
    let new_primary = set.primary_id().await?;
    set.start(index).await?;
    await_caught_up(set, index).await?;
    Ok(Round {
        killed,
        recovery,
        new_primary,
        resolutions: counts.done.load(Ordering::Relaxed) - done,
        failed: counts.failed.load(Ordering::Relaxed) - failed,
    })
}

/// Creates `name`, retrying until the set acknowledges it; when it did.
pub(super) async fn probe(client: &Client, name: &Handle) -> anyhow::Result<Instant> {
    let deadline = Instant::now() + PATIENCE;
    while Instant::now() < deadline {
        let value = HandleValue::new(1, "URL", format!("https://example.org/{name}"));
        let request = AdminRequest::Create {
            handle: name.clone(),
            values: vec![value],
            overwrite: Overwrite::Refuse,
        };
        match client.admin(request).await {
            // Already there: an earlier try was committed though its answer was lost.
            Ok(_) => return Ok(Instant::now()),
            Err(e) if e.response_code() == Some(ResponseCode::HandleAlreadyExists) => {
                return Ok(Instant::now());
            }
            Err(_) => tokio::time::sleep(STEP).await,
        }
    }
    bail!("no write was acknowledged within {PATIENCE:?}")
}

/// Waits until the node at `index` is a secondary that has applied what the
/// primary had applied when the wait began.
async fn await_caught_up(set: &LocalSet, index: usize) -> anyhow::Result<()> {
    let deadline = Instant::now() + PATIENCE;
    let primary = set.primary_id().await?;
    let primary_peer = set.nodes[set.index_of(primary)?].plan.peer;
    let target = set.set_status(primary_peer).await?.applied;
    let peer = set.nodes[index].plan.peer;
    while Instant::now() < deadline {
        if let Ok(status) = set.set_status(peer).await
            && status.role == Role::Secondary
            && status.applied >= target
        {
            return Ok(());
        }
        tokio::time::sleep(STEP).await;
    }
    bail!(
        "node {} did not catch up within {PATIENCE:?}",
        set.nodes[index].plan.id
    )
}

/// Forms `set` with a fresh administrator of `prefix` ([`bench_administrator`]);
/// its credentials, and the members' Handle protocol addresses.
pub(super) async fn form_for_bench(
    set: &LocalSet,
    prefix: &str,
) -> anyhow::Result<(Credentials, Vec<SocketAddr>)> {
    let (bootstrap, credentials) = bench_administrator(prefix)?;
    set.form(Some(&bootstrap)).await?;
    let servers = set.nodes.iter().map(|n| n.plan.handle).collect();
    Ok((credentials, servers))
}

/// A fresh administrator of `prefix` for this run: a random secret, bootstrapped as
/// `300:0.NA/<prefix>` when the set is formed, and the writers' credentials for it.
pub(super) fn bench_administrator(prefix: &str) -> anyhow::Result<(Bootstrap, Credentials)> {
    let secret: String = (0..32)
        .map(|_| format!("{:x}", rand::random::<u8>() % 16))
        .collect();
    let bootstrap = Bootstrap {
        admin: BootstrapAdmin::SecretKey(secret.clone().into_bytes()),
        prefixes: vec![prefix.to_owned()],
    };
    let credentials = Credentials {
        identity: Identity {
            handle: prefix_handle(prefix)
                .context("invalid --prefix")?
                .as_str()
                .to_owned(),
            index: KEY_VALUE_INDEX,
        },
        key: Key::Secret(SecretKey(secret.into_bytes())),
    };
    Ok((bootstrap, credentials))
}

/// Creates `<prefix>-<n>` for n = 0, 1, … until `stop`, errors ignored: load only.
pub(super) async fn write_until(
    client: &Client,
    prefix: &str,
    stop: &AtomicBool,
) -> anyhow::Result<()> {
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let request = numbered_create(prefix, n)?;
        n += 1;
        if client.admin(request).await.is_err() {
            tokio::time::sleep(STEP).await;
        }
    }
    Ok(())
}

/// Resolves `seed` over UDP until `stop`, each time asking the members from the next
/// one on; counts resolutions and failures (no member answered with the values).
pub(super) async fn resolve_until(
    servers: Vec<SocketAddr>,
    seed: &Handle,
    stop: &AtomicBool,
    counts: &Resolutions,
) -> anyhow::Result<()> {
    let config = ClientConfig {
        udp_waits: [250, 500].map(Duration::from_millis).to_vec(),
        ..ClientConfig::default()
    };
    let clients: Vec<Client> = (0..servers.len())
        .map(|first| {
            let mut order = servers.clone();
            order.rotate_left(first);
            Client::with_config(order, config.clone())
        })
        .collect();
    let all = ValueSelection::all();
    for client in clients.iter().cycle() {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if client.resolve(seed, &all, Transport::Udp).await.is_err() {
            counts.failed.fetch_add(1, Ordering::Relaxed);
        }
        counts.done.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

fn summarise(rounds: &[Round]) {
    let mut times: Vec<Duration> = rounds.iter().map(|r| r.recovery).collect();
    times.sort_unstable();
    let (Some(median), Some(p90), Some(worst)) = (
        times.get(times.len() / 2),
        times.get((times.len() * 9).div_ceil(10) - 1),
        times.last(),
    ) else {
        return;
    };
    let failed: u64 = rounds.iter().map(|r| r.failed).sum();
    let resolutions: u64 = rounds.iter().map(|r| r.resolutions).sum();
    println!(
        "failover over {} kills: median {} ms, p90 {} ms, worst {} ms; {failed} of {resolutions} resolutions failed",
        rounds.len(),
        median.as_millis(),
        p90.as_millis(),
        worst.as_millis()
    );
}
