//! The request digest a response carries when RD is set (digest §2.4; RFC 3652 §2.2.3).
//!
//! Owns [`RequestDigest`]: its wire form (`hash code u8 ‖ digest`, or the pre-2.1
//! `Bytes` of an MD5) and its computation over the request's header and body exactly
//! as received. Pure; depends on [`crate::values::wire`] and the MD5/SHA crates.

use super::version::ProtocolVersion;
use crate::values::wire::{DecodeError, Reader, Writer};
use md5::Md5;
use sha1::Sha1;
use sha2::{Digest, Sha256};

/// The version from which digests carry a hash-code octet.
const V2_1: ProtocolVersion = ProtocolVersion::new(2, 1);

const CODE_OLD_FORMAT: u8 = 0x00;
const CODE_MD5: u8 = 0x01;
const CODE_SHA1: u8 = 0x02;
const CODE_SHA256: u8 = 0x03;

/// A digest of the request a response answers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RequestDigest {
    /// Protocol 2.0: an MD5 written as `Bytes` (its length's first octet, 0, doubles as
    /// the hash code). Any length is accepted on decode, as J9 does.
    OldFormat(Vec<u8>),
    /// Hash code 1.
    Md5([u8; 16]),
    /// Hash code 2: what 2.1–2.6 responders send.
    Sha1([u8; 20]),
    /// Hash code 3: what responders of 2.7 and later send.
    Sha256([u8; 32]),
}

impl RequestDigest {
    /// The digest a response of `version` carries for a request whose header and body,
    /// as received, are `header_and_body`: SHA-256 from 2.7, SHA-1 from 2.1, the old
    /// MD5 format before (as J9 `AbstractResponse.takeDigestOfRequest`).
    pub fn for_version(version: ProtocolVersion, header_and_body: &[u8]) -> Self {
        if version >= ProtocolVersion::V2_7 {
            RequestDigest::Sha256(Sha256::digest(header_and_body).into())
        } else if version >= V2_1 {
            RequestDigest::Sha1(Sha1::digest(header_and_body).into())
        } else {
            RequestDigest::OldFormat(Md5::digest(header_and_body).to_vec())
        }
    }

    /// Whether this is the digest of `header_and_body` under its own algorithm (what a
    /// client checks against the request it sent).
    pub fn matches(&self, header_and_body: &[u8]) -> bool {
        match self {
            RequestDigest::OldFormat(d) => d[..] == Md5::digest(header_and_body)[..],
            RequestDigest::Md5(d) => d[..] == Md5::digest(header_and_body)[..],
            RequestDigest::Sha1(d) => d[..] == Sha1::digest(header_and_body)[..],
            RequestDigest::Sha256(d) => d[..] == Sha256::digest(header_and_body)[..],
        }
    }

    /// The raw digest octets, without the hash code.
    pub fn digest(&self) -> &[u8] {
        match self {
            RequestDigest::OldFormat(d) => d,
            RequestDigest::Md5(d) => d,
            RequestDigest::Sha1(d) => d,
            RequestDigest::Sha256(d) => d,
        }
    }

    /// Appends the wire form.
    pub fn encode(&self, w: &mut Writer) {
        match self {
            RequestDigest::OldFormat(d) => w.bytes(d),
            RequestDigest::Md5(d) => {
                w.u8(CODE_MD5);
                w.raw(d);
            }
            RequestDigest::Sha1(d) => {
                w.u8(CODE_SHA1);
                w.raw(d);
            }
            RequestDigest::Sha256(d) => {
                w.u8(CODE_SHA256);
                w.raw(d);
            }
        }
    }

    /// Reads the wire form.
    pub fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let mut peek = r.clone();
        match peek.u8("request digest hash code")? {
            CODE_OLD_FORMAT => Ok(RequestDigest::OldFormat(
                r.bytes("request digest")?.to_vec(),
            )),
            code => {
                *r = peek;
                match code {
                    CODE_MD5 => Ok(RequestDigest::Md5(array(r)?)),
                    CODE_SHA1 => Ok(RequestDigest::Sha1(array(r)?)),
                    CODE_SHA256 => Ok(RequestDigest::Sha256(array(r)?)),
                    other => Err(DecodeError::InvalidField {
                        field: "request digest hash code",
                        value: u64::from(other),
                    }),
                }
            }
        }
    }
}

fn array<const N: usize>(r: &mut Reader<'_>) -> Result<[u8; N], DecodeError> {
    let mut out = [0u8; N];
    out.copy_from_slice(r.take(N, "request digest")?);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::testing::hex;

    /// Digest §11.5: the 45-octet header+body of a `10.1000/1` request with RD.
    const REQUEST: &str = "00000001 00000000 19800000 0001 00 00 5f5e1000 00000015
        00000009 31302e313030302f31 00000000 00000000";
    const SHA256: &str = "27a27e8f7f7b14ea2c209471c7e185c6bd011987ef18117cbd482039ae23dab0";

    fn round_trip(digest: &RequestDigest) -> RequestDigest {
        let mut w = Writer::new();
        digest.encode(&mut w);
        let bytes = w.into_bytes();
        let mut r = Reader::new(&bytes);
        let back = RequestDigest::decode(&mut r).unwrap();
        r.finish("digest").unwrap();
        back
    }

    #[test]
    fn sha256_digest_matches_digest_vector() {
        let request = hex(REQUEST);
        assert_eq!(request.len(), 45);
        let digest = RequestDigest::for_version(ProtocolVersion::new(2, 11), &request);
        assert_eq!(digest.digest(), &hex(SHA256)[..]);
        assert!(digest.matches(&request));
        assert!(!digest.matches(&request[1..]));
        let mut w = Writer::new();
        digest.encode(&mut w);
        assert_eq!(w.into_bytes(), hex(&format!("03 {SHA256}")));
    }

    #[test]
    fn algorithm_follows_the_response_version() {
        let request = hex(REQUEST);
        let at = |minor| RequestDigest::for_version(ProtocolVersion::new(2, minor), &request);
        assert!(matches!(at(7), RequestDigest::Sha256(_)));
        assert!(matches!(at(6), RequestDigest::Sha1(_)));
        assert!(matches!(at(1), RequestDigest::Sha1(_)));
        assert!(matches!(at(0), RequestDigest::OldFormat(ref d) if d.len() == 16));
    }

    #[test]
    fn every_format_round_trips() {
        let request = hex(REQUEST);
        for digest in [
            RequestDigest::for_version(ProtocolVersion::new(2, 0), &request),
            RequestDigest::Md5([7; 16]),
            RequestDigest::for_version(ProtocolVersion::new(2, 5), &request),
            RequestDigest::for_version(ProtocolVersion::new(2, 11), &request),
        ] {
            assert_eq!(round_trip(&digest), digest);
            assert!(digest.matches(&request) || matches!(digest, RequestDigest::Md5(_)));
        }
    }

    #[test]
    fn unknown_hash_code_and_short_digest_are_refused() {
        let err = RequestDigest::decode(&mut Reader::new(&[0x04, 0, 0])).unwrap_err();
        assert!(matches!(err, DecodeError::InvalidField { value: 4, .. }));
        let err = RequestDigest::decode(&mut Reader::new(&[0x03, 0, 0])).unwrap_err();
        assert!(matches!(err, DecodeError::Truncated { needed: 30, .. }));
    }
}
