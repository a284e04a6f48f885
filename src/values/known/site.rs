//! HS_SITE data: a service site and its servers (digest §6.2).
//!
//! The same layout serves HS_SITE, HS_SITE.6, HS_SITE.PREFIX and HS_NA_DELEGATE, and
//! is the body of OC_GET_SITEINFO:
//! `DataFormatVersion u16 ‖ ProtocolMajor u8 ‖ ProtocolMinor u8 ‖ SerialNumber u16 ‖
//! PrimaryMask u8 ‖ HashOption u8 ‖ HashFilter Str ‖ Attributes List<Str ‖ Str> ‖
//! Servers List<ServerId u32 ‖ Address 16 octets ‖ PublicKey Bytes ‖
//! Interfaces List<Type u8 ‖ Protocol u8 ‖ Port u32>>`.
//!
//! Follows J9 where it departs from the RFC: the primary mask is `0x80` primary,
//! `0x40` multi-primary; an IPv4 address is 12 zero octets then its 4 octets, so any
//! address in `::/96` decodes as IPv4. Decoding is strict (trailing octets are an
//! error). An unknown hash option is an error, since no server could be chosen;
//! unknown interface types and protocols decode to `Other` so a client can skip them.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::values::wire::{DecodeError, Reader, Writer};

/// Octets a server record takes at the least: id, address, key length, count.
const MIN_SERVER_LEN: usize = 4 + 16 + 4 + 4;
/// Octets an interface takes.
const INTERFACE_LEN: usize = 6;
/// Octets an attribute takes at the least: two lengths.
const MIN_ATTRIBUTE_LEN: usize = 8;

/// The primary mask of a site (J9 bit order, digest §6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SiteFlags(pub u8);

impl SiteFlags {
    /// This site is a primary: it accepts administration.
    pub const PRIMARY: Self = Self(0x80);
    /// The service has several primary sites.
    pub const MULTI_PRIMARY: Self = Self(0x40);

    /// Whether every bit of `other` is set here.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// These flags with the bits of `other` added.
    pub const fn with(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }
}

/// Which part of a handle picks the server inside a site (digest §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HashOption {
    /// Hash the prefix (HASH_BY_NA, 0).
    ByPrefix,
    /// Hash the suffix (HASH_BY_LOCAL, 1).
    BySuffix,
    /// Hash the whole handle (HASH_BY_HANDLE, 2; the J9 default).
    ByHandle,
}

impl HashOption {
    fn from_wire(value: u8) -> Result<Self, DecodeError> {
        match value {
            0 => Ok(HashOption::ByPrefix),
            1 => Ok(HashOption::BySuffix),
            2 => Ok(HashOption::ByHandle),
            other => Err(DecodeError::InvalidField {
                field: "hash option",
                value: u64::from(other),
            }),
        }
    }

    fn wire(self) -> u8 {
        match self {
            HashOption::ByPrefix => 0,
            HashOption::BySuffix => 1,
            HashOption::ByHandle => 2,
        }
    }
}

/// What an interface of a server is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InterfaceKind {
    /// Out of service (0).
    Out,
    /// Administration only (1).
    Admin,
    /// Resolution only (2).
    Query,
    /// Administration and resolution (3).
    AdminQuery,
    /// A value this version does not know; never one of the above.
    Other(u8),
}

impl InterfaceKind {
    /// The kind from its wire octet.
    pub fn from_wire(value: u8) -> Self {
        match value {
            0 => InterfaceKind::Out,
            1 => InterfaceKind::Admin,
            2 => InterfaceKind::Query,
            3 => InterfaceKind::AdminQuery,
            other => InterfaceKind::Other(other),
        }
    }

    /// The wire octet.
    pub fn wire(self) -> u8 {
        match self {
            InterfaceKind::Out => 0,
            InterfaceKind::Admin => 1,
            InterfaceKind::Query => 2,
            InterfaceKind::AdminQuery => 3,
            InterfaceKind::Other(other) => other,
        }
    }
}

/// The transport of an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InterfaceProtocol {
    /// UDP (0).
    Udp,
    /// TCP (1).
    Tcp,
    /// The HTTP tunnel (2).
    Http,
    /// The HTTP tunnel over TLS (3).
    Https,
    /// A value this version does not know; never one of the above.
    Other(u8),
}

impl InterfaceProtocol {
    /// The protocol from its wire octet.
    pub fn from_wire(value: u8) -> Self {
        match value {
            0 => InterfaceProtocol::Udp,
            1 => InterfaceProtocol::Tcp,
            2 => InterfaceProtocol::Http,
            3 => InterfaceProtocol::Https,
            other => InterfaceProtocol::Other(other),
        }
    }

    /// The wire octet.
    pub fn wire(self) -> u8 {
        match self {
            InterfaceProtocol::Udp => 0,
            InterfaceProtocol::Tcp => 1,
            InterfaceProtocol::Http => 2,
            InterfaceProtocol::Https => 3,
            InterfaceProtocol::Other(other) => other,
        }
    }
}

/// One way to reach a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Interface {
    /// What it is for.
    pub kind: InterfaceKind,
    /// Its transport.
    pub protocol: InterfaceProtocol,
    /// Its port (a `u32` on the wire).
    pub port: u32,
}

/// One server of a site.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ServerRecord {
    /// Unique within the site.
    pub server_id: u32,
    /// Where it listens.
    pub address: IpAddr,
    /// Its key in the HS_PUBKEY encoding (see `PublicKey`); may be empty.
    pub public_key: Vec<u8>,
    /// How to reach it.
    pub interfaces: Vec<Interface>,
}

/// The data of an HS_SITE value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SiteInfo {
    /// Format of this record; J9 writes [`SiteInfo::DATA_FORMAT_VERSION`] and never
    /// checks it.
    pub data_format_version: u16,
    /// Highest protocol major version the servers speak.
    pub protocol_major: u8,
    /// Highest protocol minor version the servers speak.
    pub protocol_minor: u8,
    /// Bumped on every change of the site.
    pub serial_number: u16,
    /// Primary and multi-primary marks.
    pub flags: SiteFlags,
    /// How to choose the server for a handle.
    pub hash_option: HashOption,
    /// Reserved, normally empty.
    pub hash_filter: String,
    /// Name/value pairs such as `desc`, `alt_addr`, `domain`, `path`.
    pub attributes: Vec<(String, String)>,
    /// The servers; a handle is served by exactly one of them.
    pub servers: Vec<ServerRecord>,
}

impl SiteInfo {
    /// The data format version J9 writes.
    pub const DATA_FORMAT_VERSION: u16 = 1;

    /// Decodes HS_SITE data; trailing octets are an error.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(bytes);
        let data_format_version = r.u16("site data format version")?;
        let protocol_major = r.u8("site protocol major")?;
        let protocol_minor = r.u8("site protocol minor")?;
        let serial_number = r.u16("site serial number")?;
        let flags = SiteFlags(r.u8("site primary mask")?);
        let hash_option = HashOption::from_wire(r.u8("hash option")?)?;
        let hash_filter = r.str("hash filter")?.to_owned();
        let attributes = decode_attributes(&mut r)?;
        let count = r.count("site servers", MIN_SERVER_LEN)?;
        let servers = (0..count)
            .map(|_| decode_server(&mut r))
            .collect::<Result<_, _>>()?;
        r.finish("HS_SITE data")?;
        Ok(SiteInfo {
            data_format_version,
            protocol_major,
            protocol_minor,
            serial_number,
            flags,
            hash_option,
            hash_filter,
            attributes,
            servers,
        })
    }

    /// The HS_SITE data.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.u16(self.data_format_version);
        w.u8(self.protocol_major);
        w.u8(self.protocol_minor);
        w.u16(self.serial_number);
        w.u8(self.flags.0);
        w.u8(self.hash_option.wire());
        w.str(&self.hash_filter);
        w.count(self.attributes.len());
        for (name, value) in &self.attributes {
            w.str(name);
            w.str(value);
        }
        w.count(self.servers.len());
        for server in &self.servers {
            encode_server(server, &mut w);
        }
        w.into_bytes()
    }
}

fn decode_attributes(r: &mut Reader<'_>) -> Result<Vec<(String, String)>, DecodeError> {
    let count = r.count("site attributes", MIN_ATTRIBUTE_LEN)?;
    (0..count)
        .map(|_| {
            let name = r.str("site attribute name")?.to_owned();
            let value = r.str("site attribute value")?.to_owned();
            Ok((name, value))
        })
        .collect()
}

fn decode_server(r: &mut Reader<'_>) -> Result<ServerRecord, DecodeError> {
    let server_id = r.u32("server id")?;
    let mut octets = [0u8; 16];
    octets.copy_from_slice(r.take(16, "server address")?);
    let address = decode_address(octets);
    let public_key = r.bytes("server public key")?.to_vec();
    let count = r.count("server interfaces", INTERFACE_LEN)?;
    let interfaces = (0..count)
        .map(|_| {
            Ok(Interface {
                kind: InterfaceKind::from_wire(r.u8("interface type")?),
                protocol: InterfaceProtocol::from_wire(r.u8("interface protocol")?),
                port: r.u32("interface port")?,
            })
        })
        .collect::<Result<_, DecodeError>>()?;
    Ok(ServerRecord {
        server_id,
        address,
        public_key,
        interfaces,
    })
}

fn encode_server(server: &ServerRecord, w: &mut Writer) {
    w.u32(server.server_id);
    w.raw(&encode_address(server.address));
    w.bytes(&server.public_key);
    w.count(server.interfaces.len());
    for interface in &server.interfaces {
        w.u8(interface.kind.wire());
        w.u8(interface.protocol.wire());
        w.u32(interface.port);
    }
}

/// J9 `ServerInfo.isIPv4`: twelve leading zero octets mean IPv4.
fn decode_address(octets: [u8; 16]) -> IpAddr {
    match octets {
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, a, b, c, d] => IpAddr::V4(Ipv4Addr::new(a, b, c, d)),
        _ => IpAddr::V6(Ipv6Addr::from(octets)),
    }
}

/// IPv4 as IPv4-compatible (`::a.b.c.d`), not IPv4-mapped, as J9 writes it.
fn encode_address(address: IpAddr) -> [u8; 16] {
    match address {
        IpAddr::V4(v4) => Ipv4Addr::to_ipv6_compatible(&v4).octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::hex;
    use super::*;

    /// Digest §11.3: the 85 data octets of the synthetic site 192.0.2.10.
    const SITE_HEX: &str = "0001 020a 0003 80 02 00000000
        00000001 00000004 64657363 00000007 4578616d706c65
        00000001 00000001 000000000000000000000000 c000020a 00000000
        00000003 03 01 00000a51 02 00 00000a51 03 02 00001f40";

    fn interface(kind: InterfaceKind, protocol: InterfaceProtocol, port: u32) -> Interface {
        Interface {
            kind,
            protocol,
            port,
        }
    }

    fn example_site() -> SiteInfo {
        SiteInfo {
            data_format_version: 1,
            protocol_major: 2,
            protocol_minor: 10,
            serial_number: 3,
            flags: SiteFlags::PRIMARY,
            hash_option: HashOption::ByHandle,
            hash_filter: String::new(),
            attributes: vec![("desc".into(), "Example".into())],
            servers: vec![ServerRecord {
                server_id: 1,
                address: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 10)),
                public_key: Vec::new(),
                interfaces: vec![
                    interface(InterfaceKind::AdminQuery, InterfaceProtocol::Tcp, 2641),
                    interface(InterfaceKind::Query, InterfaceProtocol::Udp, 2641),
                    interface(InterfaceKind::AdminQuery, InterfaceProtocol::Http, 8000),
                ],
            }],
        }
    }

    #[test]
    fn matches_digest_vector() {
        let bytes = hex(SITE_HEX);
        assert_eq!(bytes.len(), 85);
        assert_eq!(example_site().encode(), bytes);
        assert_eq!(SiteInfo::decode(&bytes).unwrap(), example_site());
    }

    #[test]
    fn ipv6_server_round_trips() {
        let mut site = example_site();
        site.flags = SiteFlags::PRIMARY.with(SiteFlags::MULTI_PRIMARY);
        site.servers[0].address = "2001:550:100:6::4".parse().unwrap();
        site.servers[0].public_key = vec![1, 2, 3];
        let decoded = SiteInfo::decode(&site.encode()).unwrap();
        assert_eq!(decoded, site);
        assert!(decoded.flags.contains(SiteFlags::MULTI_PRIMARY));
    }

    #[test]
    fn unknown_interface_values_are_kept() {
        let mut bytes = hex(SITE_HEX);
        let n = bytes.len();
        bytes[n - 6] = 9;
        bytes[n - 5] = 7;
        let site = SiteInfo::decode(&bytes).unwrap();
        assert_eq!(
            site.servers[0].interfaces[2],
            interface(InterfaceKind::Other(9), InterfaceProtocol::Other(7), 8000)
        );
        assert_eq!(site.encode(), bytes);
    }

    #[test]
    fn unknown_hash_option_is_refused() {
        let mut bytes = hex(SITE_HEX);
        bytes[7] = 3;
        assert_eq!(
            SiteInfo::decode(&bytes).unwrap_err(),
            DecodeError::InvalidField {
                field: "hash option",
                value: 3
            }
        );
    }

    #[test]
    fn trailing_octets_are_refused() {
        let mut bytes = hex(SITE_HEX);
        bytes.push(0);
        assert!(matches!(
            SiteInfo::decode(&bytes),
            Err(DecodeError::TrailingBytes { count: 1, .. })
        ));
    }
}
