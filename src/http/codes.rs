//! The one place where the HTTP edge turns what went wrong into a response code
//! (service errors by the service's own table, [`Error::response_code`]; malformed
//! queries, paths, bodies and names; sessions; credentials) and response codes into
//! HTTP statuses, exactly as the reference server's `statusCodeFromResponse`
//! (`HANDLE-NET-REFERENCE.md` §1.2).

use axum::http::StatusCode;

use super::answer::Refusal;
use super::auth::CredentialRefusal;
use super::query::QueryError;
use super::sessions::SessionRefusal;
use crate::codec::ResponseCode;
use crate::names::NameError;
use crate::restjson::JsonError;
use crate::service::Error;

/// What kind of request a response code answers: the status of some codes depends
/// on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    /// A resolution: "no value matched" (200) is a successful, empty answer.
    Resolve,
    /// A write that made a new handle: success is 201.
    Created,
    /// Any other request.
    Other,
}

/// The HTTP status that carries `code` for a request of `kind`.
pub fn http_status(code: ResponseCode, kind: RequestKind) -> StatusCode {
    use ResponseCode as C;
    match code {
        C::Success if kind == RequestKind::Created => StatusCode::CREATED,
        C::Success => StatusCode::OK,
        C::ValuesNotFound if kind == RequestKind::Resolve => StatusCode::OK,
        C::ServerTooBusy | C::ServerBackup => StatusCode::SERVICE_UNAVAILABLE,
        C::ProtocolError
        | C::InvalidHandle
        | C::InvalidValue
        | C::ValuesNotFound
        | C::ServerNotResponsible => StatusCode::BAD_REQUEST,
        C::OperationNotSupported => StatusCode::NOT_IMPLEMENTED,
        C::HandleNotFound => StatusCode::NOT_FOUND,
        C::HandleAlreadyExists | C::ValueAlreadyExists => StatusCode::CONFLICT,
        C::ServiceReferral | C::PrefixReferral => StatusCode::MULTIPLE_CHOICES,
        C::AuthenticationNeeded => StatusCode::UNAUTHORIZED,
        C::InvalidAdmin
        | C::InsufficientPermissions
        | C::AuthenticationFailed
        | C::InvalidCredential => StatusCode::FORBIDDEN,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl From<Error> for Refusal {
    fn from(error: Error) -> Self {
        Refusal::new(error.response_code(), error.to_string())
    }
}

impl From<QueryError> for Refusal {
    fn from(error: QueryError) -> Self {
        let code = match error {
            QueryError::NotUtf8(_) => ResponseCode::InvalidHandle,
            _ => ResponseCode::ProtocolError,
        };
        Refusal::new(code, error.to_string())
    }
}

impl From<SessionRefusal> for Refusal {
    fn from(error: SessionRefusal) -> Self {
        let code = match error {
            SessionRefusal::Full { .. } => ResponseCode::ServerTooBusy,
            SessionRefusal::Unknown => ResponseCode::AuthenticationNeeded,
            SessionRefusal::Random(_) => ResponseCode::Error,
        };
        Refusal::new(code, error.to_string())
    }
}

impl From<JsonError> for Refusal {
    fn from(error: JsonError) -> Self {
        Refusal::new(ResponseCode::ProtocolError, error.to_string())
    }
}

impl From<NameError> for Refusal {
    fn from(error: NameError) -> Self {
        Refusal::new(ResponseCode::InvalidHandle, error.to_string())
    }
}

/// Credentials not accepted: busy (3, HTTP 503) when the answer could not be checked
/// now, else "authenticate" (402, HTTP 401).
impl From<&CredentialRefusal> for Refusal {
    fn from(refusal: &CredentialRefusal) -> Self {
        let code = match refusal {
            CredentialRefusal::Busy | CredentialRefusal::Guessing(_) => ResponseCode::ServerTooBusy,
            _ => ResponseCode::AuthenticationNeeded,
        };
        Refusal::new(code, refusal.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference table, row by row.
    #[test]
    fn statuses_follow_the_reference_table() {
        use ResponseCode as C;
        let other = |code| http_status(code, RequestKind::Other).as_u16();
        assert_eq!(http_status(C::Success, RequestKind::Created).as_u16(), 201);
        assert_eq!(other(C::Success), 200);
        assert_eq!(other(C::Error), 500);
        assert_eq!(other(C::ServerTooBusy), 503);
        assert_eq!(other(C::ServerBackup), 503);
        for code in [C::ProtocolError, C::InvalidHandle, C::InvalidValue] {
            assert_eq!(other(code), 400);
        }
        assert_eq!(other(C::OperationNotSupported), 501);
        assert_eq!(other(C::HandleNotFound), 404);
        assert_eq!(other(C::HandleAlreadyExists), 409);
        assert_eq!(other(C::ValueAlreadyExists), 409);
        assert_eq!(
            http_status(C::ValuesNotFound, RequestKind::Resolve).as_u16(),
            200
        );
        assert_eq!(other(C::ValuesNotFound), 400);
        assert_eq!(other(C::ServerNotResponsible), 400);
        assert_eq!(other(C::ServiceReferral), 300);
        assert_eq!(other(C::PrefixReferral), 300);
        assert_eq!(other(C::AuthenticationNeeded), 401);
        for code in [
            C::InvalidAdmin,
            C::InsufficientPermissions,
            C::AuthenticationFailed,
            C::InvalidCredential,
        ] {
            assert_eq!(other(code), 403);
        }
    }
}
