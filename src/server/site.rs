//! The HS_SITE record a node gives in answer to get-site-info (digest §3.3, §6.2).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use crate::codec::ProtocolVersion;
use crate::config::SiteConfig;
use crate::values::{
    HashOption, Interface, InterfaceKind, InterfaceProtocol, ServerRecord, SiteFlags, SiteInfo,
};

/// Describes this single server: a primary site of one server that answers
/// administration and queries over TCP and queries over UDP on `handle_addr`'s port.
pub fn describe(site: &SiteConfig, handle_addr: SocketAddr) -> SiteInfo {
    let address = advertised_address(site, handle_addr);
    let port = u32::from(handle_addr.port());
    SiteInfo {
        data_format_version: SiteInfo::DATA_FORMAT_VERSION,
        protocol_major: ProtocolVersion::MAX_SUPPORTED.major,
        protocol_minor: ProtocolVersion::MAX_SUPPORTED.minor,
        serial_number: site.serial,
        flags: SiteFlags::PRIMARY,
        hash_option: HashOption::ByHandle,
        hash_filter: String::new(),
        attributes: vec![("desc".into(), site.description.clone())],
        servers: vec![ServerRecord {
            server_id: site.server_id,
            address,
            public_key: Vec::new(),
            interfaces: vec![
                Interface {
                    kind: InterfaceKind::AdminQuery,
                    protocol: InterfaceProtocol::Tcp,
                    port,
                },
                Interface {
                    kind: InterfaceKind::Query,
                    protocol: InterfaceProtocol::Udp,
                    port,
                },
            ],
        }],
    }
}

/// The configured address, else the listen address, else loopback when the listener
/// is bound to every interface.
fn advertised_address(site: &SiteConfig, handle_addr: SocketAddr) -> IpAddr {
    match site.advertise {
        Some(address) => address,
        None if handle_addr.ip().is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        None => handle_addr.ip(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unspecified_listen_address_advertises_loopback_and_round_trips() {
        let info = describe(&SiteConfig::default(), "0.0.0.0:2641".parse().unwrap());
        assert_eq!(info.servers[0].address, IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert_eq!(info.servers[0].interfaces[0].port, 2641);
        assert_eq!(SiteInfo::decode(&info.encode()).unwrap(), info);
    }

    #[test]
    fn configured_address_wins() {
        let site = SiteConfig {
            advertise: Some("192.0.2.10".parse().unwrap()),
            ..SiteConfig::default()
        };
        let info = describe(&site, "127.0.0.1:1".parse().unwrap());
        assert_eq!(info.servers[0].address.to_string(), "192.0.2.10");
    }
}
