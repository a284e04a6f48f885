//! `hdl batch FILE [--server ADDR] --auth INDEX:HANDLE --key FILE | --secret-file FILE`:
//! administrative commands, one a line, run inside one authenticated Handle protocol
//! session (one challenge for the whole file).
//!
//! A line is a `create`, `add`, `modify`, `remove` or `delete` command with the
//! arguments of that subcommand (parsed by the same clap definitions; words are split
//! as a POSIX shell splits them, so `'1:DESC:two words'` is one word); `#` starts a
//! comment line, blank lines are skipped. Each line prints one result, in the file's
//! order; the exit status is non-zero when any line failed, naming the first such
//! line. Server and credentials come from the batch command, not from the lines.
//!
//! Pipelined: up to `--window` lines (64 by default) are in flight at once in the
//! session, each on a connection of its own, so a server committing writes in groups
//! commits many lines in one go. Lines about the same handle still run in the file's
//! order: a line is sent only once the line before it about the same handle has been
//! answered (a `create` then an `add` to it never race), while lines about other
//! handles go on meanwhile.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;

use crate::auth::Identity;
use crate::client::{AdminRequest, Client};
use crate::names::Handle;
use anyhow::{Context, bail};
use clap::{Args, Parser};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::add::AddArgs;
use super::admin_arg::AuthArgs;
use super::connect::{ServerArg, client, parse_reference, runtime, with_credentials};
use super::create::CreateArgs;
use super::delete::DeleteArgs;
use super::modify::ModifyArgs;
use super::remove::RemoveArgs;

/// Arguments of `hdl batch`.
#[derive(Debug, Args)]
pub struct BatchArgs {
    /// The file of commands, one a line.
    file: PathBuf,
    #[command(flatten)]
    server: ServerArg,
    #[command(flatten)]
    auth: AuthArgs,
    /// How many lines may be in flight at once (1: each line waits for the previous).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(1..=MAX_WINDOW))]
    window: u16,
}

/// The most lines in flight at once: well inside the server's window of session
/// counters that may arrive out of order.
const MAX_WINDOW: i64 = 100;

/// One line of a batch file.
#[derive(Debug, Parser)]
#[command(no_binary_name = true, name = "batch line")]
enum Line {
    /// Create a handle.
    Create(CreateArgs),
    /// Add values.
    Add(AddArgs),
    /// Replace values.
    Modify(ModifyArgs),
    /// Remove values.
    Remove(RemoveArgs),
    /// Delete a handle.
    Delete(DeleteArgs),
}

impl Line {
    /// The request this line asks for, as `creator`.
    fn request(&self, creator: Option<&Identity>) -> anyhow::Result<AdminRequest> {
        let handle = |reference| parse_reference(reference).map(|parsed| parsed.handle);
        Ok(match self {
            Line::Create(args) => args.request(handle(args.handle())?, creator),
            Line::Add(args) => args.request(handle(args.handle())?),
            Line::Modify(args) => args.request(handle(args.handle())?),
            Line::Remove(args) => args.request(handle(args.handle())?),
            Line::Delete(args) => args.request(handle(args.handle())?),
        })
    }
}

/// Runs every command of the file in one session and prints one line each.
pub fn run(args: &BatchArgs) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    let Some(creator) = args.auth.identity().cloned() else {
        bail!("hdl batch needs --auth with --key or --secret-file");
    };
    let failed = runtime()?.block_on(async {
        let client = with_credentials(client(&args.server).await?, &args.auth)?.with_session();
        client.open_session().await.context("opening a session")?;
        let mut lines = InFlight::new(Arc::new(client), usize::from(args.window));
        anyhow::Ok(lines.run_all(&text, &creator).await)
    })?;
    match failed.first() {
        None => Ok(()),
        Some(first) => bail!(
            "{} of the commands failed, the first on line {first}",
            failed.len()
        ),
    }
}

/// The lines sent and not yet reported, in the file's order.
struct InFlight {
    client: Arc<Client>,
    window: usize,
    lines: VecDeque<Sent>,
    /// For each handle with a line in flight, its last such line's number and what
    /// tells when that line has been answered.
    last_of: HashMap<Handle, (usize, oneshot::Receiver<()>)>,
    failed: Vec<usize>,
}

/// A line sent (or refused before sending), awaiting its report.
struct Sent {
    number: usize,
    line: String,
    handle: Option<Handle>,
    outcome: Outcome,
}

enum Outcome {
    /// Refused before anything was sent (a line that does not parse).
    Refused(anyhow::Error),
    /// In flight.
    Running(JoinHandle<anyhow::Result<()>>),
}

impl InFlight {
    fn new(client: Arc<Client>, window: usize) -> InFlight {
        InFlight {
            client,
            window,
            lines: VecDeque::new(),
            last_of: HashMap::new(),
            failed: Vec::new(),
        }
    }

    /// Runs each command line, printing its outcome in order; the numbers of the
    /// lines that failed.
    async fn run_all(&mut self, text: &str, creator: &Identity) -> Vec<usize> {
        for (number, line) in (1..).zip(text.lines()) {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            match parse_line(line, creator) {
                Ok(request) => self.send(number, line, request).await,
                Err(error) => self.lines.push_back(Sent {
                    number,
                    line: line.to_owned(),
                    handle: None,
                    outcome: Outcome::Refused(error),
                }),
            }
        }
        while self.report_oldest().await {}
        std::mem::take(&mut self.failed)
    }

    /// Sends `request` once the window has room, after the line before it about the
    /// same handle has been answered.
    async fn send(&mut self, number: usize, line: &str, request: AdminRequest) {
        while self.lines.len() >= self.window {
            self.report_oldest().await;
        }
        let handle = request.handle().cloned();
        let (answered, on_answer) = oneshot::channel();
        let before = handle.as_ref().and_then(|handle| {
            let (_, before) = self.last_of.insert(handle.clone(), (number, on_answer))?;
            Some(before)
        });
        let client = Arc::clone(&self.client);
        let running = tokio::spawn(async move {
            if let Some(before) = before {
                // Answered or abandoned: either way it is no longer in flight.
                let _ = before.await;
            }
            let outcome = client.admin(request).await;
            let _ = answered.send(());
            outcome?;
            anyhow::Ok(())
        });
        self.lines.push_back(Sent {
            number,
            line: line.to_owned(),
            handle,
            outcome: Outcome::Running(running),
        });
    }

    /// Awaits and prints the oldest line's outcome; false when none is left.
    async fn report_oldest(&mut self) -> bool {
        let Some(sent) = self.lines.pop_front() else {
            return false;
        };
        let outcome = match sent.outcome {
            Outcome::Refused(error) => Err(error),
            Outcome::Running(running) => running.await.unwrap_or_else(|failure| {
                Err(anyhow::anyhow!("the request's task failed: {failure}"))
            }),
        };
        let (number, line) = (sent.number, &sent.line);
        if let Some(handle) = &sent.handle
            && self
                .last_of
                .get(handle)
                .is_some_and(|(last, _)| *last == number)
        {
            self.last_of.remove(handle);
        }
        match outcome {
            Ok(()) => println!("line {number}: ok: {line}"),
            Err(error) => {
                println!("line {number}: failed: {line}: {error:#}");
                self.failed.push(number);
            }
        }
        true
    }
}

/// The request a command line asks for, as `creator`.
fn parse_line(line: &str, creator: &Identity) -> anyhow::Result<AdminRequest> {
    let words = shlex::split(line).context("unbalanced quotes")?;
    let parsed = Line::try_parse_from(words)?;
    parsed.request(Some(creator))
}
