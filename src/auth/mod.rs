//! Authentication and authorisation of administrators (digest §8, §6.1, §6.4–6.6;
//! issue 6), as a pure core for the servers to call.
//!
//! Owns keys ([`keys`]), challenges and the book of pending ones ([`challenge`]),
//! answers to challenges ([`answer`], [`public`], [`secret`], and the REST API's
//! [`rest`]), session keys and MACs ([`session`]), the encryption of session
//! messages ([`session_cipher`]), server signatures of certified answers ([`signed`]),
//! the one bounded, expiring table both edges keep their sessions in
//! ([`session_table`]), the budgets both edges keep of failed secret checks
//! ([`guesses`]) and of key-check time per source ([`work_budget`]), the permission
//! rules ([`permissions`]) and the errors ([`error`]); which response code answers each is
//! decided above, by the service.
//!
//! May depend on [`crate::names`], [`crate::values`] and [`crate::codec`] (for
//! [`crate::codec::RequestDigest`] and versions) and on the RustCrypto
//! crates. No sockets, no tokio, no storage and no clock: time is passed in, handle
//! values come from the caller or a lookup closure.
//!
//! Invariants: every size read from the network (nonces, signatures, PBKDF2
//! parameters, keys, group nesting) is bounded before work is done on it; no input
//! panics a decoder; a challenge is answered at most once.

pub mod answer;
pub mod challenge;
pub mod error;
pub mod guesses;
pub mod keys;
pub mod permissions;
pub mod public;
pub mod rest;
pub mod secret;
pub mod session;
pub mod session_cipher;
pub mod session_table;
pub mod signed;
pub mod work_budget;

#[cfg(test)]
mod proptests;

pub use answer::{AuthType, ChallengeAnswer, verify_answer};
pub use challenge::{Challenge, ChallengeBody, ChallengeBook, ChallengeId, answer_formats_version};
pub use error::{AuthError, AuthzError};
pub use keys::{KeyError, SignatureHash, SigningKey, VerifyingKey};
pub use permissions::{Identity, Operation, authorise};
pub use public::{PublicKeyAnswer, sign_public, verify_public};
pub use rest::{Pbkdf2Params, RestAlgorithm, RestAnswer, RestProof, mac_rest, sign_rest};
pub use secret::{SecretAnswer, SecretForms, SecretKey, answer_secret, verify_secret};
pub use session::{
    ClientKeyExchange, SessionError, SessionKey, server_key_exchange, session_credential,
    verify_session_mac,
};
pub use session_cipher::CipherError;
pub use signed::{SignatureError, sign_message, verify_signed};
