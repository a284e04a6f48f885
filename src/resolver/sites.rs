//! From a handle to the addresses of the servers responsible for it: the prefix
//! handle's HS_SITE values at the GHR (following HS_SERV), the primary sites first,
//! and in each site the server its hash picks (digest §6.2, §7, §9).

use std::net::SocketAddr;

use crate::client::{Client, ClientError, Transport};
use crate::codec::{ResponseCode, server_index};
use crate::names::{Handle, prefix_handle};
use crate::values::{
    HandleTarget, HandleValue, InterfaceKind, InterfaceProtocol, KnownType, ServerRecord,
    SiteFlags, SiteInfo, ValueSelection,
};

use super::ResolveError;

/// How many service handles (HS_SERV) are followed, one inside the other.
pub const MAX_SERVICE_DEPTH: usize = 4;

/// The value types that say where a prefix's service is.
const SERVICE_TYPES: [&str; 3] = ["HS_SITE", "HS_SITE.6", "HS_SERV"];

/// Whether `handle` is served by the GHR itself: the `0.` naming authorities.
pub(super) fn lives_at_registry(handle: &Handle) -> bool {
    let prefix = handle.prefix_key();
    prefix == "0" || prefix.starts_with("0.")
}

/// The servers responsible for `handle`, in the order to ask them.
pub(super) async fn servers_for(
    registry: &Client,
    handle: &Handle,
) -> Result<Vec<SocketAddr>, ResolveError> {
    let prefix = handle.prefix_key().to_owned();
    let no_service = || ResolveError::NoService {
        prefix: prefix.clone(),
    };
    let mut service = prefix_handle(&prefix).map_err(|_| no_service())?;
    for _ in 0..=MAX_SERVICE_DEPTH {
        let values = service_values(registry, &service).await?;
        let sites = sites_of(&values);
        if !sites.is_empty() {
            let servers = servers_of(sites, handle.as_str().as_bytes());
            return if servers.is_empty() {
                Err(no_service())
            } else {
                Ok(servers)
            };
        }
        let next = values
            .iter()
            .filter(|value| value.known_type() == Some(KnownType::HsServ))
            .find_map(|value| HandleTarget::decode(&value.data).ok())
            .and_then(|target| Handle::parse(target.as_str()).ok());
        service = next.ok_or_else(no_service)?;
    }
    Err(ResolveError::TooDeep { prefix })
}

/// The HS_SITE, HS_SITE.6 and HS_SERV values of `service` at the GHR; none when the
/// GHR does not hold it.
async fn service_values(
    registry: &Client,
    service: &Handle,
) -> Result<Vec<HandleValue>, ResolveError> {
    let selection = ValueSelection {
        indexes: Vec::new(),
        types: SERVICE_TYPES.iter().map(|t| (*t).to_owned()).collect(),
    };
    match registry.resolve(service, &selection, Transport::Tcp).await {
        Ok(resolution) => Ok(resolution.values),
        Err(ClientError::Server {
            code: ResponseCode::HandleNotFound | ResponseCode::ValuesNotFound,
            ..
        }) => Ok(Vec::new()),
        Err(source) => Err(ResolveError::Client {
            what: format!("resolving {service} at the Global Handle Registry"),
            source,
        }),
    }
}

/// The sites among `values`, primary sites first; undecodable ones are passed over.
fn sites_of(values: &[HandleValue]) -> Vec<SiteInfo> {
    let mut sites: Vec<SiteInfo> = values
        .iter()
        .filter(|value| {
            matches!(
                value.known_type(),
                Some(KnownType::HsSite | KnownType::HsSite6)
            )
        })
        .filter_map(|value| SiteInfo::decode(&value.data).ok())
        .collect();
    sites.sort_by_key(|site| !site.flags.contains(SiteFlags::PRIMARY));
    sites
}

/// In each site, the address of the server the site's hash picks for `handle`.
fn servers_of(sites: Vec<SiteInfo>, handle: &[u8]) -> Vec<SocketAddr> {
    sites
        .into_iter()
        .filter_map(|site| {
            let index = server_index(handle, site.hash_option, site.servers.len());
            site.servers.get(index).and_then(query_address)
        })
        .collect()
}

/// Where `server` answers resolution: its TCP query interface, else any query one.
fn query_address(server: &ServerRecord) -> Option<SocketAddr> {
    let answers_queries = |kind| matches!(kind, InterfaceKind::Query | InterfaceKind::AdminQuery);
    let queries = || server.interfaces.iter().filter(|i| answers_queries(i.kind));
    let interface = queries()
        .find(|i| i.protocol == InterfaceProtocol::Tcp)
        .or_else(|| queries().next())?;
    let port = u16::try_from(interface.port).ok()?;
    Some(SocketAddr::new(server.address, port))
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use super::*;
    use crate::values::{HashOption, Interface};

    fn server(id: u32, last_octet: u8, interfaces: Vec<Interface>) -> ServerRecord {
        ServerRecord {
            server_id: id,
            address: IpAddr::V4(Ipv4Addr::new(127, 0, 0, last_octet)),
            public_key: Vec::new(),
            interfaces,
        }
    }

    fn interface(kind: InterfaceKind, protocol: InterfaceProtocol, port: u32) -> Interface {
        Interface {
            kind,
            protocol,
            port,
        }
    }

    fn site(flags: SiteFlags, servers: Vec<ServerRecord>) -> SiteInfo {
        SiteInfo {
            data_format_version: SiteInfo::DATA_FORMAT_VERSION,
            protocol_major: 2,
            protocol_minor: 11,
            serial_number: 1,
            flags,
            hash_option: HashOption::ByHandle,
            hash_filter: String::new(),
            attributes: Vec::new(),
            servers,
        }
    }

    #[test]
    fn the_tcp_query_interface_is_preferred_and_admin_only_ones_are_not_used() {
        let both = server(
            1,
            1,
            vec![
                interface(InterfaceKind::Query, InterfaceProtocol::Udp, 2641),
                interface(InterfaceKind::AdminQuery, InterfaceProtocol::Tcp, 2642),
            ],
        );
        assert_eq!(
            query_address(&both),
            Some("127.0.0.1:2642".parse().unwrap())
        );
        let udp = server(
            2,
            2,
            vec![interface(
                InterfaceKind::Query,
                InterfaceProtocol::Udp,
                2641,
            )],
        );
        assert_eq!(query_address(&udp), Some("127.0.0.2:2641".parse().unwrap()));
        let admin = server(
            3,
            3,
            vec![interface(
                InterfaceKind::Admin,
                InterfaceProtocol::Tcp,
                2641,
            )],
        );
        assert_eq!(query_address(&admin), None);
        let huge = server(
            4,
            4,
            vec![interface(
                InterfaceKind::Query,
                InterfaceProtocol::Tcp,
                70_000,
            )],
        );
        assert_eq!(query_address(&huge), None);
    }

    #[test]
    fn primary_sites_come_first_and_the_hash_picks_the_server() {
        let tcp = |port| {
            vec![interface(
                InterfaceKind::AdminQuery,
                InterfaceProtocol::Tcp,
                port,
            )]
        };
        let mirror = site(SiteFlags(0), vec![server(1, 9, tcp(9))]);
        let primary = site(
            SiteFlags::PRIMARY,
            (0..4u8)
                .map(|i| server(u32::from(i), i + 1, tcp(2641)))
                .collect(),
        );
        let values = [mirror, primary]
            .iter()
            .enumerate()
            .map(|(i, site)| {
                let index = u32::try_from(i).unwrap() + 1;
                HandleValue::new(index, "HS_SITE", site.encode())
            })
            .collect::<Vec<_>>();
        let sites = sites_of(&values);
        assert!(sites[0].flags.contains(SiteFlags::PRIMARY));
        // Digest §7: 10.1000/ABC by handle over four servers is server 1.
        let servers = servers_of(sites, b"10.1000/ABC");
        let expected: Vec<SocketAddr> = vec![
            "127.0.0.2:2641".parse().unwrap(),
            "127.0.0.9:9".parse().unwrap(),
        ];
        assert_eq!(servers, expected);
    }

    #[test]
    fn the_registry_serves_the_zero_naming_authorities() {
        for (text, at_registry) in [
            ("0.NA/10.5555", true),
            ("0/x", true),
            ("0.TEST/admin", true),
            ("10.5555/x", false),
            ("01.5/x", false),
        ] {
            let handle = Handle::parse(text).unwrap();
            assert_eq!(lives_at_registry(&handle), at_registry, "{text}");
        }
    }
}
