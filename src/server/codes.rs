//! The one place where service and session errors become RFC 3652 response codes.

use super::sessions::SessionRefusal;
use crate::auth::{self, SessionError};
use crate::codec::ResponseCode;
use crate::replication::GroupError;
use crate::service::Error;
use crate::storage::Refusal;

/// The response code that answers `error` (digest §4).
pub fn response_code(error: &Error) -> ResponseCode {
    match error {
        Error::HandleNotFound => ResponseCode::HandleNotFound,
        Error::ValuesNotFound => ResponseCode::ValuesNotFound,
        Error::InvalidValue { .. } => ResponseCode::InvalidValue,
        Error::AuthenticationNeeded => ResponseCode::AuthenticationNeeded,
        Error::NotPermitted(error) => auth::authorisation_code(error),
        Error::Authentication(error) => auth::authentication_code(error),
        Error::KeyNotHeld { .. } | Error::KeyService { .. } => ResponseCode::AuthenticationError,
        Error::Busy => ResponseCode::ServerTooBusy,
        Error::Unreadable => ResponseCode::InsufficientPermissions,
        Error::InvalidHandle(_) => ResponseCode::InvalidHandle,
        Error::Storage(_) => ResponseCode::Error,
        // The set is electing a primary or this member is behind: try again shortly.
        Error::Replication(error) => match **error {
            GroupError::NoLeader { .. } | GroupError::Behind { .. } => {
                ResponseCode::ServerTooBusy
            }
            _ => ResponseCode::Error,
        },
        Error::Refused(refusal) => match refusal {
            Refusal::HandleExists => ResponseCode::HandleAlreadyExists,
            Refusal::HandleNotFound => ResponseCode::HandleNotFound,
            Refusal::ValueExists(_) => ResponseCode::ValueAlreadyExists,
            Refusal::ValueNotFound(_) => ResponseCode::ValuesNotFound,
            Refusal::DuplicateIndex(_) | Refusal::ZeroIndex | Refusal::NoValues => {
                ResponseCode::InvalidValue
            }
        },
    }
}

/// The response code that refuses a session message or setup (digest §4, J9 column):
/// an unknown or expired session is RC_SESSION_TIMEOUT (500), on which J9 clients
/// open a new session; a bad or replayed MAC is RC_SESSION_MESSAGE_REJECTED (505).
pub fn session_code(refusal: &SessionRefusal) -> ResponseCode {
    match refusal {
        SessionRefusal::Unknown { .. } | SessionRefusal::Expired { .. } => {
            ResponseCode::SessionTimeout
        }
        SessionRefusal::Full { .. } => ResponseCode::ServerTooBusy,
        SessionRefusal::Mac(_) | SessionRefusal::Replay { .. } => {
            ResponseCode::SessionMessageRejected
        }
    }
}

/// The response code that refuses a session setup's key exchange.
pub fn key_exchange_code(error: &SessionError) -> ResponseCode {
    match error {
        SessionError::Random(_) | SessionError::Encrypt => ResponseCode::Error,
        _ => ResponseCode::InvalidSessionSetupRequest,
    }
}
