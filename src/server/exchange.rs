//! What a response must echo from its request, and how responses are built.
//!
//! Owns the response envelope and header rules of digest §1.2, §2 and §13: answer in
//! the version the client can read, echo the request and session ids, the opcode, the
//! flags and the recursion count, add AT (this site is primary), give our site serial,
//! a future expiration time, and a request digest when the request asked for one.

use crate::codec::{
    Body, CodecError, Envelope, ErrorResponse, Header, Message, OpCode, OpFlags, ProtocolVersion,
    RequestDigest, Response, ResponseCode, answer_version,
};
use std::time::Duration;

use crate::auth::SecretForms;
use crate::clock::unix_now;
use crate::config::Config;

/// Settings that shape every response of a node.
#[derive(Debug, Clone, Copy)]
pub struct ResponseSettings {
    /// The site serial number sent in every response.
    pub site_serial: u16,
    /// Seconds until a response expires.
    pub validity_secs: u32,
    /// How long a challenge waits for its answer.
    pub challenge_lifetime: Duration,
    /// How long a session lives at most.
    pub session_lifetime: Duration,
    /// How many sessions a node holds at once.
    pub max_sessions: usize,
    /// Which forms of secret-key answer are checked.
    pub secret_forms: SecretForms,
}

impl ResponseSettings {
    /// The settings `config` gives a node.
    pub fn from_config(config: &Config) -> ResponseSettings {
        ResponseSettings {
            site_serial: config.site.serial,
            validity_secs: config.handle.response_validity_secs,
            challenge_lifetime: Duration::from_secs(config.auth.challenge_lifetime_secs),
            session_lifetime: Duration::from_secs(config.auth.session_lifetime_secs),
            max_sessions: config.auth.max_sessions,
            secret_forms: config.auth.secret_forms(),
        }
    }
}

/// The request-side facts a response is built from.
#[derive(Debug, Clone)]
pub struct Exchange {
    envelope: Envelope,
    /// The RequestId the client named the request with: the request's own, or for an
    /// answered challenge the challenged request's.
    named: u32,
    opcode: OpCode,
    flags: OpFlags,
    recursion_count: u8,
    digest: Option<RequestDigest>,
    settings: ResponseSettings,
}

impl Exchange {
    /// The exchange of a decoded request.
    pub fn of_request(request: &Message, settings: ResponseSettings) -> Exchange {
        let envelope = answer_envelope(&request.envelope);
        let digest = match request.raw_header_and_body() {
            Some(raw) if request.header.flags.contains(OpFlags::RD) => {
                Some(RequestDigest::for_version(envelope.version, raw))
            }
            _ => None,
        };
        Exchange {
            named: request.envelope.request_id,
            envelope,
            opcode: request.header.opcode,
            flags: request.header.flags,
            recursion_count: request.header.recursion_count,
            digest,
            settings,
        }
    }

    /// The exchange of a request that could not be decoded, when enough of it was read
    /// to answer (at least the envelope). Without a header the opcode is 0, as the
    /// reference server answers.
    pub fn of_undecodable(error: &CodecError, settings: ResponseSettings) -> Option<Exchange> {
        let envelope = answer_envelope(error.envelope()?);
        let header = error.header();
        Some(Exchange {
            named: envelope.request_id,
            envelope,
            opcode: header.map_or(OpCode::Reserved, |h| h.opcode),
            flags: header.map_or(OpFlags::NONE, |h| h.flags.without(OpFlags::RD)),
            recursion_count: header.map_or(0, |h| h.recursion_count),
            digest: None,
            settings,
        })
    }

    /// The request's flags.
    pub fn flags(&self) -> OpFlags {
        self.flags
    }

    /// The RequestId the client named the request with (for an answered challenge,
    /// the challenged request's): a client sending a write again keeps it.
    pub fn request_name(&self) -> u32 {
        self.named
    }

    /// The envelope SessionId the response carries (the request's).
    pub fn session_id(&self) -> u32 {
        self.envelope.session_id
    }

    /// This exchange, answering in session `session_id` (a session setup's answer
    /// names the new session, digest §3.8).
    pub fn in_session(self, session_id: u32) -> Exchange {
        Exchange {
            envelope: Envelope {
                session_id,
                ..self.envelope
            },
            ..self
        }
    }

    /// The version the response is written in.
    pub fn version(&self) -> ProtocolVersion {
        self.envelope.version
    }

    /// The exchange answering a challenged request after its challenge was answered
    /// by this one (digest §8.1 step 5): the original `opcode` and `flags`, this
    /// message's RequestId and SessionId.
    pub fn resuming(self, opcode: OpCode, flags: OpFlags, named: u32) -> Exchange {
        Exchange {
            opcode,
            flags,
            named,
            ..self
        }
    }

    /// RC_AUTHEN_NEEDED (402) challenging the request (digest §8.1 step 2): envelope
    /// SessionId = `challenge_id`, RD set with `digest` (whatever the request asked),
    /// body the `nonce`.
    pub fn challenge(&self, challenge_id: u32, digest: RequestDigest, nonce: Vec<u8>) -> Message {
        let challenging = Exchange {
            envelope: Envelope {
                session_id: challenge_id,
                ..self.envelope
            },
            digest: Some(digest),
            ..self.clone()
        };
        challenging.reply(
            ResponseCode::AuthenticationNeeded,
            Response::Challenge { nonce },
            OpFlags::NONE,
        )
    }

    /// A response with `code` and `response`, and `extra` flags added to the echoed
    /// ones (AT is always added: this server is its site's primary).
    pub fn reply(&self, code: ResponseCode, response: Response, extra: OpFlags) -> Message {
        let header = Header {
            opcode: self.opcode,
            response_code: code,
            flags: self.flags.with(OpFlags::AT).with(extra),
            site_info_serial: self.settings.site_serial,
            recursion_count: self.recursion_count,
            expiration: unix_now().saturating_add(self.settings.validity_secs),
        };
        let body = Body::Response {
            digest: self.digest.clone(),
            response,
        };
        Message::new(self.envelope, header, body)
    }

    /// A success response.
    pub fn success(&self, response: Response) -> Message {
        self.reply(ResponseCode::Success, response, OpFlags::NONE)
    }

    /// An error response with a message for people.
    pub fn error(&self, code: ResponseCode, message: impl Into<String>) -> Message {
        let response = Response::Error(ErrorResponse {
            message: message.into(),
            indexes: None,
        });
        self.reply(code, response, OpFlags::NONE)
    }
}

/// The envelope of a response to `request`: the version the client can read, our
/// highest version suggested, the request's session and request ids.
fn answer_envelope(request: &Envelope) -> Envelope {
    let version = answer_version(
        request.version,
        request.suggested,
        ProtocolVersion::MAX_SUPPORTED,
    );
    Envelope {
        session_id: request.session_id,
        ..Envelope::new(version, request.request_id)
    }
}
