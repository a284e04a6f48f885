//! Signing certified answers with the server key at the responder's exit (digest §2.5,
//! §8.6; J9 `HandleServer.sendResponse`).
//!
//! Owns [`must_sign`] and [`certify`]. An answer is signed when its request asked for
//! certification (CT, echoed in the answer's flags) or when it answers a session setup,
//! and no session MAC signs it already: inside a session the session key signs
//! (`HS_MAC`, [`super::session_requests`]), and J9 falls back to the server key only
//! when there is no session to sign with. Outside a session the session counter is 0.
//! RSA signing costs a millisecond or more, so it runs on the blocking pool and only
//! for these answers; the unsigned path pays one flag test.

use std::sync::Arc;

use crate::auth::{SigningKey, sign_message};
use crate::codec::{ENVELOPE_LEN, Message, OpCode, OpFlags};

/// Whether `answer` must carry the server's `HS_SIGNED` credential.
pub(super) fn must_sign(answer: &Message) -> bool {
    let asked =
        answer.header.flags.contains(OpFlags::CT) || answer.header.opcode == OpCode::SessionSetup;
    asked && answer.credential.is_none()
}

/// `answer` signed with `key` (on the blocking pool). Should signing fail, the
/// answer goes unsigned, as J9's server sends it, and the failure is logged: the
/// client refuses it rather than hearing nothing.
pub(super) async fn certify(key: &Arc<SigningKey>, answer: Message) -> Message {
    let key = Arc::clone(key);
    let unsigned = answer.clone();
    match tokio::task::spawn_blocking(move || sign(&key, answer)).await {
        Ok(signed) => signed,
        Err(error) => {
            tracing::error!(%error, "the signing task ended without signing");
            unsigned
        }
    }
}

/// `answer` with its `HS_SIGNED` credential, signed over its encoded header and body.
pub(super) fn sign(key: &SigningKey, mut answer: Message) -> Message {
    let bytes = answer.encode();
    let header_and_body = bytes
        .get(ENVELOPE_LEN..bytes.len().saturating_sub(4))
        .unwrap_or_default();
    match sign_message(key, &answer.envelope, 0, header_and_body) {
        Ok(credential) => answer.credential = Some(credential),
        Err(error) => tracing::error!(%error, "cannot sign a certified answer"),
    }
    answer
}
