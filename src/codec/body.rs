//! The message body: a request, or a response with its optional request digest
//! (digest §2.2, §2.4, §3; RFC 3652 §3).
//!
//! Owns [`Body`] and the choice of layout from the header. Pure; depends only on
//! [`crate::values`] and the codec's body types.

use super::digest::RequestDigest;
use super::header::{Header, OpFlags};
use super::request::Request;
use super::response::{Response, Shape};
use crate::values::wire::{DecodeError, Reader, Writer};

/// A message body.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Body {
    /// The body of a request (response code 0).
    Request(Request),
    /// The body of a response.
    Response {
        /// The digest of the request, present exactly when the header has RD.
        digest: Option<RequestDigest>,
        /// What follows the digest.
        response: Response,
    },
}

impl Body {
    /// The OpFlags to write for `flags`: in a response, RD says whether a digest
    /// follows, so it is set from the body; a request's RD (a wish) is kept.
    pub fn wire_flags(&self, flags: OpFlags) -> OpFlags {
        match self {
            Body::Request(_) => flags,
            Body::Response {
                digest: Some(_), ..
            } => flags.with(OpFlags::RD),
            Body::Response { digest: None, .. } => flags.without(OpFlags::RD),
        }
    }

    /// Appends the body.
    pub fn encode(&self, w: &mut Writer) {
        match self {
            Body::Request(request) => request.encode(w),
            Body::Response { digest, response } => {
                if let Some(digest) = digest {
                    digest.encode(w);
                }
                response.encode(w);
            }
        }
    }

    /// Reads the body that `header` announces from a reader bounded to BodyLength;
    /// `None` (nothing read) when that operation or response has no typed body here.
    pub fn decode(header: &Header, r: &mut Reader<'_>) -> Result<Option<Self>, DecodeError> {
        if header.is_request() {
            return Ok(Request::decode(header.opcode, r)?.map(Body::Request));
        }
        let Some(shape) = Shape::of(header.opcode, header.response_code) else {
            return Ok(None);
        };
        let digest = if header.flags.contains(OpFlags::RD) {
            Some(RequestDigest::decode(r)?)
        } else {
            None
        };
        let response = shape.decode(r)?;
        Ok(Some(Body::Response { digest, response }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::codes::{OpCode, ResponseCode};
    use crate::codec::response::ErrorResponse;

    fn response_header(flags: OpFlags) -> Header {
        Header {
            response_code: ResponseCode::Error,
            flags,
            ..Header::request(OpCode::Resolution, 0)
        }
    }

    #[test]
    fn response_rd_flag_follows_the_digest() {
        let error = Response::Error(ErrorResponse {
            message: String::new(),
            indexes: None,
        });
        let with = Body::Response {
            digest: Some(RequestDigest::Md5([1; 16])),
            response: error.clone(),
        };
        let without = Body::Response {
            digest: None,
            response: error,
        };
        assert!(with.wire_flags(OpFlags::NONE).contains(OpFlags::RD));
        assert!(!without.wire_flags(OpFlags::RD).contains(OpFlags::RD));
        let request = Body::Request(Request::DeleteHandle { handle: vec![] });
        assert!(request.wire_flags(OpFlags::RD).contains(OpFlags::RD));
    }

    #[test]
    fn digest_is_read_only_when_rd_is_set() {
        let mut w = Writer::new();
        RequestDigest::Md5([1; 16]).encode(&mut w);
        w.str("x");
        let bytes = w.into_bytes();
        let mut r = Reader::new(&bytes);
        let body = Body::decode(&response_header(OpFlags::RD), &mut r)
            .unwrap()
            .unwrap();
        r.finish("body").unwrap();
        assert!(matches!(
            body,
            Body::Response {
                digest: Some(_),
                ..
            }
        ));
        let err = Body::decode(&response_header(OpFlags::NONE), &mut Reader::new(&bytes));
        assert!(err.is_err());
    }
}
