//! `hdl bench`: load tests. `hdl bench resolve`, a resolution load test against a
//! running server, is here; `bench_http`, `bench_write`, `bench_auth`,
//! `bench_failover`, `bench_chaos`, `bench_import`, `bench_scale` and `bench_restart`
//! hold the others.
//!
//! Seeds `--handles` handles `<prefix>/bench/<n>` (one URL value each) with admin
//! creates over TCP, skipping those that exist (at `--seed-at`, the service behind a
//! caching resolver, when given; not at all with `--no-seed`, for handles imported or
//! derived by a template; with `--imported`, `<prefix>/import-<n>`, the handles
//! `hdl bench import` and `hdl bench scale` build, are resolved and none seeded);
//! then `--concurrency` tasks resolve for `--duration` seconds, each request a hit (a
//! seeded handle, at random, or with `--each-once` the next one not asked yet, until
//! every one was) or, `--misses` percent of the time, a
//! miss (a handle that does not exist, answered 100). Latencies go into
//! one HDR histogram per task and outcome (microseconds, 3 significant digits: bounded
//! memory whatever the run's length), merged at the end. A hit that fails or a miss
//! answered otherwise than 100 counts as an error, not a latency.
//!
//! Over UDP the load is [`super::bench_udp_load`]'s, on a thread of its own. Over TCP,
//! with `--rate R` the load is an open loop: the resolvers together send R requests a
//! second on a fixed schedule (each its own share, staggered), whatever the answers'
//! latency; a request whose turn came while its resolver still waited for the
//! previous answer is counted as late (the rate was not held there: add resolvers).
//! Without it each resolver sends its next request as soon as the last is answered
//! (closed loop, saturation). With `--server-pid` the server's CPU time over the run
//! ([`super::bench_cpu`]) is divided by the answers: the server's CPU per answer.
//!
//! When the server goes away under load (a request is refused: its port is closed),
//! the resolvers stop and the figures end with `server closed after N s; M errors
//! before (…)`: requests sent after it stopped taking them are told from those it took
//! and did not answer (`bench_close`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use crate::client::{AdminRequest, Client, ClientError, Overwrite, Transport};
use crate::codec::ResponseCode;
use crate::names::Handle;
use crate::values::{HandleValue, ValueSelection};
use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use hdrhistogram::Histogram;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::bench_close::{Answering, Verdict, no_answer, verdict};
use super::bench_cpu;
use super::connect::{ServerArg, TransportArg, client, client_of, with_credentials};

/// Arguments of `hdl bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Resolution throughput and latency, hits and misses apart.
    Resolve(ResolveBench),
    /// HTTP API GET (or, with --proxy, proxy redirect) throughput and latency.
    Http(super::bench_http::HttpBench),
    /// Durable creates per second (each acknowledged after Raft commit and apply),
    /// their latency, and optionally the secondaries' lag meanwhile.
    Write(super::bench_write::WriteBench),
    /// Failover time: SIGKILL the primary of a local set under write load, again and
    /// again, and time each recovery.
    Failover(super::bench_failover::FailoverBench),
    /// The latency of authenticated creates, one after another, over the Handle
    /// protocol (a challenge each) or HTTP (Basic).
    AuthWrite(super::bench_auth::AuthWriteBench),
    /// Torture: SIGKILL members of a local set under writes and reads, then check
    /// that nothing acknowledged was lost and the history is linearizable.
    Chaos(super::bench_chaos::ChaosBench),
    /// `hdl import` into a fresh local set: handles per second, and again when every
    /// handle is there already.
    Import(super::bench_import::ImportBench),
    /// What one node holding N handles costs: memory, disk, resolution, restart, and a
    /// new member's catch-up from its snapshot.
    Scale(super::bench_scale::ScaleBench),
    /// A rolling restart of a local set under reads and writes: failed reads, and how
    /// long writes waited.
    Restart(super::bench_restart::RestartBench),
}

/// Arguments of `hdl bench resolve`.
#[derive(Debug, Args)]
struct ResolveBench {
    #[command(flatten)]
    server: ServerArg,
    #[command(flatten)]
    transport: TransportArg,
    /// Concurrent resolvers; over UDP without --rate, the requests kept outstanding
    /// (an open loop over UDP has one sender, whatever this says).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    concurrency: u32,
    /// Seconds to run.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    duration: u64,
    /// Handles to seed and resolve.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    handles: u32,
    /// The prefix of the seeded handles.
    #[arg(long, default_value = "BENCH")]
    prefix: String,
    /// Percentage of requests for handles that do not exist.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u8).range(0..=100))]
    misses: u8,
    /// Offer this many requests a second in all, on a fixed schedule (open loop),
    /// rather than as fast as answers come.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    rate: Option<u32>,
    /// Over TCP, open a connection for each request (as J9 clients do) rather than
    /// keep connections for the next request.
    #[arg(long)]
    connection_per_request: bool,
    /// The server's process id: report its CPU time per answer over the run.
    #[arg(long)]
    server_pid: Option<u32>,
    /// Seed the handles at this server (`HOST:PORT`, the service holding the prefix)
    /// rather than at --server: for a caching resolver in front of it.
    #[arg(long, value_name = "ADDR")]
    seed_at: Option<String>,
    /// Seed nothing: the handles exist at the server already (imported, or derived
    /// by a template of the prefix).
    #[arg(long, conflicts_with = "seed_at")]
    no_seed: bool,
    /// Resolve the handles `hdl bench import` and `hdl bench scale` build,
    /// `<prefix>/import-<n>`, rather than `<prefix>/bench/<n>`; seeds nothing (their
    /// store, `bench scale --data-dir`, served again, say).
    #[arg(long, conflicts_with = "seed_at")]
    imported: bool,
    /// Ask for each handle once, in order (the resolvers share one sequence), rather
    /// than at random, and stop once every one was asked (or at --duration): every
    /// hit names a handle not asked before, as a crawl meets a caching resolver.
    #[arg(long)]
    each_once: bool,
    /// The administrator seeding the handles.
    #[command(flatten)]
    auth: super::admin_arg::AuthArgs,
}

/// Runs the benchmark and prints its figures.
pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        match &args.command {
            BenchCommand::Resolve(bench) => resolve_bench(bench).await,
            BenchCommand::Http(bench) => super::bench_http::run(bench).await,
            BenchCommand::Write(bench) => super::bench_write::run(bench).await,
            BenchCommand::AuthWrite(bench) => super::bench_auth::run(bench).await,
            BenchCommand::Failover(bench) => super::bench_failover::run(bench).await,
            BenchCommand::Chaos(bench) => super::bench_chaos::run(bench).await,
            BenchCommand::Import(bench) => super::bench_import::run(bench).await,
            BenchCommand::Scale(bench) => super::bench_scale::run(bench).await,
            BenchCommand::Restart(bench) => super::bench_restart::run(bench).await,
        }
    })
}

async fn resolve_bench(bench: &ResolveBench) -> anyhow::Result<()> {
    let client = client(&bench.server)
        .await?
        .with_connection_per_request(bench.connection_per_request);
    let client = Arc::new(with_credentials(client, &bench.auth)?);
    let mut hits = Names::new(bench.hit_stem(), bench.handles)?;
    let misses = Names::new(format!("{}/absent/", bench.prefix), bench.handles)?;
    if !(bench.no_seed || bench.imported) {
        let seeder = match &bench.seed_at {
            Some(at) => Arc::new(with_credentials(client_of(at).await?, &bench.auth)?),
            None => Arc::clone(&client),
        };
        let existed = seed(&seeder, &hits, bench.concurrency).await?;
        println!(
            "seeded {} handles under {} ({existed} existed already)",
            bench.handles, bench.prefix
        );
    }
    if bench.each_once {
        hits = hits.each_once();
    }
    let load = Load {
        concurrency: bench.concurrency,
        duration: Duration::from_secs(bench.duration),
        miss_percent: bench.misses,
        rate: bench.rate,
        transport: bench.transport.transport(Transport::Udp),
        server_pid: bench.server_pid,
    };
    offer(&client, &hits, &misses, &load).await
}

impl ResolveBench {
    /// What the names of the handles resolved start with.
    fn hit_stem(&self) -> String {
        let stem = if self.imported { "import-" } else { "bench/" };
        format!("{}/{stem}", self.prefix)
    }
}

/// Handles `<stem><n>` for n in `0..count`, each named when it is needed: no list of
/// them is held, however many there are. Picked at random, or each once in order
/// (the clones share the sequence).
#[derive(Debug, Clone)]
pub(super) struct Names {
    stem: String,
    count: u32,
    /// With [`Names::each_once`], the next `n` to pick.
    next: Option<Arc<AtomicU32>>,
}

impl Names {
    /// The names `<stem><n>`, n in `0..count` (at least one); refused, naming
    /// `--prefix`, when they are not handles.
    pub(super) fn new(stem: String, count: u32) -> anyhow::Result<Names> {
        let names = Names {
            stem,
            count: count.max(1),
            next: None,
        };
        names.nth(0)?;
        Ok(names)
    }

    /// How many names there are.
    pub(super) fn count(&self) -> u32 {
        self.count
    }

    /// The `n`-th name.
    pub(super) fn nth(&self, n: u32) -> anyhow::Result<Handle> {
        Handle::parse(&format!("{}{n}", self.stem)).context("invalid --prefix")
    }

    pub(super) fn random(&self) -> anyhow::Result<Handle> {
        self.nth(rand::random_range(0..self.count))
    }

    /// The same names, picked each once in order by [`Names::pick`].
    fn each_once(self) -> Names {
        Names {
            next: Some(Arc::new(AtomicU32::new(0))),
            ..self
        }
    }

    /// The name to ask for next: one at random, or the next not picked yet (`None`
    /// once every one was).
    fn pick(&self) -> anyhow::Result<Option<Handle>> {
        self.pick_index().map(|n| self.nth(n)).transpose()
    }

    /// [`Names::pick`]'s choice, by its place among the names.
    pub(super) fn pick_index(&self) -> Option<u32> {
        match &self.next {
            None => Some(rand::random_range(0..self.count)),
            Some(next) => Some(next.fetch_add(1, Ordering::Relaxed)).filter(|&n| n < self.count),
        }
    }
}

/// A resolution load: how many resolvers, for how long, how many misses, open or
/// closed loop, over which transport, and the server whose CPU to count.
#[derive(Debug, Clone, Copy)]
pub(super) struct Load {
    pub concurrency: u32,
    pub duration: Duration,
    pub miss_percent: u8,
    pub rate: Option<u32>,
    pub transport: Transport,
    pub server_pid: Option<u32>,
}

/// Resolves `hits` (which must exist) and `misses` (which must not) as `load` says,
/// through `client`, and prints the figures, hits and misses apart.
pub(super) async fn offer(
    client: &Arc<Client>,
    hits: &Names,
    misses: &Names,
    load: &Load,
) -> anyhow::Result<()> {
    if load.transport == Transport::Udp {
        let server = *client
            .servers()
            .first()
            .context("no server to resolve at")?;
        let (hits, misses, load) = (hits.clone(), misses.clone(), *load);
        return tokio::task::spawn_blocking(move || {
            super::bench_udp_load::offer(server, &hits, &misses, &load)
        })
        .await
        .context("the UDP load failed")?;
    }
    let started = Instant::now();
    let cpu_before = load.server_pid.map(bench_cpu::cpu_time).transpose()?;
    let gone = Arc::new(AtomicBool::new(false));
    let mut workers = JoinSet::new();
    for worker in 0..load.concurrency {
        let plan = Plan {
            transport: load.transport,
            deadline: started + load.duration,
            miss_percent: load.miss_percent,
            schedule: load
                .rate
                .map(|rate| Schedule::of(worker, load.concurrency, rate, started)),
        };
        let (client, hits, misses) = (client.clone(), hits.clone(), misses.clone());
        let gone = Arc::clone(&gone);
        workers.spawn(async move { plan.work(&client, &hits, &misses, &gone).await });
    }
    let mut total = Tally::new()?;
    let mut answering = Vec::new();
    while let Some(tally) = workers.join_next().await {
        let tally = tally.context("a resolver task failed")??;
        total.merge(&tally)?;
        answering.push(tally.answering);
    }
    let cpu = match (load.server_pid, cpu_before) {
        (Some(pid), Some(before)) => Some(bench_cpu::cpu_time(pid)?.saturating_sub(before)),
        _ => None,
    };
    let verdict = verdict(&answering, total.slowest());
    total.errors += verdict.errors;
    let seconds = match verdict.closed {
        Some(closed) => closed
            .last_answered
            .map(|last| last.duration_since(started.into_std())),
        None => None,
    }
    .unwrap_or_else(|| started.elapsed())
    .as_secs_f64()
    .max(0.001);
    let offered = load.rate.map_or_else(
        || "closed loop".to_owned(),
        |rate| format!("{rate} req/s offered"),
    );
    println!(
        "resolve over {}: {} resolvers, {offered}, {seconds:.1} s, {} handles, {}% misses",
        load.transport, load.concurrency, hits.count, load.miss_percent
    );
    total.print(seconds);
    if load.rate.is_some() {
        println!(
            "late   {:>9} requests sent over 1 ms after their turn",
            total.late
        );
    }
    if let Some(cpu) = cpu {
        print_cpu(cpu, total.hits.len() + total.misses.len());
    }
    print_close(&verdict, total.errors, seconds);
    if total.hits.is_empty() && total.misses.is_empty() {
        bail!("every request failed ({} errors)", total.errors);
    }
    Ok(())
}

/// The server's CPU time over the run, and per answer.
pub(super) fn print_cpu(cpu: Duration, answers: u64) {
    let per_answer = cpu.as_secs_f64() * 1e6 / answers.max(1) as f64;
    println!(
        "server CPU {:.2} s, {per_answer:.1} µs per answer",
        cpu.as_secs_f64()
    );
}

/// When the server closed: `server closed after N s; M errors before (K requests
/// unanswered after it or within T ms of it)`.
pub(super) fn print_close(verdict: &Verdict, errors: u64, seconds: f64) {
    if let Some(closed) = verdict.closed {
        println!(
            "server closed after {seconds:.1} s; {errors} errors before ({} requests unanswered after it or within {} ms of it)",
            closed.unanswered_after,
            closed.margin.as_millis()
        );
    }
}

/// Creates every handle, `concurrency` at a time; returns how many existed already.
async fn seed(client: &Arc<Client>, handles: &Names, concurrency: u32) -> anyhow::Result<usize> {
    let mut tasks = JoinSet::new();
    for worker in 0..concurrency {
        let (client, handles) = (client.clone(), handles.clone());
        tasks.spawn(async move {
            let mut existed = 0;
            for n in (worker..handles.count).step_by(concurrency as usize) {
                let handle = handles.nth(n)?;
                let value = HandleValue::new(1, "URL", format!("https://example.org/{handle}"));
                let request = AdminRequest::Create {
                    handle: handle.clone(),
                    values: vec![value],
                    overwrite: Overwrite::Refuse,
                };
                match client.admin(request).await {
                    Ok(_) => {}
                    Err(e) if e.response_code() == Some(ResponseCode::HandleAlreadyExists) => {
                        existed += 1;
                    }
                    Err(e) => return Err(e).with_context(|| format!("seeding {handle}")),
                }
            }
            anyhow::Ok(existed)
        });
    }
    let mut existed = 0;
    while let Some(result) = tasks.join_next().await {
        existed += result.context("a seeding task failed")??;
    }
    Ok(existed)
}

/// What one resolver does.
#[derive(Debug, Clone, Copy)]
struct Plan {
    transport: Transport,
    deadline: Instant,
    miss_percent: u8,
    /// When to send each request (open loop); as soon as answered when `None`.
    schedule: Option<Schedule>,
}

/// One resolver's turns in an open loop: the first, then one every `period`.
#[derive(Debug, Clone, Copy)]
struct Schedule {
    first: Instant,
    period: Duration,
}

impl Schedule {
    /// Resolver `worker`'s share of `rate` requests a second among `workers`, from
    /// `start`: each sends every `workers / rate` seconds, staggered evenly.
    fn of(worker: u32, workers: u32, rate: u32, start: Instant) -> Schedule {
        let period = Duration::from_secs_f64(f64::from(workers) / f64::from(rate));
        let offset = period.mul_f64(f64::from(worker) / f64::from(workers));
        Schedule {
            first: start + offset,
            period,
        }
    }

    /// The turn of request `n`.
    fn turn(&self, n: u32) -> Instant {
        self.first + self.period * n
    }
}

impl Plan {
    /// Resolves until the deadline, or until a request is refused (then `gone` is set
    /// and every resolver stops); the latencies and errors seen.
    async fn work(
        self,
        client: &Client,
        hits: &Names,
        misses: &Names,
        gone: &AtomicBool,
    ) -> anyhow::Result<Tally> {
        let mut tally = Tally::new()?;
        let all = ValueSelection::all();
        let mut sent = 0u32;
        while Instant::now() < self.deadline && !gone.load(Ordering::Relaxed) {
            if let Some(schedule) = &self.schedule {
                let turn = schedule.turn(sent);
                if turn >= self.deadline {
                    break;
                }
                if Instant::now() > turn {
                    tally.late += 1;
                }
                tokio::time::sleep_until(turn).await;
            }
            sent = sent.saturating_add(1);
            let miss = rand::random_range(0..100u8) < self.miss_percent;
            let Some(handle) = (if miss { misses } else { hits }).pick()? else {
                break;
            };
            let started = Instant::now();
            let outcome = client.resolve(&handle, &all, self.transport).await;
            let micros = micros_since(started);
            match (miss, outcome) {
                (false, Ok(_)) => tally.hits.saturating_record(micros),
                (
                    true,
                    Err(ClientError::Server {
                        code: ResponseCode::HandleNotFound,
                        ..
                    }),
                ) => {
                    tally.misses.saturating_record(micros);
                }
                (_, Err(error)) if no_answer(&error).is_some() => {
                    let refused = no_answer(&error) == Some(true);
                    tally.answering.unanswered(started.into_std(), refused);
                    if refused {
                        gone.store(true, Ordering::Relaxed);
                    }
                    continue;
                }
                _ => tally.errors += 1,
            }
            tally.answering.answered(started.into_std());
        }
        Ok(tally)
    }
}

/// Latencies in microseconds, by outcome, the count of wrong answers and which
/// requests got none.
#[derive(Debug)]
struct Tally {
    hits: Histogram<u64>,
    misses: Histogram<u64>,
    errors: u64,
    /// Requests of an open loop whose turn came while their resolver still waited for
    /// the previous answer.
    late: u64,
    answering: Answering,
}

impl Tally {
    fn new() -> anyhow::Result<Tally> {
        Ok(Tally {
            hits: histogram()?,
            misses: histogram()?,
            errors: 0,
            late: 0,
            answering: Answering::default(),
        })
    }

    fn merge(&mut self, other: &Tally) -> anyhow::Result<()> {
        self.hits.add(&other.hits)?;
        self.misses.add(&other.misses)?;
        self.errors += other.errors;
        self.late += other.late;
        Ok(())
    }

    /// The 99.9th percentile latency of every answer.
    fn slowest(&self) -> Duration {
        let micros = [&self.hits, &self.misses]
            .iter()
            .map(|histogram| histogram.value_at_quantile(0.999))
            .max()
            .unwrap_or(0);
        Duration::from_micros(micros)
    }

    fn print(&self, seconds: f64) {
        let unit = Unit("requests", "req/s");
        for (name, histogram) in [("hits", &self.hits), ("misses", &self.misses)] {
            println!("{name:<7}{}", line(histogram, seconds, unit));
        }
        let total = self.hits.len() + self.misses.len();
        println!(
            "total  {total:>9} requests {:>10.0} req/s, {} errors",
            total as f64 / seconds,
            self.errors
        );
    }
}

/// A latency histogram: 1 µs to 10 min, 3 significant digits (a few tens of KiB).
pub(super) fn histogram() -> anyhow::Result<Histogram<u64>> {
    Ok(Histogram::new_with_bounds(1, 600_000_000, 3)?)
}

/// Microseconds since `started`, saturated.
pub(super) fn micros_since(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX)
}

/// What a benchmark counts: its plural and its rate, e.g. `requests`, `req/s`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Unit(pub &'static str, pub &'static str);

/// `count requests, rate, p50, p99, p99.9` of one histogram.
pub(super) fn line(histogram: &Histogram<u64>, seconds: f64, unit: Unit) -> String {
    let quantile = |q| histogram.value_at_quantile(q);
    let Unit(plural, rate) = unit;
    format!(
        "{:>9} {plural} {:>10.0} {rate}  p50 {:>6} µs  p99 {:>6} µs  p99.9 {:>6} µs",
        histogram.len(),
        histogram.len() as f64 / seconds,
        quantile(0.5),
        quantile(0.99),
        quantile(0.999)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_once_names_every_handle_once_across_clones_then_none() {
        let names = Names::new("A/bench/".into(), 3).unwrap().each_once();
        let clone = names.clone();
        let mut picked = Vec::new();
        for from in [&names, &clone, &names, &clone] {
            picked.push(
                from.pick()
                    .unwrap()
                    .map(|handle| handle.as_str().to_owned()),
            );
        }
        assert_eq!(
            picked,
            [
                Some("A/bench/0"),
                Some("A/bench/1"),
                Some("A/bench/2"),
                None
            ]
            .map(|n| n.map(String::from))
        );
        let random = Names::new("A/bench/".into(), 3).unwrap();
        assert!(
            (0..10).all(|_| random.pick().unwrap().is_some()),
            "at random, names never run out"
        );
    }

    /// `hdl bench resolve` with `args`, as clap reads them.
    fn resolve_args(args: &[&str]) -> Result<ResolveBench, clap::Error> {
        #[derive(Debug, clap::Parser)]
        struct Command {
            #[command(flatten)]
            bench: BenchArgs,
        }
        let words = ["hdl", "resolve"].iter().chain(args);
        let parsed = <Command as clap::Parser>::try_parse_from(words)?;
        match parsed.bench.command {
            BenchCommand::Resolve(bench) => Ok(bench),
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn imported_resolves_the_handles_bench_scale_built() {
        let plain = resolve_args(&["--handles", "10"]).unwrap();
        assert_eq!(plain.hit_stem(), "BENCH/bench/");
        let imported = resolve_args(&["--imported", "--prefix", "P"]).unwrap();
        assert_eq!(imported.hit_stem(), "P/import-");
        let names = Names::new(imported.hit_stem(), 1).unwrap();
        assert_eq!(names.pick().unwrap().unwrap().as_str(), "P/import-0");
        assert!(resolve_args(&["--imported", "--seed-at", "127.0.0.1:2641"]).is_err());
    }

    #[test]
    fn an_open_loop_spreads_the_rate_evenly_over_the_resolvers() {
        let start = Instant::now();
        // 4 resolvers at 1,000 requests a second: each every 4 ms, 1 ms apart.
        let turns: Vec<Duration> = (0..4)
            .map(|worker| Schedule::of(worker, 4, 1000, start))
            .flat_map(|schedule| [schedule.turn(0), schedule.turn(1)])
            .map(|turn| turn - start)
            .collect();
        let ms = Duration::from_millis;
        assert_eq!(
            turns,
            [ms(0), ms(4), ms(1), ms(5), ms(2), ms(6), ms(3), ms(7)]
        );
    }
}
