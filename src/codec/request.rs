//! Request bodies (digest §3.2–§3.5, §11.10; RFC 3652 §3).
//!
//! Owns [`Request`] and the shapes it is made of, [`ResolutionRequest`] and
//! [`HandleValues`]. Pure; depends only on [`crate::values`].
//!
//! Handles are kept as the octets sent (UTF-8 on the wire, but J9 reads them as bytes
//! and the server hash works on bytes). The authentication bodies (200, 201) are in
//! [`super::auth`], the session setup body (400) in [`super::session`]. CNRI's
//! maintenance operations are not typed here: decoding them yields `None`, which the
//! message layer reports as an unsupported operation. Homing (300–302) is typed: its
//! bodies are one handle, as J9 sends them.

use super::auth::{AuthAnswer, VerifyRequest};
use super::codes::OpCode;
use super::session::SessionSetup;
use crate::values::value::{HandleValue, ValueIndex, decode_value_list, encode_value_list};
use crate::values::wire::{DecodeError, Reader, Writer};

/// A resolution request: which values of which handle.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResolutionRequest {
    /// The handle, as the client wrote it.
    pub handle: Vec<u8>,
    /// Values wanted by index; empty: no index filter.
    pub indexes: Vec<ValueIndex>,
    /// Values wanted by type; empty: no type filter.
    pub types: Vec<Vec<u8>>,
}

/// A handle and values: the body of create, add and modify requests and of a
/// successful resolution response.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HandleValues {
    /// The handle, as sent.
    pub handle: Vec<u8>,
    /// The values, in wire order.
    pub values: Vec<HandleValue>,
}

impl HandleValues {
    pub(super) fn encode(&self, w: &mut Writer) {
        w.bytes(&self.handle);
        encode_value_list(&self.values, w);
    }

    pub(super) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(HandleValues {
            handle: r.bytes("handle")?.to_vec(),
            values: decode_value_list(r)?,
        })
    }
}

/// The body of a request, by operation.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Request {
    /// OC 1: resolve a handle.
    Resolution(ResolutionRequest),
    /// OC 2: the handle is ignored (J9 sends `/`).
    GetSiteInfo {
        /// The ignored handle.
        handle: Vec<u8>,
    },
    /// OC 100: create a handle with these values (flags OW and MINT apply).
    CreateHandle(HandleValues),
    /// OC 101: delete a handle.
    DeleteHandle {
        /// The handle to delete.
        handle: Vec<u8>,
    },
    /// OC 102: add values (flag OW applies).
    AddValue(HandleValues),
    /// OC 103: remove the values with these indexes.
    RemoveValue {
        /// The handle.
        handle: Vec<u8>,
        /// The indexes to remove.
        indexes: Vec<ValueIndex>,
    },
    /// OC 104: replace values, matched by index.
    ModifyValue(HandleValues),
    /// OC 105: list the handles under a prefix handle (`0.NA/<prefix>`).
    ListHandles {
        /// The prefix handle.
        prefix: Vec<u8>,
    },
    /// OC 200: the answer to a challenge (envelope SessionId = the challenge id).
    ChallengeResponse(AuthAnswer),
    /// OC 201: check a secret-key answer against a stored HS_SECKEY.
    VerifyResponse(VerifyRequest),
    /// OC 300: serve the prefix of this prefix handle (`0.NA/<prefix>`) here (CNRI).
    HomeNa {
        /// The prefix handle.
        prefix: Vec<u8>,
    },
    /// OC 301: stop serving the prefix of this prefix handle here (CNRI).
    UnhomeNa {
        /// The prefix handle.
        prefix: Vec<u8>,
    },
    /// OC 302: list the prefixes homed here (CNRI; J9 ignores the handle).
    ListHomedNas {
        /// The ignored handle.
        handle: Vec<u8>,
    },
    /// OC 400: set up a session.
    SessionSetup(SessionSetup),
    /// OC 401: end the session named by the envelope SessionId (J9's generic body).
    SessionTerminate {
        /// The ignored handle (J9 sends `/`).
        handle: Vec<u8>,
    },
    /// OC 402: the session key, encrypted with the server's public key (mode 2).
    SessionExchangeKey {
        /// The encrypted key.
        encrypted_key: Vec<u8>,
    },
}

impl Request {
    /// The operation this body belongs to.
    pub fn opcode(&self) -> OpCode {
        match self {
            Request::Resolution(_) => OpCode::Resolution,
            Request::GetSiteInfo { .. } => OpCode::GetSiteInfo,
            Request::CreateHandle(_) => OpCode::CreateHandle,
            Request::DeleteHandle { .. } => OpCode::DeleteHandle,
            Request::AddValue(_) => OpCode::AddValue,
            Request::RemoveValue { .. } => OpCode::RemoveValue,
            Request::ModifyValue(_) => OpCode::ModifyValue,
            Request::ListHandles { .. } => OpCode::ListHandles,
            Request::ChallengeResponse(_) => OpCode::ChallengeResponse,
            Request::VerifyResponse(_) => OpCode::VerifyResponse,
            Request::HomeNa { .. } => OpCode::HomeNa,
            Request::UnhomeNa { .. } => OpCode::UnhomeNa,
            Request::ListHomedNas { .. } => OpCode::ListHomedNas,
            Request::SessionSetup(_) => OpCode::SessionSetup,
            Request::SessionTerminate { .. } => OpCode::SessionTerminate,
            Request::SessionExchangeKey { .. } => OpCode::SessionExchangeKey,
        }
    }

    /// Appends the body.
    pub fn encode(&self, w: &mut Writer) {
        match self {
            Request::Resolution(req) => {
                w.bytes(&req.handle);
                encode_indexes(&req.indexes, w);
                w.count(req.types.len());
                for value_type in &req.types {
                    w.bytes(value_type);
                }
            }
            Request::GetSiteInfo { handle: h }
            | Request::DeleteHandle { handle: h }
            | Request::ListHandles { prefix: h }
            | Request::HomeNa { prefix: h }
            | Request::UnhomeNa { prefix: h }
            | Request::ListHomedNas { handle: h }
            | Request::SessionTerminate { handle: h }
            | Request::SessionExchangeKey { encrypted_key: h } => w.bytes(h),
            Request::CreateHandle(hv) | Request::AddValue(hv) | Request::ModifyValue(hv) => {
                hv.encode(w);
            }
            Request::RemoveValue { handle, indexes } => {
                w.bytes(handle);
                encode_indexes(indexes, w);
            }
            Request::ChallengeResponse(answer) => answer.encode(w),
            Request::VerifyResponse(verify) => verify.encode(w),
            Request::SessionSetup(setup) => setup.encode(w),
        }
    }

    /// Reads the body of an `opcode` request; `None` if that operation has no typed
    /// body here (nothing is read then).
    pub fn decode(opcode: OpCode, r: &mut Reader<'_>) -> Result<Option<Self>, DecodeError> {
        let handle = |r: &mut Reader<'_>| r.bytes("handle").map(<[u8]>::to_vec);
        let request = match opcode {
            OpCode::Resolution => Request::Resolution(ResolutionRequest {
                handle: handle(r)?,
                indexes: decode_indexes(r)?,
                types: decode_types(r)?,
            }),
            OpCode::GetSiteInfo => Request::GetSiteInfo { handle: handle(r)? },
            OpCode::CreateHandle => Request::CreateHandle(HandleValues::decode(r)?),
            OpCode::DeleteHandle => Request::DeleteHandle { handle: handle(r)? },
            OpCode::AddValue => Request::AddValue(HandleValues::decode(r)?),
            OpCode::RemoveValue => Request::RemoveValue {
                handle: handle(r)?,
                indexes: decode_indexes(r)?,
            },
            OpCode::ModifyValue => Request::ModifyValue(HandleValues::decode(r)?),
            OpCode::ListHandles => Request::ListHandles { prefix: handle(r)? },
            OpCode::ChallengeResponse => Request::ChallengeResponse(AuthAnswer::decode(r)?),
            OpCode::VerifyResponse => Request::VerifyResponse(VerifyRequest::decode(r)?),
            OpCode::HomeNa => Request::HomeNa { prefix: handle(r)? },
            OpCode::UnhomeNa => Request::UnhomeNa { prefix: handle(r)? },
            OpCode::ListHomedNas => Request::ListHomedNas { handle: handle(r)? },
            OpCode::SessionSetup => Request::SessionSetup(SessionSetup::decode(r)?),
            OpCode::SessionTerminate => Request::SessionTerminate { handle: handle(r)? },
            OpCode::SessionExchangeKey => Request::SessionExchangeKey {
                encrypted_key: r.bytes("encrypted session key")?.to_vec(),
            },
            _ => return Ok(None),
        };
        Ok(Some(request))
    }
}

/// Appends a `List<u32>` of value indexes.
pub(super) fn encode_indexes(indexes: &[ValueIndex], w: &mut Writer) {
    w.count(indexes.len());
    for index in indexes {
        w.u32(index.0);
    }
}

/// Reads a `List<u32>` of value indexes.
pub(super) fn decode_indexes(r: &mut Reader<'_>) -> Result<Vec<ValueIndex>, DecodeError> {
    let count = r.count("index list", 4)?;
    (0..count)
        .map(|_| r.u32("value index").map(ValueIndex))
        .collect()
}

/// Reads a `List<Str>` (types or handles) as octets.
pub(super) fn decode_strings(
    r: &mut Reader<'_>,
    field: &'static str,
) -> Result<Vec<Vec<u8>>, DecodeError> {
    let count = r.count(field, 4)?;
    (0..count)
        .map(|_| r.bytes(field).map(<[u8]>::to_vec))
        .collect()
}

fn decode_types(r: &mut Reader<'_>) -> Result<Vec<Vec<u8>>, DecodeError> {
    decode_strings(r, "type list")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::testing::hex;

    fn encode(request: &Request) -> Vec<u8> {
        let mut w = Writer::new();
        request.encode(&mut w);
        w.into_bytes()
    }

    fn decode(opcode: OpCode, bytes: &[u8]) -> Request {
        let mut r = Reader::new(bytes);
        let request = Request::decode(opcode, &mut r).unwrap().unwrap();
        r.finish("request body").unwrap();
        request
    }

    fn check(request: Request, body_hex: &str) {
        let bytes = hex(body_hex);
        assert_eq!(encode(&request), bytes);
        assert_eq!(decode(request.opcode(), &bytes), request);
    }

    #[test]
    fn prefix_lookup_with_type_list_matches_digest_vector() {
        // Digest §11.2: the body of a v9 client's look-up of `0.NA/10.1000`.
        let types = ["HS_SITE", "HS_SITE.6", "HS_SERV", "HS_NAMESPACE"];
        check(
            Request::Resolution(ResolutionRequest {
                handle: b"0.NA/10.1000".to_vec(),
                indexes: vec![],
                types: types.iter().map(|t| t.as_bytes().to_vec()).collect(),
            }),
            "0000000c 302e4e412f31302e31303030 00000000 00000004
             00000007 48535f53495445 00000009 48535f534954452e36
             00000007 48535f53455256 0000000c 48535f4e414d455350414345",
        );
    }

    #[test]
    fn other_request_bodies_match_digest_vectors() {
        // Digest §11.10.
        check(
            Request::GetSiteInfo {
                handle: b"/".to_vec(),
            },
            "00000001 2f",
        );
        check(
            Request::RemoveValue {
                handle: b"10.1000/1".to_vec(),
                indexes: vec![ValueIndex(1), ValueIndex(2)],
            },
            "00000009 31302e313030302f31 00000002 00000001 00000002",
        );
        check(
            Request::ListHandles {
                prefix: b"0.NA/10.1000".to_vec(),
            },
            "0000000c 302e4e412f31302e31303030",
        );
    }

    #[test]
    fn value_carrying_requests_round_trip() {
        let hv = HandleValues {
            handle: b"10.1000/1".to_vec(),
            values: vec![HandleValue::new(1, "URL", "https://www.doi.org/")],
        };
        for request in [
            Request::CreateHandle(hv.clone()),
            Request::AddValue(hv.clone()),
            Request::ModifyValue(hv),
            Request::DeleteHandle {
                handle: b"10.1000/1".to_vec(),
            },
            Request::ChallengeResponse(AuthAnswer {
                auth_type: b"HS_PUBKEY".to_vec(),
                key_handle: b"0.NA/10.1000".to_vec(),
                key_index: 0,
                answer: vec![1, 2, 3],
            }),
            Request::VerifyResponse(VerifyRequest {
                key_handle: b"0.NA/10.1000".to_vec(),
                key_index: 300,
                nonce: vec![9; 16],
                digest: crate::codec::RequestDigest::Sha256([5; 32]),
                answer: vec![0x22],
            }),
            Request::SessionTerminate {
                handle: b"/".to_vec(),
            },
            Request::HomeNa {
                prefix: b"0.NA/10.5555".to_vec(),
            },
            Request::UnhomeNa {
                prefix: b"0.NA/10.5555".to_vec(),
            },
            Request::ListHomedNas {
                handle: b"/".to_vec(),
            },
            Request::SessionExchangeKey {
                encrypted_key: vec![7; 64],
            },
        ] {
            assert_eq!(decode(request.opcode(), &encode(&request)), request);
        }
    }

    #[test]
    fn maintenance_operations_have_no_typed_body() {
        for opcode in [106, 1000, 0, 77] {
            let mut r = Reader::new(&[0, 0, 0, 0]);
            assert_eq!(Request::decode(OpCode::from_u32(opcode), &mut r), Ok(None));
            assert_eq!(r.offset(), 0);
        }
    }

    #[test]
    fn hostile_index_count_is_refused() {
        let bytes = hex("00000001 2f ffffffff");
        let err = Request::decode(OpCode::RemoveValue, &mut Reader::new(&bytes)).unwrap_err();
        assert!(matches!(
            err,
            DecodeError::Truncated {
                field: "index list",
                ..
            }
        ));
    }
}
