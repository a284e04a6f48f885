//! The Handle.Net REST JSON shape of handle values (`HANDLE-NET-REFERENCE.md` §1.2),
//! both ways: [`resolution_json`] and [`value_json`] render stored values as trees
//! (`hdl resolve --json`, exports; read back from the text below), [`Resolution`]
//! writes the same object as text with no tree built (the HTTP API's answers),
//! [`parse_body`] and [`parse_value`] read the values a client sends.
//!
//! A value is `{"index","type","data":{"format","value"},["permissions"],["ttlType"],
//! "ttl","timestamp",["references"]}`, in that order. `permissions` (admin read, admin
//! write, public read, public write as `0`/`1`) is left out when it is the default
//! `1110`; `ttlType` appears (as 1) only for an absolute TTL; the timestamp is RFC 3339
//! UTC to the second.
//!
//! Data formats written: `admin` (decodable HS_ADMIN: `{"handle","index",
//! "permissions"}` with the 12-character bit string), `vlist` (decodable HS_VLIST:
//! `[{"handle","index"}]`), `site` (decodable HS_SITE and its variants, see
//! [`structured`]), `key` (decodable RSA, DSA or DH HS_PUBKEY as a JWK), `string` for
//! UTF-8 data of any type whose layout is not binary, `base64` otherwise. Read: the
//! same, plus `hex`, and a bare string as `data` meaning `string`. A JSON array as
//! `data` is refused, as in the reference server.
//!
//! Pure: depends on [`crate::values`] only; no I/O, no clock (the server stamps
//! timestamps, so an incoming `timestamp` is ignored), except in the lines of an
//! export file ([`export_json`], [`parse_export`]), which keep every value's
//! timestamp and octets.

mod export;
mod parse;
mod render;
pub mod structured;

use thiserror::Error;

pub use export::{export_json, parse_export};
pub use parse::{ValuesBody, parse_body, parse_value};
pub use render::{Resolution, data_json, resolution_json, timestamp, value_json};

/// Why incoming value JSON could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum JsonError {
    /// Something that must be a JSON object is not one.
    #[error("{what}: Not a JSON Object")]
    NotAnObject {
        /// What was expected.
        what: &'static str,
    },
    /// A required field is missing.
    #[error("{what}: missing field {field:?}")]
    Missing {
        /// The object it was looked for in.
        what: &'static str,
        /// The field.
        field: &'static str,
    },
    /// A field has the wrong JSON type or an impossible value.
    #[error("{what}: field {field:?} must be {expected}")]
    Invalid {
        /// The object the field is in.
        what: &'static str,
        /// The field.
        field: &'static str,
        /// What it must be.
        expected: &'static str,
    },
    /// A `data.format` this server does not know.
    #[error("unknown data format {0:?}")]
    UnknownFormat(String),
    /// The body is neither a value, an array of values nor `{"values":[…]}`.
    #[error("the body must be a value, an array of values or {{\"values\":[...]}}")]
    BadBody,
}
