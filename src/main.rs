//! `hdl`: the command-line entry point. Everything it does lives in [`cli`].

mod cli;

use std::process::ExitCode;

/// mimalloc rather than glibc's malloc: why, and the settings a node runs it with, are
/// in `cli::allocator`.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    cli::run()
}
