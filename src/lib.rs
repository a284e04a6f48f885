//! hdl: a replicated implementation of the Handle System (RFC 3650–3652).
//!
//! The module tree is the architecture; each layer depends only on those listed
//! before it: [`names`] → [`values`] → [`codec`] → [`storage`] → [`replication`] →
//! [`service`] → [`server`]. [`client`] is an edge beside the server: it depends only
//! on [`names`], [`values`] and [`codec`]. [`config`] and [`cluster_file`] are plain
//! data read by the binary.

pub mod client;
pub mod cluster_file;
pub mod codec;
pub mod config;
pub mod names;
pub mod replication;
pub mod server;
pub mod service;
pub mod storage;
pub mod values;
