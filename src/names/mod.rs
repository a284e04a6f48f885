//! Handle names (DESIGN §1): the [`Handle`] the Handle System stores and the
//! [`HandleRef`] people and documents write.
//!
//! The first layer: depends on nothing else in the crate. Pure: no I/O, no clock, no
//! tokio. Every handle that reaches storage or the wire has passed [`Handle::parse`].
//!
//! # Handles
//! `handle = naming-authority "/" local-name`, in UTF-8, at most [`MAX_HANDLE_LEN`]
//! octets. It splits at the first `/`: `a/b/c` is prefix `a`, local name `b/c`. The
//! naming authority is one or more non-empty `.`-separated segments holding any
//! character but `.` and `/` (`@` included); the local name is non-empty and holds
//! anything. Only ASCII letters are case-insensitive: the lookup [`Handle::key`] is
//! [`fold_key`] of the text, which upper-cases `a`–`z` and keeps every other octet
//! (`ü`, `日`) as it is. The spelling as first written is kept for display.
//!
//! # Prefix handles
//! A naming authority `P` is described by its prefix handle `0.NA/P`, built only by
//! [`prefix_handle`] and read back by [`named_prefix`].
//!
//! # References
//! `HandleRef = [modifier "@"] handle`, `modifier = [encoding] ["type=" 1*DIGIT]`,
//! written bare or inside a URI; see [`ReferenceForm`]. Decisions made here:
//!
//! - **Schemes** `hdl:`, `hdl://`, `info:hdl/`, `urn:hdl:`, `http://` and `https://`
//!   are matched ASCII case-insensitively. Anything else is a bare reference, taken
//!   literally: no percent-decoding, `%`, `#` and `?` are characters.
//! - **URI forms** percent-decode `%XX` to octets; a `%` not followed by two hex digits
//!   is an error, `+` is a plus. `#fragment` is dropped in every URI form. `?query` is
//!   dropped only in `hdl://` and proxy URLs; in `hdl:`, `info:hdl/` and `urn:hdl:` a
//!   `?` belongs to the handle (the seed asks only `%` and `"` to be escaped). Raw `"`,
//!   spaces and non-ASCII octets are tolerated, as browsers send them. The URI is split
//!   on raw `#`, `?`, `@` and `/` *before* charset conversion, so natively encoded
//!   characters whose octets coincide with those must be percent-encoded.
//! - **Modifiers** are accepted in every form, not only `hdl:` and proxy URLs, so that
//!   `info:hdl/jis@…` is never silently misread. The modifier is the raw text before
//!   the first `@`, and only if it holds no `/` (the `@` comes before the first `/`),
//!   no `%`, only printable ASCII, and is a charset label (encoding_rs's WHATWG labels
//!   plus `jis` for ISO-2022-JP) and/or ends in `type=<digits>` (case-insensitive).
//!   Otherwise the `@` is an ordinary character of the naming authority. A handle whose
//!   prefix starts with a charset label and `@` is written with `%40` in a URI form.
//!   `<unknown>type=3@` is an unknown-encoding error; labels encoding_rs maps to its
//!   "replacement" encoding (ISO-2022-KR, HZ) are refused as unsupported.
//! - **Conversion**: the octets after the modifier are percent-decoded, then converted
//!   from its charset to UTF-8 without replacement (malformed input is an error).
//!   Without a modifier they must already be UTF-8, else [`NameError::Encoding`].
//!   Labels mean what WHATWG says: `iso-8859-1` is windows-1252, `gb2312` is GBK.
//! - **Servers**: `hdl://host[:port]/` fills [`HandleRef::server`]; a proxy URL's host
//!   is validated but not returned (it is not a handle server).
//! - **Sizes**: input over [`MAX_REFERENCE_LEN`] octets is refused before any decoding;
//!   the decoded handle must then fit [`MAX_HANDLE_LEN`].

mod charset;
mod error;
mod handle;
mod prefix;
mod reference;
mod server;

#[cfg(test)]
mod proptests;

pub use error::NameError;
pub use handle::{Handle, MAX_HANDLE_LEN, fold_key};
pub use prefix::{PREFIX_AUTHORITY, named_prefix, prefix_handle};
pub use reference::{HandleRef, MAX_REFERENCE_LEN, ReferenceForm};
pub use server::ServerAddress;
