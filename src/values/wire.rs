//! Length-bounded, big-endian byte reader and writer for the RFC 3652 encodings.
//!
//! Owns the primitive shapes every Handle encoding is built from (digest §0):
//! `u8/u16/u32/u64`, `Str` and `Bytes` (a `u32` length then that many octets) and
//! `List<T>` (a `u32` count then the items). Pure: no I/O, no clock.
//!
//! Invariants: a [`Reader`] never reads past its slice, never allocates more than the
//! bytes actually present (a hostile count cannot reserve memory), and reports the
//! offset where decoding failed. Encoding cannot fail except for lengths that do not
//! fit the wire's `u32`, which callers rule out by bounding sizes first.

use thiserror::Error;

/// Why bytes could not be decoded. Small and precise, as in quinn-proto.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The input ended before the field that starts at `offset`.
    #[error("input ends early: {field} at offset {offset} needs {needed} more octets")]
    Truncated {
        /// Which field was being read.
        field: &'static str,
        /// Where the field starts.
        offset: usize,
        /// How many octets were missing.
        needed: usize,
    },
    /// Octets were left after a complete structure.
    #[error("{count} unexpected trailing octets after {what}")]
    TrailingBytes {
        /// What had been decoded.
        what: &'static str,
        /// How many octets were left.
        count: usize,
    },
    /// A `Str` field held bytes that are not UTF-8.
    #[error("{field} at offset {offset} is not valid UTF-8")]
    InvalidUtf8 {
        /// Which field.
        field: &'static str,
        /// Where its text starts.
        offset: usize,
    },
    /// A field held a value outside its allowed range.
    #[error("{field} has invalid value {value}")]
    InvalidField {
        /// Which field.
        field: &'static str,
        /// The value found.
        value: u64,
    },
    /// A field decoded but its content breaks a rule of its layout (for example a
    /// handle without a `/`).
    #[error("{field} is malformed: {reason}")]
    Malformed {
        /// Which field.
        field: &'static str,
        /// The rule it breaks.
        reason: &'static str,
    },
}

/// A cursor over a byte slice that decodes the RFC 3652 primitive shapes.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    bytes: &'a [u8],
    offset: usize,
}

impl<'a> Reader<'a> {
    /// Starts reading at the beginning of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, offset: 0 }
    }

    /// The offset of the next octet to be read.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// How many octets are left.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.offset
    }

    /// Takes the next `len` octets.
    pub fn take(&mut self, len: usize, field: &'static str) -> Result<&'a [u8], DecodeError> {
        if len > self.remaining() {
            return Err(DecodeError::Truncated {
                field,
                offset: self.offset,
                needed: len - self.remaining(),
            });
        }
        let start = self.offset;
        self.offset += len;
        Ok(&self.bytes[start..self.offset])
    }

    /// Takes every octet that is left.
    pub fn take_rest(&mut self) -> &'a [u8] {
        let rest = &self.bytes[self.offset..];
        self.offset = self.bytes.len();
        rest
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, field)?);
        Ok(out)
    }

    /// Reads one octet.
    pub fn u8(&mut self, field: &'static str) -> Result<u8, DecodeError> {
        Ok(self.array::<1>(field)?[0])
    }

    /// Reads a big-endian `u16`.
    pub fn u16(&mut self, field: &'static str) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array(field)?))
    }

    /// Reads a big-endian `u32`.
    pub fn u32(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array(field)?))
    }

    /// Reads a big-endian `u64`.
    pub fn u64(&mut self, field: &'static str) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.array(field)?))
    }

    /// Reads `Bytes`: a `u32` length and that many octets.
    pub fn bytes(&mut self, field: &'static str) -> Result<&'a [u8], DecodeError> {
        let len = self.u32(field)?;
        self.take(len as usize, field)
    }

    /// Reads `Str`: like [`Reader::bytes`], and the octets must be UTF-8.
    pub fn str(&mut self, field: &'static str) -> Result<&'a str, DecodeError> {
        let start = self.offset + 4;
        let raw = self.bytes(field)?;
        std::str::from_utf8(raw).map_err(|_| DecodeError::InvalidUtf8 {
            field,
            offset: start,
        })
    }

    /// Reads a `List` count and checks that `count` items of at least `min_item_len`
    /// octets each could still fit, so a hostile count cannot make callers reserve memory.
    pub fn count(
        &mut self,
        field: &'static str,
        min_item_len: usize,
    ) -> Result<usize, DecodeError> {
        let offset = self.offset;
        let count = self.u32(field)? as usize;
        let needed = count.saturating_mul(min_item_len.max(1));
        if needed > self.remaining() {
            return Err(DecodeError::Truncated {
                field,
                offset,
                needed: needed - self.remaining(),
            });
        }
        Ok(count)
    }

    /// Fails unless every octet has been read.
    pub fn finish(&self, what: &'static str) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            count => Err(DecodeError::TrailingBytes { what, count }),
        }
    }
}

/// Appends the RFC 3652 primitive shapes to a growing buffer.
#[derive(Debug, Default, Clone)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// An empty writer.
    pub fn new() -> Self {
        Writer::default()
    }

    /// An empty writer with room for `capacity` octets.
    pub fn with_capacity(capacity: usize) -> Self {
        Writer {
            buf: Vec::with_capacity(capacity),
        }
    }

    /// The bytes written so far.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    /// How many octets have been written.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether nothing has been written.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Writes one octet.
    pub fn u8(&mut self, value: u8) {
        self.buf.push(value);
    }

    /// Writes a big-endian `u16`.
    pub fn u16(&mut self, value: u16) {
        self.buf.extend_from_slice(&value.to_be_bytes());
    }

    /// Writes a big-endian `u32`.
    pub fn u32(&mut self, value: u32) {
        self.buf.extend_from_slice(&value.to_be_bytes());
    }

    /// Writes a big-endian `u64`.
    pub fn u64(&mut self, value: u64) {
        self.buf.extend_from_slice(&value.to_be_bytes());
    }

    /// Writes octets with no length prefix.
    pub fn raw(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Writes `Bytes`: a `u32` length then the octets.
    ///
    /// Lengths are bounded by callers (a message is at most 256 KiB), so the length
    /// always fits; a larger slice is a programming error and saturates.
    pub fn bytes(&mut self, bytes: &[u8]) {
        self.u32(wire_len(bytes.len()));
        self.raw(bytes);
    }

    /// Writes `Str`: the UTF-8 octets as `Bytes`.
    pub fn str(&mut self, text: &str) {
        self.bytes(text.as_bytes());
    }

    /// Writes a `List` count.
    pub fn count(&mut self, count: usize) {
        self.u32(wire_len(count));
    }

    /// Overwrites four octets at `offset` with a big-endian `u32` (for lengths known
    /// only after the body is written).
    pub fn patch_u32(&mut self, offset: usize, value: u32) {
        self.buf[offset..offset + 4].copy_from_slice(&value.to_be_bytes());
    }
}

/// A length as the wire's `u32`. Sizes are bounded long before `u32::MAX`.
pub fn wire_len(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primitives_round_trip() {
        let mut w = Writer::new();
        w.u8(7);
        w.u16(0x0102);
        w.u32(0x0304_0506);
        w.u64(0x0708_090a_0b0c_0d0e);
        w.str("日本");
        w.bytes(&[0xff, 0x00]);
        let bytes = w.into_bytes();
        let mut r = Reader::new(&bytes);
        assert_eq!(r.u8("a").unwrap(), 7);
        assert_eq!(r.u16("b").unwrap(), 0x0102);
        assert_eq!(r.u32("c").unwrap(), 0x0304_0506);
        assert_eq!(r.u64("d").unwrap(), 0x0708_090a_0b0c_0d0e);
        assert_eq!(r.str("e").unwrap(), "日本");
        assert_eq!(r.bytes("f").unwrap(), &[0xff, 0x00]);
        r.finish("all").unwrap();
    }

    #[test]
    fn truncated_length_prefixed_field_is_an_error() {
        let bytes = [0, 0, 0, 5, b'a', b'b'];
        let err = Reader::new(&bytes).bytes("data").unwrap_err();
        assert_eq!(
            err,
            DecodeError::Truncated {
                field: "data",
                offset: 4,
                needed: 3
            }
        );
    }

    #[test]
    fn hostile_count_is_refused_before_allocation() {
        let bytes = [0xff, 0xff, 0xff, 0xff, 0, 0];
        assert!(Reader::new(&bytes).count("values", 4).is_err());
    }

    #[test]
    fn invalid_utf8_in_str_is_reported() {
        let bytes = [0, 0, 0, 1, 0xff];
        assert_eq!(
            Reader::new(&bytes).str("type").unwrap_err(),
            DecodeError::InvalidUtf8 {
                field: "type",
                offset: 4
            }
        );
    }

    #[test]
    fn trailing_bytes_are_reported() {
        let bytes = [1, 2];
        let mut r = Reader::new(&bytes);
        r.u8("x").unwrap();
        assert_eq!(
            r.finish("thing").unwrap_err(),
            DecodeError::TrailingBytes {
                what: "thing",
                count: 1
            }
        );
    }
}
