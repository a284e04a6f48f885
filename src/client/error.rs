//! Errors of the client layer.
//!
//! Owns [`ClientError`] (what a caller of [`super::Client`] gets), [`AttemptError`] (why
//! one exchange with one server over one transport gave no usable answer, after which
//! the client tries the next) and [`describe`], the short meaning of a response code
//! that the CLI prints after the number.

use std::net::SocketAddr;

use thiserror::Error;

use super::Transport;
use super::credentials::AnswerError;
use crate::auth::CipherError;
use crate::codec::{CodecError, Referral, ResponseCode};
use crate::names::NameError;
use crate::values::DecodeError;

/// Why a client operation failed.
#[derive(Debug, Error)]
pub enum ClientError {
    /// The server answered with an error response code. Displays as
    /// `100 handle not found: <the server's message>`.
    #[error("{} {}{}", code.to_u32(), describe(*code), colon_message(*code, message))]
    Server {
        /// The response code.
        code: ResponseCode,
        /// The server's text, possibly empty.
        message: String,
    },
    /// The server referred the request elsewhere: RC_SERVICE_REFERRAL (302) or
    /// RC_PREFIX_REFERRAL (303), with the body naming where (digest §3.9).
    #[error("{} {} to {:?} ({} values)", code.to_u32(), describe(*code), String::from_utf8_lossy(&referral.handle), referral.values.as_ref().map_or(0, Vec::len))]
    Referred {
        /// The response code.
        code: ResponseCode,
        /// Where to ask instead.
        referral: Referral,
    },
    /// Every server was tried over every allowed transport and none answered usably.
    #[error("no server answered ({attempts} attempts); last: {last}")]
    NoAnswer {
        /// How many exchanges were tried.
        attempts: usize,
        /// Why the last one failed (boxed: codec errors are large).
        last: Box<AttemptError>,
    },
    /// The client was built without a server address.
    #[error("no server address to ask")]
    NoServers,
    /// A successful response whose body is not the one the request calls for.
    #[error("the server answered {found} to a {expected} request")]
    UnexpectedResponse {
        /// The operation asked for.
        expected: &'static str,
        /// The kind of body received.
        found: &'static str,
    },
    /// A handle in a response is not a valid handle.
    #[error("the server returned an invalid handle: {0}")]
    InvalidHandle(#[source] NameError),
    /// The HS_SITE record of a get-site-info answer could not be decoded.
    #[error("the server's site information is malformed: {0}")]
    InvalidSiteInfo(#[source] DecodeError),
    /// A list of handles went past the caller's bound.
    #[error("the server listed more than {limit} handles")]
    TooManyHandles {
        /// The bound.
        limit: usize,
    },
    /// A session needs credentials to authenticate with.
    #[error("a session needs credentials (--auth with --key or --secret-file)")]
    NoCredentials,
    /// A certified answer's signature does not check out: the answer is refused.
    #[error("the answer from {server} is refused: {source}")]
    Signature {
        /// The server that sent it.
        server: SocketAddr,
        /// What is wrong with the signature.
        source: crate::auth::SignatureError,
    },
    /// No key to check a server's signed answers with.
    #[error("no key to verify the answers of {server} with: {reason}")]
    NoServerKey {
        /// The server.
        server: SocketAddr,
        /// Why not.
        reason: String,
    },
    /// The session key could not be agreed or a session message not signed.
    #[error("session: {0}")]
    Session(#[from] crate::auth::SessionError),
}

impl ClientError {
    /// The server's response code, when the server answered with an error.
    pub fn response_code(&self) -> Option<ResponseCode> {
        match self {
            ClientError::Server { code, .. } | ClientError::Referred { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// Why one exchange with one server gave no usable answer.
#[derive(Debug, Error)]
pub enum AttemptError {
    /// Nothing (complete) came back in time.
    #[error("{server} ({transport}): no answer in time")]
    Timeout {
        /// The server asked.
        server: SocketAddr,
        /// The transport used.
        transport: Transport,
    },
    /// A socket operation failed.
    #[error("{server} ({transport}): {source}")]
    Io {
        /// The server asked.
        server: SocketAddr,
        /// The transport used.
        transport: Transport,
        /// The failure.
        source: std::io::Error,
    },
    /// The server answered RC_ERROR (2) over UDP, which J9 and hdl clients take as
    /// "try the next transport" (an hdl server answers so when the answer is larger
    /// than it sends over UDP).
    #[error("{server} ({transport}): server error: {message}")]
    ServerError {
        /// The server asked.
        server: SocketAddr,
        /// The transport used.
        transport: Transport,
        /// The server's text.
        message: String,
    },
    /// The server closed the TCP connection before the whole answer arrived.
    #[error("{server}: connection closed before the answer was complete")]
    Closed {
        /// The server asked.
        server: SocketAddr,
    },
    /// The answer could not be decoded (or is over the size limit).
    #[error("{server}: undecodable answer: {source}")]
    Codec {
        /// The server asked.
        server: SocketAddr,
        /// Why.
        source: CodecError,
    },
    /// An encrypted answer did not open with the session key.
    #[error("{server}: encrypted answer: {source}")]
    Sealed {
        /// The server asked.
        server: SocketAddr,
        /// Why.
        source: CipherError,
    },
    /// The server's challenge could not be answered with our credentials.
    #[error("{server}: {source}")]
    Answer {
        /// The server asked.
        server: SocketAddr,
        /// Why.
        source: AnswerError,
    },
    /// The answer is not a response to our request.
    #[error("{server}: {problem}")]
    NotOurs {
        /// The server asked.
        server: SocketAddr,
        /// What does not match.
        problem: Mismatch,
    },
}

/// How an answer fails to match the request it should answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum Mismatch {
    /// The RequestId differs from ours.
    #[error("answer carries request id {found}, not {expected}")]
    RequestId {
        /// Ours.
        expected: u32,
        /// The answer's.
        found: u32,
    },
    /// The message is a request (response code 0), not a response.
    #[error("answer is a request, not a response")]
    NotAResponse,
    /// The request digest in the response is not the digest of what we sent.
    #[error("request digest in the answer does not match the request")]
    Digest,
}

/// The meaning of a response code, in a few words (digest §4).
pub fn describe(code: ResponseCode) -> &'static str {
    use ResponseCode as C;
    match code {
        C::Reserved => "reserved",
        C::Success => "success",
        C::Error => "server error",
        C::ServerTooBusy => "server too busy",
        C::ProtocolError => "protocol error",
        C::OperationNotSupported => "operation not supported",
        C::RecursionCountTooHigh => "recursion count too high",
        C::ServerBackup => "server in backup",
        C::HandleNotFound => "handle not found",
        C::HandleAlreadyExists => "handle already exists",
        C::InvalidHandle => "invalid handle",
        C::ValuesNotFound => "values not found",
        C::ValueAlreadyExists => "value already exists",
        C::InvalidValue => "invalid value",
        C::OutOfDateSiteInfo => "out-of-date site information",
        C::ServerNotResponsible => "server not responsible",
        C::ServiceReferral => "service referral",
        C::PrefixReferral => "prefix referral",
        C::InvalidAdmin => "not authorised",
        C::InsufficientPermissions => "insufficient permissions",
        C::AuthenticationNeeded => "authentication needed",
        C::AuthenticationFailed => "authentication failed",
        C::InvalidCredential => "invalid credential",
        C::AuthenticationTimeout => "authentication timed out",
        C::AuthenticationError => "authentication error",
        C::SessionTimeout => "session timed out",
        C::SessionFailed => "session failed",
        C::InvalidSessionKey => "invalid session key",
        C::NeedRsaKeyForSessionExchange => "RSA key needed for session exchange",
        C::InvalidSessionSetupRequest => "invalid session setup request",
        C::SessionMessageRejected => "session message rejected",
    }
}

/// `": message"`, or nothing when the message is empty or only repeats the code's
/// meaning.
fn colon_message(code: ResponseCode, message: &str) -> String {
    if message.is_empty() || message.eq_ignore_ascii_case(describe(code)) {
        String::new()
    } else {
        format!(": {message}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_errors_show_code_meaning_and_message() {
        let error = ClientError::Server {
            code: ResponseCode::HandleNotFound,
            message: "TEST/x".into(),
        };
        assert_eq!(error.to_string(), "100 handle not found: TEST/x");
        assert_eq!(error.response_code(), Some(ResponseCode::HandleNotFound));
        let bare = ClientError::Server {
            code: ResponseCode::InvalidValue,
            message: String::new(),
        };
        assert_eq!(bare.to_string(), "202 invalid value");
        let repeated = ClientError::Server {
            code: ResponseCode::HandleNotFound,
            message: "Handle not found".into(),
        };
        assert_eq!(repeated.to_string(), "100 handle not found");
        assert_eq!(ClientError::NoServers.response_code(), None);
    }
}
