//! Test helpers for the codec: digest hex vectors and proptest strategies that build
//! arbitrary, self-consistent messages (header codes matching the body).

use super::{
    Body, Credential, Envelope, ErrorResponse, HandleValues, Header, KeyExchange, Message,
    MessageFlags, OpCode, OpFlags, ProtocolVersion, Referral, Request, RequestDigest,
    ResolutionRequest, Response, ResponseCode, SessionSetup, SessionSetupAnswer,
};
use crate::values::{HandleValue, Permissions, Ttl, ValueIndex, ValueReference};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;

/// The octets written as hex in `text`; anything but hex digits is ignored.
pub(crate) fn hex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text
        .bytes()
        .filter(u8::is_ascii_hexdigit)
        .map(|d| match d {
            b'0'..=b'9' => d - b'0',
            _ => (d | 0x20) - b'a' + 10,
        })
        .collect();
    digits
        .chunks(2)
        .map(|pair| pair[0] << 4 | pair[1])
        .collect()
}

fn octets(max: usize) -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..max)
}

fn value() -> impl Strategy<Value = HandleValue> {
    let reference = ("[ -~]{0,12}", any::<u32>()).prop_map(|(handle, index)| ValueReference {
        handle,
        index: ValueIndex(index),
    });
    let ttl = prop_oneof![
        any::<u32>().prop_map(Ttl::Relative),
        any::<u32>().prop_map(Ttl::Absolute)
    ];
    (
        any::<u32>(),
        "\\PC{0,10}",
        octets(48),
        ttl,
        any::<u32>(),
        any::<u8>(),
    )
        .prop_flat_map(
            move |(index, value_type, data, ttl, timestamp, permissions)| {
                vec(reference.clone(), 0..3).prop_map(move |references| HandleValue {
                    index: ValueIndex(index),
                    value_type: value_type.clone(),
                    data: data.clone(),
                    ttl,
                    timestamp,
                    permissions: Permissions::from_bits(permissions),
                    references,
                })
            },
        )
}

fn handle_values() -> impl Strategy<Value = HandleValues> {
    (octets(40), vec(value(), 0..4)).prop_map(|(handle, values)| HandleValues { handle, values })
}

fn indexes() -> impl Strategy<Value = Vec<ValueIndex>> {
    vec(any::<u32>().prop_map(ValueIndex), 0..5)
}

fn request() -> impl Strategy<Value = Request> {
    prop_oneof![
        (octets(40), indexes(), vec(octets(16), 0..4)).prop_map(|(handle, indexes, types)| {
            Request::Resolution(ResolutionRequest {
                handle,
                indexes,
                types,
            })
        }),
        octets(8).prop_map(|handle| Request::GetSiteInfo { handle }),
        handle_values().prop_map(Request::CreateHandle),
        octets(40).prop_map(|handle| Request::DeleteHandle { handle }),
        handle_values().prop_map(Request::AddValue),
        (octets(40), indexes())
            .prop_map(|(handle, indexes)| Request::RemoveValue { handle, indexes }),
        handle_values().prop_map(Request::ModifyValue),
        octets(40).prop_map(|prefix| Request::ListHandles { prefix }),
        (any::<u32>(), octets(20), any::<u32>(), key_exchange()).prop_map(
            |(timeout, identity_handle, identity_index, exchange)| {
                Request::SessionSetup(SessionSetup {
                    timeout,
                    identity_handle,
                    identity_index,
                    exchange,
                })
            }
        ),
        octets(4).prop_map(|handle| Request::SessionTerminate { handle }),
        octets(64).prop_map(|encrypted_key| Request::SessionExchangeKey { encrypted_key }),
    ]
}

fn key_exchange() -> impl Strategy<Value = KeyExchange> {
    prop_oneof![
        Just(KeyExchange::None),
        octets(64).prop_map(|public_key| KeyExchange::CipherClient { public_key }),
        Just(KeyExchange::CipherServer),
        (octets(20), any::<u32>())
            .prop_map(|(handle, index)| KeyExchange::CipherHandle { handle, index }),
        octets(64).prop_map(|public_key| KeyExchange::DiffieHellman { public_key }),
    ]
}

/// Response codes whose body is an error body.
fn error_codes() -> Vec<ResponseCode> {
    (0..=505)
        .filter_map(ResponseCode::from_u32)
        .filter(|code| {
            !matches!(
                code,
                ResponseCode::Reserved
                    | ResponseCode::Success
                    | ResponseCode::ServiceReferral
                    | ResponseCode::PrefixReferral
                    | ResponseCode::AuthenticationNeeded
            )
        })
        .collect()
}

fn any_opcode() -> impl Strategy<Value = OpCode> {
    any::<u32>().prop_map(OpCode::from_u32)
}

/// A response body with an OpCode and response code that announce it.
fn response() -> impl Strategy<Value = (OpCode, ResponseCode, Response)> {
    let success = |opcode, response| (opcode, ResponseCode::Success, response);
    let done = select(vec![
        OpCode::DeleteHandle,
        OpCode::AddValue,
        OpCode::RemoveValue,
        OpCode::ModifyValue,
        OpCode::SessionTerminate,
        OpCode::SessionExchangeKey,
    ]);
    let referral = (octets(20), prop::option::of(vec(value(), 0..3)))
        .prop_map(|(handle, values)| Response::Referral(Referral { handle, values }));
    let referral_code = select(vec![
        ResponseCode::ServiceReferral,
        ResponseCode::PrefixReferral,
    ]);
    let error = ("\\PC{0,20}", prop::option::of(indexes()))
        .prop_map(|(message, indexes)| Response::Error(ErrorResponse { message, indexes }));
    prop_oneof![
        handle_values().prop_map(move |hv| success(OpCode::Resolution, Response::Resolution(hv))),
        octets(1200)
            .prop_map(move |site| success(OpCode::GetSiteInfo, Response::SiteInfo { site })),
        prop::option::of(octets(30)).prop_map(move |handle| {
            success(OpCode::CreateHandle, Response::CreateHandle { handle })
        }),
        done.prop_map(move |opcode| success(opcode, Response::Done)),
        (any::<u16>(), octets(64)).prop_map(move |(mode, data)| {
            let answer = SessionSetupAnswer { mode, data };
            success(OpCode::SessionSetup, Response::SessionSetup(answer))
        }),
        vec(octets(20), 0..5).prop_map(move |handles| {
            success(OpCode::ListHandles, Response::ListHandles { handles })
        }),
        (any_opcode(), referral_code, referral),
        (any_opcode(), select(error_codes()), error),
    ]
}

fn digest() -> impl Strategy<Value = Option<RequestDigest>> {
    prop::option::of(prop_oneof![
        octets(40).prop_map(RequestDigest::OldFormat),
        any::<[u8; 16]>().prop_map(RequestDigest::Md5),
        any::<[u8; 20]>().prop_map(RequestDigest::Sha1),
        any::<[u8; 32]>().prop_map(RequestDigest::Sha256),
    ])
}

fn credential() -> impl Strategy<Value = Option<Credential>> {
    let fields = (
        any::<(u8, u8, u16, u32)>(),
        octets(20),
        octets(12),
        octets(12),
        octets(64),
    );
    prop::option::of(fields.prop_map(
        |((version, reserved, options, index), signer, kind, alg, sig)| Credential {
            version,
            reserved,
            options,
            signer_handle: signer,
            signer_index: index,
            credential_type: kind,
            digest_algorithm: alg,
            signature: sig,
        },
    ))
}

/// An envelope of a version from 2.5 (below it two response codes are renumbered, see
/// `ResponseCode::to_wire`) with an arbitrary suggestion, ids and TC.
fn envelope() -> impl Strategy<Value = Envelope> {
    let ids = any::<(u32, u32, u32)>();
    (5u8..=11, 0u8..32, any::<u8>(), any::<bool>(), ids).prop_map(
        |(minor, s_major, s_minor, truncated, (session_id, request_id, sequence_number))| {
            let flags = if truncated {
                MessageFlags::TC
            } else {
                MessageFlags::NONE
            };
            Envelope {
                suggested: ProtocolVersion::new(s_major, s_minor),
                flags,
                session_id,
                sequence_number,
                ..Envelope::new(ProtocolVersion::new(2, minor), request_id)
            }
        },
    )
}

fn header_fields() -> impl Strategy<Value = (u32, u16, u8, u32)> {
    any::<(u32, u16, u8, u32)>()
}

/// An arbitrary message whose header agrees with its body.
pub(crate) fn message() -> impl Strategy<Value = Message> {
    let body = prop_oneof![
        request().prop_map(|r| (r.opcode(), ResponseCode::Reserved, Body::Request(r))),
        (response(), digest()).prop_map(|((opcode, code, response), digest)| {
            (opcode, code, Body::Response { digest, response })
        }),
    ];
    (envelope(), header_fields(), body, credential()).prop_map(
        |(envelope, (flags, site_info_serial, recursion_count, expiration), body, credential)| {
            let (opcode, response_code, body) = body;
            let header = Header {
                opcode,
                response_code,
                flags: OpFlags::from_bits(flags),
                site_info_serial,
                recursion_count,
                expiration,
            };
            Message {
                credential,
                ..Message::new(envelope, header, body)
            }
        },
    )
}
