//! `hdl store stats|compact --data-dir D`: a stopped node's handle store, offline.
//!
//! `stats` prints how full each table's pages are; `compact` rebuilds the store in key
//! order, giving back what half-empty pages took ([`crate::node::store_files`]). The
//! set's log needs no compacting: its segments are removed as they are purged. Both need the node stopped: redb locks the files, and
//! a running node's store is refused.

use std::path::{Path, PathBuf};

use crate::node::store_files::{Compacted, SetFiles, StorageError, TableFill};
use anyhow::Context;
use clap::{Args, Subcommand};

/// Arguments of `hdl store`.
#[derive(Debug, Args)]
pub struct StoreArgs {
    #[command(subcommand)]
    command: StoreCommand,
}

#[derive(Debug, Subcommand)]
enum StoreCommand {
    /// Print each table of the handle store: entries, octets stored, octets of pages.
    Stats(DataDir),
    /// Rebuild the handle store in key order (crash-safe: a new file, then a rename).
    Compact(DataDir),
}

#[derive(Debug, Args)]
struct DataDir {
    /// The stopped node's data directory.
    #[arg(long)]
    data_dir: PathBuf,
}

/// Runs `hdl store`.
pub fn run(args: &StoreArgs) -> anyhow::Result<()> {
    match &args.command {
        StoreCommand::Stats(dir) => {
            print_fill(&fill_of(&set_files(&dir.data_dir)?)?);
            Ok(())
        }
        StoreCommand::Compact(dir) => compact_set(&set_files(&dir.data_dir)?),
    }
}

/// Compacts the set's store, and says what it came to.
pub(super) fn compact_set(files: &SetFiles) -> anyhow::Result<()> {
    print_compacted(&files.store, files.compact_store())
}

fn print_compacted(path: &Path, done: Result<Compacted, StorageError>) -> anyhow::Result<()> {
    let done =
        done.with_context(|| format!("cannot compact {} (is its node stopped?)", path.display()))?;
    println!(
        "compacted {}: {} MiB before, {} MiB after",
        path.display(),
        done.before >> 20,
        done.after >> 20
    );
    Ok(())
}

/// The files of the replica set under the data directory `data_dir`.
pub(super) fn set_files(data_dir: &Path) -> anyhow::Result<SetFiles> {
    SetFiles::find(data_dir)?.with_context(|| {
        format!(
            "{} holds no replica set's store (no groups/set-<k>/)",
            data_dir.display()
        )
    })
}

/// The tables of the set's store, as [`print_fill`] shows them.
pub(super) fn fill_of(files: &SetFiles) -> anyhow::Result<Vec<TableFill>> {
    files.fill().with_context(|| {
        format!(
            "cannot read {} (is its node stopped?)",
            files.store.display()
        )
    })
}

/// One line a table that holds anything: entries, MiB stored / MiB of pages, fill.
pub(super) fn print_fill(tables: &[TableFill]) {
    for table in tables.iter().filter(|table| table.entries > 0) {
        println!(
            "  {}: {} entries, {:.1} / {:.1} MiB stored / in pages ({:.0} % full)",
            table.name,
            table.entries,
            table.stored as f64 / 1_048_576.0,
            table.pages as f64 / 1_048_576.0,
            100.0 * table.stored as f64 / table.pages.max(1) as f64
        );
    }
}
