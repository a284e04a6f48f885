//! Cluster files: the TOML description of a local replica set that `hdl cluster up`
//! launches (`cluster/local.toml` is the example).
//!
//! Owns the file's shape, its defaults and its checks; unknown fields are an error so
//! a typo never passes silently. Pure data: reading the file and starting processes
//! are the caller's business. Every node's ports are offsets from one base port, so a
//! whole set moves to other ports with a single `--base-port`.
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
//!
//! # One [[node]] table per member; node 1 forms the set and the others join it as
//! # secondaries (voters). At least one node; ids and ports must be distinct.
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

/// A local replica set: where its nodes keep their data and listen.
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
    /// The members, the first of which forms the set.
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

/// Why a cluster file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ClusterFileError {
    /// The text is not valid TOML for this shape (names the line and field).
    #[error("invalid cluster file: {0}")]
    Invalid(#[from] toml::de::Error),
    /// The file lists no node.
    #[error("the cluster file lists no node")]
    NoNodes,
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
        if self.nodes.is_empty() {
            return Err(ClusterFileError::NoNodes);
        }
        let mut ids = BTreeSet::new();
        let mut ports = BTreeSet::new();
        for node in &self.nodes {
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
        Ok(())
    }

    /// The shared secret file.
    pub fn secret_path(&self) -> PathBuf {
        self.secret_file
            .clone()
            .unwrap_or_else(|| self.data_dir.join("cluster.secret"))
    }

    /// Every node's directory and addresses, in the file's order.
    pub fn plan(&self) -> Result<Vec<NodePlan>, ClusterFileError> {
        self.nodes
            .iter()
            .map(|node| {
                let dir = node
                    .dir
                    .clone()
                    .unwrap_or_else(|| PathBuf::from(format!("node-{}", node.id)));
                Ok(NodePlan {
                    id: node.id,
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
        ];
        for (text, expected) in cases {
            let error = ClusterFile::from_toml(text).unwrap_err().to_string();
            assert!(error.contains(expected), "{text:?}: {error}");
        }
    }
}
