//! Stored values as REST JSON (see the [module documentation](super)).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::{Value, json};

use super::structured::{key_json, site_json, vlist_json};
use crate::values::{
    AdminRecord, HandleValue, KnownType, Permissions, PublicKey, SiteInfo, Ttl, ValueList,
};

/// The REST JSON object of a successful resolution: `handle` exactly as given (the
/// request's spelling), values in the order given (stored order).
pub fn resolution_json(handle: &str, values: &[HandleValue]) -> Value {
    to_value(&Resolution {
        handle,
        values,
        template: None,
    })
}

/// One value as REST JSON.
pub fn value_json(value: &HandleValue) -> Value {
    to_value(&ValueJson(value))
}

/// The tree of a view below, which cannot fail to serialize (its keys are strings).
fn to_value(view: &impl Serialize) -> Value {
    serde_json::to_value(view).unwrap_or(Value::Null)
}

/// A successful resolution as REST JSON, serialized straight from the values, with
/// no tree of [`Value`]s built first (the API answers with it); [`resolution_json`]
/// is the same object as a tree. `template`, when given, is written last.
pub struct Resolution<'a> {
    /// The handle as the request spelled it.
    pub handle: &'a str,
    /// The values, in the order given.
    pub values: &'a [HandleValue],
    /// What a template-derived answer says of its origin.
    pub template: Option<Value>,
}

impl Serialize for Resolution<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("responseCode", &1)?;
        map.serialize_entry("handle", self.handle)?;
        map.serialize_entry("values", &ValuesJson(self.values))?;
        if let Some(template) = &self.template {
            map.serialize_entry("template", template)?;
        }
        map.end()
    }
}

/// Values as a REST JSON array.
struct ValuesJson<'a>(&'a [HandleValue]);

impl Serialize for ValuesJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for value in self.0 {
            seq.serialize_element(&ValueJson(value))?;
        }
        seq.end()
    }
}

/// One value as REST JSON, in the module's field order.
struct ValueJson<'a>(&'a HandleValue);

impl Serialize for ValueJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let value = self.0;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("index", &value.index.0)?;
        map.serialize_entry("type", &value.value_type)?;
        map.serialize_entry("data", &DataJson(value))?;
        if value.permissions != Permissions::DEFAULT {
            map.serialize_entry("permissions", &permission_bits(value.permissions))?;
        }
        if let Ttl::Absolute(_) = value.ttl {
            map.serialize_entry("ttlType", &1)?;
        }
        map.serialize_entry("ttl", &value.ttl.seconds())?;
        map.serialize_entry("timestamp", &Timestamp(value.timestamp))?;
        if !value.references.is_empty() {
            map.serialize_entry("references", &ReferencesJson(value))?;
        }
        map.end()
    }
}

/// A value's references as `[{"index","handle"}]`.
struct ReferencesJson<'a>(&'a HandleValue);

impl Serialize for ReferencesJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let references = &self.0.references;
        let mut seq = serializer.serialize_seq(Some(references.len()))?;
        for reference in references {
            seq.serialize_element(
                &json!({"index": reference.index.0, "handle": reference.handle}),
            )?;
        }
        seq.end()
    }
}

/// A value's data as [`data_json`] writes it; text is written from the value's
/// octets, with no tree built.
struct DataJson<'a>(&'a HandleValue);

impl Serialize for DataJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let value = self.0;
        let known = value.known_type();
        if known == Some(KnownType::HsAdmin) {
            if let Ok(record) = AdminRecord::decode(&value.data) {
                return AdminJson(&record).serialize(serializer);
            }
        } else if let Some(structured) = known.and_then(|known| structured_json(known, &value.data))
        {
            return structured.serialize(serializer);
        }
        let mut map = serializer.serialize_map(Some(2))?;
        match std::str::from_utf8(&value.data) {
            Ok(text) if !known.is_some_and(is_binary) => {
                map.serialize_entry("format", "string")?;
                map.serialize_entry("value", text)?;
            }
            _ => {
                map.serialize_entry("format", "base64")?;
                map.serialize_entry("value", &STANDARD.encode(&value.data))?;
            }
        }
        map.end()
    }
}

/// An HS_ADMIN value's data, `{"format":"admin","value":{"handle","index",
/// "permissions"}}`, written with no tree built (nearly every handle has one).
struct AdminJson<'a>(&'a AdminRecord);

impl Serialize for AdminJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("format", "admin")?;
        map.serialize_entry("value", &AdminFields(self.0))?;
        map.end()
    }
}

/// The `value` of [`AdminJson`].
struct AdminFields<'a>(&'a AdminRecord);

impl Serialize for AdminFields<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let record = self.0;
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry("handle", &record.admin_handle)?;
        map.serialize_entry("index", &record.admin_index)?;
        map.serialize_entry("permissions", &record.permissions.to_bit_string())?;
        map.end()
    }
}

/// A timestamp written as [`timestamp`] spells it, with no string made first.
struct Timestamp(u32);

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&humantime::format_rfc3339_seconds(epoch_seconds(self.0)))
    }
}

/// The `{"format","value"}` object of a value's data: the structured format of its
/// type when the data decodes, else `string` for UTF-8 text, else `base64`.
pub fn data_json(value: &HandleValue) -> Value {
    to_value(&DataJson(value))
}

/// The structured data format of a decodable value of a binary known type other
/// than HS_ADMIN ([`AdminJson`]).
fn structured_json(known: KnownType, data: &[u8]) -> Option<Value> {
    let (format, value) = match known {
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
    humantime::format_rfc3339_seconds(epoch_seconds(seconds)).to_string()
}

fn epoch_seconds(seconds: u32) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(u64::from(seconds))
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
    fn a_resolution_written_straight_is_the_tree_written_and_its_template_comes_last() {
        let values = [
            HandleValue::new(1, "URL", "https://example.org/?a=\"b\""),
            admin(),
            HandleValue {
                ttl: Ttl::Absolute(5),
                references: vec![ValueReference {
                    handle: "TEST/2".into(),
                    index: ValueIndex(3),
                }],
                ..HandleValue::new(7, "CUSTOM", vec![0xff, 0x00])
            },
        ];
        let tree = resolution_json("test/Ünï", &values).to_string();
        let straight = Resolution {
            handle: "test/Ünï",
            values: &values,
            template: None,
        };
        assert_eq!(serde_json::to_string(&straight).unwrap(), tree);
        let derived = Resolution {
            template: Some(json!({"namespace": "0.NA/TEST", "base": "TEST/b"})),
            ..straight
        };
        let written = serde_json::to_string(&derived).unwrap();
        let expected = format!(
            "{},\"template\":{{\"namespace\":\"0.NA/TEST\",\"base\":\"TEST/b\"}}}}",
            &tree[..tree.len() - 1]
        );
        assert_eq!(written, expected);
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
