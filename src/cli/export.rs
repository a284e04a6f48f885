//! `hdl export [--prefix P] [--out FILE]`: every handle of a running cluster (under
//! `P`), one a line, as JSON Lines in the Handle.Net REST JSON shape
//! (`{"handle":…,"values":[…]}`; each value's index, type, data, TTL, timestamp and
//! permissions kept, its data in a format that reads back to the same octets), in
//! folded-key order.
//!
//! Each replica set is read from one snapshot of its store at its primary (after every
//! write acknowledged before the export began), page by page over the peer port, as
//! the administrator of `--auth`, who needs `LIST_HANDLES` on every prefix exported and
//! `READ_VALUE` on every handle holding a non-public value (module `service::bulk`);
//! the sets' pages are merged by key. With `--out` the file appears whole or not at
//! all: it is written beside, as `FILE.partial`, and renamed once complete.

use std::collections::VecDeque;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::node::bulk::{BulkAnswer, MAX_PAGE, SessionRequest};
use crate::replication::SetId;
use crate::service::HandleRecord;
use anyhow::bail;
use clap::Args;

use super::bulk_link::{BulkArgs, BulkLink};
use super::whole_file::WholeFile;

/// Arguments of `hdl export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Only the handles under this prefix (e.g. `10.5555`); default every handle.
    #[arg(long)]
    prefix: Option<String>,
    /// Write to this file rather than to stdout.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    #[command(flatten)]
    link: BulkArgs,
}

/// One set's export under way: its cursor and the page read ahead.
struct SetExport {
    set: SetId,
    cursor: u64,
    page: VecDeque<(String, HandleRecord)>,
    done: bool,
}

/// Exports and prints how many handles were written (to stderr).
pub fn run(args: &ExportArgs) -> anyhow::Result<()> {
    let written = super::connect::runtime()?.block_on(async {
        let link = BulkLink::connect(&args.link).await?;
        match &args.out {
            Some(path) => export_to_file(&link, args.prefix.as_deref(), path).await,
            None => {
                let mut out = BufWriter::new(std::io::stdout().lock());
                export(&link, args.prefix.as_deref(), &mut out).await
            }
        }
    })?;
    eprintln!("exported {written} handles");
    Ok(())
}

/// Exports into `path`, written whole or not at all; how many handles.
pub async fn export_to_file(
    link: &BulkLink,
    prefix: Option<&str>,
    path: &Path,
) -> anyhow::Result<u64> {
    let (whole, file) = WholeFile::create(path, 0o666)?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let written = export(link, prefix, &mut out).await?;
    let file = out.into_inner().map_err(|error| error.into_error())?;
    whole.keep(&file)?;
    Ok(written)
}

/// Writes every handle (under `prefix`) to `out`, one JSON line each, in folded-key
/// order across the sets; how many.
pub async fn export(
    link: &BulkLink,
    prefix: Option<&str>,
    out: &mut impl Write,
) -> anyhow::Result<u64> {
    let mut exports = Vec::new();
    for set in link.sets() {
        let request = SessionRequest::OpenExport {
            set,
            prefix: prefix.map(str::to_owned),
        };
        let cursor = match link.call(set, request).await?.0 {
            BulkAnswer::ExportOpened { cursor } => cursor,
            BulkAnswer::Refused(reason) | BulkAnswer::NotHere(reason) => {
                bail!("replica set {}: {reason}", set.0)
            }
            other => bail!("replica set {} answered {other:?}", set.0),
        };
        exports.push(SetExport {
            set,
            cursor,
            page: VecDeque::new(),
            done: false,
        });
    }
    let mut written = 0;
    loop {
        for export in &mut exports {
            if export.page.is_empty() && !export.done {
                next_page(link, export).await?;
            }
        }
        let next = exports
            .iter_mut()
            .filter(|export| !export.page.is_empty())
            .min_by(|a, b| a.page[0].0.cmp(&b.page[0].0));
        let Some((_, record)) = next.and_then(|export| export.page.pop_front()) else {
            break;
        };
        let line = crate::restjson::export_json(&record.display, &record.values);
        serde_json::to_writer(&mut *out, &line)?;
        out.write_all(b"\n")?;
        written += 1;
    }
    out.flush()?;
    Ok(written)
}

/// Reads the next page of `export`.
async fn next_page(link: &BulkLink, export: &mut SetExport) -> anyhow::Result<()> {
    let request = SessionRequest::ExportPage {
        cursor: export.cursor,
        limit: MAX_PAGE,
    };
    match link.call(export.set, request).await?.0 {
        BulkAnswer::Page(page) => {
            export.page.extend(page.records);
            export.done = page.done;
            Ok(())
        }
        BulkAnswer::Refused(reason) | BulkAnswer::NotHere(reason) => {
            bail!("replica set {}: {reason}", export.set.0)
        }
        other => bail!("replica set {} answered {other:?}", export.set.0),
    }
}
