//! The HS_SITE record a node describes itself with (get-site-info, digest §3.3, §6.2):
//! one primary site whose servers are the members of the replica set, or, for a ring
//! over several sets, one server entry per slot (`DESIGN.md` §3).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use crate::codec::ProtocolVersion;
use crate::config::SiteConfig;
use crate::placement::ClusterMap;
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
        servers: members
            .iter()
            .filter_map(|m| Some(server_record(u32::try_from(m.id).ok()?, m.node.handle)))
            .collect(),
    }
}

/// The HS_SITE of member rank `rank` of a cluster whose map is `map`. With one set (or
/// no ring yet) the set's HS_SITE, every member a server. With several: one server
/// entry per slot, entry `i` (server id `i + 1`) at the member of rank `rank` modulo
/// the set's size (members in node id order) of the set that owns slot `i`, so a
/// client hashing over the entries (digest §7) lands on the slot's owner; its serial
/// is the map's epoch (modulo 2^16). A slot whose owner records no member has no
/// entry (a map in that state is being formed).
pub fn describe_ring(site: &SiteConfig, map: &ClusterMap, rank: usize) -> SiteInfo {
    if map.sets.len() <= 1 || map.slots.is_empty() {
        let members: Vec<Member> = map
            .sets
            .values()
            .flat_map(|set| set.members.values().cloned())
            .collect();
        return describe(site, &members, None);
    }
    let servers = map
        .slots
        .iter()
        .zip(1u32..)
        .filter_map(|(owner, server_id)| {
            let members = &map.sets.get(owner)?.members;
            let member = members.values().nth(rank % members.len().max(1))?;
            Some(server_record(server_id, member.node.handle))
        });
    SiteInfo {
        serial_number: u16::try_from(map.epoch % (1 << 16)).unwrap_or(u16::MAX),
        servers: servers.collect(),
        ..describe(site, &[], None)
    }
}

fn server_record(server_id: u32, handle: SocketAddr) -> ServerRecord {
    let port = u32::from(handle.port());
    let address = match handle.ip() {
        unspecified if unspecified.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        address => address,
    };
    ServerRecord {
        server_id,
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
    }
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

    #[test]
    fn a_ring_of_two_sets_lists_one_server_per_slot_at_the_owners_rank() {
        use crate::placement::MapCommand;
        use crate::replication::SetId;
        let mut map = ClusterMap::default();
        for (set, ids) in [(1, [1, 2, 3]), (2, [4, 5, 6])] {
            let members = ids
                .iter()
                .map(|id| member(*id, &format!("127.0.0.1:{}", 2640 + id)))
                .collect();
            let set = SetId(set);
            map.apply(MapCommand::RecordSet { set, members }).unwrap();
        }
        let sets = vec![SetId(1), SetId(2)];
        map.apply(MapCommand::MakeRing {
            slot_count: 8,
            sets,
        })
        .unwrap();
        let rank = |rank| describe_ring(&SiteConfig::default(), &map, rank);
        let ports = |info: SiteInfo| -> Vec<u32> {
            info.servers.iter().map(|s| s.interfaces[0].port).collect()
        };
        assert_eq!(
            ports(rank(0)),
            [2641, 2641, 2641, 2641, 2644, 2644, 2644, 2644]
        );
        assert_eq!(
            ports(rank(4)),
            [2642, 2642, 2642, 2642, 2645, 2645, 2645, 2645]
        );
        let info = rank(0);
        let ids: Vec<u32> = info.servers.iter().map(|s| s.server_id).collect();
        assert_eq!(ids, (1..=8).collect::<Vec<_>>());
        assert_eq!(u64::from(info.serial_number), map.epoch);
        assert_eq!(info.hash_option, HashOption::ByHandle);
    }
}
