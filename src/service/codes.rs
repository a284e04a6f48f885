//! The one table from service errors to RFC 3652 response codes (digest §4, J9
//! meanings), shared by both edges: the Handle protocol sends the code, the HTTP API
//! writes it as `responseCode` and derives its status from it.
//!
//! Authentication failures: unknown, replayed or expired challenges 405; a wrong key
//! or secret 403; a malformed answer 404; an answer that cannot be checked (algorithm,
//! stored key, randomness, group depth) 406; not an administrator 400; missing
//! permissions 401; a full challenge book 3 (busy). RC_AUTHEN_NEEDED (402) is not an
//! error: it is the challenge itself. A replica set electing its primary, or a member
//! too far behind for a fresh read, is busy (3): the client tries again shortly. A
//! handle under a prefix this service does not serve is 301, as J9 answers ("That
//! prefix doesn't live here"). A
//! handle whose slot this replica set does not answer for now is 301 (not responsible),
//! should no router have taken the request to the slot's owner; a slot whose owner
//! cannot be reached, or a node in no replica set yet, is busy (3), never "not found";
//! a refusal forwarded from another node keeps the code that node answered. A write
//! that would make a handle larger than allowed is an invalid value (202): the
//! values are what the client must change, and J9 clients show the message. A search
//! of types the store does not index is a protocol error (4): the request cannot be
//! answered as asked. A template that cannot derive a missing handle (malformed
//! HS_NAMESPACE, bounds passed) is an error (2): the server's data is at fault.
//! A caching resolver refuses what is not a resolution with 5
//! (operation not supported), answers a failed global resolution with the code
//! [`ResolveError::response_code`](crate::resolver::ResolveError::response_code)
//! gives, and too many resolutions waiting upstream with busy (3).

use crate::auth::{AuthError, AuthzError};
use crate::codec::ResponseCode;
use crate::replication::GroupError;
use crate::storage::Refusal;

use super::Error;

impl Error {
    /// The response code that answers this error.
    pub fn response_code(&self) -> ResponseCode {
        match self {
            Error::HandleNotFound => ResponseCode::HandleNotFound,
            Error::ValuesNotFound => ResponseCode::ValuesNotFound,
            Error::InvalidValue { .. } => ResponseCode::InvalidValue,
            Error::AuthenticationNeeded => ResponseCode::AuthenticationNeeded,
            Error::NotPermitted(error) => authorisation_code(error),
            Error::Authentication(error) => authentication_code(error),
            Error::KeyNotHeld { .. } | Error::KeyService { .. } => {
                ResponseCode::AuthenticationError
            }
            Error::Busy | Error::Unavailable(_) | Error::NoSet => ResponseCode::ServerTooBusy,
            Error::Remote { code, .. } => *code,
            Error::Unreadable => ResponseCode::InsufficientPermissions,
            Error::InvalidHandle(_) => ResponseCode::InvalidHandle,
            Error::NotIndexed { .. } => ResponseCode::ProtocolError,
            Error::Storage(_) | Error::Template { .. } => ResponseCode::Error,
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
                Refusal::DuplicateIndex(_)
                | Refusal::ZeroIndex
                | Refusal::NoValues
                | Refusal::TooLarge { .. } => ResponseCode::InvalidValue,
                Refusal::NotHere(_) => ResponseCode::ServerNotResponsible,
                Refusal::AuthorityChanged => ResponseCode::ServerTooBusy,
            },
            Error::NotHere(_) | Error::NotHomed { .. } => ResponseCode::ServerNotResponsible,
            Error::ResolutionOnly { .. } => ResponseCode::OperationNotSupported,
            Error::Upstream(error) => error.response_code(),
            Error::TooManyPending { .. } => ResponseCode::ServerTooBusy,
        }
    }
}

/// The response code of an authentication failure, also when an edge meets one
/// itself (a challenge unknown, expired or the book full).
pub fn authentication_code(error: &AuthError) -> ResponseCode {
    match error {
        AuthError::UnknownChallenge { .. } | AuthError::ChallengeExpired { .. } => {
            ResponseCode::AuthenticationTimeout
        }
        AuthError::TooManyChallenges { .. } => ResponseCode::ServerTooBusy,
        AuthError::Decode(_)
        | AuthError::UnknownAuthType { .. }
        | AuthError::AnswerParameter { .. } => ResponseCode::InvalidCredential,
        AuthError::NoKey { .. } | AuthError::Mismatch { .. } | AuthError::WeakAnswer { .. } => {
            ResponseCode::AuthenticationFailed
        }
        AuthError::UnsupportedAlgorithm { .. } | AuthError::Random(_) | AuthError::Key(_) => {
            ResponseCode::AuthenticationError
        }
    }
}

/// The response code of an authorisation failure.
fn authorisation_code(error: &AuthzError) -> ResponseCode {
    match error {
        AuthzError::NotAnAdmin { .. } => ResponseCode::InvalidAdmin,
        AuthzError::InsufficientPermissions { .. } => ResponseCode::InsufficientPermissions,
        AuthzError::GroupTooDeep { .. } | AuthzError::TooManyGroups { .. } => {
            ResponseCode::AuthenticationError
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{ChallengeId, KeyError};
    use crate::values::{AdminPermissions, DecodeError};

    fn code(error: Error) -> u32 {
        error.response_code().to_u32()
    }

    fn authentication(error: AuthError) -> u32 {
        code(Error::Authentication(error))
    }

    fn authorisation(error: AuthzError) -> u32 {
        code(Error::NotPermitted(error))
    }

    #[test]
    fn errors_map_to_the_j9_codes() {
        let id = ChallengeId(7);
        assert_eq!(authentication(AuthError::UnknownChallenge { id }), 405);
        assert_eq!(authentication(AuthError::ChallengeExpired { id }), 405);
        assert_eq!(
            authentication(AuthError::TooManyChallenges { capacity: 1 }),
            3
        );
        let mismatch = AuthError::Mismatch {
            handle: "0.NA/10.1000".into(),
        };
        assert_eq!(authentication(mismatch), 403);
        let decode = DecodeError::Malformed {
            field: "answer",
            reason: "test",
        };
        assert_eq!(authentication(AuthError::Decode(decode)), 404);
        let md5 = AuthError::UnsupportedAlgorithm {
            algorithm: b"MD5".to_vec(),
        };
        assert_eq!(authentication(md5), 406);
        let weak = AuthError::Key(KeyError::KeySize { bits: 512 });
        assert_eq!(authentication(weak), 406);
        let not_admin = AuthzError::NotAnAdmin {
            handle: "x/y".into(),
            index: 300,
        };
        assert_eq!(authorisation(not_admin), 400);
        let lacking = AuthzError::InsufficientPermissions {
            required: AdminPermissions::ADD_HANDLE,
            held: AdminPermissions(0),
        };
        assert_eq!(authorisation(lacking), 401);
        assert_eq!(code(Error::Refused(Refusal::HandleExists)), 101);
        let too_large = Refusal::TooLarge {
            octets: 70_000,
            limit: 65_536,
        };
        assert_eq!(code(Error::Refused(too_large)), 202);
        assert_eq!(code(Error::Busy), 3);
        assert_eq!(code(Error::Unavailable(crate::storage::Slot(7))), 3);
        assert_eq!(code(Error::NotHere(crate::storage::Slot(7))), 301);
    }
}
