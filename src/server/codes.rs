//! The one place where service errors become RFC 3652 response codes.

use crate::auth;
use crate::codec::ResponseCode;
use crate::replication::ReplicaError;
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
        Error::Storage(_) => ResponseCode::Error,
        // The set is electing a primary or this member is behind: try again shortly.
        Error::Replication(error) => match **error {
            ReplicaError::NoLeader { .. } | ReplicaError::Behind { .. } => {
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
