//! `hdl import FILE [--format jsonl|batch] [--overwrite] [--batch N]`: bulk-loads a
//! file of handles into a running cluster through each replica set's log.
//!
//! The file is `hdl export`'s JSON Lines (one handle a line, values with their
//! timestamps, kept as they are) or a GenericBatch file of the reference server
//! (module `genericbatch`; its values are dated by the server); `--format` picks, else
//! the first non-blank line does (`{` starts JSON Lines). A thread reads and parses
//! the file while the handles read before are sent: `--batch` handles at a time, split
//! by the replica set that owns each, [`IN_FLIGHT`] batches under way at once, each
//! one log entry at its set (module `service::bulk` says what a batch does). A batch
//! file's ADD, MODIFY, REMOVE and DELETE blocks are carried out in file order, one
//! after another, once everything before them is imported.
//!
//! Importing is idempotent: a handle that holds the same values already is counted
//! unchanged and not written, one that holds others is reported and left alone unless
//! `--overwrite` (then replaced); so a run cut short is resumed by running it again.
//! A line that cannot be read stops the import with an error naming it, once every
//! handle before it is imported. The exit status is non-zero then, and when a handle
//! was refused or left differing.
//!
//! Progress goes to stderr: a bar on a terminal (indicatif), else a line every few
//! seconds; the handles not written as given, and the summary, to stdout.

use std::fs::File;
use std::io::{BufRead, BufReader, IsTerminal};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::names::Handle;
use crate::node::bulk::{BulkAnswer, SessionRequest};
use crate::replication::SetId;
use crate::service::{
    ExistingHandle, ExistingValue, ImportBatch, ImportProblem, ImportReport, ImportTally,
    Operation, Timestamps,
};
use crate::values::HandleValue;
use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::bulk_link::{BulkArgs, BulkLink};
use super::genericbatch::{BatchOp, BatchReader};

/// Batches under way at once: one being applied while the next is sent.
pub const IN_FLIGHT: usize = 3;
/// How often a batch sent to a set that no longer owns its slots is routed again.
const ROUTE_ATTEMPTS: usize = 5;
/// How often a plain progress line is printed when stderr is not a terminal.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// Arguments of `hdl import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The file: JSON Lines as `hdl export` writes, or a GenericBatch file.
    file: PathBuf,
    #[command(flatten)]
    options: ImportOptions,
    #[command(flatten)]
    link: BulkArgs,
}

/// How a file is imported.
#[derive(Debug, Clone, Args)]
pub struct ImportOptions {
    /// The file's format; by default the first non-blank line decides (`{`: jsonl).
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Replace handles that exist with other values (else they are reported and left).
    #[arg(long)]
    pub overwrite: bool,
    /// Handles sent at a time (split by replica set, each part one log entry).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub batch: u32,
}

/// The formats `hdl import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// `hdl export`'s JSON Lines.
    Jsonl,
    /// The reference server's GenericBatch file.
    Batch,
}

/// One handle read, and its line.
#[derive(Debug, Clone)]
pub(super) struct Put {
    line: usize,
    handle: Handle,
    values: Vec<HandleValue>,
}

impl Put {
    /// Handle `handle` with `values`, read from line `line`.
    pub(super) fn new(line: usize, handle: Handle, values: Vec<HandleValue>) -> Put {
        Put {
            line,
            handle,
            values,
        }
    }
}

/// What the reading thread hands over, in file order.
#[derive(Debug, Clone)]
pub(super) enum Item {
    /// Handles, and how many octets of the file are read so far.
    Puts(Vec<Put>, u64),
    /// A batch file's operation other than a create, and its line.
    Operation(usize, Operation),
    /// A line that could not be read: nothing from it on is imported.
    Malformed(String),
}

/// What an import came to.
#[derive(Debug, Default)]
pub struct Summary {
    /// Every handle put, by outcome.
    pub tally: ImportTally,
    /// Operations carried out and refused.
    pub operations: (u64, u64),
}

impl Summary {
    fn handles(&self) -> u64 {
        let t = &self.tally;
        t.created + t.replaced + t.unchanged + t.differing + t.refused
    }

    /// The summary line.
    pub fn line(&self, elapsed: Duration) -> String {
        let t = &self.tally;
        let rate = self.handles() as f64 / elapsed.as_secs_f64().max(1e-9);
        let mut line = format!(
            "{} handles in {:.2} s ({rate:.0} handles/s): {} created, {} replaced, {} unchanged, {} differing, {} refused",
            self.handles(),
            elapsed.as_secs_f64(),
            t.created,
            t.replaced,
            t.unchanged,
            t.differing,
            t.refused
        );
        let (done, failed) = self.operations;
        if done + failed > 0 {
            line.push_str(&format!("; {done} operations done, {failed} refused"));
        }
        line
    }
}

/// Imports the file and prints what became of it.
pub fn run(args: &ImportArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let (summary, outcome) = super::connect::runtime()?.block_on(async {
        let link = Arc::new(BulkLink::connect(&args.link).await?);
        anyhow::Ok(import_file(link, &args.file, &args.options).await)
    })?;
    println!(
        "imported {}: {}",
        args.file.display(),
        summary.line(started.elapsed())
    );
    outcome?;
    let t = &summary.tally;
    if t.differing + t.refused + summary.operations.1 > 0 {
        bail!("some handles were not imported as given (see above)");
    }
    Ok(())
}

/// Imports the file at `path` through `link`: what was imported, and the error that
/// stopped it early, if any.
async fn import_file(
    link: Arc<BulkLink>,
    path: &Path,
    options: &ImportOptions,
) -> (Summary, anyhow::Result<()>) {
    let mut summary = Summary::default();
    let outcome = import_into(&link, path, options, &mut summary).await;
    (summary, outcome)
}

async fn import_into(
    link: &Arc<BulkLink>,
    path: &Path,
    options: &ImportOptions,
    summary: &mut Summary,
) -> anyhow::Result<()> {
    let (reader, items, format) = open_reader(path, options)?;
    let size = std::fs::metadata(path).map_or(0, |meta| meta.len());
    let outcome = send_items(link, items, size, options, format, summary).await;
    let _ = reader.join();
    outcome
}

/// Starts a thread reading the file at `path` into [`Item`]s, in its format.
pub(super) fn open_reader(
    path: &Path,
    options: &ImportOptions,
) -> anyhow::Result<(std::thread::JoinHandle<()>, mpsc::Receiver<Item>, Format)> {
    let format = match options.format {
        Some(format) => format,
        None => detect(path)?,
    };
    let file = File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let (sender, items) = mpsc::channel(IN_FLIGHT);
    let (name, chunk) = (path.display().to_string(), options.batch as usize);
    let base = path.parent().map(Path::to_owned).unwrap_or_default();
    let reader = std::thread::spawn(move || {
        let source = BufReader::with_capacity(1 << 20, file);
        match format {
            Format::Jsonl => read_jsonl(source, &name, chunk, &sender),
            Format::Batch => read_batch(source, &name, &base, chunk, &sender),
        }
    });
    Ok((reader, items, format))
}

/// Imports the items `items` yields (from a file of `size` octets in `format`), in
/// order, into `summary`, until they end or one cannot be imported.
pub(super) async fn send_items(
    link: &Arc<BulkLink>,
    mut items: mpsc::Receiver<Item>,
    size: u64,
    options: &ImportOptions,
    format: Format,
    summary: &mut Summary,
) -> anyhow::Result<()> {
    let timestamps = match format {
        Format::Jsonl => Timestamps::Kept,
        Format::Batch => Timestamps::Stamped,
    };
    let existing = match options.overwrite {
        true => ExistingHandle::Overwrite,
        false => ExistingHandle::Refuse,
    };
    let mut progress = Progress::new(size);
    let mut flight: JoinSet<anyhow::Result<(Vec<Put>, ImportReport)>> = JoinSet::new();
    let mut failure = None;
    while let Some(item) = items.recv().await {
        let step = match item {
            Item::Puts(puts, octets) => {
                progress.read = octets;
                send_puts(
                    link,
                    puts,
                    (existing, timestamps),
                    &mut flight,
                    summary,
                    &mut progress,
                )
                .await
            }
            Item::Operation(line, operation) => {
                let drained = drain(&mut flight, summary, &mut progress).await;
                match drained {
                    Ok(()) => administer(link, line, operation, summary).await,
                    failed => failed,
                }
            }
            Item::Malformed(message) => Err(anyhow::anyhow!(message)),
        };
        if let Err(error) = step {
            failure = Some(error);
            break;
        }
    }
    drop(items);
    let drained = drain(&mut flight, summary, &mut progress).await;
    progress.finish();
    match (failure, drained) {
        (Some(error), _) | (None, Err(error)) => Err(error.context(format!(
            "stopped; the {} handles before it are imported",
            summary.handles()
        ))),
        (None, Ok(())) => Ok(()),
    }
}

/// The format of the file at `path`, by its first non-blank line.
fn detect(path: &Path) -> anyhow::Result<Format> {
    let file = File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    for line in BufReader::new(file).lines() {
        let line = line.with_context(|| format!("cannot read {}", path.display()))?;
        match line.trim_start().chars().next() {
            None => continue,
            Some('{') => return Ok(Format::Jsonl),
            Some(_) => return Ok(Format::Batch),
        }
    }
    Ok(Format::Jsonl)
}

/// Reads JSON Lines, `chunk` handles at a time, until the end or a malformed line.
fn read_jsonl(source: impl BufRead, name: &str, chunk: usize, sender: &mpsc::Sender<Item>) {
    let mut puts = Vec::with_capacity(chunk);
    let mut octets = 0u64;
    for (number, line) in (1..).zip(source.lines()) {
        let parsed = line.map_err(|error| error.to_string()).and_then(|line| {
            octets += line.len() as u64 + 1;
            parse_line(&line)
        });
        match parsed {
            Ok(None) => {}
            Ok(Some((handle, values))) => {
                puts.push(Put {
                    line: number,
                    handle,
                    values,
                });
                if puts.len() == chunk {
                    let full = std::mem::replace(&mut puts, Vec::with_capacity(chunk));
                    if sender.blocking_send(Item::Puts(full, octets)).is_err() {
                        return;
                    }
                }
            }
            Err(message) => {
                let _ = sender.blocking_send(Item::Puts(puts, octets));
                let _ =
                    sender.blocking_send(Item::Malformed(format!("{name}:{number}: {message}")));
                return;
            }
        }
    }
    let _ = sender.blocking_send(Item::Puts(puts, octets));
}

/// One JSON line's handle and values; `None` for a blank line.
fn parse_line(line: &str) -> Result<Option<(Handle, Vec<HandleValue>)>, String> {
    if line.trim().is_empty() {
        return Ok(None);
    }
    let json: serde_json::Value =
        serde_json::from_str(line).map_err(|error| format!("not JSON: {error}"))?;
    let (handle, values) = crate::restjson::parse_export(&json).map_err(|e| e.to_string())?;
    let handle = Handle::parse(&handle).map_err(|error| format!("handle {handle:?}: {error}"))?;
    Ok(Some((handle, values)))
}

/// Reads a GenericBatch file: creates `chunk` at a time, other operations alone.
fn read_batch(
    source: impl BufRead,
    name: &str,
    base: &Path,
    chunk: usize,
    sender: &mpsc::Sender<Item>,
) {
    let mut reader = BatchReader::new(source, base);
    let mut puts = Vec::with_capacity(chunk);
    loop {
        let next = reader.next_op();
        let operation = match next {
            Ok(Some((line, BatchOp::Create(handle, values)))) => {
                puts.push(Put {
                    line,
                    handle,
                    values,
                });
                if puts.len() < chunk {
                    continue;
                }
                None
            }
            Ok(Some((line, op))) => Some(Ok((line, operation_of(op)))),
            Ok(None) => {
                let _ = sender.blocking_send(Item::Puts(puts, reader.octets));
                return;
            }
            Err(error) => Some(Err(format!("{name}:{error}"))),
        };
        let full = std::mem::replace(&mut puts, Vec::with_capacity(chunk));
        if sender
            .blocking_send(Item::Puts(full, reader.octets))
            .is_err()
        {
            return;
        }
        let item = match operation {
            None => continue,
            Some(Ok((line, operation))) => Item::Operation(line, operation),
            Some(Err(message)) => Item::Malformed(message),
        };
        let stop = matches!(item, Item::Malformed(_));
        if sender.blocking_send(item).is_err() || stop {
            return;
        }
    }
}

/// The operation a batch file's ADD, MODIFY, REMOVE or DELETE block asks for.
fn operation_of(op: BatchOp) -> Operation {
    match op {
        BatchOp::Create(handle, values) => Operation::Create {
            handle,
            values,
            existing: ExistingHandle::Refuse,
        },
        BatchOp::Add(handle, values) => Operation::AddValues {
            handle,
            values,
            existing: ExistingValue::Refuse,
        },
        BatchOp::Modify(handle, values) => Operation::ModifyValues { handle, values },
        BatchOp::Remove(handle, indexes) => Operation::RemoveValues { handle, indexes },
        BatchOp::Delete(handle) => Operation::Delete { handle },
    }
}

/// Splits `puts` by replica set and sends each part, waiting for room first.
async fn send_puts(
    link: &Arc<BulkLink>,
    puts: Vec<Put>,
    (existing, timestamps): (ExistingHandle, Timestamps),
    flight: &mut JoinSet<anyhow::Result<(Vec<Put>, ImportReport)>>,
    summary: &mut Summary,
    progress: &mut Progress,
) -> anyhow::Result<()> {
    for (set, part) in split(link, puts)? {
        while flight.len() >= IN_FLIGHT {
            collect_one(flight, summary, progress).await?;
        }
        let link = Arc::clone(link);
        flight.spawn(async move { import_part(&link, set, part, existing, timestamps).await });
    }
    Ok(())
}

/// `puts` grouped by the replica set owning each, in file order within a group.
fn split(link: &BulkLink, puts: Vec<Put>) -> anyhow::Result<Vec<(SetId, Vec<Put>)>> {
    let mut parts: Vec<(SetId, Vec<Put>)> = Vec::new();
    for put in puts {
        let set = link.set_of(&put.handle)?;
        match parts.iter_mut().find(|(owner, _)| *owner == set) {
            Some((_, part)) => part.push(put),
            None => parts.push((set, vec![put])),
        }
    }
    Ok(parts)
}

/// Imports `puts` at `set`; when the set no longer owns some of them, reads the map
/// again and sends them where they belong.
async fn import_part(
    link: &BulkLink,
    set: SetId,
    puts: Vec<Put>,
    existing: ExistingHandle,
    timestamps: Timestamps,
) -> anyhow::Result<(Vec<Put>, ImportReport)> {
    let mut parts = vec![(set, puts)];
    let (mut done, mut report) = (Vec::new(), ImportReport::default());
    for _ in 0..ROUTE_ATTEMPTS {
        let mut moved = Vec::new();
        for (set, puts) in parts {
            let (lines, handles): (Vec<usize>, Vec<_>) = puts
                .into_iter()
                .map(|put| (put.line, (put.handle, put.values)))
                .unzip();
            let batch = ImportBatch {
                handles,
                existing,
                timestamps,
            };
            let (answer, request) = link
                .call(set, SessionRequest::Import { set, batch })
                .await?;
            let SessionRequest::Import { mut batch, .. } = request else {
                bail!("the request changed in flight");
            };
            match answer {
                BulkAnswer::Imported(mut part) => {
                    if part.tally.differing > 0 {
                        let (positions, back) = differing(link, set, batch).await?;
                        batch = back;
                        let refused: Vec<u32> = part.problems.iter().map(|(at, _)| *at).collect();
                        let differs = positions.into_iter().filter(|at| !refused.contains(at));
                        part.problems
                            .extend(differs.map(|at| (at, ImportProblem::Differs)));
                    }
                    let offset = u32::try_from(done.len()).context("batch too large")?;
                    for (position, _) in &mut part.problems {
                        *position += offset;
                    }
                    report.tally.add(part.tally);
                    report.problems.append(&mut part.problems);
                    done.extend(puts_of(lines, batch));
                }
                BulkAnswer::NotHere(_) | BulkAnswer::Again(_) => {
                    moved.extend(puts_of(lines, batch))
                }
                BulkAnswer::Refused(reason) => bail!("replica set {}: {reason}", set.0),
                other => bail!("replica set {} answered {other:?} to an import", set.0),
            }
        }
        if moved.is_empty() {
            return Ok((done, report));
        }
        link.refresh().await?;
        parts = split(link, moved)?;
    }
    bail!("the cluster map kept changing under the import")
}

/// The handles of `batch` again, with their lines.
fn puts_of(lines: Vec<usize>, batch: ImportBatch) -> impl Iterator<Item = Put> {
    let handles = batch.handles.into_iter();
    lines
        .into_iter()
        .zip(handles)
        .map(|(line, (handle, values))| Put {
            line,
            handle,
            values,
        })
}

/// The positions of the handles of `batch` that `set` holds with other values; the
/// batch back.
async fn differing(
    link: &BulkLink,
    set: SetId,
    batch: ImportBatch,
) -> anyhow::Result<(Vec<u32>, ImportBatch)> {
    let (answer, request) = link
        .call(set, SessionRequest::Differing { set, batch })
        .await?;
    let SessionRequest::Differing { batch, .. } = request else {
        bail!("the request changed in flight");
    };
    match answer {
        BulkAnswer::Differing(positions) => Ok((positions, batch)),
        other => bail!("replica set {} answered {other:?} to differing", set.0),
    }
}

/// Waits for one batch under way and reports it.
async fn collect_one(
    flight: &mut JoinSet<anyhow::Result<(Vec<Put>, ImportReport)>>,
    summary: &mut Summary,
    progress: &mut Progress,
) -> anyhow::Result<()> {
    let Some(joined) = flight.join_next().await else {
        return Ok(());
    };
    let (puts, report) = joined.context("an import task failed")??;
    for (position, problem) in &report.problems {
        let Some(put) = usize::try_from(*position).ok().and_then(|at| puts.get(at)) else {
            continue;
        };
        let what = match problem {
            ImportProblem::Differs => {
                "exists with other values; not replaced (--overwrite replaces it)".to_owned()
            }
            ImportProblem::Refused(reason) => format!("refused: {reason}"),
        };
        progress.println(&format!("line {}: {}: {what}", put.line, put.handle));
    }
    summary.tally.add(report.tally);
    progress.show(summary.handles());
    Ok(())
}

/// Waits for every batch under way.
async fn drain(
    flight: &mut JoinSet<anyhow::Result<(Vec<Put>, ImportReport)>>,
    summary: &mut Summary,
    progress: &mut Progress,
) -> anyhow::Result<()> {
    let mut first_error = None;
    while !flight.is_empty() {
        if let Err(error) = collect_one(flight, summary, progress).await {
            first_error.get_or_insert(error);
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// Carries out one operation of a batch file at the set owning its handle.
async fn administer(
    link: &BulkLink,
    line: usize,
    operation: Operation,
    summary: &mut Summary,
) -> anyhow::Result<()> {
    let handle = operation
        .handle()
        .cloned()
        .context("an operation without a handle")?;
    let set = link.set_of(&handle)?;
    let request = SessionRequest::Administer {
        set,
        operations: vec![operation],
    };
    let (answer, _) = link.call(set, request).await?;
    let outcome = match answer {
        BulkAnswer::Administered(outcomes) => outcomes.into_iter().next(),
        BulkAnswer::NotHere(reason) | BulkAnswer::Refused(reason) => Some(Err(reason)),
        other => bail!("replica set {} answered {other:?} to an operation", set.0),
    };
    match outcome {
        Some(Ok(())) => summary.operations.0 += 1,
        Some(Err(reason)) => {
            summary.operations.1 += 1;
            println!("line {line}: {handle}: refused: {reason}");
        }
        None => bail!("replica set {} answered no outcome", set.0),
    }
    Ok(())
}

/// Progress on stderr: a bar on a terminal, else a line every [`PROGRESS_EVERY`].
struct Progress {
    bar: Option<ProgressBar>,
    size: u64,
    read: u64,
    started: Instant,
    shown: Instant,
}

impl Progress {
    fn new(size: u64) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(size);
            let style = ProgressStyle::with_template(
                "{bar:40} {bytes}/{total_bytes} {msg} ({elapsed}, {eta} left)",
            );
            if let Ok(style) = style {
                bar.set_style(style);
            }
            bar
        });
        let now = Instant::now();
        Progress {
            bar,
            size,
            read: 0,
            started: now,
            shown: now,
        }
    }

    fn show(&mut self, handles: u64) {
        let rate = handles as f64 / self.started.elapsed().as_secs_f64().max(1e-9);
        if let Some(bar) = &self.bar {
            bar.set_position(self.read);
            bar.set_message(format!("{handles} handles, {rate:.0}/s"));
        } else if self.shown.elapsed() >= PROGRESS_EVERY {
            self.shown = Instant::now();
            let percent = 100 * self.read / self.size.max(1);
            eprintln!("import: {handles} handles ({percent} % of the file), {rate:.0} handles/s");
        }
    }

    /// Prints a line to stdout without garbling the bar.
    fn println(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.suspend(|| println!("{line}")),
            None => println!("{line}"),
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
