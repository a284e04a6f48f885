//! `hdl list PREFIX [--server ADDR] [--max N]`: the handles under a prefix, one a line.

use clap::Args;

use super::connect::{ServerArg, client, runtime};

/// Arguments of `hdl list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// The prefix, `10.1000` or its prefix handle `0.NA/10.1000`.
    prefix: String,
    /// Fail rather than read more than this many handles.
    #[arg(long, default_value_t = 100_000)]
    max: usize,
    #[command(flatten)]
    server: ServerArg,
}

/// Lists the handles.
pub fn run(args: &ListArgs) -> anyhow::Result<()> {
    let handles = runtime()?.block_on(async {
        let client = client(&args.server).await?;
        anyhow::Ok(client.list_handles(&args.prefix, args.max).await?)
    })?;
    for handle in handles {
        println!("{handle}");
    }
    Ok(())
}
