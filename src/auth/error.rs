//! The errors of authentication and authorisation.
//!
//! Owns [`AuthError`] (challenges and answers) and [`AuthzError`] (permissions);
//! [`KeyError`] lives with the keys. Which response code answers
//! each is the service's table (`service::Error::response_code`), not this layer's.

use thiserror::Error;

use crate::values::{AdminPermissions, DecodeError};

use super::challenge::ChallengeId;
use super::keys::KeyError;

/// Why a challenge could not be issued or an answer was not accepted.
#[derive(Debug, Error)]
pub enum AuthError {
    /// No pending challenge has this id: never issued, already answered (a replay),
    /// or dropped after expiring.
    #[error("no pending challenge {id:?}")]
    UnknownChallenge {
        /// The id the answer named.
        id: ChallengeId,
    },
    /// The challenge was answered after its lifetime.
    #[error("challenge {id:?} has expired")]
    ChallengeExpired {
        /// The id of the challenge.
        id: ChallengeId,
    },
    /// The book of pending challenges is full.
    #[error("{capacity} challenges are already pending")]
    TooManyChallenges {
        /// How many the book holds.
        capacity: usize,
    },
    /// The operating system's randomness failed (nonce or salt).
    #[error("no randomness for a nonce or salt: {0}")]
    Random(getrandom::Error),
    /// An answer (the OC 200 body or the answer inside it) did not decode.
    #[error("malformed challenge answer: {0}")]
    Decode(#[from] DecodeError),
    /// The answer's authentication type is neither `HS_PUBKEY` nor `HS_SECKEY`.
    #[error("unknown authentication type {auth_type:?}")]
    UnknownAuthType {
        /// The type as sent.
        auth_type: Vec<u8>,
    },
    /// The answer names a hash or MAC we do not accept (MD5 signatures, unknown codes).
    #[error("unsupported answer algorithm {algorithm:?}")]
    UnsupportedAlgorithm {
        /// The name or code as sent.
        algorithm: Vec<u8>,
    },
    /// A parameter of the answer is out of its bounds (signature length, PBKDF2
    /// iterations, key length, salt length).
    #[error("answer parameter {field} = {value} is out of bounds")]
    AnswerParameter {
        /// Which parameter.
        field: &'static str,
        /// The value sent.
        value: u64,
    },
    /// The key handle holds no usable key of the answer's type at the index named.
    #[error("{handle} has no usable {auth_type} at index {index}")]
    NoKey {
        /// The key handle.
        handle: String,
        /// The index named (0: any).
        index: u32,
        /// `HS_PUBKEY` or `HS_SECKEY`.
        auth_type: &'static str,
    },
    /// The signature or MAC does not match any key (wrong key or wrong secret).
    #[error("the answer does not verify against {handle}")]
    Mismatch {
        /// The key handle.
        handle: String,
    },
    /// A secret-key answer of a form this server does not check (see
    /// [`super::SecretForms`]).
    #[error(
        "secret-key answers in {form} are not accepted here: answer with PBKDF2-HMAC-SHA1 of at least 10000 iterations (protocol 2.7 or later), or the server sets [auth] legacy_secret_answers = true"
    )]
    WeakAnswer {
        /// The form sent.
        form: &'static str,
    },
    /// A key could not be used or made.
    #[error(transparent)]
    Key(#[from] KeyError),
}

/// Why an authenticated identity may not carry out an operation.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AuthzError {
    /// The identity is not named, directly or through groups, by any HS_ADMIN value
    /// that applies (RC_INVALID_ADMIN).
    #[error("{index}:{handle} is not an administrator here")]
    NotAnAdmin {
        /// The identity's handle.
        handle: String,
        /// The identity's index.
        index: u32,
    },
    /// The identity is an administrator, but none of its HS_ADMIN values grants
    /// every required permission (RC_INSUFFICIENT_PERMISSIONS).
    #[error("administrator lacks permissions {required}, holds {held}")]
    InsufficientPermissions {
        /// The permissions the operation needs.
        required: AdminPermissions,
        /// The union of the permissions of the HS_ADMIN values naming the identity.
        held: AdminPermissions,
    },
    /// Group membership could not be decided within the nesting limit.
    #[error("admin groups nest deeper than {limit} at {handle}")]
    GroupTooDeep {
        /// The group handle where the limit was hit.
        handle: String,
        /// The limit.
        limit: usize,
    },
    /// Group membership could not be decided within the number of group lookups.
    #[error("more than {limit} admin group handles to look up")]
    TooManyGroups {
        /// The limit.
        limit: usize,
    },
}
