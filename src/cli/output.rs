//! How resolved values are shown: the Handle.Net REST JSON shape
//! (`HANDLE-NET-REFERENCE.md` §1.2) and one text line per value.
//!
//! JSON: `{"responseCode":1,"handle":…,"values":[…]}`, each value
//! `{"index","type","data":{"format","value"},["permissions"],["ttlType"],"ttl",
//! "timestamp",["references"]}` in that order. `permissions` (admin read, admin write,
//! public read, public write as `0`/`1`) is left out when it is the default `1110`;
//! `ttlType` only appears (as 1) for an absolute TTL; the timestamp is RFC 3339 UTC to
//! the second. Data formats: `admin` for a decodable HS_ADMIN
//! (`{"handle","index","permissions"}` with the 12-character bit string), `string` for
//! UTF-8 data of any type whose layout is not binary, `base64` otherwise.

use std::time::{Duration, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hdl::values::{AdminRecord, HandleValue, KnownType, Permissions, Ttl};
use serde_json::{Map, Value, json};

/// The data of a value, as shown.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Data {
    Admin(AdminRecord),
    Text(String),
    Binary(Vec<u8>),
}

impl Data {
    fn of(value: &HandleValue) -> Data {
        let known = value.known_type();
        if known == Some(KnownType::HsAdmin)
            && let Ok(record) = AdminRecord::decode(&value.data)
        {
            return Data::Admin(record);
        }
        let binary = matches!(
            known,
            Some(
                KnownType::HsAdmin
                    | KnownType::HsSite
                    | KnownType::HsSite6
                    | KnownType::HsSitePrefix
                    | KnownType::HsNaDelegate
                    | KnownType::HsVlist
                    | KnownType::HsPubkey
            )
        );
        match std::str::from_utf8(&value.data) {
            Ok(text) if !binary => Data::Text(text.to_owned()),
            _ => Data::Binary(value.data.clone()),
        }
    }
}

/// The REST JSON object of a successful resolution.
pub fn resolution_json(handle: &str, values: &[HandleValue]) -> Value {
    json!({
        "responseCode": 1,
        "handle": handle,
        "values": values.iter().map(value_json).collect::<Vec<_>>(),
    })
}

/// One value as REST JSON.
fn value_json(value: &HandleValue) -> Value {
    let mut object = Map::new();
    object.insert("index".into(), json!(value.index.0));
    object.insert("type".into(), json!(value.value_type));
    let data = match Data::of(value) {
        Data::Admin(record) => json!({"format": "admin", "value": {
            "handle": record.admin_handle,
            "index": record.admin_index,
            "permissions": record.permissions.to_bit_string(),
        }}),
        Data::Text(text) => json!({"format": "string", "value": text}),
        Data::Binary(bytes) => json!({"format": "base64", "value": STANDARD.encode(bytes)}),
    };
    object.insert("data".into(), data);
    if value.permissions != Permissions::DEFAULT {
        object.insert(
            "permissions".into(),
            json!(permission_bits(value.permissions)),
        );
    }
    if let Ttl::Absolute(_) = value.ttl {
        object.insert("ttlType".into(), json!(1));
    }
    object.insert("ttl".into(), json!(value.ttl.seconds()));
    object.insert("timestamp".into(), json!(timestamp(value.timestamp)));
    if !value.references.is_empty() {
        let references = value
            .references
            .iter()
            .map(|reference| json!({"index": reference.index.0, "handle": reference.handle}));
        object.insert("references".into(), references.collect());
    }
    Value::Object(object)
}

/// One value as a text line: `index type data`, HS_ADMIN data written as
/// `INDEX:PERMISSIONS:HANDLE` (the form `--value` takes), binary data in base64.
pub fn value_line(value: &HandleValue) -> String {
    let data = match Data::of(value) {
        Data::Admin(record) => format!(
            "{}:{}:{}",
            record.admin_index,
            record.permissions.to_bit_string(),
            record.admin_handle
        ),
        Data::Text(text) => text,
        Data::Binary(bytes) => STANDARD.encode(bytes),
    };
    format!("{} {} {data}", value.index, value.value_type)
}

/// The four permission bits, admin read first.
fn permission_bits(permissions: Permissions) -> String {
    [
        Permissions::ADMIN_READ,
        Permissions::ADMIN_WRITE,
        Permissions::PUBLIC_READ,
        Permissions::PUBLIC_WRITE,
    ]
    .iter()
    .map(|bit| if permissions.contains(*bit) { '1' } else { '0' })
    .collect()
}

/// Seconds since the epoch as RFC 3339 UTC, e.g. `2024-01-01T00:00:00Z`.
fn timestamp(seconds: u32) -> String {
    let time = UNIX_EPOCH + Duration::from_secs(u64::from(seconds));
    humantime::format_rfc3339_seconds(time).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdl::values::{AdminPermissions, ValueIndex, ValueReference};

    fn admin() -> HandleValue {
        let record = AdminRecord {
            permissions: "011111110011".parse::<AdminPermissions>().unwrap(),
            admin_handle: "0.NA/TEST".into(),
            admin_index: 300,
            legacy_padding: false,
        };
        HandleValue {
            permissions: Permissions::ADMIN_ONLY,
            ..HandleValue::new(100, "HS_ADMIN", record.encode())
        }
    }

    #[test]
    fn url_value_has_the_rest_shape() {
        let value = HandleValue {
            timestamp: 1_704_067_200,
            ..HandleValue::new(1, "URL", "https://example.org/")
        };
        let json = resolution_json("TEST/1", &[value]);
        let expected = r#"{"responseCode":1,"handle":"TEST/1","values":[{"index":1,"type":"URL","data":{"format":"string","value":"https://example.org/"},"ttl":86400,"timestamp":"2024-01-01T00:00:00Z"}]}"#;
        assert_eq!(json.to_string(), expected);
    }

    #[test]
    fn admin_values_show_record_and_permissions() {
        let json = value_json(&admin());
        assert_eq!(
            json["data"],
            json!({"format": "admin", "value": {
                "handle": "0.NA/TEST", "index": 300, "permissions": "011111110011"}})
        );
        assert_eq!(json["permissions"], "1100");
        assert_eq!(
            value_line(&admin()),
            "100 HS_ADMIN 300:011111110011:0.NA/TEST"
        );
    }

    #[test]
    fn binary_data_absolute_ttl_and_references_are_shown() {
        let value = HandleValue {
            ttl: Ttl::Absolute(5),
            references: vec![ValueReference {
                handle: "TEST/2".into(),
                index: ValueIndex(3),
            }],
            ..HandleValue::new(7, "CUSTOM", vec![0xff, 0x00])
        };
        let json = value_json(&value);
        assert_eq!(json["data"], json!({"format": "base64", "value": "/wA="}));
        assert_eq!(json["ttlType"], 1);
        assert_eq!(json["ttl"], 5);
        assert_eq!(json["timestamp"], "1970-01-01T00:00:00Z");
        assert_eq!(
            json["references"],
            json!([{"index": 3, "handle": "TEST/2"}])
        );
        assert!(json.get("permissions").is_none());
        assert_eq!(value_line(&value), "7 CUSTOM /wA=");
        let site = HandleValue::new(2, "HS_SITE", "text-looking");
        assert_eq!(value_json(&site)["data"]["format"], "base64");
    }
}
