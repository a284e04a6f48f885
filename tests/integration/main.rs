//! Integration tests: each runs the real `hdl` binary as a user would.
//!
//! One test binary (so it links once), one module per feature; `harness` starts
//! servers and `raw` speaks the wire directly.

mod answer_cache;
mod auth;
mod bench_resolve;
mod caching;
mod cluster;
mod commands;
mod drain;
mod encrypted_sessions;
mod export_import;
mod global;
mod hardening;
mod harness;
mod http;
mod http_proxy;
mod http_sessions;
mod key_services;
mod layers;
mod parse;
mod protocol;
mod raw;
mod rest_clients;
mod retries;
mod search;
mod sessions;
mod signed;
mod sizes;
mod templates;
mod upgrades;
