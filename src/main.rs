//! `hdl`: the command-line entry point. Everything it does lives in [`cli`].

mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::run()
}
