//! Whole handles as lines of an export file (JSON Lines), both ways:
//! `{"handle":…,"values":[…]}` with each value as [`value_json`] writes it.
//!
//! Unlike a PUT body, a line is read back exactly: the timestamp of each value is
//! kept (and required), and each value's data is written in a format that reads back
//! to the very same octets: its structured format (`admin`, `vlist`, `site`, `key`)
//! or `string` when that does, `base64` otherwise (an HS_ADMIN with legacy padding, a
//! key whose JWK would re-encode differently), and its permissions are always
//! written, so an export imported elsewhere holds the same octets.

use std::time::UNIX_EPOCH;

use serde_json::{Value, json};

use super::JsonError;
use super::parse::{array, field, object, parse_data, parse_value, string};
use super::render::{permission_bits, value_json};
use crate::values::HandleValue;

/// One handle as an export line's JSON (no newline).
pub fn export_json(handle: &str, values: &[HandleValue]) -> Value {
    let values: Vec<Value> = values.iter().map(exact_value_json).collect();
    json!({"handle": handle, "values": values})
}

/// A value as REST JSON that reads back the same: its data in a format that gives
/// the same octets, and its permissions always written (a missing field would read
/// as its type's default, which is not `1110` for every type).
fn exact_value_json(value: &HandleValue) -> Value {
    let mut json = value_json(value);
    let exact = json
        .get("data")
        .is_some_and(|data| parse_data(data).is_ok_and(|octets| octets == value.data));
    if let Some(object) = json.as_object_mut() {
        if !exact {
            let data =
                base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &value.data);
            object.insert("data".into(), json!({"format": "base64", "value": data}));
        }
        object
            .entry("permissions")
            .or_insert_with(|| json!(permission_bits(value.permissions)));
    }
    json
}

/// Reads an export line's JSON: the handle as written and its values, timestamps
/// kept.
pub fn parse_export(json: &Value) -> Result<(String, Vec<HandleValue>), JsonError> {
    const WHAT: &str = "line";
    let line = object(json, WHAT)?;
    let handle = string(field(line, WHAT, "handle")?, WHAT, "handle")?.to_owned();
    let values = array(field(line, WHAT, "values")?, WHAT)?
        .iter()
        .map(|value| {
            let mut parsed = parse_value(value)?;
            parsed.timestamp = timestamp_of(value)?;
            Ok(parsed)
        })
        .collect::<Result<_, JsonError>>()?;
    Ok((handle, values))
}

/// The `timestamp` of a value: RFC 3339, to the second, within the u32 seconds a
/// value stores.
fn timestamp_of(value: &Value) -> Result<u32, JsonError> {
    const WHAT: &str = "value";
    let text = string(
        field(object(value, WHAT)?, WHAT, "timestamp")?,
        WHAT,
        "timestamp",
    )?;
    let expected = "an RFC 3339 time from 1970 to 2106, e.g. 2024-01-01T00:00:00Z";
    let invalid = || JsonError::Invalid {
        what: WHAT,
        field: "timestamp",
        expected,
    };
    let time = humantime::parse_rfc3339(text).map_err(|_| invalid())?;
    let seconds = time.duration_since(UNIX_EPOCH).map_err(|_| invalid())?;
    u32::try_from(seconds.as_secs()).map_err(|_| invalid())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::{
        AdminPermissions, AdminRecord, Permissions, Ttl, ValueIndex, ValueReference,
    };

    fn values() -> Vec<HandleValue> {
        let admin = AdminRecord {
            permissions: AdminPermissions::ALL,
            admin_handle: "0.NA/TEST".into(),
            admin_index: 300,
            legacy_padding: false,
        };
        let padded = AdminRecord {
            legacy_padding: true,
            ..admin.clone()
        };
        vec![
            HandleValue {
                timestamp: 1_704_067_200,
                ttl: Ttl::Absolute(1_800_000_000),
                references: vec![ValueReference {
                    handle: "TEST/other".into(),
                    index: ValueIndex(2),
                }],
                ..HandleValue::new(1, "URL", "https://example.org/")
            },
            HandleValue {
                timestamp: 1_704_067_201,
                ..HandleValue::new(100, "HS_ADMIN", admin.encode())
            },
            HandleValue {
                timestamp: 3,
                permissions: Permissions::ADMIN_ONLY,
                ..HandleValue::new(101, "HS_ADMIN", padded.encode())
            },
            // Readable by the public: unlike a PUT body's, a line leaves nothing to
            // the type's default (admin-only for HS_SECKEY).
            HandleValue::new(300, "HS_SECKEY", vec![0xff, 0, 1]),
            HandleValue::new(7, "DESC", "日本 \"quoted\"\nline"),
        ]
    }

    #[test]
    fn a_line_reads_back_the_same_values_octets_and_timestamps_included() {
        let values = values();
        let line = export_json("Test/Mixed-Case", &values).to_string();
        assert!(!line.contains('\n'), "one line: {line}");
        let parsed: Value = serde_json::from_str(&line).unwrap();
        let (handle, read) = parse_export(&parsed).unwrap();
        assert_eq!(handle, "Test/Mixed-Case");
        assert_eq!(read, values);
        assert!(line.contains(r#""format":"admin""#), "{line}");
        assert!(
            line.contains(r#""timestamp":"2024-01-01T00:00:00Z""#),
            "{line}"
        );
    }

    #[test]
    fn a_malformed_line_says_what_is_wrong() {
        let cases = [
            (json!([]), "Not a JSON Object"),
            (json!({"values": []}), "\"handle\""),
            (json!({"handle": "T/1"}), "\"values\""),
            (
                json!({"handle": "T/1", "values": [{"index": 1, "type": "URL", "data": "x"}]}),
                "\"timestamp\"",
            ),
            (
                json!({"handle": "T/1", "values": [{"index": 1, "type": "URL", "data": "x", "timestamp": "yesterday"}]}),
                "RFC 3339",
            ),
        ];
        for (json, expected) in cases {
            let error = parse_export(&json).unwrap_err().to_string();
            assert!(error.contains(expected), "{json}: {error}");
        }
    }
}
