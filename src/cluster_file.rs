//! Cluster files: the TOML description of a local cluster that `hdl cluster up`
//! launches — one replica set (`cluster/local.toml`) or several sharing a ring of hash
//! slots (`cluster/sharded.toml`).
//!
//! Owns the file's shape, its defaults and its checks; unknown fields are an error so
//! a typo never passes silently. Pure data: reading the file and starting processes
//! are the caller's business. Every node's ports are offsets from one base port, so a
//! whole cluster moves to other ports with a single `--base-port`.
//!
//! One replica set is a list of `[[node]]` tables (below). Several are `[[set]]`
//! tables instead, each with an `id` and its own `[[set.node]]` tables of the same
//! fields; set 1 must be one of them (its members are the voters of the metadata
//! group, the other sets' members its learners), and a file has either `[[node]]` or
//! `[[set]]` tables, not both:
//!
//! ```text
//! [[set]]
//! id = 1
//! [[set.node]]
//! id = 1
//! handle_offset = 0
//! peer_offset = 10
//! http_offset = 20
//! # ...
//! [[set]]
//! id = 2
//! [[set.node]]
//! id = 4
//! handle_offset = 3
//! peer_offset = 13
//! http_offset = 23
//! ```
//!
//! ```toml
//! # Directory of the set: each node keeps its store in <data_dir>/<node dir>, and the
//! # shared secret is <data_dir>/cluster.secret unless secret_file says otherwise.
//! # Relative paths are taken from the current directory. Default: "hdl-cluster".
//! data_dir = "hdl-cluster"
//! # Address every node listens on (Handle protocol and peers). Default: "127.0.0.1".
//! host = "127.0.0.1"
//! # The port every node's ports are offsets from. Default: 2641.
//! base_port = 2641
//! # The cluster secret file shared by the nodes; created with 32 random bytes and
//! # mode 0600 when absent. Default: "<data_dir>/cluster.secret".
//! # secret_file = "/etc/hdl/cluster.secret"
//! # A node configuration file (`hdl serve --config`) given to every node, e.g. for
//! # Raft timing or snapshot settings; relative to the current directory.
//! # Default: none, every node default applies.
//! # node_config = "node.toml"
//! # Hash slots of the cluster's ring, shared evenly by the sets when it is made: a
//! # power of two from 1 to 16384, fixed for the cluster's life (DESIGN.md §3: 64 for
//! # a handful of sets, 256 for dozens). Default: 256.
//! slot_count = 256
//!
//! # One [[node]] table per member; the first node forms the set and the others join
//! # it as secondaries (voters). At least one node; ids and ports must be distinct
//! # across the whole file.
//! [[node]]
//! # The node id, 1 to 4294967295. Required.
//! id = 1
//! # Its Handle protocol port (TCP and UDP) is base_port + handle_offset. Required.
//! handle_offset = 0
//! # Its peer port (Raft, forwarded writes, `hdl cluster`) is base_port + peer_offset.
//! # Required.
//! peer_offset = 10
//! # Its HTTP port (JSON API, proxy, status, metrics) is base_port + http_offset.
//! # Required.
//! http_offset = 20
//! # Its store directory, under data_dir. Default: "node-<id>".
//! # dir = "node-1"
//! ```

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use serde::Deserialize;

use crate::config::{ConfigError, DEFAULT_SLOT_COUNT, check_slot_count};

/// The replica set a file of `[[node]]` tables describes.
pub const FIRST_SET: u32 = 1;

/// A local cluster: where its nodes keep their data and listen.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterFile {
    /// Directory of the set's node stores and, by default, of its secret.
    #[serde(default = "default_data_dir")]
    pub data_dir: PathBuf,
    /// Address every node listens on.
    #[serde(default = "default_host")]
    pub host: IpAddr,
    /// The port every node's ports are offsets from.
    #[serde(default = "default_base_port")]
    pub base_port: u16,
    /// The shared secret file; `None` means `<data_dir>/cluster.secret`.
    #[serde(default)]
    pub secret_file: Option<PathBuf>,
    /// A node configuration file given to every node.
    #[serde(default)]
    pub node_config: Option<PathBuf>,
    /// Slots of the ring.
    #[serde(default = "default_slot_count")]
    pub slot_count: u32,
    /// The members of the one set of a file without `[[set]]` tables, the first of
    /// which forms it.
    #[serde(default, rename = "node")]
    pub nodes: Vec<NodeEntry>,
    /// The replica sets of a file of several.
    #[serde(default, rename = "set")]
    pub sets: Vec<SetEntry>,
}

/// One replica set of a [`ClusterFile`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetEntry {
    /// Its set id, 1 or more.
    pub id: u32,
    /// Its members, the first of which forms it.
    #[serde(rename = "node")]
    pub nodes: Vec<NodeEntry>,
}

/// One member of a [`ClusterFile`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeEntry {
    /// Its node id.
    pub id: u64,
    /// Its Handle protocol port, as an offset from the base port.
    pub handle_offset: u16,
    /// Its peer port, as an offset from the base port.
    pub peer_offset: u16,
    /// Its HTTP port, as an offset from the base port.
    pub http_offset: u16,
    /// Its store directory under the set's data directory; `None` means `node-<id>`.
    #[serde(default)]
    pub dir: Option<PathBuf>,
}

fn default_data_dir() -> PathBuf {
    PathBuf::from("hdl-cluster")
}

fn default_host() -> IpAddr {
    IpAddr::V4(Ipv4Addr::LOCALHOST)
}

fn default_base_port() -> u16 {
    2641
}

fn default_slot_count() -> u32 {
    DEFAULT_SLOT_COUNT
}

/// Why a cluster file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ClusterFileError {
    /// The text is not valid TOML for this shape (names the line and field).
    #[error("invalid cluster file: {0}")]
    Invalid(#[from] toml::de::Error),
    /// The file (or one of its sets) lists no node.
    #[error("the cluster file lists no node")]
    NoNodes,
    /// The file has both `[[node]]` and `[[set]]` tables.
    #[error("the cluster file has both [[node]] and [[set]] tables: put every node in a [[set]]")]
    BothForms,
    /// A set id is 0 or listed twice.
    #[error("set id {0} is 0 or listed twice")]
    SetId(u32),
    /// The `[[set]]` tables do not include set 1.
    #[error("the cluster file has no [[set]] with id = 1")]
    NoFirstSet,
    /// The slot count is not a power of two in range.
    #[error(transparent)]
    SlotCount(#[from] ConfigError),
    /// A node id is 0 or does not fit an HS_SITE server id.
    #[error("node id {0} is out of range: it must be 1 to 4294967295")]
    NodeId(u64),
    /// Two nodes have the same id.
    #[error("node id {0} is listed twice")]
    DuplicateId(u64),
    /// Two listeners would share a port.
    #[error("port {0} is used twice")]
    DuplicatePort(u16),
    /// The base port plus an offset is past 65535.
    #[error("base port {base} + offset {offset} is past 65535")]
    PortRange {
        /// The base port.
        base: u16,
        /// The offset.
        offset: u16,
    },
}

/// Where one node of a set keeps its data and listens, with the base port applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePlan {
    /// Its node id.
    pub id: u64,
    /// The replica set it belongs to.
    pub set: u32,
    /// Its store directory.
    pub data_dir: PathBuf,
    /// Its Handle protocol address.
    pub handle: SocketAddr,
    /// Its peer address.
    pub peer: SocketAddr,
    /// Its HTTP address.
    pub http: SocketAddr,
}

impl ClusterFile {
    /// Parses and checks a cluster file; missing optional fields take their defaults.
    pub fn from_toml(text: &str) -> Result<ClusterFile, ClusterFileError> {
        let file: ClusterFile = toml::from_str(text)?;
        file.validate()?;
        Ok(file)
    }

    /// Checks what the shape alone cannot (call it again after overriding fields).
    pub fn validate(&self) -> Result<(), ClusterFileError> {
        if !self.nodes.is_empty() && !self.sets.is_empty() {
            return Err(ClusterFileError::BothForms);
        }
        check_slot_count(self.slot_count)?;
        let mut set_ids = BTreeSet::new();
        for set in &self.sets {
            if set.id == 0 || !set_ids.insert(set.id) {
                return Err(ClusterFileError::SetId(set.id));
            }
            if set.nodes.is_empty() {
                return Err(ClusterFileError::NoNodes);
            }
        }
        if !self.sets.is_empty() && !set_ids.contains(&FIRST_SET) {
            return Err(ClusterFileError::NoFirstSet);
        }
        let nodes = self.node_entries().map(|(_, node)| node);
        let mut ids = BTreeSet::new();
        let mut ports = BTreeSet::new();
        let mut any = false;
        for node in nodes {
            any = true;
            if !u32::try_from(node.id).is_ok_and(|id| id > 0) {
                return Err(ClusterFileError::NodeId(node.id));
            }
            if !ids.insert(node.id) {
                return Err(ClusterFileError::DuplicateId(node.id));
            }
            for offset in [node.handle_offset, node.peer_offset, node.http_offset] {
                let port = self.port(offset)?;
                if !ports.insert(port) {
                    return Err(ClusterFileError::DuplicatePort(port));
                }
            }
        }
        if !any {
            return Err(ClusterFileError::NoNodes);
        }
        Ok(())
    }

    /// Every node with its set id: set 1 first, then the other sets in the file's
    /// order, each set's nodes in the file's order.
    fn node_entries(&self) -> impl Iterator<Item = (u32, &NodeEntry)> {
        let one = self.nodes.iter().map(|node| (FIRST_SET, node));
        let first = self.sets.iter().filter(|set| set.id == FIRST_SET);
        let others = self.sets.iter().filter(|set| set.id != FIRST_SET);
        let sets = first.chain(others);
        one.chain(sets.flat_map(|set| set.nodes.iter().map(|node| (set.id, node))))
    }

    /// The shared secret file.
    pub fn secret_path(&self) -> PathBuf {
        self.secret_file
            .clone()
            .unwrap_or_else(|| self.data_dir.join("cluster.secret"))
    }

    /// Every node's set, directory and addresses: set 1's nodes first, then the other
    /// sets' in the file's order; within a set, the file's order (its first node forms
    /// it).
    pub fn plan(&self) -> Result<Vec<NodePlan>, ClusterFileError> {
        self.node_entries()
            .map(|(set, node)| {
                let dir = node
                    .dir
                    .clone()
                    .unwrap_or_else(|| PathBuf::from(format!("node-{}", node.id)));
                Ok(NodePlan {
                    id: node.id,
                    set,
                    data_dir: self.data_dir.join(dir),
                    handle: SocketAddr::new(self.host, self.port(node.handle_offset)?),
                    peer: SocketAddr::new(self.host, self.port(node.peer_offset)?),
                    http: SocketAddr::new(self.host, self.port(node.http_offset)?),
                })
            })
            .collect()
    }

    fn port(&self, offset: u16) -> Result<u16, ClusterFileError> {
        self.base_port
            .checked_add(offset)
            .ok_or(ClusterFileError::PortRange {
                base: self.base_port,
                offset,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: &str = "[[node]]\nid = 1\nhandle_offset = 0\npeer_offset = 10\nhttp_offset = 20\n";
    const SET_NODE: &str =
        "[[set.node]]\nid = 9\nhandle_offset = 5\npeer_offset = 15\nhttp_offset = 25\n";

    #[test]
    fn documented_example_parses_with_every_default() {
        let example = crate::config::toml_example(include_str!("cluster_file.rs"));
        let file = ClusterFile::from_toml(&example).unwrap();
        assert_eq!(file, ClusterFile::from_toml(ONE).unwrap());
        assert_eq!(
            file.secret_path(),
            PathBuf::from("hdl-cluster/cluster.secret")
        );
        assert_eq!(file.node_config, None);
    }

    #[test]
    fn the_shipped_local_set_has_three_nodes_on_the_readme_ports() {
        let file = ClusterFile::from_toml(include_str!("../cluster/local.toml")).unwrap();
        let plan = file.plan().unwrap();
        let ports: Vec<(u64, u16, u16, u16)> = plan
            .iter()
            .map(|n| (n.id, n.handle.port(), n.peer.port(), n.http.port()))
            .collect();
        let expected = [
            (1, 2641, 2651, 2661),
            (2, 2642, 2652, 2662),
            (3, 2643, 2653, 2663),
        ];
        assert_eq!(ports, expected);
        assert_eq!(plan[2].data_dir, PathBuf::from("hdl-cluster/node-3"));
    }

    #[test]
    fn the_shipped_sharded_cluster_has_two_sets_of_three() {
        let file = ClusterFile::from_toml(include_str!("../cluster/sharded.toml")).unwrap();
        assert_eq!(file.slot_count, 256);
        let plan = file.plan().unwrap();
        let nodes: Vec<(u32, u64, u16, u16, u16)> = plan
            .iter()
            .map(|n| (n.set, n.id, n.handle.port(), n.peer.port(), n.http.port()))
            .collect();
        let expected = [
            (1, 1, 2641, 2651, 2661),
            (1, 2, 2642, 2652, 2662),
            (1, 3, 2643, 2653, 2663),
            (2, 4, 2644, 2654, 2664),
            (2, 5, 2645, 2655, 2665),
            (2, 6, 2646, 2656, 2666),
        ];
        assert_eq!(nodes, expected);
        assert_eq!(plan[5].data_dir, PathBuf::from("hdl-sharded/node-6"));
        let local = ClusterFile::from_toml(include_str!("../cluster/local.toml")).unwrap();
        assert!(local.plan().unwrap().iter().all(|n| n.set == FIRST_SET));
        assert_eq!(local.slot_count, DEFAULT_SLOT_COUNT);
    }

    #[test]
    fn set_1_comes_first_whatever_the_file_order() {
        let node = |id: u64, offset: u16| {
            format!(
                "[[set.node]]\nid = {id}\nhandle_offset = {offset}\npeer_offset = {}\nhttp_offset = {}\n",
                offset + 10,
                offset + 20
            )
        };
        let text = format!(
            "slot_count = 64\n[[set]]\nid = 3\n{}[[set]]\nid = 1\n{}{}",
            node(7, 0),
            node(1, 1),
            node(2, 2)
        );
        let file = ClusterFile::from_toml(&text).unwrap();
        let order: Vec<(u32, u64)> = file.plan().unwrap().iter().map(|n| (n.set, n.id)).collect();
        assert_eq!(order, [(1, 1), (1, 2), (3, 7)]);
        assert_eq!(file.slot_count, 64);
    }

    #[test]
    fn the_base_port_moves_every_node() {
        let mut file = ClusterFile::from_toml(ONE).unwrap();
        file.base_port = 40000;
        let plan = file.plan().unwrap();
        assert_eq!(plan[0].handle, "127.0.0.1:40000".parse().unwrap());
        assert_eq!(plan[0].peer, "127.0.0.1:40010".parse().unwrap());
        file.base_port = 65530;
        assert!(matches!(
            file.validate(),
            Err(ClusterFileError::PortRange { offset: 10, .. })
        ));
    }

    #[test]
    fn bad_files_are_refused_naming_the_problem() {
        let twice = format!("{ONE}{ONE}");
        let same_port = format!(
            "{ONE}[[node]]\nid = 2\nhandle_offset = 10\npeer_offset = 11\nhttp_offset = 21\n"
        );
        let cases = [
            ("", "node"),
            ("node = []\n", "no node"),
            (&twice, "listed twice"),
            (&same_port, "port 2651"),
            (
                "[[node]]\nid = 0\nhandle_offset = 0\npeer_offset = 1\nhttp_offset = 2\n",
                "out of range",
            ),
            ("[[node]]\nid = 1\nhandle_offset = 0\n", "peer_offset"),
            (
                "[[node]]\nid = 1\nhandle_offset = 0\npeer_offset = 1\n",
                "http_offset",
            ),
            (
                "base_prot = 1\n[[node]]\nid = 1\nhandle_offset = 0\npeer_offset = 1\n",
                "base_prot",
            ),
            (&format!("slot_count = 100\n{ONE}"), "power of two"),
            (&format!("slot_count = 32768\n{ONE}"), "power of two"),
            (&format!("{ONE}[[set]]\nid = 2\n{SET_NODE}"), "both"),
            (&format!("[[set]]\nid = 2\n{SET_NODE}"), "id = 1"),
            (&format!("[[set]]\nid = 0\n{SET_NODE}"), "set id 0"),
            (
                &format!("[[set]]\nid = 1\n{SET_NODE}[[set]]\nid = 1\nnode = []\n"),
                "set id 1",
            ),
            ("[[set]]\nid = 1\nnode = []\n", "no node"),
            (&format!("[[set]]\nid = 1\nsize = 3\n{SET_NODE}"), "size"),
        ];
        for (text, expected) in cases {
            let error = ClusterFile::from_toml(text).unwrap_err().to_string();
            assert!(error.contains(expected), "{text:?}: {error}");
        }
    }
}
