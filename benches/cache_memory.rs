//! The caching resolver's memory bound with a million distinct handles:
//! `cargo bench --bench cache_memory`.
//!
//! Fills an [`AnswerCache`] with `HANDLES` (default 1,000,000) distinct answers of one
//! URL value each, as a cache in front of a busy namespace meets them, through the
//! bytes a caching resolver with `[cache] max_mib = MAX_MIB` (default 64) counts its
//! answers against ([`answer_bytes`]: half of it), or with `RUN=unbounded` with room
//! for all of them. Prints the bytes the cache counts, its entries and
//! evictions, and how much the process's resident memory grew, read from
//! `/proc/self/status`: the counted bytes must be what the allocator really holds, or
//! the bound is not one. One fill a process, so that it is the heap's first use (no
//! criterion: the figure is memory, not time).

use std::time::{Duration, Instant};

use hdl::caching::answer_bytes;
use hdl::caching::answers::{Answer, AnswerCache, CacheKey};
use hdl::names::Handle;
use hdl::service::HandleRecord;
use hdl::values::{HandleValue, ValueSelection};

/// Resident memory of this process, in bytes.
fn resident() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kib = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<usize>()
                .ok()
        })
        .expect("VmRSS in /proc/self/status");
    kib * 1024
}

/// A number from the environment variable `name`, or `default`.
fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(default)
}

/// Inserts `handles` distinct one-URL answers into a cache bounded at `max_bytes`;
/// prints what it holds and what the process's memory grew by.
fn fill(handles: usize, max_bytes: usize) {
    let before = resident();
    let mut cache = AnswerCache::new(max_bytes);
    let selection = ValueSelection::default();
    let now = Instant::now();
    let ttl = Duration::from_secs(3600);
    let mut evicted = 0;
    for n in 0..handles {
        let name = format!("10.5555/object-{n:08}");
        let handle = Handle::parse(&name).expect("valid handle");
        let record = HandleRecord {
            display: name.clone(),
            values: vec![HandleValue::new(
                1,
                "URL",
                format!("https://repository.example.org/objects/{n:08}"),
            )],
        };
        let key = CacheKey::new(&handle, &selection);
        evicted += cache
            .insert(key, Answer::Values(record.into()), ttl, now)
            .evicted;
    }
    let grown = resident().saturating_sub(before);
    let mib = |bytes: usize| bytes as f64 / f64::from(1 << 20);
    println!(
        "{handles} distinct answers, bound {:.0} MiB: {} entries, {:.1} MiB counted, \
         {evicted} evicted; resident memory grew {:.1} MiB ({:.2}x the counted bytes)",
        mib(max_bytes),
        cache.len(),
        mib(cache.bytes()),
        mib(grown),
        grown as f64 / cache.bytes().max(1) as f64,
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs it as a test with
    // no arguments: a small run then, so the suite stays quick.
    let benching = std::env::args().any(|arg| arg == "--bench");
    let handles = setting("HANDLES", if benching { 1_000_000 } else { 10_000 });
    let max_mib = setting("MAX_MIB", 64);
    let bound = match std::env::var("RUN").as_deref() {
        Ok("unbounded") => usize::MAX,
        _ => answer_bytes(max_mib),
    };
    fill(handles, bound);
}
