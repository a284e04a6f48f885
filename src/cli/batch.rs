//! `hdl batch FILE [--server ADDR] --auth INDEX:HANDLE --key FILE | --secret-file FILE`:
//! administrative commands, one a line, run inside one authenticated Handle protocol
//! session (one challenge for the whole file).
//!
//! A line is a `create`, `add`, `modify`, `remove` or `delete` command with the
//! arguments of that subcommand (parsed by the same clap definitions; words are split
//! as a POSIX shell splits them, so `'1:DESC:two words'` is one word); `#` starts a
//! comment line, blank lines are skipped. Each line prints one result; the exit status is non-zero when any line
//! failed, naming the first such line. Server and credentials come from the batch
//! command, not from the lines.

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Args, Parser};
use hdl::auth::Identity;
use hdl::client::{AdminRequest, Client};

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
}

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
        anyhow::Ok(run_lines(&client, &text, &creator).await)
    })?;
    match failed.first() {
        None => Ok(()),
        Some(first) => bail!(
            "{} of the commands failed, the first on line {first}",
            failed.len()
        ),
    }
}

/// Runs each command line, printing its outcome; the numbers of the lines that failed.
async fn run_lines(client: &Client, text: &str, creator: &Identity) -> Vec<usize> {
    let mut failed = Vec::new();
    for (number, line) in (1..).zip(text.lines()) {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match run_line(client, line, creator).await {
            Ok(()) => println!("line {number}: ok: {line}"),
            Err(error) => {
                println!("line {number}: failed: {line}: {error:#}");
                failed.push(number);
            }
        }
    }
    failed
}

async fn run_line(client: &Client, line: &str, creator: &Identity) -> anyhow::Result<()> {
    let words = shlex::split(line).context("unbalanced quotes")?;
    let parsed = Line::try_parse_from(words)?;
    let request = parsed.request(Some(creator))?;
    client.admin(request).await?;
    Ok(())
}
