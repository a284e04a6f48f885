//! hdl: a replicated implementation of the Handle System (RFC 3650–3652).
//!
//! The module tree is the architecture; each layer depends only on those listed
//! before it: [`names`] → [`values`] → [`storage`].

pub mod codec;
pub mod names;
pub mod storage;
pub mod values;
