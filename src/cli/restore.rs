//! `hdl restore FILE --data-dir D`: makes a new data directory from a backup of
//! `hdl backup`, from which `hdl serve --data-dir D` answers exactly the handles the
//! backup holds, as a new replica set of one member that others can then join.
//!
//! The library does the work ([`crate::node::restore`]): the backup is verified whole
//! before anything is written, a damaged or truncated one is refused naming the
//! problem, and `D` must be absent or empty.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use clap::Args;

/// Arguments of `hdl restore`.
#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The backup file (`hdl backup --out`).
    file: PathBuf,
    /// The data directory to make; it must be absent or empty.
    #[arg(long)]
    data_dir: PathBuf,
}

/// Restores and says what was restored and how to start it.
pub fn run(args: &RestoreArgs) -> anyhow::Result<()> {
    let restored = crate::node::restore::restore(&args.file, &args.data_dir)?;
    let header = &restored.header;
    let taken = SystemTime::UNIX_EPOCH + Duration::from_micros(header.created_micros);
    let sets: Vec<String> = header
        .sections
        .iter()
        .map(|s| s.set.0.to_string())
        .collect();
    println!(
        "restored {} handles of replica set{} {} (backed up {}, cluster map epoch {}) into {}",
        restored.handles,
        if sets.len() == 1 { "" } else { "s" },
        sets.join(", "),
        humantime::format_rfc3339_seconds(taken),
        header.epoch,
        args.data_dir.display()
    );
    if restored.left > 0 {
        println!(
            "left out {} copies of handles held by a set whose slot another set owned (a slot move under way)",
            restored.left
        );
    }
    println!(
        "start it with: hdl serve --data-dir {} (it forms replica set 1 of itself; others join it with hdl cluster add-secondary)",
        args.data_dir.display()
    );
    Ok(())
}
