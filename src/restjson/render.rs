//! Stored values as REST JSON (see the [module documentation](super)).

use std::fmt::Write as _;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use super::structured::{key_json, site_json, vlist_json};
use crate::values::{
    AdminRecord, HandleValue, KnownType, Permissions, PublicKey, SiteInfo, Ttl, ValueList,
};

/// The REST JSON object of a successful resolution: `handle` exactly as given (the
/// request's spelling), values in the order given (stored order).
pub fn resolution_json(handle: &str, values: &[HandleValue]) -> Value {
    let resolution = Resolution {
        handle,
        values,
        template: None,
    };
    tree(&resolution.to_json())
}

/// One value as REST JSON.
pub fn value_json(value: &HandleValue) -> Value {
    let mut text = String::new();
    push_value(&mut text, value);
    tree(&text)
}

/// The tree of JSON text this module wrote, which always parses.
fn tree(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or(Value::Null)
}

/// A successful resolution as REST JSON, written as text straight from the values
/// (the API answers with it); [`resolution_json`] is the same object as a tree.
/// `template`, when given, is written last.
pub struct Resolution<'a> {
    /// The handle as the request spelled it.
    pub handle: &'a str,
    /// The values, in the order given.
    pub values: &'a [HandleValue],
    /// What a template-derived answer says of its origin.
    pub template: Option<Value>,
}

impl Resolution<'_> {
    /// The compact JSON text, as `serde_json` writes the same object: no tree is
    /// built, field names are written as they are (they need no escape), and text is
    /// escaped a run at a time.
    pub fn to_json(&self) -> String {
        let per_value: usize = self
            .values
            .iter()
            .map(|value| VALUE_OVERHEAD + value.value_type.len() + value.data.len() * 4 / 3)
            .sum();
        let mut out = String::with_capacity(64 + self.handle.len() + per_value);
        out.push_str("{\"responseCode\":1,\"handle\":");
        push_string(&mut out, self.handle);
        out.push_str(",\"values\":[");
        for (at, value) in self.values.iter().enumerate() {
            if at > 0 {
                out.push(',');
            }
            push_value(&mut out, value);
        }
        out.push(']');
        if let Some(template) = &self.template {
            out.push_str(",\"template\":");
            push_display(&mut out, template);
        }
        out.push('}');
        out
    }
}

/// About what a value's JSON takes besides its type and data.
const VALUE_OVERHEAD: usize = 160;

/// One value as REST JSON, in the module's field order.
fn push_value(out: &mut String, value: &HandleValue) {
    out.push_str("{\"index\":");
    push_number(out, value.index.0);
    out.push_str(",\"type\":");
    push_string(out, &value.value_type);
    out.push_str(",\"data\":");
    push_data(out, value);
    if value.permissions != Permissions::DEFAULT {
        out.push_str(",\"permissions\":\"");
        out.push_str(&permission_bits(value.permissions));
        out.push('"');
    }
    if let Ttl::Absolute(_) = value.ttl {
        out.push_str(",\"ttlType\":1");
    }
    out.push_str(",\"ttl\":");
    push_number(out, value.ttl.seconds());
    out.push_str(",\"timestamp\":\"");
    push_timestamp(out, value.timestamp);
    out.push('"');
    if !value.references.is_empty() {
        out.push_str(",\"references\":[");
        for (at, reference) in value.references.iter().enumerate() {
            if at > 0 {
                out.push(',');
            }
            out.push_str("{\"index\":");
            push_number(out, reference.index.0);
            out.push_str(",\"handle\":");
            push_string(out, &reference.handle);
            out.push('}');
        }
        out.push(']');
    }
    out.push('}');
}

/// A value's data as [`data_json`] shows it. An HS_ADMIN (nearly every handle has
/// one) is written field by field; the other structured formats from their tree.
fn push_data(out: &mut String, value: &HandleValue) {
    let known = value.known_type();
    if known == Some(KnownType::HsAdmin) {
        if let Ok(record) = AdminRecord::decode(&value.data) {
            out.push_str("{\"format\":\"admin\",\"value\":{\"handle\":");
            push_string(out, &record.admin_handle);
            out.push_str(",\"index\":");
            push_number(out, record.admin_index);
            out.push_str(",\"permissions\":\"");
            out.push_str(&record.permissions.to_bit_string());
            out.push_str("\"}}");
            return;
        }
    } else if let Some(structured) = known.and_then(|known| structured_json(known, &value.data)) {
        push_display(out, structured);
        return;
    }
    match std::str::from_utf8(&value.data) {
        Ok(text) if !known.is_some_and(is_binary) => {
            out.push_str("{\"format\":\"string\",\"value\":");
            push_string(out, text);
            out.push('}');
        }
        _ => {
            out.push_str("{\"format\":\"base64\",\"value\":\"");
            STANDARD.encode_string(&value.data, out);
            out.push_str("\"}");
        }
    }
}

/// Appends `text` as a JSON string, escaped as `serde_json` escapes it: `"` and `\`
/// after a backslash, the control characters with a short escape as one
/// (`\b\t\n\f\r`), the others as `\u00XX` (lower-case hex), everything else as
/// it is. The runs between escapes (all ASCII octets, so never inside a UTF-8
/// sequence) are copied whole.
fn push_string(out: &mut String, text: &str) {
    out.push('"');
    let mut rest = text;
    while let Some(at) = rest
        .bytes()
        .position(|octet| octet < 0x20 || octet == b'"' || octet == b'\\')
    {
        out.push_str(&rest[..at]);
        let octet = rest.as_bytes()[at];
        match octet {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x08 => out.push_str("\\b"),
            b'\t' => out.push_str("\\t"),
            b'\n' => out.push_str("\\n"),
            0x0c => out.push_str("\\f"),
            b'\r' => out.push_str("\\r"),
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.push_str("\\u00");
                out.push(char::from(HEX[usize::from(octet >> 4)]));
                out.push(char::from(HEX[usize::from(octet & 0xf)]));
            }
        }
        rest = &rest[at + 1..];
    }
    out.push_str(rest);
    out.push('"');
}

/// Appends what `shown` displays (a tree as compact JSON).
fn push_display(out: &mut String, shown: impl std::fmt::Display) {
    // Writing to a String cannot fail.
    let _ = write!(out, "{shown}");
}

/// Appends `number` in decimal, as JSON writes it.
fn push_number(out: &mut String, number: u32) {
    let mut digits = ['0'; 10];
    let mut rest = number;
    let mut start = digits.len();
    loop {
        start -= 1;
        digits[start] = decimal_digit(rest % 10);
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    out.extend(&digits[start..]);
}

/// Appends `number` in decimal, zero-padded to `width` digits.
fn push_padded(out: &mut String, number: u32, width: u32) {
    for place in (0..width).rev() {
        out.push(decimal_digit(number / 10_u32.pow(place) % 10));
    }
}

/// The character of a digit below ten.
fn decimal_digit(digit: u32) -> char {
    char::from_digit(digit, 10).unwrap_or('0')
}

/// Appends `seconds` since the epoch as RFC 3339 UTC to the second
/// (`2024-01-01T00:00:00Z`), as `humantime::format_rfc3339_seconds` writes it.
fn push_timestamp(out: &mut String, seconds: u32) {
    let (year, month, day) = civil_from_days(seconds / 86_400);
    let second_of_day = seconds % 86_400;
    push_padded(out, year, 4);
    out.push('-');
    push_padded(out, month, 2);
    out.push('-');
    push_padded(out, day, 2);
    out.push('T');
    push_padded(out, second_of_day / 3_600, 2);
    out.push(':');
    push_padded(out, second_of_day / 60 % 60, 2);
    out.push(':');
    push_padded(out, second_of_day % 60, 2);
    out.push('Z');
}

/// The Gregorian (year, month, day) of the day `days` after 1970-01-01 (Howard
/// Hinnant's `civil_from_days`, for days after the epoch).
fn civil_from_days(days: u32) -> (u32, u32, u32) {
    let from_march_0000 = days + 719_468;
    let era = from_march_0000 / 146_097;
    let day_of_era = from_march_0000 - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    (year_of_era + era * 400 + u32::from(month <= 2), month, day)
}

/// The `{"format","value"}` object of a value's data: the structured format of its
/// type when the data decodes, else `string` for UTF-8 text, else `base64`.
pub fn data_json(value: &HandleValue) -> Value {
    let mut text = String::new();
    push_data(&mut text, value);
    tree(&text)
}

/// The structured data format of a decodable value of a binary known type other
/// than HS_ADMIN (which [`push_data`] writes itself).
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
    let mut text = String::with_capacity(20);
    push_timestamp(&mut text, seconds);
    text
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
    fn a_resolution_is_written_as_serde_json_writes_its_tree_and_its_template_comes_last() {
        let values = [
            HandleValue::new(1, "URL", "https://example.org/?a=\"b\"\\\u{1}\n"),
            admin(),
            HandleValue {
                ttl: Ttl::Absolute(5),
                timestamp: 1_704_067_200,
                references: vec![ValueReference {
                    handle: "TEST/2".into(),
                    index: ValueIndex(3),
                }],
                ..HandleValue::new(7, "CUSTOM", vec![0xff, 0x00])
            },
        ];
        let data = |format: &str, value: Value| json!({"format": format, "value": value});
        let admin_data =
            json!({"handle": "0.NA/TEST", "index": 300, "permissions": "011111110011"});
        let tree = json!({"responseCode": 1, "handle": "test/Ünï\t", "values": [
            {"index": 1, "type": "URL", "data": data("string", json!("https://example.org/?a=\"b\"\\\u{1}\n")),
             "ttl": 86400, "timestamp": "1970-01-01T00:00:00Z"},
            {"index": 100, "type": "HS_ADMIN", "data": data("admin", admin_data),
             "permissions": "1100", "ttl": 86400, "timestamp": "1970-01-01T00:00:00Z"},
            {"index": 7, "type": "CUSTOM", "data": data("base64", json!("/wA=")), "ttlType": 1,
             "ttl": 5, "timestamp": "2024-01-01T00:00:00Z",
             "references": [{"index": 3, "handle": "TEST/2"}]},
        ]});
        let straight = Resolution {
            handle: "test/Ünï\t",
            values: &values,
            template: None,
        };
        assert_eq!(straight.to_json(), tree.to_string());
        assert_eq!(resolution_json("test/Ünï\t", &values), tree);
        let derived = Resolution {
            template: Some(json!({"namespace": "0.NA/TEST", "base": "TEST/b"})),
            ..straight
        };
        let mut with_template = tree;
        with_template["template"] = json!({"namespace": "0.NA/TEST", "base": "TEST/b"});
        assert_eq!(derived.to_json(), with_template.to_string());
    }

    #[test]
    fn timestamps_and_numbers_are_written_as_humantime_and_serde_json_write_them() {
        let days_apart = (0..=u32::MAX / 7_777_777).map(|step| step * 7_777_777);
        let edges = [
            0,
            59,
            86_399,
            86_400,
            951_782_400,
            951_868_799,
            1_704_067_200,
            4_102_444_800,
            u32::MAX,
        ];
        for seconds in edges.into_iter().chain(days_apart) {
            let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(seconds.into());
            let expected = humantime::format_rfc3339_seconds(at).to_string();
            assert_eq!(timestamp(seconds), expected, "{seconds}");
            let mut number = String::new();
            push_number(&mut number, seconds);
            assert_eq!(number, seconds.to_string());
        }
    }

    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        let every_ascii: String = (0..=0x7f_u8).map(char::from).collect();
        for text in [every_ascii.as_str(), "", "plain", "日本\u{2028}\"", "\\\\"] {
            let mut written = String::new();
            push_string(&mut written, text);
            assert_eq!(written, serde_json::to_string(text).unwrap(), "{text:?}");
        }
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
