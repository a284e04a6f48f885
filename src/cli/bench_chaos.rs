//! `hdl bench chaos`: a replica set under writes and reads while its members are
//! SIGKILLed and restarted, then checked: nothing acknowledged lost, every member
//! alike, and the whole history linearizable.
//!
//! Runs the set of a cluster file as `hdl cluster up` does (child `hdl serve`
//! processes of this binary on their data directories under a new `--data-dir`, by
//! default a new temporary directory), with frequent snapshots unless the file names
//! a node configuration. For `--duration` seconds, `--writers` clients create and
//! modify handles and `--readers` resolve them ([`workload`]) while [`kills`] strikes
//! every 1–3 s. Then every member is started, caught up and asked for every handle
//! directly; each operation's invocation and answer, and those final reads, make the
//! history that [`history`] checks. Every random choice comes from `--seed` (printed),
//! so a failing run's schedule can be played again (timing differs, choices do not).
//!
//! Exits non-zero when an acknowledged write is lost, members differ, or a handle's
//! history is not linearizable; the data directory is then kept, with the offending
//! histories in `violations.txt`. Only its own children are ever signalled: SIGINT or
//! SIGTERM stops them (SIGTERM, SIGKILL after [`GRACE`]) and reaps them, as any end does.

mod history;
mod kills;
mod workload;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use clap::Args;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::bench_failover::bench_administrator;
use super::cluster_up::{DEFAULT_FILE, GRACE, load};
use super::local_set::LocalSet;
use history::{FinalValue, LostWrite, Record, Verdict, check, lost_writes};
use kills::{KillTally, Rounds, kill_until};
use workload::{Members, Shared, Work, final_values};

/// Rounds of final reads before members that still differ count as differing.
const SETTLE_ROUNDS: usize = 5;
/// The pause between two rounds of final reads.
const SETTLE_PAUSE: Duration = Duration::from_secs(1);
/// How long the history check may take.
const CHECK_BUDGET: Duration = Duration::from_secs(300);

/// Arguments of `hdl bench chaos`.
#[derive(Debug, Args)]
pub struct ChaosBench {
    /// The cluster file of the set to run.
    #[arg(long, default_value = DEFAULT_FILE)]
    cluster: PathBuf,
    /// Directory of the set's data: must be new or empty, and is kept. Default: a new
    /// directory under the system's temporary directory, removed after a clean run.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// The port the nodes' ports are offsets from; overrides the file's `base_port`.
    #[arg(long)]
    base_port: Option<u16>,
    /// Seconds of kills under load.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    duration: u64,
    /// The shortest time between two kills, in milliseconds.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(100..=600_000))]
    min_interval_ms: u64,
    /// The longest time between two kills, in milliseconds.
    #[arg(long, default_value_t = 3000, value_parser = clap::value_parser!(u64).range(100..=600_000))]
    max_interval_ms: u64,
    /// Concurrent writers (creates and modifies over the Handle protocol).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1000))]
    writers: u32,
    /// Concurrent readers (authoritative resolutions over HTTP).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(0..=1000))]
    readers: u32,
    /// The percentage of writes that modify a handle (its URL value) rather than
    /// create one.
    #[arg(long, default_value_t = 67, value_parser = clap::value_parser!(u32).range(0..=100))]
    modifies: u32,
    /// The seed of every random choice; a random one (printed) by default.
    #[arg(long)]
    seed: Option<u64>,
    /// The prefix of the handles.
    #[arg(long, default_value = "CHAOS")]
    prefix: String,
    /// Members snapshot their store every this many log entries, keeping a fifth of
    /// them, so a restarted member often catches up from a snapshot (and kills land
    /// during installs). Unused when the cluster file names a node configuration.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(5..))]
    snapshot_every: u64,
}

impl ChaosBench {
    fn rounds(&self) -> anyhow::Result<Rounds> {
        if self.min_interval_ms > self.max_interval_ms {
            bail!("--min-interval-ms is above --max-interval-ms");
        }
        Ok(Rounds {
            min: Duration::from_millis(self.min_interval_ms),
            max: Duration::from_millis(self.max_interval_ms),
        })
    }
}

/// Runs the chaos and stops the set it started, whatever the outcome.
pub async fn run(bench: &ChaosBench) -> anyhow::Result<()> {
    let seed = bench.seed.unwrap_or_else(rand::random);
    println!("chaos: seed {seed} (the same choices again: --seed {seed})");
    let rounds = bench.rounds()?;
    let (dir, temporary) = data_dir(bench.data_dir.as_ref(), seed)?;
    let mut file = load(&bench.cluster, Some(&dir), bench.base_port)?;
    if file.node_config.is_none() {
        file.node_config = Some(node_config(&dir, bench.snapshot_every)?);
    }
    let mut stop = StopSignals::new()?;
    let mut set = tokio::select! {
        set = LocalSet::launch(file) => set?,
        () = stop.recv() => bail!("interrupted"),
    };
    let outcome = tokio::select! {
        outcome = torture(&mut set, bench, seed, rounds, &dir) => outcome,
        () = stop.recv() => Err(anyhow!("interrupted")),
    };
    set.stop_all(GRACE).await;
    match &outcome {
        Ok(()) if temporary => std::fs::remove_dir_all(&dir)
            .with_context(|| format!("cannot remove {}", dir.display()))?,
        _ => println!("data kept in {}", dir.display()),
    }
    outcome
}

/// The data directory, created (new or empty), and whether it is a temporary one.
fn data_dir(given: Option<&PathBuf>, seed: u64) -> anyhow::Result<(PathBuf, bool)> {
    let (dir, temporary) = match given {
        Some(dir) => (dir.clone(), false),
        None => {
            let name = format!("hdl-chaos-{seed:016x}-{}", std::process::id());
            (std::env::temp_dir().join(name), true)
        }
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut entries =
        std::fs::read_dir(&dir).with_context(|| format!("cannot read {}", dir.display()))?;
    if entries.next().is_some() {
        bail!(
            "{} is not empty: a chaos run starts a new set",
            dir.display()
        );
    }
    Ok((dir, temporary))
}

/// Writes the members' node configuration into `dir`; its path.
fn node_config(dir: &Path, snapshot_every: u64) -> anyhow::Result<PathBuf> {
    let path = dir.join("chaos-node.toml");
    let text = format!(
        "# Written by hdl bench chaos: frequent snapshots.\n[cluster]\n\
         snapshot_every = {snapshot_every}\nkeep_after_snapshot = {}\n",
        snapshot_every / 5
    );
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// SIGINT and SIGTERM, watched from the start so neither kills the run outright.
struct StopSignals {
    interrupt: Signal,
    terminate: Signal,
}

impl StopSignals {
    fn new() -> anyhow::Result<StopSignals> {
        Ok(StopSignals {
            interrupt: signal(SignalKind::interrupt()).context("cannot watch SIGINT")?,
            terminate: signal(SignalKind::terminate()).context("cannot watch SIGTERM")?,
        })
    }

    async fn recv(&mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
    }
}

/// Forms the set, runs the clients and the kills, settles and checks.
async fn torture(
    set: &mut LocalSet,
    bench: &ChaosBench,
    seed: u64,
    rounds: Rounds,
    dir: &Path,
) -> anyhow::Result<()> {
    let mut rng = StdRng::seed_from_u64(seed);
    let (bootstrap, credentials) = bench_administrator(&bench.prefix)?;
    set.form(Some(&bootstrap)).await?;
    let members = Members::new(
        set.nodes.iter().map(|node| node.plan.handle).collect(),
        set.nodes.iter().map(|node| node.plan.http).collect(),
    );
    let started = Instant::now();
    let deadline = started + Duration::from_secs(bench.duration);
    let run = rng.random();
    let shared = Shared::new(members, &bench.prefix, run, deadline, bench.modifies);
    let shared = Arc::new(shared);
    let mut clients = JoinSet::new();
    for _ in 0..bench.writers {
        let (shared, credentials) = (Arc::clone(&shared), credentials.clone());
        clients.spawn(workload::write(shared, credentials, rng.random()));
    }
    for _ in 0..bench.readers {
        clients.spawn(workload::read(Arc::clone(&shared), rng.random()));
    }
    let kill_rng = StdRng::seed_from_u64(rng.random());
    let kills = kill_until(set, &shared.members, rounds, kill_rng, deadline).await?;
    let mut work = Work::default();
    while let Some(done) = clients.join_next().await {
        work.add(done.context("a client task failed")??);
    }
    let seconds = started.elapsed().as_secs_f64();
    let (finals, final_reads) = settle(set, &shared).await?;
    work.records.extend(final_reads);
    let lost = lost_writes(&work.records, &finals);
    let differing = differing(&finals);
    println!(
        "chaos: {seconds:.1} s under load, {} writers ({}% modifies), {} readers, a kill every {}-{} ms",
        bench.writers, bench.modifies, bench.readers, bench.min_interval_ms, bench.max_interval_ms
    );
    print_kills(&kills);
    print_work(&work);
    println!(
        "final     {} handles on {} members: {} lost writes, {} handles differing between members",
        shared.keys_used(),
        set.nodes.len(),
        lost.iter()
            .map(|l| l.write)
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        differing.len()
    );
    let records = Arc::new(std::mem::take(&mut work.records));
    let checking = Instant::now();
    let verdict = check_within(Arc::clone(&records), CHECK_BUDGET).await?;
    let checked_in = checking.elapsed();
    println!(
        "history   {} handles, {} operations: {} (stateright's linearizability tester, {:.1} s)",
        verdict.handles,
        verdict.operations,
        if verdict.violations.is_empty() {
            "linearizable".to_owned()
        } else {
            format!("{} handles NOT linearizable", verdict.violations.len())
        },
        checked_in.as_secs_f64()
    );
    let findings = Findings {
        lost,
        differing,
        verdict,
    };
    judge(&work, &kills, &findings, &records, dir)
}

/// What the checks found.
struct Findings {
    lost: std::collections::BTreeSet<LostWrite>,
    differing: Vec<history::Key>,
    verdict: Verdict,
}

/// Checks the history on a thread of its own (a search may take long), giving up
/// after `budget`: the thread is left to the process's exit.
async fn check_within(records: Arc<Vec<Record>>, budget: Duration) -> anyhow::Result<Verdict> {
    let (sender, verdict) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("history check".into())
        .spawn(move || sender.send(check(&records)))
        .context("cannot start the history check")?;
    match tokio::time::timeout(budget, verdict).await {
        Ok(verdict) => verdict.context("the history check failed"),
        Err(_) => bail!("the history check did not end within {budget:?}"),
    }
}

/// Waits until every member has caught up and reads every handle at each, again (at
/// most [`SETTLE_ROUNDS`] times) while members differ: a write of unknown outcome may
/// still be on its way. The last round's values, and every round's reads.
async fn settle(set: &LocalSet, shared: &Shared) -> anyhow::Result<(Vec<FinalValue>, Vec<Record>)> {
    let all: Vec<usize> = (0..set.nodes.len()).collect();
    let mut reads = Vec::new();
    let mut round = 1;
    loop {
        set.await_caught_up(crate::placement::FIRST_SET_GROUP, &all)
            .await?;
        let (finals, records): (Vec<FinalValue>, Vec<Record>) =
            final_values(shared, shared.keys_used())
                .await?
                .into_iter()
                .unzip();
        reads.extend(records);
        if differing(&finals).is_empty() || round == SETTLE_ROUNDS {
            return Ok((finals, reads));
        }
        round += 1;
        tokio::time::sleep(SETTLE_PAUSE).await;
    }
}

/// The handles whose final value is not the same at every member.
fn differing(finals: &[FinalValue]) -> Vec<history::Key> {
    let mut by_key: BTreeMap<history::Key, Vec<history::Ret>> = BTreeMap::new();
    for last in finals {
        by_key.entry(last.key).or_default().push(last.value);
    }
    by_key
        .into_iter()
        .filter(|(_, values)| values.windows(2).any(|pair| pair[0] != pair[1]))
        .map(|(key, _)| key)
        .collect()
}

fn print_kills(kills: &KillTally) {
    println!(
        "kills     {} SIGKILLs: {} rounds of one member, {} of two at once, {} of the primary ({} right after another)",
        kills.kills, kills.single, kills.double, kills.primary, kills.primary_again
    );
}

fn print_work(work: &Work) {
    let writes = &work.writes;
    let reasons: Vec<String> = (writes.unknown.iter())
        .map(|(reason, count)| format!("{count} {reason}"))
        .collect();
    println!(
        "writes    {} acknowledged ({} creates, {} modifies), {} refused ({} existing, {} not found), {} answered with errors or not at all ({}), {} not sent (member down)",
        writes.acknowledged(),
        writes.created,
        writes.modified,
        writes.already_exists + writes.not_found,
        writes.already_exists,
        writes.not_found,
        writes.failed(),
        reasons.join(", "),
        writes.not_sent
    );
    println!(
        "reads     {} answered (auth=true over HTTP), {} failed",
        work.reads.answered, work.reads.failed
    );
}

/// Fails the run on a loss, a difference or a violation (writing the histories of the
/// handles concerned to `<dir>/violations.txt`), or when it tested nothing.
fn judge(
    work: &Work,
    kills: &KillTally,
    findings: &Findings,
    records: &[Record],
    dir: &Path,
) -> anyhow::Result<()> {
    let Findings {
        lost,
        differing,
        verdict,
    } = findings;
    if lost.is_empty() && differing.is_empty() && verdict.violations.is_empty() {
        if work.writes.acknowledged() == 0 || kills.kills == 0 {
            bail!("nothing was tested: no write was acknowledged or no member was killed");
        }
        return Ok(());
    }
    let mut keys: Vec<history::Key> = lost.iter().map(|l| l.key).collect();
    keys.extend(differing);
    keys.extend(&verdict.violations);
    keys.sort_unstable();
    keys.dedup();
    let mut text = String::new();
    for key in &keys {
        let _ = writeln!(text, "handle {}:", key.0);
        let mut history: Vec<&Record> = records.iter().filter(|r| r.key == *key).collect();
        history.sort_by_key(|r| r.invoked);
        for record in history {
            let _ = writeln!(text, "  {record:?}");
        }
    }
    for lost in lost {
        let _ = writeln!(text, "{lost:?}");
    }
    let path = dir.join("violations.txt");
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    bail!(
        "{} acknowledged writes lost, {} handles differing, {} handles not linearizable; their histories are in {}",
        lost.len(),
        differing.len(),
        verdict.violations.len(),
        path.display()
    )
}
