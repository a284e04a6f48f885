//! The client side of the REST API's `Authorization: Handle …` header
//! (`HANDLE-NET-REFERENCE.md` §1.2): what an HTTP client sends to name its session and
//! to answer the session's nonce. The server side reads it in the HTTP edge.
//!
//! Pure: strings in, strings out. Depends on [`crate::auth::rest`] for the answer.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::auth::RestAnswer;

/// `Handle sessionId="…"`, for requests in an authenticated session.
pub fn session_header(session: &str) -> String {
    format!("Handle version=\"0\", sessionId=\"{session}\"")
}

/// The header answering `session`'s nonce with `answer`; `None` for
/// a proof REST cannot carry (the pre-2.1 MD5).
pub fn answer_header(session: &str, answer: &RestAnswer) -> Option<String> {
    let (alg, signature, pbkdf2) = answer.proof.parts()?;
    let auth_type = answer.challenge_answer().auth_type.name();
    let mut header = format!(
        "{}, id=\"{}:{}\", type=\"{auth_type}\", cnonce=\"{}\", alg=\"{}\", signature=\"{}\"",
        session_header(session),
        answer.identity.index,
        answer.identity.handle,
        STANDARD.encode(&answer.cnonce),
        alg.name(),
        STANDARD.encode(signature),
    );
    if let Some(params) = pbkdf2 {
        header.push_str(&format!(
            ", salt=\"{}\", iterations=\"{}\", length=\"{}\"",
            STANDARD.encode(&params.salt),
            params.iterations,
            params.key_bits
        ));
    }
    Some(header)
}
