//! The HS_SITE record a node describes itself with (get-site-info, digest §3.3, §6.2):
//! one primary site whose servers are the members of the replica set (`describe`);
//! or, once the ring spreads handles over several replica sets, one site per member
//! rank with one server entry per slot ([`describe_ring`], `DESIGN.md` §3: a client
//! hashing a handle over the entries lands on a member of the set owning its slot).
//! Pure: both describe what they are given.
//!
//! Every server entry carries its member's server key (HS_PUBKEY data, digest §6.5),
//! with which a client checks the signed answers of that member (digest §2.5: J9
//! verifies with the key of the entry it contacted). The keys come from
//! [`MemberKeys`], the book the node fills as it learns them; an entry whose key is
//! not known yet has an empty one.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{PoisonError, RwLock};

use crate::codec::ProtocolVersion;
use crate::config::SiteConfig;
use crate::placement::ClusterMap;
use crate::replication::NodeId;
use crate::replication::admin::Member;
use crate::values::{
    HashOption, Interface, InterfaceKind, InterfaceProtocol, ServerRecord, SiteFlags, SiteInfo,
};

/// The server keys of the cluster's members (HS_PUBKEY data) by node id, as a node
/// has learned them: its own from the start, the others' by asking them.
#[derive(Debug, Default)]
pub struct MemberKeys(RwLock<BTreeMap<NodeId, Vec<u8>>>);

impl MemberKeys {
    /// A book knowing only `id`'s key `public_key`.
    pub fn with_own(id: NodeId, public_key: Vec<u8>) -> Self {
        MemberKeys(RwLock::new(BTreeMap::from([(id, public_key)])))
    }

    /// Records `id`'s key.
    pub fn insert(&self, id: NodeId, public_key: Vec<u8>) {
        let mut keys = self.0.write().unwrap_or_else(PoisonError::into_inner);
        keys.insert(id, public_key);
    }

    /// Whether `id`'s key is known.
    pub fn knows(&self, id: NodeId) -> bool {
        let keys = self.0.read().unwrap_or_else(PoisonError::into_inner);
        keys.contains_key(&id)
    }

    /// Every key known now.
    pub fn snapshot(&self) -> BTreeMap<NodeId, Vec<u8>> {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Describes the replica set: a primary site with one server record per member (its
/// node id as server id, its key from `keys`), each answering administration and
/// queries over TCP and queries over UDP on its handle port, and the attribute
/// `primary` naming the current primary's node id when one is known.
pub fn describe(
    site: &SiteConfig,
    members: &[Member],
    primary: Option<NodeId>,
    keys: &BTreeMap<NodeId, Vec<u8>>,
) -> SiteInfo {
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
            .filter_map(|member| {
                let server_id = u32::try_from(member.id).ok()?;
                Some(server_record(server_id, member, keys))
            })
            .collect(),
    }
}

/// The HS_SITE to publish for member rank `rank` of the cluster `map` describes: with
/// one set (or before the ring is made) the set's own, every member a server;
/// with several, [`describe_ring`]. Server keys come from `keys`.
pub fn describe_cluster(
    site: &SiteConfig,
    map: &ClusterMap,
    rank: usize,
    keys: &BTreeMap<NodeId, Vec<u8>>,
) -> SiteInfo {
    if map.sets.len() > 1 && !map.slots.is_empty() {
        return describe_ring(site, map, rank, keys);
    }
    let members: Vec<Member> = map
        .sets
        .values()
        .flat_map(|set| set.members.values().cloned())
        .collect();
    describe(site, &members, None, keys)
}

/// The HS_SITE of member rank `rank` of a ring over several replica sets: one server
/// entry per slot, entry `i` (server id `i + 1`) at the member of rank `rank mod size`
/// of the set owning slot `i` (members in node id order), serial the map's epoch
/// modulo 2^16, hashed by handle. A slot whose owner has no recorded member (never so
/// in a made ring) takes the first recorded member of the cluster, which forwards.
/// Each entry carries its member's key from `keys`.
pub fn describe_ring(
    site: &SiteConfig,
    map: &ClusterMap,
    rank: usize,
    keys: &BTreeMap<NodeId, Vec<u8>>,
) -> SiteInfo {
    let any = map
        .sets
        .values()
        .find_map(|set| set.members.values().next());
    let servers = map
        .slots
        .iter()
        .zip(1u32..)
        .filter_map(|(owner, server_id)| {
            let members = map.sets.get(owner).map(|set| &set.members);
            let member = members
                .filter(|members| !members.is_empty())
                .and_then(|members| members.values().nth(rank % members.len()))
                .or(any)?;
            Some(server_record(server_id, member, keys))
        })
        .collect();
    SiteInfo {
        data_format_version: SiteInfo::DATA_FORMAT_VERSION,
        protocol_major: ProtocolVersion::MAX_SUPPORTED.major,
        protocol_minor: ProtocolVersion::MAX_SUPPORTED.minor,
        serial_number: u16::try_from(map.epoch % (1 << 16)).unwrap_or_default(),
        flags: SiteFlags::PRIMARY,
        hash_option: HashOption::ByHandle,
        hash_filter: String::new(),
        attributes: vec![
            ("desc".into(), site.description.clone()),
            ("rank".into(), rank.to_string()),
        ],
        servers,
    }
}

fn server_record(
    server_id: u32,
    member: &Member,
    keys: &BTreeMap<NodeId, Vec<u8>>,
) -> ServerRecord {
    let handle = member.node.handle;
    let port = u32::from(handle.port());
    let address = match handle.ip() {
        unspecified if unspecified.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        address => address,
    };
    ServerRecord {
        server_id,
        address,
        public_key: keys.get(&member.id).cloned().unwrap_or_default(),
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
        let keys = BTreeMap::from([(2, b"key of 2".to_vec())]);
        let info = describe(&SiteConfig::default(), &members, Some(2), &keys);
        let ids: Vec<u32> = info.servers.iter().map(|s| s.server_id).collect();
        assert_eq!(ids, [1, 2]);
        assert!(info.servers[0].public_key.is_empty(), "not learned yet");
        assert_eq!(info.servers[1].public_key, b"key of 2");
        assert_eq!(info.servers[1].address.to_string(), "192.0.2.7");
        assert_eq!(info.servers[1].interfaces[1].port, 2700);
        assert!(info.attributes.contains(&("primary".into(), "2".into())));
        assert!(info.flags.contains(SiteFlags::PRIMARY));
        assert_eq!(SiteInfo::decode(&info.encode()).unwrap(), info);
    }

    /// Two sets of three (nodes 1-3 and 4-6), eight slots, four each.
    fn ring() -> ClusterMap {
        let mut map = ClusterMap::default();
        for (set, ids) in [(1, [1, 2, 3]), (2, [4, 5, 6])] {
            let members = ids
                .iter()
                .map(|&id| member(id, &format!("192.0.2.{id}:2641")))
                .collect();
            let command = crate::placement::MapCommand::RecordSet {
                set: crate::replication::SetId(set),
                members,
            };
            map.apply(command).unwrap();
        }
        let sets = vec![crate::replication::SetId(1), crate::replication::SetId(2)];
        let command = crate::placement::MapCommand::MakeRing {
            slot_count: 8,
            sets,
        };
        map.apply(command).unwrap();
        map
    }

    #[test]
    fn a_ring_site_has_one_entry_per_slot_at_the_owner_member_of_its_rank() {
        let map = ring();
        let keys: BTreeMap<NodeId, Vec<u8>> = (1..=6)
            .map(|id| (id, vec![u8::try_from(id).unwrap()]))
            .collect();
        for rank in 0..4 {
            let info = describe_ring(&SiteConfig::default(), &map, rank, &keys);
            assert_eq!(info.servers.len(), 8);
            assert_eq!(info.serial_number, u16::try_from(map.epoch).unwrap());
            assert_eq!(info.hash_option, HashOption::ByHandle);
            for (slot, server) in info.servers.iter().enumerate() {
                assert_eq!(server.server_id, u32::try_from(slot).unwrap() + 1);
                let first = if slot < 4 { 1 } else { 4 };
                let id = first + rank % 3;
                assert_eq!(
                    server.address.to_string(),
                    format!("192.0.2.{id}"),
                    "{slot}"
                );
                assert_eq!(server.public_key, [u8::try_from(id).unwrap()], "{slot}");
            }
            assert_eq!(SiteInfo::decode(&info.encode()).unwrap(), info);
        }
    }
}
