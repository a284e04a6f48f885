//! Encrypted session messages on the server edge (envelope flag EC, digest §3.8;
//! J9 `HdlTcpRequestHandler`, `HdlUdpRequestHandler`, `shouldEncrypt`).
//!
//! Owns when a message is opened on the way in and sealed on the way out; the
//! cipher is [`crate::auth::session_cipher`], where the octets sit is
//! [`crate::codec::Sealed`]. As the reference server does:
//! - a request with EC is opened with the key of the session its envelope names
//!   before anything else reads it; no such session answers RC_SESSION_TIMEOUT, a
//!   payload that does not open RC_SESSION_FAILED, and nothing is carried out;
//! - an answer in a session is sealed, after its credential was made, when the
//!   request asked for it (OpFlag ENC, echoed in the answer) or when it carries
//!   values without public read (a resolution from 2.8 on: what J9 clients encrypt
//!   their own modify requests for). A session setup's answer is never sealed: it
//!   agrees the key. Pages of a list answer go unsealed (they hold handle names).

use std::borrow::Cow;
use std::time::Instant;

use crate::auth::SessionKey;
use crate::auth::session_cipher::{open, seal};
use crate::codec::{
    Body, CodecError, Envelope, ErrorResponse, Header, Message, MessageFlags, OpCode, OpFlags,
    ProtocolVersion, Response, ResponseCode, unsealed,
};
use crate::values::Permissions;

use super::codes::Refusal;
use super::exchange::Exchange;
use super::responder::{Reply, Responder};
use super::sessions::SessionRefusal;

/// The first version whose resolution answers are sealed for their non-public values
/// (J9 `ResolutionResponse.shouldEncrypt`).
const SEALED_VALUES_FROM: ProtocolVersion = ProtocolVersion::new(2, 8);

impl Responder {
    /// `bytes` as the responder reads them: opened with the session key when the
    /// envelope says EC, or the reply refusing them when they cannot be opened (boxed:
    /// the rare case should not make the common one large).
    pub(super) fn opened<'a>(&self, bytes: &'a [u8]) -> Result<Cow<'a, [u8]>, Box<Reply>> {
        let Ok(envelope) = Envelope::peek(bytes) else {
            return Ok(Cow::Borrowed(bytes));
        };
        if !envelope.flags.contains(MessageFlags::EC) {
            return Ok(Cow::Borrowed(bytes));
        }
        let refuse = |code: ResponseCode, text: String| {
            let exchange =
                Exchange::of_undecodable(&CodecError::Encrypted { envelope }, self.settings);
            Box::new(exchange.map_or(Reply::Nothing, |exchange| {
                Reply::One(exchange.error(code, text))
            }))
        };
        let key = self
            .session_key(envelope.session_id)
            .map_err(|refusal| refuse(ResponseCode::SessionTimeout, refusal.to_string()))?;
        unsealed(&envelope, bytes, |sealed| open(&key, sealed))
            .map(Cow::Owned)
            .map_err(|error| refuse(ResponseCode::SessionFailed, error.to_string()))
    }

    /// `reply` sealed with its session's key when it must be (module doc). The
    /// SessionId of an answer may name no session but a challenge (the answer to a
    /// challenged request outside a session): such an answer goes as outside a
    /// session, in the clear, as the reference server sends it. An answer that cannot
    /// be sealed for want of randomness is not sent in the clear: it becomes the error
    /// saying why.
    pub(super) fn sealed(&self, reply: Reply) -> Reply {
        let Reply::One(answer) = reply else {
            return reply;
        };
        if !must_seal(&answer) {
            return Reply::One(answer);
        }
        let Ok(key) = self.session_key(answer.envelope.session_id) else {
            return Reply::One(answer);
        };
        let sealing = answer
            .seal(|payload| seal(&key, payload))
            .map_err(|error| Refusal::new(ResponseCode::SessionFailed, error.to_string()));
        match sealing {
            Ok(sealed) => Reply::Sealed(sealed),
            Err(refusal) => {
                tracing::warn!(message = %refusal.message, "cannot encrypt a session answer");
                Reply::One(refused(answer, refusal))
            }
        }
    }

    fn session_key(&self, id: u32) -> Result<SessionKey, SessionRefusal> {
        self.sessions().key(id, Instant::now())
    }
}

/// `answer` turned into the error response of `refusal`, with the same envelope and
/// header but for the code.
fn refused(answer: Message, refusal: Refusal) -> Message {
    let Body::Response { digest, .. } = answer.body else {
        return answer;
    };
    let header = Header {
        response_code: refusal.code,
        ..answer.header
    };
    let response = Response::Error(ErrorResponse {
        message: refusal.message,
        indexes: None,
    });
    Message::new(answer.envelope, header, Body::Response { digest, response })
}

/// Whether `answer` must go sealed (module doc).
fn must_seal(answer: &Message) -> bool {
    if answer.envelope.session_id == 0 || answer.header.opcode == OpCode::SessionSetup {
        return false;
    }
    answer.header.flags.contains(OpFlags::ENC) || holds_private_values(answer)
}

fn holds_private_values(answer: &Message) -> bool {
    let Body::Response {
        response: Response::Resolution(found),
        ..
    } = &answer.body
    else {
        return false;
    };
    answer.envelope.version >= SEALED_VALUES_FROM
        && found
            .values
            .iter()
            .any(|value| !value.permissions.contains(Permissions::PUBLIC_READ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{HandleValues, Header};
    use crate::values::HandleValue;

    fn answer(
        version: ProtocolVersion,
        session_id: u32,
        flags: OpFlags,
        perms: Permissions,
    ) -> Message {
        let envelope = Envelope {
            session_id,
            ..Envelope::new(version, 9)
        };
        let header = Header {
            response_code: ResponseCode::Success,
            flags,
            ..Header::request(OpCode::Resolution, 0)
        };
        let mut value = HandleValue::new(1, "URL", "https://example.org/");
        value.permissions = perms;
        let response = Response::Resolution(HandleValues {
            handle: b"T/1".to_vec(),
            values: vec![value],
        });
        Message::new(
            envelope,
            header,
            Body::Response {
                digest: None,
                response,
            },
        )
    }

    const V2_8: ProtocolVersion = ProtocolVersion::new(2, 8);
    const V2_7: ProtocolVersion = ProtocolVersion::new(2, 7);

    #[test]
    fn asked_or_private_answers_in_a_session_are_sealed() {
        let public = Permissions::DEFAULT;
        let private = Permissions::ADMIN_ONLY;
        assert!(must_seal(&answer(V2_7, 5, OpFlags::ENC, public)));
        assert!(must_seal(&answer(V2_8, 5, OpFlags::NONE, private)));
        assert!(!must_seal(&answer(V2_8, 5, OpFlags::NONE, public)));
        // Before 2.8 J9 does not seal for private values.
        assert!(!must_seal(&answer(V2_7, 5, OpFlags::NONE, private)));
        // Outside a session there is no key.
        assert!(!must_seal(&answer(V2_8, 0, OpFlags::ENC, private)));
    }

    #[test]
    fn a_session_setup_answer_is_never_sealed() {
        let mut setup = answer(V2_8, 5, OpFlags::ENC, Permissions::ADMIN_ONLY);
        setup.header.opcode = OpCode::SessionSetup;
        assert!(!must_seal(&setup));
    }

    #[test]
    fn a_refused_answer_keeps_its_envelope_and_says_why() {
        let original = answer(V2_8, 5, OpFlags::ENC, Permissions::ADMIN_ONLY);
        let refusal = Refusal::new(ResponseCode::SessionTimeout, "gone");
        let refused = refused(original.clone(), refusal);
        assert_eq!(refused.envelope, original.envelope);
        assert_eq!(refused.header.response_code, ResponseCode::SessionTimeout);
        assert!(matches!(
            refused.body,
            Body::Response { response: Response::Error(ErrorResponse { ref message, .. }), .. } if message == "gone"
        ));
    }
}
