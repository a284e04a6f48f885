//! Incoming REST JSON values (see the [module documentation](super)).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value};

use super::JsonError;
use super::structured::{parse_key, parse_site, parse_vlist};
use crate::values::{
    AdminPermissions, AdminRecord, HandleValue, Permissions, Ttl, ValueIndex, ValueReference,
    default_permissions,
};

/// The values a PUT body carries, and the handle it names if it names one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValuesBody {
    /// The `"handle"` field of a `{"values":[…]}` body.
    pub handle: Option<String>,
    /// The values, in the order written.
    pub values: Vec<HandleValue>,
}

/// Reads a PUT body: a bare array of values, `{"values":[…]}` (with an optional
/// `"handle"`), or a single value object.
pub fn parse_body(json: &Value) -> Result<ValuesBody, JsonError> {
    match json {
        Value::Array(values) => Ok(ValuesBody {
            handle: None,
            values: parse_list(values)?,
        }),
        Value::Object(object) if object.contains_key("values") => {
            let handle = match object.get("handle") {
                None | Some(Value::Null) => None,
                Some(handle) => Some(string(handle, "body", "handle")?.to_owned()),
            };
            let values = array(field(object, "body", "values")?, "body")?;
            Ok(ValuesBody {
                handle,
                values: parse_list(values)?,
            })
        }
        Value::Object(_) => Ok(ValuesBody {
            handle: None,
            values: vec![parse_value(json)?],
        }),
        _ => Err(JsonError::BadBody),
    }
}

fn parse_list(values: &[Value]) -> Result<Vec<HandleValue>, JsonError> {
    values.iter().map(parse_value).collect()
}

/// Reads one value. Missing `ttl` is one day (relative unless `"ttlType":1`); missing
/// `permissions` is the type's default (admin-only for HS_ADMIN and HS_SECKEY).
pub fn parse_value(json: &Value) -> Result<HandleValue, JsonError> {
    const WHAT: &str = "value";
    let object = object(json, WHAT)?;
    let value_type = string(field(object, WHAT, "type")?, WHAT, "type")?.to_owned();
    let seconds = match object.get("ttl") {
        None => Ttl::DEFAULT.seconds(),
        Some(_) => u32_field(object, WHAT, "ttl")?,
    };
    let ttl = match object.get("ttlType").map(number) {
        None | Some(Some(0)) => Ttl::Relative(seconds),
        Some(Some(1)) => Ttl::Absolute(seconds),
        Some(_) => return Err(invalid(WHAT, "ttlType", "0 or 1")),
    };
    let permissions = match object.get("permissions") {
        None => default_permissions(&value_type),
        Some(bits) => parse_permissions(string(bits, WHAT, "permissions")?)?,
    };
    let references = match object.get("references") {
        None => Vec::new(),
        Some(list) => parse_references(array(list, WHAT)?)?,
    };
    Ok(HandleValue {
        index: ValueIndex(u32_field(object, WHAT, "index")?),
        data: parse_data(field(object, WHAT, "data")?)?,
        value_type,
        ttl,
        timestamp: 0,
        permissions,
        references,
    })
}

/// The octets of a `data` field: a bare string, or `{"format","value"}`.
pub(super) fn parse_data(json: &Value) -> Result<Vec<u8>, JsonError> {
    const WHAT: &str = "data";
    let data = match json {
        Value::String(text) => return Ok(text.clone().into_bytes()),
        other => object(other, WHAT)?,
    };
    let format = match data.get("format") {
        None => "string",
        Some(format) => string(format, WHAT, "format")?,
    };
    let value = field(data, WHAT, "value")?;
    match format {
        "string" => Ok(string(value, WHAT, "value")?.as_bytes().to_vec()),
        "base64" => STANDARD
            .decode(string(value, WHAT, "value")?)
            .map_err(|_| invalid(WHAT, "value", "base64")),
        "hex" => decode_hex(string(value, WHAT, "value")?),
        "admin" => parse_admin(value),
        "vlist" => Ok(parse_vlist(value)?.encode()),
        "site" => Ok(parse_site(value)?.encode()),
        "key" => Ok(parse_key(value)?.encode()),
        other => Err(JsonError::UnknownFormat(other.to_owned())),
    }
}

fn parse_admin(json: &Value) -> Result<Vec<u8>, JsonError> {
    const WHAT: &str = "admin";
    let admin = object(json, WHAT)?;
    let bits = string(field(admin, WHAT, "permissions")?, WHAT, "permissions")?;
    let permissions = bits
        .parse::<AdminPermissions>()
        .map_err(|_| invalid(WHAT, "permissions", "12 characters of 0 and 1, or \"*\""))?;
    let record = AdminRecord {
        permissions,
        admin_handle: string(field(admin, WHAT, "handle")?, WHAT, "handle")?.to_owned(),
        admin_index: u32_field(admin, WHAT, "index")?,
        legacy_padding: false,
    };
    Ok(record.encode())
}

fn parse_permissions(bits: &str) -> Result<Permissions, JsonError> {
    let expected =
        "four characters of 0 and 1 (admin read, admin write, public read, public write)";
    Permissions::from_bit_string(bits).ok_or_else(|| invalid("value", "permissions", expected))
}

fn parse_references(list: &[Value]) -> Result<Vec<ValueReference>, JsonError> {
    const WHAT: &str = "reference";
    list.iter()
        .map(|reference| {
            let reference = object(reference, WHAT)?;
            Ok(ValueReference {
                handle: string(field(reference, WHAT, "handle")?, WHAT, "handle")?.to_owned(),
                index: ValueIndex(u32_field(reference, WHAT, "index")?),
            })
        })
        .collect()
}

fn decode_hex(text: &str) -> Result<Vec<u8>, JsonError> {
    let digits: Vec<u8> = text.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
    if !digits.len().is_multiple_of(2) {
        return Err(invalid("data", "value", "an even number of hex digits"));
    }
    digits
        .chunks_exact(2)
        .map(|pair| {
            std::str::from_utf8(pair)
                .ok()
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
                .ok_or_else(|| invalid("data", "value", "hex digits"))
        })
        .collect()
}

/// `json` as an object, or [`JsonError::NotAnObject`].
pub(super) fn object<'a>(
    json: &'a Value,
    what: &'static str,
) -> Result<&'a Map<String, Value>, JsonError> {
    json.as_object().ok_or(JsonError::NotAnObject { what })
}

/// `json` as an array.
pub(super) fn array<'a>(json: &'a Value, what: &'static str) -> Result<&'a Vec<Value>, JsonError> {
    json.as_array().ok_or(JsonError::Invalid {
        what,
        field: "(list)",
        expected: "a JSON array",
    })
}

/// A required field of `object`.
pub(super) fn field<'a>(
    object: &'a Map<String, Value>,
    what: &'static str,
    name: &'static str,
) -> Result<&'a Value, JsonError> {
    object
        .get(name)
        .ok_or(JsonError::Missing { what, field: name })
}

/// `json` as a string.
pub(super) fn string<'a>(
    json: &'a Value,
    what: &'static str,
    name: &'static str,
) -> Result<&'a str, JsonError> {
    json.as_str().ok_or_else(|| invalid(what, name, "a string"))
}

/// `json` as an unsigned integer: a JSON number, or a string of decimal digits as
/// real clients send for `index` (`"index":"200"`), which the reference server's
/// parser (gson, whose `getAsInt` parses a string primitive) accepts.
fn number(json: &Value) -> Option<u64> {
    match json {
        Value::String(text) if !text.is_empty() && text.bytes().all(|c| c.is_ascii_digit()) => {
            text.parse().ok()
        }
        other => other.as_u64(),
    }
}

/// A required unsigned integer field that fits `T` (see [`number`]).
fn unsigned<T: TryFrom<u64>>(
    object: &Map<String, Value>,
    what: &'static str,
    name: &'static str,
    expected: &'static str,
) -> Result<T, JsonError> {
    number(field(object, what, name)?)
        .and_then(|number| T::try_from(number).ok())
        .ok_or_else(|| invalid(what, name, expected))
}

/// A required `u32` field.
pub(super) fn u32_field(
    object: &Map<String, Value>,
    what: &'static str,
    name: &'static str,
) -> Result<u32, JsonError> {
    unsigned(object, what, name, "an integer from 0 to 4294967295")
}

/// A required `u16` field.
pub(super) fn u16_field(
    object: &Map<String, Value>,
    what: &'static str,
    name: &'static str,
) -> Result<u16, JsonError> {
    unsigned(object, what, name, "an integer from 0 to 65535")
}

/// A required `u8` field.
pub(super) fn u8_field(
    object: &Map<String, Value>,
    what: &'static str,
    name: &'static str,
) -> Result<u8, JsonError> {
    unsigned(object, what, name, "an integer from 0 to 255")
}

fn invalid(what: &'static str, field: &'static str, expected: &'static str) -> JsonError {
    JsonError::Invalid {
        what,
        field,
        expected,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::value_json;
    use super::*;

    #[test]
    fn every_body_shape_is_read() {
        let value = json!({"index": 1, "type": "URL", "data": "https://example.org/"});
        let bare = parse_body(&json!([value.clone()])).unwrap();
        let wrapped = parse_body(&json!({"handle": "T/1", "values": [value.clone()]})).unwrap();
        let single = parse_body(&value).unwrap();
        assert_eq!(bare.values, single.values);
        assert_eq!(wrapped.values, single.values);
        assert_eq!(wrapped.handle.as_deref(), Some("T/1"));
        assert_eq!(single.values[0].data, b"https://example.org/");
        assert_eq!(single.values[0].permissions, Permissions::DEFAULT);
        assert!(matches!(parse_body(&json!(3)), Err(JsonError::BadBody)));
    }

    #[test]
    fn rendered_values_read_back_identically() {
        let admin = AdminRecord {
            permissions: AdminPermissions::ALL,
            admin_handle: "0.NA/T".into(),
            admin_index: 300,
            legacy_padding: false,
        };
        let values = [
            HandleValue::new(1, "URL", "https://example.org/"),
            HandleValue::new(2, "CUSTOM", vec![0, 0xff]),
            HandleValue {
                permissions: Permissions::ADMIN_ONLY,
                ttl: Ttl::Absolute(99),
                ..HandleValue::new(100, "HS_ADMIN", admin.encode())
            },
        ];
        for value in values {
            assert_eq!(parse_value(&value_json(&value)).unwrap(), value);
        }
    }

    #[test]
    fn numbers_may_come_as_strings_of_digits() {
        // As pyhandle and b2handle send an HS_ADMIN.
        let admin = json!({"index": "100", "type": "HS_ADMIN", "ttl": "86400", "ttlType": "0",
            "data": {"format": "admin", "value": {"handle": "0.NA/T", "index": "300", "permissions": "011111110011"}}});
        let value = parse_value(&admin).unwrap();
        assert_eq!(value.index, ValueIndex(100));
        assert_eq!(value.ttl, Ttl::Relative(86_400));
        let record = AdminRecord::decode(&value.data).unwrap();
        assert_eq!(record.admin_index, 300);
        for bad in ["", "-1", "1e3", " 1", "4294967296", "ten"] {
            let value = json!({"index": bad, "type": "URL", "data": "x"});
            assert!(parse_value(&value).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn formats_and_errors() {
        let hex = json!({"index": 2, "type": "X", "data": {"format": "hex", "value": "00ff"}});
        assert_eq!(parse_value(&hex).unwrap().data, vec![0, 0xff]);
        let admin = json!({"index": 100, "type": "HS_ADMIN",
            "data": {"format": "admin", "value": {"handle": "0.NA/T", "index": 300, "permissions": "*"}}});
        // Public read, as the reference server's JSON API gives an HS_ADMIN.
        assert_eq!(
            parse_value(&admin).unwrap().permissions,
            Permissions::DEFAULT
        );
        let array = json!({"index": 1, "type": "URL", "data": ["x"]});
        let error = parse_value(&array).unwrap_err();
        assert!(error.to_string().contains("Not a JSON Object"), "{error}");
        let big = json!({"index": 4_294_967_296_u64, "type": "URL", "data": "x"});
        assert!(parse_value(&big).is_err());
        let unknown = json!({"index": 1, "type": "URL", "data": {"format": "rot13", "value": ""}});
        assert_eq!(
            parse_value(&unknown),
            Err(JsonError::UnknownFormat("rot13".into()))
        );
        let odd = json!({"index": 1, "type": "X", "data": {"format": "hex", "value": "abc"}});
        assert!(parse_value(&odd).is_err());
    }
}
