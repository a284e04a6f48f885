//! The handle value model and its RFC 3652 byte encoding (digest §5).
//!
//! Owns [`HandleValue`] and the shapes around it: [`ValueIndex`], [`Ttl`],
//! [`Permissions`], [`ValueReference`], and `encode`/`decode` of one value and of a
//! value list. Pure: no I/O, no clock (timestamps are given by the caller).
//!
//! Wire layout of one value, all integers big-endian:
//! `Index u32 ‖ Timestamp u32 ‖ TTLType u8 ‖ TTL u32 ‖ Permissions u8 ‖ Type Str ‖
//! Data Bytes ‖ References List<Str handle ‖ u32 index>`.

use serde::{Deserialize, Serialize};

use super::wire::{DecodeError, Reader, Writer};

/// Octets a value takes at the least: 14 fixed, the type length, the data length and
/// the reference count.
pub const MIN_VALUE_LEN: usize = 14 + 4 + 4 + 4;

/// The position of a value inside its handle; unique within the handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ValueIndex(pub u32);

impl std::fmt::Display for ValueIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// How long a value may be cached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Ttl {
    /// Seconds from the moment it was resolved (TTLType 0).
    Relative(u32),
    /// An absolute expiry, in seconds since the Unix epoch (TTLType 1).
    Absolute(u32),
}

impl Ttl {
    /// The reference server's default: one day, relative.
    pub const DEFAULT: Ttl = Ttl::Relative(86_400);

    fn wire_type(self) -> u8 {
        match self {
            Ttl::Relative(_) => 0,
            Ttl::Absolute(_) => 1,
        }
    }

    /// The TTL field's value, whatever its type.
    pub fn seconds(self) -> u32 {
        match self {
            Ttl::Relative(s) | Ttl::Absolute(s) => s,
        }
    }
}

/// The permission octet of a value (digest §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Permissions(u8);

impl Permissions {
    /// An administrator may read the value.
    pub const ADMIN_READ: Permissions = Permissions(0x08);
    /// An administrator may change the value.
    pub const ADMIN_WRITE: Permissions = Permissions(0x04);
    /// Anyone may read the value (it is part of resolution).
    pub const PUBLIC_READ: Permissions = Permissions(0x02);
    /// Anyone may change the value.
    pub const PUBLIC_WRITE: Permissions = Permissions(0x01);
    /// The usual default: administrators read and write, the public reads (`0x0E`).
    pub const DEFAULT: Permissions = Permissions(0x0E);
    /// Administrators only (`0x0C`): the default for HS_ADMIN and HS_SECKEY.
    pub const ADMIN_ONLY: Permissions = Permissions(0x0C);

    /// The permissions from their wire octet; the four high bits are kept as sent.
    pub const fn from_bits(bits: u8) -> Self {
        Permissions(bits)
    }

    /// The wire octet.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// Whether every bit of `other` is set here.
    pub const fn contains(self, other: Permissions) -> bool {
        self.0 & other.0 == other.0
    }

    /// These permissions with the bits of `other` added.
    pub const fn with(self, other: Permissions) -> Permissions {
        Permissions(self.0 | other.0)
    }

    /// These permissions with the bits of `other` removed.
    pub const fn without(self, other: Permissions) -> Permissions {
        Permissions(self.0 & !other.0)
    }

    /// The four permissions in the order REST JSON and batch files write them:
    /// admin read, admin write, public read, public write.
    pub const WRITTEN_ORDER: [Permissions; 4] = [
        Permissions::ADMIN_READ,
        Permissions::ADMIN_WRITE,
        Permissions::PUBLIC_READ,
        Permissions::PUBLIC_WRITE,
    ];

    /// Reads four `0`/`1` characters in [`Permissions::WRITTEN_ORDER`] (`1110` is
    /// [`Permissions::DEFAULT`]); `None` for anything else.
    pub fn from_bit_string(text: &str) -> Option<Permissions> {
        if text.len() != Self::WRITTEN_ORDER.len() {
            return None;
        }
        text.bytes()
            .zip(Self::WRITTEN_ORDER)
            .try_fold(Permissions(0), |held, (bit, permission)| match bit {
                b'1' => Some(held.with(permission)),
                b'0' => Some(held),
                _ => None,
            })
    }
}

/// A reference from a value to a value of another (or the same) handle.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ValueReference {
    /// The referenced handle, UTF-8.
    pub handle: String,
    /// The referenced value's index (0: the whole handle).
    pub index: ValueIndex,
}

impl ValueReference {
    /// Octets a reference takes at the least: the handle length and the index.
    pub const MIN_LEN: usize = 8;

    /// Appends `Str handle ‖ u32 index`, the layout shared by value references and
    /// HS_VLIST members.
    pub fn encode(&self, w: &mut Writer) {
        w.str(&self.handle);
        w.u32(self.index.0);
    }

    /// Reads one reference written by [`ValueReference::encode`].
    pub fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let handle = r.str("reference handle")?.to_owned();
        let index = ValueIndex(r.u32("reference index")?);
        Ok(ValueReference { handle, index })
    }
}

/// One typed value of a handle.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HandleValue {
    /// Unique within the handle.
    pub index: ValueIndex,
    /// The type name, UTF-8 (`URL`, `HS_ADMIN`, `10320/loc`, …).
    pub value_type: String,
    /// The type-specific data.
    pub data: Vec<u8>,
    /// How long it may be cached.
    pub ttl: Ttl,
    /// Seconds since the Unix epoch of the last change, assigned by the server.
    pub timestamp: u32,
    /// Who may read and write it.
    pub permissions: Permissions,
    /// References to other values.
    pub references: Vec<ValueReference>,
}

impl HandleValue {
    /// A value with the default TTL and permissions, no references, timestamp 0.
    pub fn new(index: u32, value_type: impl Into<String>, data: impl Into<Vec<u8>>) -> Self {
        HandleValue {
            index: ValueIndex(index),
            value_type: value_type.into(),
            data: data.into(),
            ttl: Ttl::DEFAULT,
            timestamp: 0,
            permissions: Permissions::DEFAULT,
            references: Vec::new(),
        }
    }

    /// The number of octets [`HandleValue::encode`] writes.
    pub fn encoded_len(&self) -> usize {
        MIN_VALUE_LEN
            + self.value_type.len()
            + self.data.len()
            + self
                .references
                .iter()
                .map(|r| 8 + r.handle.len())
                .sum::<usize>()
    }

    /// Appends the RFC 3652 encoding of this value.
    pub fn encode(&self, w: &mut Writer) {
        w.u32(self.index.0);
        w.u32(self.timestamp);
        w.u8(self.ttl.wire_type());
        w.u32(self.ttl.seconds());
        w.u8(self.permissions.bits());
        w.str(&self.value_type);
        w.bytes(&self.data);
        w.count(self.references.len());
        for reference in &self.references {
            reference.encode(w);
        }
    }

    /// The RFC 3652 encoding of this value on its own.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(self.encoded_len());
        self.encode(&mut w);
        w.into_bytes()
    }

    /// Reads one value from `r`.
    pub fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let index = ValueIndex(r.u32("value index")?);
        let timestamp = r.u32("value timestamp")?;
        let ttl_type = r.u8("TTL type")?;
        let ttl_seconds = r.u32("TTL")?;
        let ttl = match ttl_type {
            0 => Ttl::Relative(ttl_seconds),
            1 => Ttl::Absolute(ttl_seconds),
            other => {
                return Err(DecodeError::InvalidField {
                    field: "TTL type",
                    value: u64::from(other),
                });
            }
        };
        let permissions = Permissions::from_bits(r.u8("permissions")?);
        let value_type = r.str("value type")?.to_owned();
        let data = r.bytes("value data")?.to_vec();
        let count = r.count("value references", ValueReference::MIN_LEN)?;
        let mut references = Vec::with_capacity(count);
        for _ in 0..count {
            references.push(ValueReference::decode(r)?);
        }
        Ok(HandleValue {
            index,
            value_type,
            data,
            ttl,
            timestamp,
            permissions,
            references,
        })
    }

    /// Decodes exactly one value; trailing octets are an error.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(bytes);
        let value = HandleValue::decode(&mut r)?;
        r.finish("handle value")?;
        Ok(value)
    }
}

/// Appends a value list: a `u32` count, then each value.
pub fn encode_value_list(values: &[HandleValue], w: &mut Writer) {
    w.count(values.len());
    for value in values {
        value.encode(w);
    }
}

/// The number of octets [`encode_value_list`] writes for `values`: what a handle's
/// values take in a resolution answer, and the measure of a handle's size.
pub fn value_list_len(values: &[HandleValue]) -> usize {
    4 + values.iter().map(HandleValue::encoded_len).sum::<usize>()
}

/// Reads a value list written by [`encode_value_list`].
pub fn decode_value_list(r: &mut Reader<'_>) -> Result<Vec<HandleValue>, DecodeError> {
    let count = r.count("value count", MIN_VALUE_LEN)?;
    let mut values = Vec::with_capacity(count);
    for _ in 0..count {
        values.push(HandleValue::decode(r)?);
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let digits: String = s.chars().filter(|c| c.is_ascii_hexdigit()).collect();
        (0..digits.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&digits[i..i + 2], 16).unwrap())
            .collect()
    }

    /// Digest §11.4: the URL value of `10.1000/1` as the J9 encoder writes it.
    const URL_VALUE_HEX: &str = "00000001 5f5e0000 00 00015180 0e 00000003 55524c
        00000014 68747470733a2f2f7777772e646f692e6f72672f 00000000";

    fn doi_url_value() -> HandleValue {
        HandleValue {
            timestamp: 0x5f5e_0000,
            ..HandleValue::new(1, "URL", "https://www.doi.org/")
        }
    }

    #[test]
    fn url_value_matches_digest_vector() {
        assert_eq!(doi_url_value().to_bytes(), hex(URL_VALUE_HEX));
        assert_eq!(
            HandleValue::from_bytes(&hex(URL_VALUE_HEX)).unwrap(),
            doi_url_value()
        );
    }

    /// Digest §11.3: an HS_SITE value's fixed part (index 1, TTL 86400, perms 0x0e).
    #[test]
    fn value_header_matches_digest_vector() {
        let value = HandleValue {
            timestamp: 0x5f00_0000,
            ..HandleValue::new(1, "HS_SITE", Vec::new())
        };
        let bytes = value.to_bytes();
        assert_eq!(
            &bytes[..25],
            &hex("00000001 5f000000 00 00015180 0e 00000007 48535f53495445")[..]
        );
    }

    #[test]
    fn references_round_trip() {
        let value = HandleValue {
            ttl: Ttl::Absolute(1_900_000_000),
            permissions: Permissions::ADMIN_ONLY,
            references: vec![ValueReference {
                handle: "0.NA/10.1000".into(),
                index: ValueIndex(200),
            }],
            ..HandleValue::new(7, "DESC", "x")
        };
        let bytes = value.to_bytes();
        assert_eq!(bytes.len(), value.encoded_len());
        assert_eq!(HandleValue::from_bytes(&bytes).unwrap(), value);
    }

    #[test]
    fn unknown_ttl_type_is_refused() {
        let mut bytes = doi_url_value().to_bytes();
        bytes[8] = 2;
        assert_eq!(
            HandleValue::from_bytes(&bytes).unwrap_err(),
            DecodeError::InvalidField {
                field: "TTL type",
                value: 2
            }
        );
    }

    #[test]
    fn value_list_round_trips() {
        let values = vec![doi_url_value(), HandleValue::new(2, "EMAIL", "a@b.org")];
        let mut w = Writer::new();
        encode_value_list(&values, &mut w);
        let bytes = w.into_bytes();
        assert_eq!(bytes.len(), value_list_len(&values));
        let mut r = Reader::new(&bytes);
        assert_eq!(decode_value_list(&mut r).unwrap(), values);
        r.finish("list").unwrap();
    }
}
