//! The one place where the Handle protocol edge turns what went wrong into a response
//! code (digest §4): service errors (by the service's own table,
//! [`Error::response_code`]), challenges unknown, expired or too many, session
//! refusals and key exchanges refused.
//!
//! Owns [`Refusal`], this edge's refused outcome: a response code and a message for
//! people, answered as an error response.

use super::exchange::Exchange;
use super::sessions::SessionRefusal;
use crate::auth::{AuthError, SessionError};
use crate::codec::{Message, ResponseCode};
use crate::names::NameError;
use crate::service::{Error, authentication_code};

/// A request answered with an error code and a message.
#[derive(Debug)]
pub(super) struct Refusal {
    pub(super) code: ResponseCode,
    pub(super) message: String,
}

impl Refusal {
    pub(super) fn new(code: ResponseCode, message: impl Into<String>) -> Self {
        Refusal {
            code,
            message: message.into(),
        }
    }

    /// The error response answering the request of `exchange`.
    pub(super) fn into_message(self, exchange: &Exchange) -> Message {
        exchange.error(self.code, self.message)
    }
}

impl From<Error> for Refusal {
    fn from(error: Error) -> Self {
        Refusal::new(error.response_code(), error.to_string())
    }
}

impl From<NameError> for Refusal {
    fn from(error: NameError) -> Self {
        Refusal::new(ResponseCode::InvalidHandle, error.to_string())
    }
}

/// A challenge that could not be issued (a full book: busy) or an answer naming
/// one that is unknown, expired or from elsewhere (405).
impl From<AuthError> for Refusal {
    fn from(error: AuthError) -> Self {
        Refusal::new(authentication_code(&error), error.to_string())
    }
}

/// A session message or setup refused (digest §4, J9 column): an unknown or expired
/// session is RC_SESSION_TIMEOUT (500), on which J9 clients open a new session; a
/// bad or replayed MAC is RC_SESSION_MESSAGE_REJECTED (505); a table full of
/// authenticated sessions is busy (3).
impl From<SessionRefusal> for Refusal {
    fn from(refusal: SessionRefusal) -> Self {
        let code = match &refusal {
            SessionRefusal::Unknown { .. } | SessionRefusal::Expired { .. } => {
                ResponseCode::SessionTimeout
            }
            SessionRefusal::Full { .. } => ResponseCode::ServerTooBusy,
            SessionRefusal::Mac(_) | SessionRefusal::Replay { .. } => {
                ResponseCode::SessionMessageRejected
            }
        };
        Refusal::new(code, refusal.to_string())
    }
}

/// A session setup whose key exchange was refused: the client's part is unusable
/// (RC_INVALID_SESSION_SETUP_REQUEST, 504) or this server failed (2).
impl From<SessionError> for Refusal {
    fn from(error: SessionError) -> Self {
        let code = match error {
            SessionError::Random(_) | SessionError::Encrypt => ResponseCode::Error,
            _ => ResponseCode::InvalidSessionSetupRequest,
        };
        Refusal::new(code, error.to_string())
    }
}
