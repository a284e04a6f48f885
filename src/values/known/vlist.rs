//! HS_VLIST data: a list of value references, used for admin groups (digest §6.4).
//!
//! Layout: `List< Str handle ‖ u32 index >`, the same as a value's references
//! (J9 `encodeValueReferenceList`, whose decoder is strict: trailing octets are an
//! error).

use crate::values::value::ValueReference;
use crate::values::wire::{DecodeError, Reader, Writer};

/// The data of an HS_VLIST value: the members, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ValueList(pub Vec<ValueReference>);

/// An admin group is an HS_VLIST whose members name administrators' keys (or
/// further groups), conventionally at index 200.
pub type AdminGroup = ValueList;

impl ValueList {
    /// Decodes HS_VLIST data; trailing octets are an error.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(bytes);
        let count = r.count("HS_VLIST count", ValueReference::MIN_LEN)?;
        let mut members = Vec::with_capacity(count);
        for _ in 0..count {
            members.push(ValueReference::decode(&mut r)?);
        }
        r.finish("HS_VLIST data")?;
        Ok(ValueList(members))
    }

    /// The HS_VLIST data.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.count(self.0.len());
        for member in &self.0 {
            member.encode(&mut w);
        }
        w.into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::super::hex;
    use super::*;
    use crate::values::value::ValueIndex;

    /// Digest §6.4: a group of two members.
    const VLIST_HEX: &str = "00000002 0000000c 302e4e412f31302e31303030 000000c8
        0000000d 31302e313030302f61646d696e 0000012c";

    fn group() -> AdminGroup {
        ValueList(vec![
            ValueReference {
                handle: "0.NA/10.1000".into(),
                index: ValueIndex(200),
            },
            ValueReference {
                handle: "10.1000/admin".into(),
                index: ValueIndex(300),
            },
        ])
    }

    #[test]
    fn matches_digest_vector() {
        assert_eq!(group().encode(), hex(VLIST_HEX));
        assert_eq!(ValueList::decode(&hex(VLIST_HEX)).unwrap(), group());
    }

    #[test]
    fn empty_list_round_trips() {
        let empty = ValueList::default();
        assert_eq!(empty.encode(), hex("00000000"));
        assert_eq!(ValueList::decode(&empty.encode()).unwrap(), empty);
    }

    #[test]
    fn trailing_octets_are_refused() {
        let mut bytes = hex(VLIST_HEX);
        bytes.push(0);
        assert!(matches!(
            ValueList::decode(&bytes),
            Err(DecodeError::TrailingBytes { count: 1, .. })
        ));
    }

    #[test]
    fn hostile_count_is_refused() {
        assert!(ValueList::decode(&hex("ffffffff 00000000")).is_err());
    }
}
