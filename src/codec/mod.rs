//! The Handle protocol codec (RFC 3652 as deployed by CNRI's Handle.Net 9, see
//! `shared/RFC3652-DIGEST.md`): bytes in, values out.
//!
//! Owns every wire type of a message — [`Envelope`], [`Header`], [`Body`] with its
//! [`Request`] and [`Response`] bodies, [`RequestDigest`], [`Credential`] and
//! [`Message`] and the [`Sealed`] form of a message encrypted in a session — plus TCP framing ([`next_frame`]), UDP packetisation and reassembly
//! ([`split_datagrams`], [`Reassembler`]), the choice of the version to answer in
//! ([`answer_version`]) and the server hash ([`server_index`]).
//!
//! Depends only on [`crate::values`] (and the MD5/SHA crates). Sans-IO: no tokio, no
//! sockets, no clock — timestamps, timeouts and response codes for errors are the
//! callers'. Decoding fails with a small [`CodecError`] that keeps the envelope when it
//! was readable; encoding cannot fail. Every count and length is bounded by the octets
//! present and a message by [`MAX_MESSAGE_LEN`].

mod auth;
mod body;
mod codes;
mod credential;
mod digest;
mod envelope;
mod error;
mod hash;
mod header;
mod message;
mod request;
mod response;
mod sealed;
mod session;
mod tcp;
mod udp;
mod version;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod testing;

pub use auth::{AuthAnswer, VerifyRequest};
pub use body::Body;
pub use codes::{OpCode, ResponseCode};
pub use credential::Credential;
pub use digest::RequestDigest;
pub use envelope::{ENVELOPE_LEN, Envelope, MessageFlags};
pub use error::CodecError;
pub use hash::{handle_hash, server_index};
pub use header::{HEADER_LEN, Header, OpFlags};
pub use message::{MAX_MESSAGE_LEN, MAX_VALUE_LIST_LEN, Message};
pub use request::{HandleValues, Request, ResolutionRequest};
pub use response::{ErrorResponse, Referral, Response};
pub use sealed::{Sealed, unsealed};
pub use session::{KeyExchange, SessionSetup, SessionSetupAnswer};
pub use tcp::{Frame, next_frame};
pub use udp::{DATAGRAM_PAYLOAD_LEN, MAX_DATAGRAM_LEN, Reassembler, split_datagrams};
pub use version::{ProtocolVersion, answer_version};
