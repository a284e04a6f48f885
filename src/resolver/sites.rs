//! From a handle to the addresses of the servers responsible for it: the prefix
//! handle's HS_SITE values at the GHR (following HS_SERV and prefix referrals), the
//! primary sites first, and in each site the server its hash picks (digest §6.2, §7,
//! §9).

use std::net::SocketAddr;
use std::time::Instant;

use crate::client::{Client, ClientError, Transport};
use crate::codec::{ResponseCode, server_index};
use crate::names::{Handle, prefix_handle};
use crate::values::{
    HandleTarget, HandleValue, InterfaceKind, InterfaceProtocol, KnownType, ServerRecord,
    SiteFlags, SiteInfo, ValueSelection,
};

use super::cache::shortest_ttl;
use super::{Purpose, ResolveError, Resolver, Step};

/// How many service handles (HS_SERV) and prefix referrals are followed, one inside
/// the other.
pub const MAX_SERVICE_DEPTH: usize = 4;

/// The value types that say where a prefix's service is.
const SERVICE_TYPES: [&str; 3] = ["HS_SITE", "HS_SITE.6", "HS_SERV"];

/// Whether `handle` is served by the GHR itself: the `0.` naming authorities.
pub(super) fn lives_at_registry(handle: &Handle) -> bool {
    let prefix = handle.prefix_key();
    prefix == "0" || prefix.starts_with("0.")
}

impl Resolver {
    /// The sites of the service of `prefix`: from the cache while its TTL lasts, else
    /// from the prefix handle `0.NA/<prefix>` at the GHR, following its HS_SERV values
    /// and prefix referrals (at most [`MAX_SERVICE_DEPTH`] steps).
    pub(super) async fn sites_of_prefix(
        &self,
        prefix: &str,
    ) -> Result<Vec<SiteInfo>, ResolveError> {
        let no_service = || ResolveError::NoService {
            prefix: prefix.to_owned(),
        };
        let prefix_handle = prefix_handle(prefix).map_err(|_| no_service())?;
        if let Some(sites) = self.cache.get(prefix_handle.key(), Instant::now()) {
            self.trace(Step::Cached {
                prefix: prefix.to_owned(),
                sites: sites.len(),
            });
            return Ok(sites);
        }
        let mut ask = self.registry.clone();
        let mut service = prefix_handle.clone();
        let mut used = Vec::new();
        for _ in 0..=MAX_SERVICE_DEPTH {
            let values = match self.service_values(&ask, &service).await {
                Ok(values) => values,
                Err(ClientError::Referred { code, referral }) => {
                    self.trace(Step::referred(code, &referral));
                    let values = referral.values.unwrap_or_default();
                    ask = self
                        .delegate(&values, &service)
                        .await?
                        .ok_or_else(no_service)?;
                    continue;
                }
                Err(source) => {
                    return Err(ResolveError::Client {
                        what: format!("resolving {service}"),
                        source,
                    });
                }
            };
            let sites = sites_of(&values);
            if !sites.is_empty() {
                used.extend(values);
                let ttl = shortest_ttl(&used);
                self.trace(Step::Sites {
                    prefix: prefix.to_owned(),
                    sites: sites.len(),
                    ttl,
                });
                self.cache
                    .insert(prefix_handle.key(), sites.clone(), ttl, Instant::now());
                return Ok(sites);
            }
            service = service_handle(&values, KnownType::HsServ).ok_or_else(no_service)?;
            self.trace(Step::ServiceHandle {
                handle: service.to_string(),
            });
            used.extend(values);
            ask = self.registry.clone();
        }
        Err(ResolveError::TooDeep {
            prefix: prefix.to_owned(),
        })
    }

    /// A client of the servers a prefix referral's `values` name for the prefix handle
    /// `service`; `None` when they name none.
    async fn delegate(
        &self,
        values: &[HandleValue],
        service: &Handle,
    ) -> Result<Option<Client>, ResolveError> {
        let sites = self.sites_of_delegation(values).await?;
        let servers = servers_of(sites, service.as_str().as_bytes(), Purpose::Read);
        Ok((!servers.is_empty()).then(|| Client::new(servers)))
    }

    /// The sites a prefix referral's values name: HS_SITE.PREFIX and HS_NA_DELEGATE
    /// directly, else those of the service handle an HS_SERV.PREFIX names (at the GHR).
    async fn sites_of_delegation(
        &self,
        values: &[HandleValue],
    ) -> Result<Vec<SiteInfo>, ResolveError> {
        let sites = decoded_sites(values, &[KnownType::HsSitePrefix, KnownType::HsNaDelegate]);
        if !sites.is_empty() {
            return Ok(sites);
        }
        let Some(service) = service_handle(values, KnownType::HsServPrefix) else {
            return Ok(Vec::new());
        };
        self.trace(Step::ServiceHandle {
            handle: service.to_string(),
        });
        let values = self
            .service_values(&self.registry, &service)
            .await
            .map_err(|source| ResolveError::Client {
                what: format!("resolving service handle {service}"),
                source,
            })?;
        Ok(sites_of(&values))
    }

    /// The HS_SITE, HS_SITE.6 and HS_SERV values of `service` at `servers`; none when
    /// they do not hold it.
    async fn service_values(
        &self,
        servers: &Client,
        service: &Handle,
    ) -> Result<Vec<HandleValue>, ClientError> {
        let selection = ValueSelection {
            indexes: Vec::new(),
            types: SERVICE_TYPES.iter().map(|t| (*t).to_owned()).collect(),
        };
        self.trace(Step::Asking {
            handle: service.to_string(),
            servers: servers.servers().to_vec(),
        });
        match servers.resolve(service, &selection, Transport::Tcp).await {
            Ok(resolution) => Ok(resolution.values),
            Err(ClientError::Server {
                code: ResponseCode::HandleNotFound | ResponseCode::ValuesNotFound,
                ..
            }) => Ok(Vec::new()),
            Err(error) => Err(error),
        }
    }
}

/// The handle the first decodable value of type `kind` (HS_SERV, HS_SERV.PREFIX)
/// names.
fn service_handle(values: &[HandleValue], kind: KnownType) -> Option<Handle> {
    values
        .iter()
        .filter(|value| value.known_type() == Some(kind))
        .find_map(|value| HandleTarget::decode(&value.data).ok())
        .and_then(|target| Handle::parse(target.as_str()).ok())
}

/// The sites among `values` of one of `kinds`, primary sites first; undecodable ones
/// are passed over.
fn decoded_sites(values: &[HandleValue], kinds: &[KnownType]) -> Vec<SiteInfo> {
    let mut sites: Vec<SiteInfo> = values
        .iter()
        .filter(|value| value.known_type().is_some_and(|t| kinds.contains(&t)))
        .filter_map(|value| SiteInfo::decode(&value.data).ok())
        .collect();
    sites.sort_by_key(|site| !site.flags.contains(SiteFlags::PRIMARY));
    sites
}

/// The HS_SITE and HS_SITE.6 sites among `values`, primary sites first.
pub(super) fn sites_of(values: &[HandleValue]) -> Vec<SiteInfo> {
    decoded_sites(values, &[KnownType::HsSite, KnownType::HsSite6])
}

/// In each site `purpose` may use (every site for a read, primary sites for a
/// write), the address of the server the site's hash picks for `handle`.
pub(super) fn servers_of(sites: Vec<SiteInfo>, handle: &[u8], purpose: Purpose) -> Vec<SocketAddr> {
    sites
        .into_iter()
        .filter(|site| purpose == Purpose::Read || site.flags.contains(SiteFlags::PRIMARY))
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
        let servers = servers_of(sites.clone(), b"10.1000/ABC", Purpose::Read);
        let expected: Vec<SocketAddr> = vec![
            "127.0.0.2:2641".parse().unwrap(),
            "127.0.0.9:9".parse().unwrap(),
        ];
        assert_eq!(servers, expected);
        let writes = servers_of(sites, b"10.1000/ABC", Purpose::Write);
        assert_eq!(writes, expected[..1], "writes go to primary sites only");
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
