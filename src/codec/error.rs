//! The codec layer's one error type (STYLE: one `thiserror` enum per layer).
//!
//! Owns [`CodecError`]. Every variant raised after the 20-octet envelope was read
//! carries that [`Envelope`], so the server can answer with the request's RequestId and
//! version; the mapping to response codes is the server edge's, and each variant's
//! doc says which code J9 answers with.

use super::envelope::Envelope;
use super::header::Header;
use crate::values::wire::DecodeError;
use thiserror::Error;

/// Why bytes could not be turned into a message, a frame or a reassembled datagram.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CodecError {
    /// Fewer than 20 octets: no envelope, nothing to echo. J9 answers such garbage (if
    /// at all) with OpCode 0 and RC_PROTOCOL_ERROR.
    #[error("no complete envelope: {0}")]
    Envelope(#[source] DecodeError),
    /// MessageLength over [`super::MAX_MESSAGE_LEN`]: RC_PROTOCOL_ERROR.
    #[error("message length {length} exceeds the limit of {limit} octets")]
    TooLong {
        /// The envelope read.
        envelope: Envelope,
        /// The MessageLength it declares.
        length: u32,
        /// The limit.
        limit: usize,
    },
    /// The octets after the envelope are not MessageLength long: RC_PROTOCOL_ERROR.
    #[error("envelope declares {declared} octets but {present} follow it")]
    LengthMismatch {
        /// The envelope read.
        envelope: Envelope,
        /// Its MessageLength.
        declared: u32,
        /// The octets present after it.
        present: usize,
    },
    /// CP is set; J9 never implemented compression: RC_PROTOCOL_ERROR.
    #[error("compressed messages are not supported")]
    Compressed {
        /// The envelope read.
        envelope: Envelope,
    },
    /// EC is set; decrypting needs a session, which the codec does not hold.
    #[error("encrypted message for session {}", envelope.session_id)]
    Encrypted {
        /// The envelope read.
        envelope: Envelope,
    },
    /// The header, body or credential is malformed: RC_PROTOCOL_ERROR.
    #[error("malformed message: {source}")]
    Malformed {
        /// The envelope read.
        envelope: Envelope,
        /// The header, when it could be read.
        header: Option<Header>,
        /// What went wrong, and where.
        source: DecodeError,
    },
    /// The operation (or response) has no typed body here:
    /// RC_OPERATION_NOT_SUPPORTED.
    #[error(
        "operation {:?} with response code {:?} is not supported",
        header.opcode,
        header.response_code
    )]
    UnsupportedOperation {
        /// The envelope read.
        envelope: Envelope,
        /// The header read.
        header: Header,
    },
    /// A datagram does not belong to the message being reassembled (another request,
    /// version, session or length); J9 drops such datagrams.
    #[error("datagram of request {} does not belong to request {}", found.request_id, expected.request_id)]
    ForeignDatagram {
        /// The envelope of the first datagram.
        expected: Envelope,
        /// The envelope of this one.
        found: Envelope,
    },
    /// A datagram's sequence number or size does not fit its message's 492-octet
    /// pieces.
    #[error(
        "datagram {} carries {found} octets where {expected} were expected",
        envelope.sequence_number
    )]
    BadDatagram {
        /// The datagram's envelope.
        envelope: Envelope,
        /// Octets of payload expected (0 for a sequence number past the last piece).
        expected: usize,
        /// Octets of payload carried.
        found: usize,
    },
}

impl CodecError {
    /// The envelope of the offending message, when it could be read (for the
    /// RequestId, SessionId and version of an error reply).
    pub fn envelope(&self) -> Option<&Envelope> {
        match self {
            CodecError::Envelope(_) => None,
            CodecError::TooLong { envelope, .. }
            | CodecError::LengthMismatch { envelope, .. }
            | CodecError::Compressed { envelope }
            | CodecError::Encrypted { envelope }
            | CodecError::Malformed { envelope, .. }
            | CodecError::UnsupportedOperation { envelope, .. }
            | CodecError::BadDatagram { envelope, .. } => Some(envelope),
            CodecError::ForeignDatagram { found, .. } => Some(found),
        }
    }

    /// The header of the offending message, when it could be read (for its OpCode).
    pub fn header(&self) -> Option<&Header> {
        match self {
            CodecError::Malformed { header, .. } => header.as_ref(),
            CodecError::UnsupportedOperation { header, .. } => Some(header),
            _ => None,
        }
    }
}
