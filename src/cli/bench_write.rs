//! `hdl bench write`: durable creates per second against a replica set.
//!
//! `--concurrency` tasks create fresh handles `<prefix>/w-<run>-<task>-<n>` (one URL
//! value each, `<run>` random so runs never collide) over TCP for `--duration`
//! seconds. A server acknowledges a create only once the primary has committed it with
//! a quorum and applied it, so every success is durable; failures count as errors,
//! never as latencies. Each writer opens an authenticated session of its own first (one
//! challenge per writer), so the figure is the write path's, not the authentication's;
//! `--challenge-each` answers a challenge for every create instead. With `--lag-peer`
//! and `--cluster-secret-file`, a sampler asks every member for its applied index every
//! [`LAG_EVERY`] meanwhile and records each secondary's lag behind the primary's log
//! (entries), as `hdl cluster status` shows it, and the primary's term at the first
//! and last sample: a term change means an election interrupted the run.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::client::{AdminRequest, Client, Overwrite};
use crate::names::Handle;
use crate::placement::FIRST_SET_GROUP;
use crate::replication::AdminClient;
use crate::replication::network::read_secret_file;
use crate::values::HandleValue;
use anyhow::{Context, bail};
use clap::Args;
use hdrhistogram::Histogram;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::admin_arg::AuthArgs;
use super::bench::{Unit, histogram, line, micros_since};
use super::connect::with_credentials;

/// How often the lag sampler asks the members.
const LAG_EVERY: Duration = Duration::from_millis(100);

/// Arguments of `hdl bench write`.
#[derive(Debug, Args)]
pub struct WriteBench {
    /// Handle protocol addresses of the members, `IP:PORT[,IP:PORT…]`, asked in order
    /// (the next when one gives no answer); any member forwards writes to the primary.
    #[arg(long, value_delimiter = ',', required = true, value_name = "ADDR")]
    server: Vec<SocketAddr>,
    /// Concurrent writers.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    concurrency: u32,
    /// Seconds to run.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    duration: u64,
    /// The prefix of the created handles.
    #[arg(long, default_value = "BENCH")]
    prefix: String,
    /// Peer address of a member: sample every member's lag through it meanwhile.
    #[arg(long, requires = "cluster_secret_file")]
    lag_peer: Option<SocketAddr>,
    /// The cluster secret file, for --lag-peer.
    #[arg(long)]
    cluster_secret_file: Option<PathBuf>,
    /// The administrator the creates are made as (`--auth INDEX:HANDLE` with `--key`
    /// or `--secret-file`).
    #[command(flatten)]
    auth: AuthArgs,
    /// Answer a challenge for every create (two key checks each) rather than make
    /// them in one authenticated session per writer.
    #[arg(long)]
    challenge_each: bool,
}

/// Runs the benchmark and prints its figures.
pub async fn run(bench: &WriteBench) -> anyhow::Result<()> {
    Handle::parse(&format!("{}/w", bench.prefix)).context("invalid --prefix")?;
    let run: u32 = rand::random();
    let mut clients = Vec::new();
    for task in 0..bench.concurrency {
        let prefix = format!("{}/w-{run:08x}-{task}", bench.prefix);
        clients.push((writer_client(bench, &prefix).await?, prefix));
    }
    let deadline = Instant::now() + Duration::from_secs(bench.duration);
    let sampler = match (bench.lag_peer, &bench.cluster_secret_file) {
        (Some(peer), Some(file)) => {
            let admin = AdminClient::new(read_secret_file(file)?, Duration::from_secs(2));
            Some(tokio::spawn(sample_lag(admin, peer, deadline)))
        }
        _ => None,
    };
    let started = Instant::now();
    let mut writers = JoinSet::new();
    for (client, prefix) in clients {
        writers.spawn(async move { write_until(&client, &prefix, deadline).await });
    }
    let mut latencies = histogram()?;
    let mut errors = 0;
    let mut first_error = None;
    while let Some(done) = writers.join_next().await {
        let written = done.context("a writer task failed")??;
        latencies.add(&written.latencies)?;
        errors += written.errors;
        first_error = first_error.or(written.first_error);
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "write over TCP: {} writers, {seconds:.1} s, servers {}",
        bench.concurrency,
        bench
            .server
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",")
    );
    println!(
        "created{}, {errors} errors",
        line(&latencies, seconds, Unit("creates", "creates/s"))
    );
    if let Some(error) = first_error {
        println!("first error: {error}");
    }
    if let Some(sampler) = sampler {
        print_samples(&sampler.await.context("the lag sampler failed")??);
    }
    if latencies.is_empty() {
        bail!("no create was acknowledged ({errors} errors)");
    }
    Ok(())
}

/// A writer's client: in a session of its own, opened and authenticated now (by its
/// first create, `<prefix>-setup`, untimed), unless `--challenge-each`. Sessions are
/// made one after another, as a server keeps few sessions nobody has authenticated
/// in per address.
async fn writer_client(bench: &WriteBench, prefix: &str) -> anyhow::Result<Client> {
    let client = with_credentials(Client::new(bench.server.clone()), &bench.auth)?;
    if bench.challenge_each {
        return Ok(client);
    }
    let client = client.with_session();
    client.open_session().await.context("opening a session")?;
    let first = numbered_create(prefix, u64::MAX)?;
    client
        .admin(first)
        .await
        .context("authenticating a session")?;
    Ok(client)
}

/// What one writer did.
struct Written {
    /// Latencies of the acknowledged creates.
    latencies: Histogram<u64>,
    /// Creates that failed.
    errors: u64,
    /// Why the first of them failed.
    first_error: Option<String>,
}

/// Creates `<prefix>-<n>` for n = 0, 1, … until `deadline`.
async fn write_until(client: &Client, prefix: &str, deadline: Instant) -> anyhow::Result<Written> {
    let mut written = Written {
        latencies: histogram()?,
        errors: 0,
        first_error: None,
    };
    let mut n = 0u64;
    while Instant::now() < deadline {
        let request = numbered_create(prefix, n)?;
        n += 1;
        let started = Instant::now();
        match client.admin(request).await {
            Ok(_) => written.latencies.saturating_record(micros_since(started)),
            Err(error) => {
                written.errors += 1;
                written.first_error.get_or_insert_with(|| error.to_string());
            }
        }
    }
    Ok(written)
}

/// What the sampler saw: each secondary's lag, and the primary's term at the first
/// and the last sample.
struct Samples {
    lags: Histogram<u64>,
    terms: Option<(u64, u64)>,
}

/// Every [`LAG_EVERY`] until `deadline`: each secondary's lag (entries) behind the
/// primary's last log index, from the members' own status, and the primary's term.
async fn sample_lag(
    admin: AdminClient,
    peer: SocketAddr,
    deadline: Instant,
) -> anyhow::Result<Samples> {
    let mut lags = Histogram::new(3)?;
    let mut terms: Option<(u64, u64)> = None;
    let mut ticks = tokio::time::interval(LAG_EVERY);
    while Instant::now() < deadline {
        ticks.tick().await;
        let Ok(asked) = admin.status(peer, FIRST_SET_GROUP).await else {
            continue;
        };
        let mut statuses = Vec::new();
        for member in &asked.members {
            statuses.extend(admin.status(member.node.peer, FIRST_SET_GROUP).await.ok());
        }
        let leader = statuses.iter().find(|s| Some(s.id) == s.leader);
        if let Some(leader) = leader {
            let first = terms.map_or(leader.term, |(first, _)| first);
            terms = Some((first, leader.term));
        }
        let Some(last_log) = leader.and_then(|l| l.last_log) else {
            continue;
        };
        for status in statuses.iter().filter(|s| Some(s.id) != s.leader) {
            lags.saturating_record(last_log.saturating_sub(status.applied.unwrap_or(0)));
        }
    }
    Ok(Samples { lags, terms })
}

fn print_samples(samples: &Samples) {
    match samples.terms {
        Some((first, last)) => println!(
            "primary's term: {first} at the first sample, {last} at the last ({} term changes)",
            last - first
        ),
        None => println!("primary's term: no primary answered the sampler"),
    }
    let lags = &samples.lags;
    if lags.is_empty() {
        println!("secondary lag: no sample");
        return;
    }
    println!(
        "secondary lag (entries behind the primary's log): {} samples, p50 {}, p99 {}, max {}",
        lags.len(),
        lags.value_at_quantile(0.5),
        lags.value_at_quantile(0.99),
        lags.max()
    );
}

/// The create of `<prefix>-<n>` with one URL value, as both write benches send it.
pub(super) fn numbered_create(prefix: &str, n: u64) -> anyhow::Result<AdminRequest> {
    let handle = Handle::parse(&format!("{prefix}-{n}"))?;
    let value = HandleValue::new(1, "URL", format!("https://example.org/{handle}"));
    Ok(AdminRequest::Create {
        handle,
        values: vec![value],
        overwrite: Overwrite::Refuse,
    })
}
