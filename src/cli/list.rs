//! `hdl list PREFIX [--server ADDR] [--max N]`: the handles under a prefix, one a line.

use clap::Args;

use super::admin_arg::AuthArgs;
use super::connect::{ServerArg, client, runtime, with_credentials};

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
    #[command(flatten)]
    auth: AuthArgs,
}

/// Lists the handles.
pub fn run(args: &ListArgs) -> anyhow::Result<()> {
    let handles = runtime()?.block_on(async {
        let client = with_credentials(client(&args.server).await?, &args.auth)?;
        anyhow::Ok(client.list_handles(&args.prefix, args.max).await?)
    })?;
    for handle in handles {
        println!("{handle}");
    }
    Ok(())
}
