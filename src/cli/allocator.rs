//! The settings a node's memory allocator runs with.
//!
//! `hdl` allocates through mimalloc (the global allocator in `main.rs`): a write's path
//! allocates and frees many small buffers on several threads, and glibc's malloc took a
//! fifth of a busy member's CPU. mimalloc's defaults trade memory for speed: it commits
//! its arenas ahead of use and gives freed pages back a second later (its version 3),
//! which left a node that had loaded 1 M handles 30 MiB bigger than under glibc.
//! [`NODE_SETTINGS`] turn both off; the speed stays (`hdl bench scale --handles
//! 1000000`, the same session: glibc 53,579 handles/s built, 90 MiB resident after,
//! 63 MiB steady; mimalloc with its defaults 85,555/s, 122 and 90 MiB; with these
//! settings 86,647/s, 73 and 66 MiB). Giving pages back at once costs a busy primary
//! page faults (3.3 a create at 256 writers, against 1.8-2.1 with a 10 ms delay: 2-3 %
//! of its CPU), but a delay keeps what a busy process freed once it goes idle (a
//! caching resolver with `max_mib = 1`, five seconds after 300,000 misses: 39.5 MB
//! with 10 ms, 21.6 MB at once), so the settings keep it at once.
//!
//! mimalloc reads its settings from the environment when a process starts, so a node
//! gets them in its environment: from its launcher ([`set_for_node`], `hdl cluster up`
//! and the benches that start sets), or by `hdl serve` running itself again with them
//! ([`run_again_with_node_settings`]). A setting the environment already names is left
//! as it is, so an operator may choose another. Owns no allocation.

use std::os::unix::process::CommandExt;
use std::process::Command;

/// mimalloc's settings for a node: commit arena memory only as it is used
/// (`ARENA_EAGER_COMMIT=0`), and give freed memory back at once (`PURGE_DELAY=0`).
const NODE_SETTINGS: [(&str, &str); 2] = [
    ("MIMALLOC_ARENA_EAGER_COMMIT", "0"),
    ("MIMALLOC_PURGE_DELAY", "0"),
];

/// The settings of [`NODE_SETTINGS`] this process's environment does not name.
fn unset_node_settings() -> impl Iterator<Item = (&'static str, &'static str)> {
    NODE_SETTINGS
        .into_iter()
        .filter(|(name, _)| std::env::var_os(name).is_none())
}

/// Gives a node about to be started the settings its launcher's environment does not
/// name.
pub(super) fn set_for_node(command: &mut tokio::process::Command) {
    command.envs(unset_node_settings());
}

/// Runs this command again in place of this process (same pid, arguments and
/// streams) with the node settings its environment lacks, if it lacks any. Carries
/// on as it is, saying so, if it cannot.
pub(super) fn run_again_with_node_settings() {
    let unset: Vec<_> = unset_node_settings().collect();
    if unset.is_empty() {
        return;
    }
    let error = match std::env::current_exe() {
        Ok(program) => Command::new(program)
            .args(std::env::args_os().skip(1))
            .envs(unset)
            .exec(),
        Err(error) => error,
    };
    eprintln!(
        "hdl serve: cannot run again with the allocator's settings ({error}); \
         it keeps its defaults"
    );
}
