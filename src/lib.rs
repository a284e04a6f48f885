//! hdl: a replicated implementation of the Handle System (RFC 3650–3652).
//!
//! The module tree is the architecture; each layer depends only on layers before it,
//! as the layer table of README.md's "Layout" section says (a test reads that table
//! and every import): [`clock`] and [`metrics`] → [`names`] → [`values`] → [`codec`]
//! → [`auth`] and [`restjson`] (pure) → [`config`] → [`cluster_file`] → [`client`] →
//! [`resolver`] → [`storage`] → [`replication`] → [`placement`] → [`service`] (the
//! [`service::Handler`] seam and this node's implementation of it) → [`server`] and
//! [`http`], the edges that bind sockets and reach everything below through the
//! handler, and [`routing`], the handler that sends each call to the replica set
//! owning its handle's slot, and [`caching`], the handler of a caching resolver
//! (answers by global resolution, kept for their TTLs) → [`node`], which assembles one process from all of these (its groups,
//! service, both edges, the peer port) and runs it until shutdown → [`cli`], the `hdl`
//! command line, which parses arguments and sits on top; the binary (`src/main.rs`)
//! only calls [`cli::run`].
//!
//! One word for one thing: a request declined for a reason of its own (a handle that
//! exists, a wrong answer, a full session table) is a *refusal* in every layer
//! ([`storage::Refusal`], each edge's `Refusal` carrying its response code, the
//! session tables' `SessionRefusal` and [`auth::session_table::TableRefusal`]); an
//! `Error` is a failure.

pub mod auth;
pub mod caching;
pub mod cli;
pub mod client;
pub mod clock;
pub mod cluster_file;
pub mod codec;
pub mod config;
pub mod http;
pub mod metrics;
pub mod names;
pub mod node;
pub mod placement;
pub mod replication;
pub mod resolver;
pub mod restjson;
pub mod routing;
pub mod server;
pub mod service;
pub mod storage;
pub mod values;
