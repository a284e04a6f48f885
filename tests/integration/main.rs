//! Integration tests: each runs the real `hdl` binary as a user would.
//!
//! One test binary (so it links once), one module per feature.

mod parse;
