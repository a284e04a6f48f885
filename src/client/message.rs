//! Request messages as the client sends them and the checks on what comes back. Pure:
//! the clock and the request id are the caller's.
//!
//! Owns [`Outgoing`], [`ResolutionDatagram`] and [`Answer`]. Every request is encoded in version 2.11 and
//! suggests 2.11, carries the flags it is given (J9's `REC|CA|PO` by default), an
//! unknown site serial and an expiry 12 hours after `now`, as J9 builds its messages
//! (digest §1.2, §2). An answer is ours when it decodes, is a response and carries our
//! RequestId; if it has a request digest, that digest must be of the header and body
//! we sent (digest §2.4). An answer to a session message may come encrypted with the
//! session key (EC) and is opened first. An answer's own expiry is not checked.

use super::error::{ClientError, Mismatch};
use std::borrow::Cow;

use crate::auth::session_cipher::open;
use crate::auth::{CipherError, SessionError, SessionKey, session_credential};
use crate::codec::{
    Body, CodecError, ENVELOPE_LEN, Envelope, Header, Message, MessageFlags, OpFlags,
    ProtocolVersion, Request, Response, ResponseCode, split_datagrams, unsealed,
};
use crate::names::Handle;
use crate::values::ValueSelection;

/// Seconds a request stays valid, as J9 (`now + 43 200`).
pub const EXPIRY_SECONDS: u32 = 43_200;

/// Octets of the empty credential after every body we send.
const EMPTY_CREDENTIAL_LEN: usize = 4;

/// A request ready to send, with what is needed to check its answer.
#[derive(Debug, Clone)]
pub struct Outgoing {
    envelope: Envelope,
    flags: OpFlags,
    bytes: Vec<u8>,
    credential_len: usize,
    /// The session key of a message sent in a session: its answer may come sealed.
    session_key: Option<SessionKey>,
}

impl Outgoing {
    /// Encodes `request` with `flags`, RequestId `request_id` (non-zero) and an expiry
    /// [`EXPIRY_SECONDS`] after `now` (seconds since the Unix epoch).
    pub fn new(request: Request, flags: OpFlags, request_id: u32, now: u32) -> Self {
        Outgoing::in_session(request, flags, request_id, now, 0)
    }

    /// As [`new`](Self::new), with the envelope SessionId `session_id` (the challenge
    /// id, for the answer to a challenge).
    pub fn in_session(
        request: Request,
        flags: OpFlags,
        request_id: u32,
        now: u32,
        session_id: u32,
    ) -> Self {
        let message = build(request, flags, request_id, now, session_id);
        Outgoing {
            envelope: message.envelope,
            flags,
            bytes: message.encode(),
            credential_len: EMPTY_CREDENTIAL_LEN,
            session_key: None,
        }
    }

    /// As [`in_session`](Self::in_session), signed with the session's `key` and
    /// `counter` (an `HS_MAC` credential, digest §2.5, §3.8).
    pub fn signed(
        request: Request,
        flags: OpFlags,
        ids: (u32, u32),
        now: u32,
        session: (&SessionKey, u32),
    ) -> Result<Self, SessionError> {
        let (request_id, session_id) = ids;
        let (key, counter) = session;
        let mut message = build(request, flags, request_id, now, session_id);
        let unsigned = message.encode();
        let header_and_body = &unsigned[ENVELOPE_LEN..unsigned.len() - EMPTY_CREDENTIAL_LEN];
        let credential = session_credential(key, &message.envelope, counter, header_and_body)?;
        message.credential = Some(credential);
        let bytes = message.encode();
        Ok(Outgoing {
            envelope: message.envelope,
            flags,
            credential_len: bytes.len() - header_and_body.len() - ENVELOPE_LEN,
            bytes,
            session_key: Some(key.clone()),
        })
    }

    /// This message, sent in the session of `earlier` (answering a challenge the
    /// server sent in it): its answer may come sealed with that session's key.
    pub fn in_session_of(self, earlier: &Outgoing) -> Self {
        Outgoing {
            session_key: earlier.session_key.clone(),
            ..self
        }
    }

    /// The OpFlags it carries.
    pub fn flags(&self) -> OpFlags {
        self.flags
    }

    /// The RequestId.
    pub fn request_id(&self) -> u32 {
        self.envelope.request_id
    }

    /// The whole message, as written on a TCP connection.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The message as UDP datagrams of at most 512 octets.
    pub fn datagrams(&self) -> Vec<Vec<u8>> {
        split_datagrams(&self.envelope, &self.bytes[ENVELOPE_LEN..])
    }

    /// The header and body as sent: what a request digest covers (the message ends
    /// in the credential).
    fn header_and_body(&self) -> &[u8] {
        &self.bytes[ENVELOPE_LEN..self.bytes.len() - self.credential_len]
    }

    /// Decodes one complete answer (envelope included) and checks that it answers
    /// this request.
    /// An answer sealed with the session key (EC, digest §3.8) is opened first.
    pub fn check(&self, answer: &[u8]) -> Result<Message, Problem> {
        let opened = self.opened(answer)?;
        let message = Message::decode(&opened).map_err(Problem::Codec)?;
        let found = message.envelope.request_id;
        if found != self.request_id() {
            return Err(Problem::Mismatch(Mismatch::RequestId {
                expected: self.request_id(),
                found,
            }));
        }
        let Body::Response { digest, .. } = &message.body else {
            return Err(Problem::Mismatch(Mismatch::NotAResponse));
        };
        if let Some(digest) = digest
            && !digest.matches(self.header_and_body())
        {
            return Err(Problem::Mismatch(Mismatch::Digest));
        }
        Ok(message)
    }
}

impl Outgoing {
    /// `answer` opened with the session key when it came sealed; as it is otherwise
    /// (a sealed answer outside a session fails to decode).
    fn opened<'a>(&self, answer: &'a [u8]) -> Result<Cow<'a, [u8]>, Problem> {
        let (Some(key), Ok(envelope)) = (&self.session_key, Envelope::peek(answer)) else {
            return Ok(Cow::Borrowed(answer));
        };
        if !envelope.flags.contains(MessageFlags::EC) {
            return Ok(Cow::Borrowed(answer));
        }
        unsealed(&envelope, answer, |sealed| open(key, sealed))
            .map(Cow::Owned)
            .map_err(Problem::Sealed)
    }
}

/// A resolution request encoded once, as the one UDP datagram
/// [`Client::resolve`](super::Client::resolve) sends for it, to be sent again and again
/// under a new RequestId each time: a load generator's requests, which cost no encoding
/// per send.
#[derive(Debug, Clone)]
pub struct ResolutionDatagram {
    bytes: Vec<u8>,
}

impl ResolutionDatagram {
    /// What `selection` picks of `handle`, with J9's flags and an expiry 12 hours after
    /// `now`, as every request; `None` when the request takes more than one datagram (a
    /// handle of over 452 octets).
    pub fn new(handle: &Handle, selection: &ValueSelection, now: u32) -> Option<Self> {
        let request = super::resolution_request(handle, selection);
        let mut datagrams = Outgoing::new(request, OpFlags::J9_DEFAULT, 0, now).datagrams();
        match (datagrams.pop(), datagrams.is_empty()) {
            (Some(bytes), true) => Some(ResolutionDatagram { bytes }),
            _ => None,
        }
    }

    /// The datagram, carrying RequestId `request_id`.
    pub fn with_request_id(&mut self, request_id: u32) -> &[u8] {
        if let Some(envelope) = self.bytes.first_chunk_mut() {
            Envelope::set_request_id(envelope, request_id);
        }
        &self.bytes
    }
}

/// A request message of version 2.11 suggesting 2.11 (module doc).
fn build(request: Request, flags: OpFlags, request_id: u32, now: u32, session_id: u32) -> Message {
    let envelope = Envelope {
        session_id,
        ..Envelope::new(ProtocolVersion::MAX_SUPPORTED, request_id)
    };
    let header = Header {
        flags,
        ..Header::request(request.opcode(), now.saturating_add(EXPIRY_SECONDS))
    };
    Message::new(envelope, header, Body::Request(request))
}

/// Why an answer was not accepted.
#[derive(Debug)]
pub enum Problem {
    /// It could not be decoded.
    Codec(CodecError),
    /// It does not answer our request.
    Mismatch(Mismatch),
    /// It came encrypted and did not open with the session key.
    Sealed(CipherError),
}

/// A successful response: its body and the OpFlags it came with (CN on all but the
/// last message of a list, OW on a create that replaced a handle).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The body after the request digest.
    pub response: Response,
    /// The response's OpFlags.
    pub flags: OpFlags,
}

impl Answer {
    /// The answer of a checked response; an error or referral code becomes
    /// [`ClientError::Server`].
    pub fn of(message: Message) -> Result<Answer, ClientError> {
        let code = message.header.response_code;
        let Body::Response { response, .. } = message.body else {
            return Err(ClientError::UnexpectedResponse {
                expected: "response",
                found: "request",
            });
        };
        match response {
            Response::Error(error) => Err(ClientError::Server {
                code,
                message: error.message,
            }),
            Response::Referral(referral) => Err(ClientError::Referred { code, referral }),
            response if code == ResponseCode::Success => Ok(Answer {
                response,
                flags: message.header.flags,
            }),
            _ => Err(ClientError::Server {
                code,
                message: String::new(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{ErrorResponse, HandleValues, OpCode, RequestDigest, ResolutionRequest};
    use crate::values::HandleValue;

    const NOW: u32 = 1_700_000_000;

    fn resolution() -> Outgoing {
        let request = Request::Resolution(ResolutionRequest {
            handle: b"TEST/1".to_vec(),
            indexes: vec![],
            types: vec![],
        });
        Outgoing::new(request, OpFlags::J9_DEFAULT, 0x0102_0304, NOW)
    }

    /// What a server would answer to `outgoing`.
    fn reply(outgoing: &Outgoing, code: ResponseCode, response: Response, digest: bool) -> Message {
        let request = Message::decode(outgoing.bytes()).unwrap();
        let digest = digest.then(|| {
            let raw = request.raw_header_and_body().unwrap();
            RequestDigest::for_version(ProtocolVersion::MAX_SUPPORTED, raw)
        });
        let header = Header {
            response_code: code,
            ..request.header
        };
        Message::new(
            request.envelope,
            header,
            Body::Response { digest, response },
        )
    }

    fn found(values: Vec<HandleValue>) -> Response {
        Response::Resolution(HandleValues {
            handle: b"TEST/1".to_vec(),
            values,
        })
    }

    #[test]
    fn requests_are_built_as_j9_builds_them() {
        let outgoing = resolution();
        let sent = Message::decode(outgoing.bytes()).unwrap();
        assert_eq!(sent.envelope.version, ProtocolVersion::new(2, 11));
        assert_eq!(sent.envelope.suggested, ProtocolVersion::new(2, 11));
        assert_eq!(sent.envelope.request_id, 0x0102_0304);
        assert_eq!(sent.header.opcode, OpCode::Resolution);
        assert_eq!(sent.header.flags.bits(), 0x1900_0000);
        assert_eq!(sent.header.expiration, NOW + 43_200);
        assert_eq!(sent.header.site_info_serial, 0xFFFF);
        assert_eq!(
            sent.raw_header_and_body().unwrap(),
            outgoing.header_and_body()
        );
        assert_eq!(outgoing.datagrams(), vec![outgoing.bytes().to_vec()]);
    }

    #[test]
    fn a_resolution_datagram_is_the_request_resolve_sends_under_each_request_id() {
        let handle = Handle::parse("TEST/1").unwrap();
        let selection = ValueSelection::all();
        let mut datagram = ResolutionDatagram::new(&handle, &selection, NOW).unwrap();
        for request_id in [7, 0x7fff_ffff] {
            let request = super::super::resolution_request(&handle, &selection);
            let sent = Outgoing::new(request, OpFlags::J9_DEFAULT, request_id, NOW);
            assert_eq!(datagram.with_request_id(request_id), sent.bytes());
        }
        let of_len = |len: usize| Handle::parse(&format!("TEST/{}", "x".repeat(len - 5))).unwrap();
        assert!(ResolutionDatagram::new(&of_len(452), &selection, NOW).is_some());
        assert!(ResolutionDatagram::new(&of_len(453), &selection, NOW).is_none());
    }

    #[test]
    fn a_matching_digest_is_accepted_and_a_wrong_one_refused() {
        let outgoing = resolution();
        let good = reply(&outgoing, ResponseCode::Success, found(vec![]), true);
        let checked = outgoing.check(&good.encode()).unwrap();
        assert!(matches!(
            checked.body,
            Body::Response {
                digest: Some(_),
                ..
            }
        ));
        let mut bad = good.clone();
        bad.body = Body::Response {
            digest: Some(RequestDigest::Sha256([7; 32])),
            response: found(vec![]),
        };
        let err = outgoing.check(&bad.encode()).unwrap_err();
        assert!(matches!(err, Problem::Mismatch(Mismatch::Digest)));
        let without = reply(&outgoing, ResponseCode::Success, found(vec![]), false);
        assert!(outgoing.check(&without.encode()).is_ok());
    }

    #[test]
    fn other_request_ids_requests_and_garbage_are_refused() {
        let outgoing = resolution();
        let mut other = reply(&outgoing, ResponseCode::Success, found(vec![]), false);
        other.envelope.request_id = 9;
        let err = outgoing.check(&other.encode()).unwrap_err();
        assert!(matches!(
            err,
            Problem::Mismatch(Mismatch::RequestId { found: 9, .. })
        ));
        let err = outgoing.check(outgoing.bytes()).unwrap_err();
        assert!(matches!(err, Problem::Mismatch(Mismatch::NotAResponse)));
        let err = outgoing.check(&outgoing.bytes()[..30]).unwrap_err();
        assert!(matches!(err, Problem::Codec(_)));
    }

    #[test]
    fn error_codes_become_server_errors_and_success_an_answer() {
        let outgoing = resolution();
        let error = Response::Error(ErrorResponse {
            message: "no such handle".into(),
            indexes: None,
        });
        let message = reply(&outgoing, ResponseCode::HandleNotFound, error, false);
        let err = Answer::of(message).unwrap_err();
        assert_eq!(err.to_string(), "100 handle not found: no such handle");
        let values = vec![HandleValue::new(1, "URL", "https://example.org/")];
        let message = reply(
            &outgoing,
            ResponseCode::Success,
            found(values.clone()),
            false,
        );
        let answer = Answer::of(message).unwrap();
        assert_eq!(answer.response, found(values));
        assert_eq!(answer.flags, OpFlags::J9_DEFAULT);
    }

    #[test]
    fn a_referral_keeps_where_it_refers_to() {
        let outgoing = resolution();
        let referral = crate::codec::Referral {
            handle: b"0.NA/TEST".to_vec(),
            values: Some(vec![HandleValue::new(1, "HS_SITE", vec![0, 1])]),
        };
        let response = Response::Referral(referral.clone());
        let message = reply(&outgoing, ResponseCode::ServiceReferral, response, true);
        let err = Answer::of(message).unwrap_err();
        assert_eq!(err.response_code(), Some(ResponseCode::ServiceReferral));
        assert_eq!(
            err.to_string(),
            "302 service referral to \"0.NA/TEST\" (1 values)"
        );
        let ClientError::Referred { referral: kept, .. } = err else {
            panic!("not a referral: {err:?}")
        };
        assert_eq!(kept, referral);
    }
}
