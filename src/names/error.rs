//! The one error type of the names layer.
//!
//! Every variant names the problem and carries the facts as fields (offsets, lengths,
//! the offending text), never a pre-formatted string. Byte offsets count from the
//! start of the input that was handed to the parser, unless the field says otherwise.

use thiserror::Error;

use super::handle::MAX_HANDLE_LEN;
use super::reference::MAX_REFERENCE_LEN;

/// Why a handle or handle reference was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NameError {
    /// The handle octets are not UTF-8 and nothing says which charset they are in.
    #[error(
        "encoding error: the handle is not valid UTF-8 at byte {offset} and no encoding \
         modifier names its charset"
    )]
    Encoding {
        /// Offset of the first octet that is not UTF-8, counted in the handle octets
        /// after any scheme, modifier and percent-escapes were removed.
        offset: usize,
    },
    /// A modifier named a charset but the octets after it are malformed in it.
    #[error("encoding error: the handle octets are not valid {charset}")]
    Malformed {
        /// The charset as encoding_rs names it, e.g. `ISO-2022-JP`.
        charset: &'static str,
    },
    /// A modifier that ends in `type=<digits>` starts with something that is not a
    /// charset label.
    #[error("unknown character encoding '{label}'")]
    UnknownEncoding {
        /// The label as written.
        label: String,
    },
    /// A modifier names a charset (such as ISO-2022-KR) that is known only to be
    /// undecodable: the WHATWG "replacement" encoding.
    #[error("character encoding '{label}' is not supported")]
    UnsupportedEncoding {
        /// The label as written.
        label: String,
    },
    /// The `type=` modifier's number does not fit a `u32`.
    #[error("bad type modifier 'type={digits}': the type must fit in 32 bits")]
    BadType {
        /// The digits as written.
        digits: String,
    },
    /// Nothing at all was given.
    #[error("empty handle")]
    Empty,
    /// The handle has no `/`, so it has no local name.
    #[error("no '/' between naming authority and local name")]
    NoSlash,
    /// The handle starts with `/`.
    #[error("empty naming authority")]
    EmptyPrefix,
    /// The handle ends at its first `/`.
    #[error("empty local name")]
    EmptyLocalName,
    /// The naming authority has `..`, or starts or ends with `.`.
    #[error("empty segment in naming authority (segment {index}, counted from 0)")]
    EmptySegment {
        /// Which segment is empty, counted from 0.
        index: usize,
    },
    /// The handle is longer than [`MAX_HANDLE_LEN`] octets of UTF-8.
    #[error("handle is {len} bytes; the limit is {MAX_HANDLE_LEN}")]
    TooLong {
        /// Its length in octets of UTF-8.
        len: usize,
    },
    /// The reference (URI, URL or bare) is longer than [`MAX_REFERENCE_LEN`] octets.
    #[error("reference is {len} bytes; the limit is {MAX_REFERENCE_LEN}")]
    ReferenceTooLong {
        /// Its length in octets.
        len: usize,
    },
    /// A `%` in a URI form is not followed by two hex digits.
    #[error("bad percent-escape at byte {offset}")]
    BadEscape {
        /// Offset of the `%`.
        offset: usize,
    },
    /// The server part of `hdl://` or the host of a proxy URL is malformed.
    #[error("bad server address '{text}': {reason}")]
    BadServer {
        /// The authority as written (lossily shown if it was not UTF-8).
        text: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}
