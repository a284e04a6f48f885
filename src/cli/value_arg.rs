//! The `--value INDEX:TYPE:DATA` argument of `hdl create`, `add` and `modify`.
//!
//! DATA is UTF-8 text taken as the value's data, except for HS_ADMIN, whose DATA is
//! `INDEX:PERMISSIONS:HANDLE` as in Handle.Net batch files (e.g.
//! `100:HS_ADMIN:300:111111111111:0.NA/TEST`: admin index 300, the 12-character
//! permission bit string, admin handle), encoded as an HS_ADMIN record, and for
//! HS_PUBKEY, whose DATA is `file:KEY.pem` (the public half of that PEM key, as
//! `hdl keygen` writes it) or the HS_PUBKEY octets in hex (as `hdl keygen` prints), and for
//! HS_SITE, HS_SITE.6, HS_SITE.PREFIX and HS_NA_DELEGATE, whose DATA is the site record in
//! hex (as `hdl site` prints). Each value
//! gets the permissions of its type (`values::default_permissions`), the default TTL
//! and no references; the server checks the data of known types.

use std::path::Path;

use crate::names::Handle;
use crate::values::{AdminPermissions, AdminRecord, HandleValue, KnownType, default_permissions};

/// Parses one `--value` (a clap value parser: the error names the problem).
pub fn parse_value(text: &str) -> Result<HandleValue, String> {
    let mut parts = text.splitn(3, ':');
    let (Some(index), Some(value_type), Some(data)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(format!("{text:?} is not INDEX:TYPE:DATA"));
    };
    let index = parse_index(index)?;
    if value_type.is_empty() {
        return Err(format!("{text:?} has an empty type"));
    }
    let data = match KnownType::from_name(value_type) {
        Some(KnownType::HsAdmin) => admin_data(data)?,
        Some(KnownType::HsPubkey) => public_key_data(data)?,
        Some(
            KnownType::HsSite
            | KnownType::HsSite6
            | KnownType::HsSitePrefix
            | KnownType::HsNaDelegate,
        ) => decode_hex(data).ok_or_else(|| {
            format!("{value_type} data must be hex octets (as `hdl site` prints), not {data:?}")
        })?,
        _ => data.as_bytes().to_vec(),
    };
    Ok(HandleValue {
        permissions: default_permissions(value_type),
        ..HandleValue::new(index, value_type, data)
    })
}

/// Parses a value index: a number from 1 to 4294967295.
pub fn parse_index(text: &str) -> Result<u32, String> {
    match text.parse::<u32>() {
        Ok(index) if index > 0 => Ok(index),
        _ => Err(format!(
            "value index {text:?} must be a number from 1 to 4294967295"
        )),
    }
}

/// HS_PUBKEY data from `file:KEY.pem` or hex.
fn public_key_data(text: &str) -> Result<Vec<u8>, String> {
    if let Some(path) = text.strip_prefix("file:") {
        let key = super::admin_arg::read_key(Path::new(path)).map_err(|e| format!("{e:#}"))?;
        return Ok(key.public_key().encode());
    }
    decode_hex(text)
        .ok_or_else(|| format!("HS_PUBKEY data must be file:KEY.pem or hex octets, not {text:?}"))
}

/// Octets from hex digits (even count, no separators); `None` otherwise.
fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if text.is_empty() || !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(text.get(at..at + 2)?, 16).ok())
        .collect()
}

/// Encodes `INDEX:PERMISSIONS:HANDLE` as an HS_ADMIN record.
pub(super) fn admin_data(text: &str) -> Result<Vec<u8>, String> {
    let mut parts = text.splitn(3, ':');
    let (Some(index), Some(permissions), Some(handle)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(format!(
            "HS_ADMIN data {text:?} is not INDEX:PERMISSIONS:HANDLE, e.g. 300:111111111111:0.NA/TEST"
        ));
    };
    let admin_index = index
        .parse::<u32>()
        .map_err(|_| format!("admin index {index:?} is not a number"))?;
    let permissions = permissions
        .parse::<AdminPermissions>()
        .map_err(|error| error.to_string())?;
    let admin_handle =
        Handle::parse(handle).map_err(|error| format!("admin handle {handle:?}: {error}"))?;
    let record = AdminRecord {
        permissions,
        admin_handle: admin_handle.as_str().to_owned(),
        admin_index,
        legacy_padding: false,
    };
    Ok(record.encode())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::Permissions;

    #[test]
    fn text_values_keep_colons_in_their_data() {
        let value = parse_value("1:URL:https://example.org:8080/x").unwrap();
        assert_eq!(value.index.0, 1);
        assert_eq!(value.value_type, "URL");
        assert_eq!(value.data, b"https://example.org:8080/x");
        assert_eq!(value.permissions, Permissions::DEFAULT);
        assert_eq!(parse_value("2:DESC:").unwrap().data, b"");
    }

    #[test]
    fn admin_values_are_encoded_records_readable_by_anyone() {
        let value = parse_value("100:HS_ADMIN:300:111111111111:0.NA/TEST").unwrap();
        assert_eq!(value.permissions, Permissions::DEFAULT);
        let record = AdminRecord::decode(&value.data).unwrap();
        assert_eq!(record.admin_index, 300);
        assert_eq!(record.admin_handle, "0.NA/TEST");
        assert_eq!(record.permissions, AdminPermissions::ALL);
    }

    #[test]
    fn public_keys_are_hex_octets() {
        let value = parse_value("300:HS_PUBKEY:0001ff").unwrap();
        assert_eq!(value.data, [0, 1, 0xff]);
        assert_eq!(value.permissions, Permissions::DEFAULT);
    }

    #[test]
    fn malformed_values_name_the_problem() {
        let cases = [
            ("URL:https://x", "value index"),
            ("1:URL", "INDEX:TYPE:DATA"),
            ("0:URL:x", "from 1"),
            ("x:URL:x", "from 1"),
            ("1::x", "empty type"),
            ("100:HS_ADMIN:300:0.NA/TEST", "INDEX:PERMISSIONS:HANDLE"),
            ("100:HS_ADMIN:x:111111111111:0.NA/TEST", "admin index"),
            ("100:HS_ADMIN:300:1111:0.NA/TEST", "12 characters"),
            ("100:HS_ADMIN:300:111111111111:NOSLASH", "admin handle"),
            ("300:HS_PUBKEY:xyz", "file:KEY.pem or hex"),
            ("300:HS_PUBKEY:abc", "file:KEY.pem or hex"),
            ("300:HS_PUBKEY:file:/nonexistent.pem", "cannot read key"),
        ];
        for (text, expected) in cases {
            let error = parse_value(text).unwrap_err();
            assert!(error.contains(expected), "{text}: {error}");
        }
    }
}
