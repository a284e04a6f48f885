//! hdl: a replicated implementation of the Handle System (RFC 3650–3652).
//!
//! The module tree is the architecture; each layer depends only on those listed
//! before it: [`names`] → [`values`] → [`codec`] → [`storage`] → [`replication`] →
//! [`service`] → [`server`] and [`http`] (the edges that bind sockets). [`client`] is
//! an edge beside the servers: it depends only on [`names`], [`values`] and [`codec`].
//! [`resolver`] finds the service responsible for a handle through the Global Handle
//! Registry and asks it, over [`client`]; [`service`] uses it for keys held elsewhere.
//! [`auth`] (authentication and authorisation) is pure like the codec and depends only
//! on [`names`], [`values`] and [`codec`]. [`restjson`] (the REST JSON shape of values,
//! pure, over [`values`]) and [`metrics`] (the registry the edges record into) serve
//! several layers. [`config`] and [`cluster_file`] are plain data read by the binary.
//! [`node`] assembles one process from all of these (store, replica, service, both
//! edges, the peer port) and runs it until shutdown; the binary only parses arguments.

pub mod auth;
pub mod client;
pub mod cluster_file;
pub mod codec;
pub mod config;
pub mod http;
pub mod metrics;
pub mod names;
pub mod node;
pub mod replication;
pub mod resolver;
pub mod restjson;
pub mod server;
pub mod service;
pub mod storage;
pub mod values;
