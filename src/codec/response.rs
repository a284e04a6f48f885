//! Response bodies (digest §3.2–§3.5, §3.9, §3.10, §11.2–§11.6; RFC 3652 §3).
//!
//! Owns [`Response`], [`ErrorResponse`] and [`Referral`]: what follows the optional
//! request digest in a response body. Pure; depends only on [`crate::values`].
//!
//! Which body a response has depends on its response code and, for RC_SUCCESS, on the
//! OpCode ([`Shape::of`]). Several bodies end in an optional part whose presence is
//! given by the remaining BodyLength, so decoding expects a reader bounded to the body.

use super::auth::decode_verification;
use super::codes::{OpCode, ResponseCode};
use super::request::{HandleValues, decode_indexes, decode_strings, encode_indexes};
use super::session::SessionSetupAnswer;
use crate::values::value::{HandleValue, ValueIndex, decode_value_list, encode_value_list};
use crate::values::wire::{DecodeError, Reader, Writer};

/// The body of an error response (any code but success, referrals and challenges).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ErrorResponse {
    /// Human-readable text; empty when there is none.
    pub message: String,
    /// The offending value indexes (RFC/DO-IRP; J9 never sends them). `None` writes
    /// nothing; `Some` writes the list, even an empty one.
    pub indexes: Option<Vec<ValueIndex>>,
}

/// The body of a service (302) or prefix (303) referral.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Referral {
    /// The service handle to ask (empty in a prefix referral).
    pub handle: Vec<u8>,
    /// The service's HS_SITE/HS_SERV values (the prefix's `HS_SITE.PREFIX` and kin in
    /// a prefix referral); `None` writes nothing.
    pub values: Option<Vec<HandleValue>>,
}

/// The body of a response after its request digest, by kind.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Response {
    /// Success of OC 1: the handle as requested and the matching values.
    Resolution(HandleValues),
    /// Success of OC 2: one raw HS_SITE record (decoded by `values::known::site`).
    SiteInfo {
        /// The HS_SITE octets, up to the end of the body.
        site: Vec<u8>,
    },
    /// Success of OC 100: v8+ servers name the created handle (essential with MINT).
    CreateHandle {
        /// The handle created; `None` for an empty body (older servers, RFC).
        handle: Option<Vec<u8>>,
    },
    /// Success of OC 101–104: nothing but the optional digest.
    Done,
    /// Success of OC 105: one page of handles (CN set while more pages follow).
    ListHandles {
        /// The handles of this page.
        handles: Vec<Vec<u8>>,
    },
    /// Response code 302 or 303.
    Referral(Referral),
    /// RC_AUTHEN_NEEDED (402), a challenge (digest §8.1): the request digest (RD is
    /// always set) then this nonce; the envelope SessionId is the challenge id. The
    /// 2.0 layout (nonce first) is not supported.
    Challenge {
        /// The octets to sign, with the request digest.
        nonce: Vec<u8>,
    },
    /// Success of OC 201: whether the answer verified.
    Verification {
        /// Bit 0 of the result octet.
        valid: bool,
    },
    /// Success of OC 400: the key exchange's answer; the envelope SessionId is the
    /// new session's id.
    SessionSetup(SessionSetupAnswer),
    /// Any error response code.
    Error(ErrorResponse),
}

/// How a response body is laid out, chosen before anything is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    Resolution,
    SiteInfo,
    CreateHandle,
    Done,
    ListHandles,
    Referral,
    Challenge,
    Verification,
    SessionSetup,
    Error,
}

impl Shape {
    /// The layout of a response to `opcode` with `code`; `None` when it has no typed
    /// body here (challenges, auth, session and maintenance operations).
    pub(super) fn of(opcode: OpCode, code: ResponseCode) -> Option<Shape> {
        match code {
            ResponseCode::Reserved => None,
            ResponseCode::AuthenticationNeeded => Some(Shape::Challenge),
            ResponseCode::ServiceReferral | ResponseCode::PrefixReferral => Some(Shape::Referral),
            ResponseCode::Success => match opcode {
                OpCode::Resolution => Some(Shape::Resolution),
                OpCode::GetSiteInfo => Some(Shape::SiteInfo),
                OpCode::CreateHandle => Some(Shape::CreateHandle),
                OpCode::DeleteHandle
                | OpCode::AddValue
                | OpCode::RemoveValue
                | OpCode::ModifyValue
                | OpCode::SessionTerminate
                | OpCode::SessionExchangeKey => Some(Shape::Done),
                OpCode::SessionSetup => Some(Shape::SessionSetup),
                OpCode::HomeNa | OpCode::UnhomeNa => Some(Shape::Done),
                OpCode::ListHandles | OpCode::ListHomedNas => Some(Shape::ListHandles),
                OpCode::VerifyResponse => Some(Shape::Verification),
                _ => None,
            },
            _ => Some(Shape::Error),
        }
    }

    /// Reads a body of this layout from a reader bounded to the body.
    pub(super) fn decode(self, r: &mut Reader<'_>) -> Result<Response, DecodeError> {
        Ok(match self {
            Shape::Resolution => Response::Resolution(HandleValues::decode(r)?),
            Shape::SiteInfo => Response::SiteInfo {
                site: r.take_rest().to_vec(),
            },
            Shape::CreateHandle => Response::CreateHandle {
                handle: optional(r, |r| r.bytes("created handle").map(<[u8]>::to_vec))?,
            },
            Shape::Done => Response::Done,
            Shape::ListHandles => Response::ListHandles {
                handles: decode_strings(r, "handle list")?,
            },
            Shape::Referral => Response::Referral(Referral {
                handle: r.bytes("referral handle")?.to_vec(),
                values: optional(r, decode_value_list)?,
            }),
            Shape::Challenge => Response::Challenge {
                nonce: r.bytes("challenge nonce")?.to_vec(),
            },
            Shape::Verification => Response::Verification {
                valid: decode_verification(r)?,
            },
            Shape::SessionSetup => Response::SessionSetup(SessionSetupAnswer::decode(r)?),
            Shape::Error => Response::Error(ErrorResponse {
                message: r.str("error message")?.to_owned(),
                indexes: optional(r, decode_indexes)?,
            }),
        })
    }
}

/// Reads a trailing optional part: present when octets are left.
fn optional<T>(
    r: &mut Reader<'_>,
    read: impl FnOnce(&mut Reader<'_>) -> Result<T, DecodeError>,
) -> Result<Option<T>, DecodeError> {
    if r.remaining() == 0 {
        Ok(None)
    } else {
        read(r).map(Some)
    }
}

impl Response {
    /// Appends the body (after any request digest).
    pub fn encode(&self, w: &mut Writer) {
        match self {
            Response::Resolution(hv) => hv.encode(w),
            Response::SiteInfo { site } => w.raw(site),
            Response::CreateHandle { handle } => {
                if let Some(handle) = handle {
                    w.bytes(handle);
                }
            }
            Response::Done => {}
            Response::ListHandles { handles } => {
                w.count(handles.len());
                for handle in handles {
                    w.bytes(handle);
                }
            }
            Response::Referral(referral) => {
                w.bytes(&referral.handle);
                if let Some(values) = &referral.values {
                    encode_value_list(values, w);
                }
            }
            Response::Challenge { nonce } => w.bytes(nonce),
            Response::Verification { valid } => w.u8(u8::from(*valid)),
            Response::SessionSetup(answer) => answer.encode(w),
            Response::Error(error) => {
                w.str(&error.message);
                if let Some(indexes) = &error.indexes {
                    encode_indexes(indexes, w);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::testing::hex;

    fn encode(response: &Response) -> Vec<u8> {
        let mut w = Writer::new();
        response.encode(&mut w);
        w.into_bytes()
    }

    fn decode(opcode: OpCode, code: ResponseCode, bytes: &[u8]) -> Response {
        let mut r = Reader::new(bytes);
        let response = Shape::of(opcode, code).unwrap().decode(&mut r).unwrap();
        r.finish("response body").unwrap();
        response
    }

    fn check(opcode: OpCode, code: ResponseCode, response: Response, body_hex: &str) {
        let bytes = hex(body_hex);
        assert_eq!(encode(&response), bytes);
        assert_eq!(decode(opcode, code, &bytes), response);
    }

    #[test]
    fn error_bodies_match_digest_vectors() {
        // Digest §11.6: with and without text.
        let not_found = |message: &str| {
            Response::Error(ErrorResponse {
                message: message.into(),
                indexes: None,
            })
        };
        let code = ResponseCode::HandleNotFound;
        check(
            OpCode::Resolution,
            code,
            not_found("not found"),
            "00000009 6e6f7420666f756e64",
        );
        check(OpCode::Resolution, code, not_found(""), "00000000");
    }

    #[test]
    fn error_index_list_is_optional() {
        let response = Response::Error(ErrorResponse {
            message: "bad".into(),
            indexes: Some(vec![ValueIndex(3)]),
        });
        let code = ResponseCode::InvalidValue;
        check(
            OpCode::AddValue,
            code,
            response,
            "00000003 626164 00000001 00000003",
        );
    }

    #[test]
    fn service_referral_without_values_round_trips() {
        let response = Response::Referral(Referral {
            handle: b"0.NA/10".to_vec(),
            values: None,
        });
        let code = ResponseCode::ServiceReferral;
        check(
            OpCode::Resolution,
            code,
            response,
            "00000007 302e4e412f3130",
        );
    }

    /// A referral to `handle` carrying one value of type `kind`.
    fn referral_to(handle: &[u8], kind: &str) -> Response {
        let value = HandleValue {
            timestamp: 0x5f00_0000,
            ..HandleValue::new(1, kind, vec![0, 1])
        };
        Response::Referral(Referral {
            handle: handle.to_vec(),
            values: Some(vec![value]),
        })
    }

    #[test]
    fn referrals_carry_values_and_a_cut_list_is_refused() {
        // Digest §11.2: a prefix referral has an empty handle, then HS_SITE.PREFIX
        // values; a service referral names the service handle before its values.
        let cases = [
            (
                ResponseCode::PrefixReferral,
                referral_to(b"", "HS_SITE.PREFIX"),
                "00000000 00000001 00000001 5f000000 00 00015180 0e 0000000e",
            ),
            (
                ResponseCode::ServiceReferral,
                referral_to(b"0.NA/10", "HS_SITE"),
                "00000007 302e4e412f3130 00000001 00000001 5f000000 00 00015180",
            ),
        ];
        for (code, response, head) in cases {
            let bytes = encode(&response);
            let head = hex(head);
            assert_eq!(&bytes[..head.len()], &head[..], "{code:?}");
            assert_eq!(decode(OpCode::Resolution, code, &bytes), response);
            let mut cut = Reader::new(&bytes[..bytes.len() - 1]);
            let shape = Shape::of(OpCode::Resolution, code).unwrap();
            assert!(
                shape.decode(&mut cut).is_err(),
                "a value list cut short is an error, not an absent list"
            );
        }
    }

    #[test]
    fn create_response_may_name_the_handle() {
        let code = ResponseCode::Success;
        let minted = Response::CreateHandle {
            handle: Some(b"10.1000/x1".to_vec()),
        };
        check(
            OpCode::CreateHandle,
            code,
            minted,
            "0000000a 31302e313030302f7831",
        );
        let bare = Response::CreateHandle { handle: None };
        check(OpCode::CreateHandle, code, bare, "");
    }

    #[test]
    fn success_bodies_round_trip() {
        let code = ResponseCode::Success;
        check(OpCode::DeleteHandle, code, Response::Done, "");
        let site = Response::SiteInfo {
            site: hex("0001 020a 0003 80 02"),
        };
        check(OpCode::GetSiteInfo, code, site, "0001 020a 0003 80 02");
        let list = Response::ListHandles {
            handles: vec![b"10/a".to_vec(), b"10/b".to_vec()],
        };
        check(
            OpCode::ListHandles,
            code,
            list,
            "00000002 00000004 31302f61 00000004 31302f62",
        );
        let valid = Response::Verification { valid: true };
        check(OpCode::VerifyResponse, code, valid, "01");
        // Digest §11.7: the nonce after the challenge's request digest.
        let challenge = Response::Challenge {
            nonce: (0xa0..=0xaf).collect(),
        };
        check(
            OpCode::CreateHandle,
            ResponseCode::AuthenticationNeeded,
            challenge,
            "00000010 a0a1a2a3a4a5a6a7a8a9aaabacadaeaf",
        );
    }

    #[test]
    fn shapes_follow_code_then_opcode() {
        let shape = Shape::of;
        assert_eq!(
            shape(OpCode::Reserved, ResponseCode::ProtocolError),
            Some(Shape::Error)
        );
        assert_eq!(
            shape(OpCode::ChallengeResponse, ResponseCode::Error),
            Some(Shape::Error)
        );
        assert_eq!(
            shape(OpCode::CreateHandle, ResponseCode::AuthenticationNeeded),
            Some(Shape::Challenge)
        );
        assert_eq!(
            shape(OpCode::VerifyResponse, ResponseCode::Success),
            Some(Shape::Verification)
        );
        assert_eq!(
            shape(OpCode::SessionSetup, ResponseCode::Success),
            Some(Shape::SessionSetup)
        );
        assert_eq!(
            shape(OpCode::HomeNa, ResponseCode::Success),
            Some(Shape::Done)
        );
        assert_eq!(
            shape(OpCode::ListHomedNas, ResponseCode::Success),
            Some(Shape::ListHandles)
        );
        assert_eq!(shape(OpCode::BackupServer, ResponseCode::Success), None);
        assert_eq!(
            shape(OpCode::ModifyValue, ResponseCode::Success),
            Some(Shape::Done)
        );
    }
}
