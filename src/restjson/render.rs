//! Stored values as REST JSON (see the [module documentation](super)).

use std::time::{Duration, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value, json};

use super::structured::{key_json, site_json, vlist_json};
use crate::values::{
    AdminRecord, HandleValue, KnownType, Permissions, PublicKey, SiteInfo, Ttl, ValueList,
};

/// The REST JSON object of a successful resolution: `handle` exactly as given (the
/// request's spelling), values in the order given (stored order).
pub fn resolution_json(handle: &str, values: &[HandleValue]) -> Value {
    json!({
        "responseCode": 1,
        "handle": handle,
        "values": values.iter().map(value_json).collect::<Vec<_>>(),
    })
}

/// One value as REST JSON.
pub fn value_json(value: &HandleValue) -> Value {
    let mut object = Map::new();
    object.insert("index".into(), json!(value.index.0));
    object.insert("type".into(), json!(value.value_type));
    object.insert("data".into(), data_json(value));
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

/// The `{"format","value"}` object of a value's data: the structured format of its
/// type when the data decodes, else `string` for UTF-8 text, else `base64`.
pub fn data_json(value: &HandleValue) -> Value {
    let known = value.known_type();
    if let Some(structured) = known.and_then(|known| structured_json(known, &value.data)) {
        return structured;
    }
    match std::str::from_utf8(&value.data) {
        Ok(text) if !known.is_some_and(is_binary) => json!({"format": "string", "value": text}),
        _ => json!({"format": "base64", "value": STANDARD.encode(&value.data)}),
    }
}

/// The structured data format of a decodable value of a binary known type.
fn structured_json(known: KnownType, data: &[u8]) -> Option<Value> {
    let (format, value) = match known {
        KnownType::HsAdmin => {
            let record = AdminRecord::decode(data).ok()?;
            let value = json!({
                "handle": record.admin_handle,
                "index": record.admin_index,
                "permissions": record.permissions.to_bit_string(),
            });
            ("admin", value)
        }
        KnownType::HsVlist => ("vlist", vlist_json(&ValueList::decode(data).ok()?)),
        KnownType::HsPubkey => ("key", key_json(&PublicKey::decode(data).ok()?)?),
        known if is_site(known) => ("site", site_json(&SiteInfo::decode(data).ok()?)),
        _ => return None,
    };
    Some(json!({"format": format, "value": value}))
}

/// Whether values of `known` hold a binary layout (never shown as a string).
fn is_binary(known: KnownType) -> bool {
    matches!(
        known,
        KnownType::HsAdmin | KnownType::HsVlist | KnownType::HsPubkey
    ) || is_site(known)
}

/// The types whose data is an HS_SITE record.
fn is_site(known: KnownType) -> bool {
    matches!(
        known,
        KnownType::HsSite | KnownType::HsSite6 | KnownType::HsSitePrefix | KnownType::HsNaDelegate
    )
}

/// The four permission bits, admin read first.
pub(super) fn permission_bits(permissions: Permissions) -> String {
    Permissions::WRITTEN_ORDER
        .iter()
        .map(|bit| if permissions.contains(*bit) { '1' } else { '0' })
        .collect()
}

/// Seconds since the epoch as RFC 3339 UTC, e.g. `2024-01-01T00:00:00Z`.
pub fn timestamp(seconds: u32) -> String {
    let time = UNIX_EPOCH + Duration::from_secs(u64::from(seconds));
    humantime::format_rfc3339_seconds(time).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::{AdminPermissions, ValueIndex, ValueReference};

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
        let site = HandleValue::new(2, "HS_SITE", "text-looking");
        assert_eq!(value_json(&site)["data"]["format"], "base64");
    }

    #[test]
    fn vlist_is_shown_as_members() {
        let list = ValueList(vec![ValueReference {
            handle: "0.NA/TEST".into(),
            index: ValueIndex(300),
        }]);
        let value = HandleValue::new(200, "HS_VLIST", list.encode());
        assert_eq!(
            data_json(&value),
            json!({"format": "vlist", "value": [{"handle": "0.NA/TEST", "index": 300}]})
        );
    }
}
