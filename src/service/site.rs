//! The HS_SITE record a node describes itself with (get-site-info, digest §3.3, §6.2):
//! one primary site whose servers are the members of the replica set.

use std::net::{IpAddr, Ipv4Addr};

use crate::codec::ProtocolVersion;
use crate::config::SiteConfig;
use crate::replication::NodeId;
use crate::replication::admin::Member;
use crate::values::{
    HashOption, Interface, InterfaceKind, InterfaceProtocol, ServerRecord, SiteFlags, SiteInfo,
};

/// Describes the replica set: a primary site with one server record per member (its
/// node id as server id), each answering administration and queries over TCP and
/// queries over UDP on its handle port, and the attribute `primary` naming the
/// current primary's node id when one is known.
pub(super) fn describe(site: &SiteConfig, members: &[Member], primary: Option<NodeId>) -> SiteInfo {
    let mut attributes = vec![("desc".into(), site.description.clone())];
    if let Some(primary) = primary {
        attributes.push(("primary".into(), primary.to_string()));
    }
    SiteInfo {
        data_format_version: SiteInfo::DATA_FORMAT_VERSION,
        protocol_major: ProtocolVersion::MAX_SUPPORTED.major,
        protocol_minor: ProtocolVersion::MAX_SUPPORTED.minor,
        serial_number: site.serial,
        flags: SiteFlags::PRIMARY,
        hash_option: HashOption::ByHandle,
        hash_filter: String::new(),
        attributes,
        // Node ids are checked to fit a server id when a node starts or joins.
        servers: members.iter().filter_map(server_record).collect(),
    }
}

fn server_record(member: &Member) -> Option<ServerRecord> {
    let handle = member.node.handle;
    let port = u32::from(handle.port());
    let address = match handle.ip() {
        unspecified if unspecified.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        address => address,
    };
    Some(ServerRecord {
        server_id: u32::try_from(member.id).ok()?,
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
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replication::Node;

    fn member(id: NodeId, handle: &str) -> Member {
        Member {
            id,
            node: Node {
                handle: handle.parse().unwrap(),
                ..Node::default()
            },
            voter: true,
        }
    }

    #[test]
    fn every_member_is_a_server_and_the_primary_is_named() {
        let members = [member(1, "127.0.0.1:2641"), member(2, "192.0.2.7:2700")];
        let info = describe(&SiteConfig::default(), &members, Some(2));
        let ids: Vec<u32> = info.servers.iter().map(|s| s.server_id).collect();
        assert_eq!(ids, [1, 2]);
        assert_eq!(info.servers[1].address.to_string(), "192.0.2.7");
        assert_eq!(info.servers[1].interfaces[1].port, 2700);
        assert!(info.attributes.contains(&("primary".into(), "2".into())));
        assert!(info.flags.contains(SiteFlags::PRIMARY));
        assert_eq!(SiteInfo::decode(&info.encode()).unwrap(), info);
    }
}
