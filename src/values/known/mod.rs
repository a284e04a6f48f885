//! The data layouts of the well-known value types (digest §6), one file each.
//!
//! Every layout is sans-IO: `decode(&[u8])` takes a value's `Data` and fails with a
//! precise [`DecodeError`](crate::values::DecodeError) (trailing octets are an error,
//! except the J9 quirks each file documents); `encode(&self)` returns the `Data` and
//! cannot fail. Depends only on [`crate::values::wire`] and [`crate::values::value`].

pub mod admin;
pub mod pubkey;
pub mod site;
pub mod text;
pub mod vlist;

pub use admin::{AdminPermissions, AdminPermissionsParseError, AdminRecord};
pub use pubkey::PublicKey;
pub use site::{
    HashOption, Interface, InterfaceKind, InterfaceProtocol, ServerRecord, SiteFlags, SiteInfo,
};
pub use text::HandleTarget;
pub use vlist::{AdminGroup, ValueList};

/// Test helper: the octets of a hex string, ignoring spaces and line breaks.
#[cfg(test)]
pub(crate) fn hex(s: &str) -> Vec<u8> {
    let digits: String = s.chars().filter(|c| c.is_ascii_hexdigit()).collect();
    (0..digits.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&digits[i..i + 2], 16).unwrap())
        .collect()
}
