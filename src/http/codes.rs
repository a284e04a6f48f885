//! The one place where response codes become HTTP statuses, exactly as the reference
//! server's `statusCodeFromResponse` (`HANDLE-NET-REFERENCE.md` §1.2).

use axum::http::StatusCode;

use crate::codec::ResponseCode;

/// What kind of request a response code answers: the status of some codes depends
/// on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// A resolution: "no value matched" (200) is a successful, empty answer.
    Resolve,
    /// A write that made a new handle: success is 201.
    Created,
    /// Any other request.
    Other,
}

/// The HTTP status that carries `code` for `operation`.
pub fn http_status(code: ResponseCode, operation: Operation) -> StatusCode {
    use ResponseCode as C;
    match code {
        C::Success if operation == Operation::Created => StatusCode::CREATED,
        C::Success => StatusCode::OK,
        C::ValuesNotFound if operation == Operation::Resolve => StatusCode::OK,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference table, row by row.
    #[test]
    fn statuses_follow_the_reference_table() {
        use ResponseCode as C;
        let other = |code| http_status(code, Operation::Other).as_u16();
        assert_eq!(http_status(C::Success, Operation::Created).as_u16(), 201);
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
            http_status(C::ValuesNotFound, Operation::Resolve).as_u16(),
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
