//! `hdl`: the command-line entry point. Everything it does lives in [`hdl::cli`], in
//! the library, so that the library's code is compiled once: a binary awaiting the
//! library's async functions compiles their bodies (and the generic code under them)
//! again.

use std::process::ExitCode;

/// mimalloc rather than glibc's malloc: why, and the settings a node runs it with, are
/// in `hdl::cli::allocator`.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    hdl::cli::run()
}
