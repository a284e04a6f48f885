//! HS_ADMIN data: who may administer a handle (digest §6.1).
//!
//! Layout: `Permissions u16 ‖ AdminHandle Str ‖ AdminIndex u32`, then, in records
//! written by software up to 7.3, two zero octets that J9 accepts and re-emits
//! (`AdminRecord.legacyByteLength`); we do the same and keep the flag so the bytes
//! round-trip. Any other trailing octet is an error.

use std::fmt;
use std::str::FromStr;

use thiserror::Error;

use crate::values::wire::{DecodeError, Reader, Writer};

/// The administrator permission mask of an HS_ADMIN record (digest §6.1).
///
/// Every bit read from the wire is kept, including ones J9 does not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AdminPermissions(pub u16);

impl AdminPermissions {
    /// May create handles under the prefix (RFC: Add_Handle).
    pub const ADD_HANDLE: Self = Self(0x0001);
    /// May delete handles (RFC: Delete_Handle).
    pub const DELETE_HANDLE: Self = Self(0x0002);
    /// May create derived prefixes (RFC: Add_NA).
    pub const ADD_DERIVED_PREFIX: Self = Self(0x0004);
    /// May delete derived prefixes (RFC: Delete_NA).
    pub const DELETE_DERIVED_PREFIX: Self = Self(0x0008);
    /// May change values (RFC: Modify_Value).
    pub const MODIFY_VALUE: Self = Self(0x0010);
    /// May remove values (RFC: Delete_Value).
    pub const REMOVE_VALUE: Self = Self(0x0020);
    /// May add values (RFC: Add_Value).
    pub const ADD_VALUE: Self = Self(0x0040);
    /// May change HS_ADMIN values (RFC: Modify_Admin).
    pub const MODIFY_ADMIN: Self = Self(0x0080);
    /// May remove HS_ADMIN values (RFC: Remove_Admin).
    pub const REMOVE_ADMIN: Self = Self(0x0100);
    /// May add HS_ADMIN values (RFC: Add_Admin).
    pub const ADD_ADMIN: Self = Self(0x0200);
    /// May read values without public read (RFC: Authorized_Read).
    pub const READ_VALUE: Self = Self(0x0400);
    /// May list the handles under a prefix (RFC: List_Handle).
    pub const LIST_HANDLES: Self = Self(0x0800);
    /// May list derived prefixes (RFC: List_NA). J9 drops this bit on re-encode; we
    /// keep it, but it has no place in the 12-character bit string.
    pub const LIST_NA: Self = Self(0x1000);
    /// The twelve J9 permissions, `ADD_HANDLE` to `LIST_HANDLES` (`"*"` in J9 JSON).
    pub const ALL: Self = Self(0x0fff);

    /// Length of the J9 bit string.
    const BIT_STRING_LEN: usize = 12;

    /// Whether every bit of `other` is set here.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// These permissions with the bits of `other` added.
    pub const fn with(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// These permissions with the bits of `other` removed.
    pub const fn without(self, other: Self) -> Self {
        Self(self.0 & !other.0)
    }

    /// The J9 JSON form: the twelve low bits as `0`/`1`, most significant first (the
    /// first character is `LIST_HANDLES`, the last `ADD_HANDLE`), e.g. `"011111110011"`.
    /// `LIST_NA` and higher bits are left out, as in J9.
    pub fn to_bit_string(self) -> String {
        (0..Self::BIT_STRING_LEN)
            .rev()
            .map(|bit| if self.0 & (1 << bit) != 0 { '1' } else { '0' })
            .collect()
    }
}

impl fmt::Display for AdminPermissions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_bit_string())
    }
}

/// A string that is not twelve `0`/`1` characters nor `"*"`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("admin permissions must be 12 characters of 0 and 1, or \"*\": {text:?}")]
pub struct AdminPermissionsParseError {
    /// The text that was refused.
    pub text: String,
}

impl FromStr for AdminPermissions {
    type Err = AdminPermissionsParseError;

    /// Parses the J9 bit string (see [`AdminPermissions::to_bit_string`]); `"*"` is
    /// [`AdminPermissions::ALL`].
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text == "*" {
            return Ok(Self::ALL);
        }
        let err = || AdminPermissionsParseError {
            text: text.to_owned(),
        };
        if text.len() != Self::BIT_STRING_LEN {
            return Err(err());
        }
        text.bytes().try_fold(Self(0), |acc, c| match c {
            b'0' => Ok(Self(acc.0 << 1)),
            b'1' => Ok(Self((acc.0 << 1) | 1)),
            _ => Err(err()),
        })
    }
}

/// The data of an HS_ADMIN value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AdminRecord {
    /// What the administrator may do.
    pub permissions: AdminPermissions,
    /// The handle holding the administrator's key or group, e.g. `0.NA/10.1000`.
    pub admin_handle: String,
    /// The index of that value; 0 means any index (J9 ≥ 8).
    pub admin_index: u32,
    /// Whether the record carries the two zero octets of software up to 7.3.
    pub legacy_padding: bool,
}

impl AdminRecord {
    /// Decodes HS_ADMIN data; only the two legacy zero octets may follow the record.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(bytes);
        let permissions = AdminPermissions(r.u16("admin permissions")?);
        let admin_handle = r.str("admin handle")?.to_owned();
        let admin_index = r.u32("admin index")?;
        let legacy_padding = r.remaining() == 2;
        if legacy_padding {
            let padding = r.u16("admin legacy padding")?;
            if padding != 0 {
                return Err(DecodeError::InvalidField {
                    field: "admin legacy padding",
                    value: u64::from(padding),
                });
            }
        }
        r.finish("HS_ADMIN data")?;
        Ok(AdminRecord {
            permissions,
            admin_handle,
            admin_index,
            legacy_padding,
        })
    }

    /// The HS_ADMIN data, with the legacy padding if the record had it.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(12 + self.admin_handle.len());
        w.u16(self.permissions.0);
        w.str(&self.admin_handle);
        w.u32(self.admin_index);
        if self.legacy_padding {
            w.u16(0);
        }
        w.into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::super::hex;
    use super::*;

    /// Digest §11.10: all twelve J9 permissions for `200:0.NA/10.1000`.
    const ADMIN_HEX: &str = "0fff 0000000c 302e4e412f31302e31303030 000000c8";

    fn record() -> AdminRecord {
        AdminRecord {
            permissions: AdminPermissions::ALL,
            admin_handle: "0.NA/10.1000".into(),
            admin_index: 200,
            legacy_padding: false,
        }
    }

    #[test]
    fn matches_digest_vector() {
        assert_eq!(record().encode(), hex(ADMIN_HEX));
        assert_eq!(AdminRecord::decode(&hex(ADMIN_HEX)).unwrap(), record());
    }

    #[test]
    fn root_admin_list_vector_decodes() {
        // Digest §6.1: root value 100, `0fff 00000011 "0.ADMIN/ADMINLIST" 000000c8`.
        let bytes = hex("0fff 00000011 302e41444d494e2f41444d494e4c495354 000000c8");
        let decoded = AdminRecord::decode(&bytes).unwrap();
        assert_eq!(decoded.admin_handle, "0.ADMIN/ADMINLIST");
        assert_eq!(decoded.encode(), bytes);
    }

    #[test]
    fn legacy_padding_is_accepted_and_re_emitted() {
        let bytes = hex(&format!("{ADMIN_HEX} 0000"));
        let decoded = AdminRecord::decode(&bytes).unwrap();
        assert!(decoded.legacy_padding);
        assert_eq!(decoded.encode(), bytes);
    }

    #[test]
    fn other_trailing_octets_are_refused() {
        let nonzero = hex(&format!("{ADMIN_HEX} 0001"));
        assert!(matches!(
            AdminRecord::decode(&nonzero),
            Err(DecodeError::InvalidField { value: 1, .. })
        ));
        let three = hex(&format!("{ADMIN_HEX} 000000"));
        assert!(matches!(
            AdminRecord::decode(&three),
            Err(DecodeError::TrailingBytes { count: 3, .. })
        ));
    }

    #[test]
    fn bit_string_is_msb_first() {
        let perms = AdminPermissions::ALL
            .without(AdminPermissions::ADD_DERIVED_PREFIX)
            .without(AdminPermissions::DELETE_DERIVED_PREFIX)
            .without(AdminPermissions::LIST_HANDLES);
        assert_eq!(perms.to_bit_string(), "011111110011");
        assert_eq!("011111110011".parse::<AdminPermissions>().unwrap(), perms);
        assert_eq!(
            "*".parse::<AdminPermissions>().unwrap(),
            AdminPermissions::ALL
        );
        assert_eq!(AdminPermissions::LIST_NA.to_bit_string(), "000000000000");
    }

    #[test]
    fn malformed_bit_strings_are_refused() {
        for text in ["", "01111111001", "0111111100111", "01111111001x", "**"] {
            assert!(text.parse::<AdminPermissions>().is_err(), "{text:?}");
        }
    }
}
