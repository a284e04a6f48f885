//! The structured data formats: `vlist` (HS_VLIST), `site` (HS_SITE) and `key`
//! (HS_PUBKEY as a JSON Web Key), both ways.
//!
//! `site` follows J9's shape: `{"version","protocolVersion":"2.10","serialNumber",
//! "primaryMask","hashOption","hashFilter","attributes":[{"name","value"}],
//! "servers":[{"serverId","address","publicKey":{"format","value"},
//! "interfaces":[{"query","admin","protocol","port"}]}]}` where `primaryMask` is the
//! raw octet (0x80 primary, 0x40 multi-primary), `hashOption` the wire number (0 by
//! prefix, 1 by suffix, 2 whole handle) and `protocol` one of `UDP`, `TCP`, `HTTP`,
//! `HTTPS`. A server key is `{"format":"key","value":JWK}` when it decodes, else
//! base64. A JWK is `{"kty":"RSA","n","e"}`, `{"kty":"DSA","p","q","g","y"}` or
//! `{"kty":"DH","p","g","y"}`, integers as unpadded base64url big-endian magnitudes.

use std::net::IpAddr;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Map, Value, json};

use super::JsonError;
use super::parse::{array, field, object, string, u8_field, u16_field, u32_field};
use crate::values::{
    HashOption, Interface, InterfaceKind, InterfaceProtocol, PublicKey, ServerRecord, SiteFlags,
    SiteInfo, ValueIndex, ValueList, ValueReference,
};

/// HS_VLIST members as `[{"handle","index"}]`.
pub fn vlist_json(list: &ValueList) -> Value {
    list.0
        .iter()
        .map(|member| json!({"handle": member.handle, "index": member.index.0}))
        .collect()
}

/// Reads `[{"handle","index"}]`.
pub fn parse_vlist(json: &Value) -> Result<ValueList, JsonError> {
    let members = array(json, "vlist")?;
    let members = members.iter().map(|member| {
        let member = object(member, "vlist member")?;
        Ok(ValueReference {
            handle: string(
                field(member, "vlist member", "handle")?,
                "vlist member",
                "handle",
            )?
            .to_owned(),
            index: ValueIndex(u32_field(member, "vlist member", "index")?),
        })
    });
    Ok(ValueList(members.collect::<Result<_, _>>()?))
}

/// A public key as a JWK; `None` for key types JWK has no shape for here.
pub fn key_json(key: &PublicKey) -> Option<Value> {
    let b64 = |bytes: &Vec<u8>| URL_SAFE_NO_PAD.encode(bytes);
    Some(match key {
        PublicKey::Rsa { exponent, modulus } => {
            json!({"kty": "RSA", "n": b64(modulus), "e": b64(exponent)})
        }
        PublicKey::Dsa { q, p, g, y } => {
            json!({"kty": "DSA", "p": b64(p), "q": b64(q), "g": b64(g), "y": b64(y)})
        }
        PublicKey::Dh { y, p, g } => json!({"kty": "DH", "p": b64(p), "g": b64(g), "y": b64(y)}),
        PublicKey::Other { .. } => return None,
    })
}

/// Reads a JWK written by [`key_json`].
pub fn parse_key(json: &Value) -> Result<PublicKey, JsonError> {
    let jwk = object(json, "key")?;
    let part = |name: &'static str| -> Result<Vec<u8>, JsonError> {
        let text = string(field(jwk, "key", name)?, "key", name)?;
        URL_SAFE_NO_PAD
            .decode(text.trim_end_matches('='))
            .map_err(|_| invalid("key", name, "base64url"))
    };
    match string(field(jwk, "key", "kty")?, "key", "kty")? {
        "RSA" => Ok(PublicKey::Rsa {
            exponent: part("e")?,
            modulus: part("n")?,
        }),
        "DSA" => Ok(PublicKey::Dsa {
            q: part("q")?,
            p: part("p")?,
            g: part("g")?,
            y: part("y")?,
        }),
        "DH" => Ok(PublicKey::Dh {
            y: part("y")?,
            p: part("p")?,
            g: part("g")?,
        }),
        _ => Err(invalid("key", "kty", "RSA, DSA or DH")),
    }
}

/// An HS_SITE record in J9's JSON shape.
pub fn site_json(site: &SiteInfo) -> Value {
    let attributes: Vec<Value> = site
        .attributes
        .iter()
        .map(|(name, value)| json!({"name": name, "value": value}))
        .collect();
    json!({
        "version": site.data_format_version,
        "protocolVersion": format!("{}.{}", site.protocol_major, site.protocol_minor),
        "serialNumber": site.serial_number,
        "primaryMask": site.flags.0,
        "hashOption": hash_number(site.hash_option),
        "hashFilter": site.hash_filter,
        "attributes": attributes,
        "servers": site.servers.iter().map(server_json).collect::<Vec<_>>(),
    })
}

fn server_json(server: &ServerRecord) -> Value {
    let key = PublicKey::decode(&server.public_key)
        .ok()
        .and_then(|key| key_json(&key));
    let public_key = match key {
        Some(jwk) => json!({"format": "key", "value": jwk}),
        None => json!({"format": "base64", "value": STANDARD.encode(&server.public_key)}),
    };
    let interfaces: Vec<Value> = server
        .interfaces
        .iter()
        .map(|interface| {
            let kind = interface.kind.wire();
            json!({
                "query": kind & 2 != 0,
                "admin": kind & 1 != 0,
                "protocol": protocol_name(interface.protocol),
                "port": interface.port,
            })
        })
        .collect();
    json!({
        "serverId": server.server_id,
        "address": server.address.to_string(),
        "publicKey": public_key,
        "interfaces": interfaces,
    })
}

/// Reads an HS_SITE record written by [`site_json`].
pub fn parse_site(json: &Value) -> Result<SiteInfo, JsonError> {
    const WHAT: &str = "site";
    let site = object(json, WHAT)?;
    let version = string(
        field(site, WHAT, "protocolVersion")?,
        WHAT,
        "protocolVersion",
    )?;
    let (major, minor) = version
        .split_once('.')
        .and_then(|(major, minor)| Some((major.parse().ok()?, minor.parse().ok()?)))
        .ok_or_else(|| invalid(WHAT, "protocolVersion", "\"MAJOR.MINOR\""))?;
    let hash_option = match u8_field(site, WHAT, "hashOption")? {
        0 => HashOption::ByPrefix,
        1 => HashOption::BySuffix,
        2 => HashOption::ByHandle,
        _ => return Err(invalid(WHAT, "hashOption", "0, 1 or 2")),
    };
    let attributes = optional_array(site, "attributes")?
        .iter()
        .map(parse_attribute)
        .collect::<Result<_, _>>()?;
    let servers = optional_array(site, "servers")?
        .iter()
        .map(parse_server)
        .collect::<Result<_, _>>()?;
    Ok(SiteInfo {
        data_format_version: u16_field(site, WHAT, "version")?,
        protocol_major: major,
        protocol_minor: minor,
        serial_number: u16_field(site, WHAT, "serialNumber")?,
        flags: SiteFlags(u8_field(site, WHAT, "primaryMask")?),
        hash_option,
        hash_filter: match site.get("hashFilter") {
            Some(filter) => string(filter, WHAT, "hashFilter")?.to_owned(),
            None => String::new(),
        },
        attributes,
        servers,
    })
}

fn optional_array<'a>(
    object: &'a Map<String, Value>,
    name: &str,
) -> Result<&'a [Value], JsonError> {
    match object.get(name) {
        Some(value) => Ok(array(value, "site")?.as_slice()),
        None => Ok(&[]),
    }
}

fn parse_attribute(json: &Value) -> Result<(String, String), JsonError> {
    const WHAT: &str = "site attribute";
    let attribute = object(json, WHAT)?;
    let name = string(field(attribute, WHAT, "name")?, WHAT, "name")?;
    let value = string(field(attribute, WHAT, "value")?, WHAT, "value")?;
    Ok((name.to_owned(), value.to_owned()))
}

fn parse_server(json: &Value) -> Result<ServerRecord, JsonError> {
    const WHAT: &str = "site server";
    let server = object(json, WHAT)?;
    let address = string(field(server, WHAT, "address")?, WHAT, "address")?;
    let address: IpAddr = address
        .parse()
        .map_err(|_| invalid(WHAT, "address", "an IP address"))?;
    let public_key = match server.get("publicKey") {
        None => Vec::new(),
        Some(key) => parse_server_key(key)?,
    };
    let interfaces = match server.get("interfaces") {
        None => Vec::new(),
        Some(list) => array(list, WHAT)?
            .iter()
            .map(parse_interface)
            .collect::<Result<_, _>>()?,
    };
    Ok(ServerRecord {
        server_id: u32_field(server, WHAT, "serverId")?,
        address,
        public_key,
        interfaces,
    })
}

fn parse_server_key(json: &Value) -> Result<Vec<u8>, JsonError> {
    const WHAT: &str = "server key";
    let key = object(json, WHAT)?;
    let value = field(key, WHAT, "value")?;
    match string(field(key, WHAT, "format")?, WHAT, "format")? {
        "key" => Ok(parse_key(value)?.encode()),
        "base64" => STANDARD
            .decode(string(value, WHAT, "value")?)
            .map_err(|_| invalid(WHAT, "value", "base64")),
        other => Err(JsonError::UnknownFormat(other.to_owned())),
    }
}

fn parse_interface(json: &Value) -> Result<Interface, JsonError> {
    const WHAT: &str = "site interface";
    let interface = object(json, WHAT)?;
    let flag = |name: &'static str| match interface.get(name) {
        None => Ok(false),
        Some(value) => value
            .as_bool()
            .ok_or_else(|| invalid(WHAT, name, "a boolean")),
    };
    let kind = u8::from(flag("query")?) << 1 | u8::from(flag("admin")?);
    let protocol = match string(field(interface, WHAT, "protocol")?, WHAT, "protocol")? {
        "UDP" => InterfaceProtocol::Udp,
        "TCP" => InterfaceProtocol::Tcp,
        "HTTP" => InterfaceProtocol::Http,
        "HTTPS" => InterfaceProtocol::Https,
        _ => return Err(invalid(WHAT, "protocol", "UDP, TCP, HTTP or HTTPS")),
    };
    Ok(Interface {
        kind: InterfaceKind::from_wire(kind),
        protocol,
        port: u32_field(interface, WHAT, "port")?,
    })
}

fn hash_number(option: HashOption) -> u8 {
    match option {
        HashOption::ByPrefix => 0,
        HashOption::BySuffix => 1,
        HashOption::ByHandle => 2,
    }
}

fn protocol_name(protocol: InterfaceProtocol) -> String {
    match protocol {
        InterfaceProtocol::Udp => "UDP".into(),
        InterfaceProtocol::Tcp => "TCP".into(),
        InterfaceProtocol::Http => "HTTP".into(),
        InterfaceProtocol::Https => "HTTPS".into(),
        InterfaceProtocol::Other(number) => number.to_string(),
    }
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
    use super::*;

    fn site() -> SiteInfo {
        SiteInfo {
            data_format_version: 1,
            protocol_major: 2,
            protocol_minor: 10,
            serial_number: 3,
            flags: SiteFlags::PRIMARY,
            hash_option: HashOption::ByHandle,
            hash_filter: String::new(),
            attributes: vec![("desc".into(), "test site".into())],
            servers: vec![ServerRecord {
                server_id: 1,
                address: "192.0.2.10".parse().unwrap(),
                public_key: PublicKey::Rsa {
                    exponent: vec![1, 0, 1],
                    modulus: vec![0xc3; 64],
                }
                .encode(),
                interfaces: vec![Interface {
                    kind: InterfaceKind::AdminQuery,
                    protocol: InterfaceProtocol::Tcp,
                    port: 2641,
                }],
            }],
        }
    }

    #[test]
    fn site_round_trips_through_json() {
        let json = site_json(&site());
        assert_eq!(json["servers"][0]["publicKey"]["value"]["kty"], "RSA");
        assert_eq!(json["servers"][0]["interfaces"][0]["protocol"], "TCP");
        assert_eq!(parse_site(&json).unwrap(), site());
    }

    #[test]
    fn keys_and_vlists_round_trip() {
        let key = PublicKey::Dsa {
            q: vec![1],
            p: vec![2, 3],
            g: vec![4],
            y: vec![0x85],
        };
        assert_eq!(parse_key(&key_json(&key).unwrap()).unwrap(), key);
        let list = ValueList(vec![ValueReference {
            handle: "0.NA/X".into(),
            index: ValueIndex(7),
        }]);
        assert_eq!(parse_vlist(&vlist_json(&list)).unwrap(), list);
        assert!(parse_key(&json!({"kty": "EC"})).is_err());
    }
}
