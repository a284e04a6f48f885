//! A running replica: this node's member of its replica set.
//!
//! [`Replica`] is the application API over openraft: it opens the log and the state
//! machine, starts Raft and the peer server, and offers what the service needs —
//! [`Replica::client_write`] (proposed on the leader, forwarded from any other member),
//! [`Replica::ensure_fresh_read`] (linearizable reads), and the membership and status
//! used for HS_SITE. [`AdminClient`] is the `hdl cluster` side of the admin calls.
//!
//! Invariants: a write is acknowledged only once the leader has committed and applied
//! it; a fresh read returns only after the local store applied the leader's read index;
//! every wait is bounded.

mod admin_client;
mod error;
mod leader;

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use openraft::{Raft, SnapshotPolicy};
use tokio::net::TcpListener;
use tokio::sync::Notify;

pub use admin_client::AdminClient;
pub use error::ReplicaError;

use super::admin::{self, Member, MemberStatus};
use super::network::{ClusterSecret, Network, PeerServer};
use super::{LogStore, Node, NodeId, Request, Response, StateMachine, TypeConfig};
use crate::storage::{Command, CommandResult, Store};
use leader::{ReadIndex, Write};

/// How long a write or a fresh read waits for a reachable leader, retries included.
pub const LEADER_PATIENCE: Duration = Duration::from_secs(5);

/// Whether a node with an empty log forms a replica set of its own at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bootstrap {
    /// Form a one-member set of itself, so a lone node accepts writes at once.
    Alone,
    /// Wait to be made a member by `hdl cluster init` or `add-secondary`.
    Wait,
}

/// How a replica runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaSettings {
    /// This node's id in its set.
    pub id: NodeId,
    /// What to do with an empty log.
    pub bootstrap: Bootstrap,
    /// Milliseconds between the leader's heartbeats.
    pub heartbeat_ms: u64,
    /// Least milliseconds without a leader before a follower stands for election.
    pub election_min_ms: u64,
    /// Most milliseconds without a leader before a follower stands for election.
    pub election_max_ms: u64,
    /// Build a snapshot after this many entries applied since the last one.
    pub snapshot_every: u64,
    /// Entries kept in the log after a snapshot covers them, for slow members.
    pub keep_after_snapshot: u64,
}

/// This node's member of its replica set; clones share it.
#[derive(Clone)]
pub struct Replica {
    inner: Arc<Inner>,
}

impl fmt::Debug for Replica {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Replica")
            .field("id", &self.inner.id)
            .field("node", &self.inner.me)
            .finish_non_exhaustive()
    }
}

struct Inner {
    id: NodeId,
    me: Node,
    raft: Raft<TypeConfig>,
    network: Network,
    next_request: AtomicU64,
    stop_peers: Arc<Notify>,
}

/// The addresses clients reach a node on, as the set's membership records them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PublicAddresses {
    /// The Handle protocol address (TCP and UDP).
    pub handle: SocketAddr,
    /// The HTTP address, when the node serves HTTP.
    pub http: Option<SocketAddr>,
}

impl Replica {
    /// Opens the log and state machine in `data_dir` over `store`, starts Raft and
    /// serves peers on `peers`. `public` are the client-facing addresses recorded for
    /// this node in the set's membership.
    pub async fn start(
        settings: &ReplicaSettings,
        store: Arc<Store>,
        data_dir: &Path,
        peers: TcpListener,
        public: PublicAddresses,
        secret: ClusterSecret,
    ) -> Result<Replica, ReplicaError> {
        let me = Node {
            handle: public.handle,
            peer: peers.local_addr().map_err(super::network::PeerError::Io)?,
            http: public.http,
        };
        let dir = data_dir.to_owned();
        let (log, state_machine) = tokio::task::spawn_blocking(move || {
            Ok::<_, super::Error>((LogStore::open(&dir)?, StateMachine::open(store, &dir)?))
        })
        .await??;
        let network = Network::new(settings.id, secret.clone());
        let config = Arc::new(raft_config(settings).validate()?);
        let raft = Raft::new(settings.id, config, network.clone(), log, state_machine)
            .await
            .map_err(ReplicaError::Stopped)?;
        let stop_peers = Arc::new(Notify::new());
        let stopped = Arc::clone(&stop_peers);
        let shutdown = async move { stopped.notified().await };
        let server = PeerServer::serve(peers, raft.clone(), me.clone(), secret, shutdown);
        tokio::spawn(server);
        if settings.bootstrap == Bootstrap::Alone {
            bootstrap(&raft, settings.id, &me).await?;
        }
        let next_request = AtomicU64::new(getrandom::u64().unwrap_or_default());
        let inner = Inner {
            id: settings.id,
            me,
            raft,
            network,
            next_request,
            stop_peers,
        };
        Ok(Replica {
            inner: Arc::new(inner),
        })
    }

    /// This node's addresses.
    pub fn node(&self) -> &Node {
        &self.inner.me
    }

    /// Proposes `command` at the leader and returns its result once committed and
    /// applied there. From a follower or learner the command is forwarded.
    pub async fn client_write(&self, command: Command) -> Result<CommandResult, ReplicaError> {
        let id = super::RequestId(self.inner.next_request.fetch_add(1, Ordering::Relaxed));
        match self.at_leader(&Write(Request { id, command })).await? {
            Response::Command(result) => Ok(result),
            Response::NoCommand => Err(ReplicaError::NoCommandResult),
        }
    }

    /// Returns once the local store reflects every write acknowledged before the
    /// call: asks the leader for its read index (confirming its leadership with a
    /// quorum) and waits until this node has applied it.
    pub async fn ensure_fresh_read(&self) -> Result<(), ReplicaError> {
        let Some(index) = self.at_leader(&ReadIndex).await? else {
            return Ok(());
        };
        let waited = LEADER_PATIENCE;
        self.inner
            .raft
            .wait(Some(waited))
            .applied_index_at_least(Some(index), "the read index is applied")
            .await
            .map(|_| ())
            .map_err(|_| ReplicaError::Behind { index, waited })
    }

    /// This node's view of itself and its set.
    pub fn status(&self) -> MemberStatus {
        admin::status(&self.inner.raft, &self.inner.me)
    }

    /// Every member of the set, by id, and the leader this node knows of.
    pub fn members(&self) -> (Vec<Member>, Option<NodeId>) {
        let leader = self.inner.raft.metrics().borrow().current_leader;
        (admin::members(&self.inner.raft), leader)
    }

    /// Stops serving peers and stops Raft.
    pub async fn shutdown(&self) -> Result<(), ReplicaError> {
        self.inner.stop_peers.notify_one();
        self.inner.raft.shutdown().await?;
        Ok(())
    }
}

/// Forms a set of this node alone if its log is empty, and waits (bounded) until it
/// is its primary, so a lone node takes writes and describes its set once started.
async fn bootstrap(raft: &Raft<TypeConfig>, id: NodeId, me: &Node) -> Result<(), ReplicaError> {
    if raft.is_initialized().await.map_err(ReplicaError::Stopped)? {
        return Ok(());
    }
    let alone = BTreeMap::from([(id, me.clone())]);
    raft.initialize(alone)
        .await
        .map_err(|error| ReplicaError::Refused(error.into()))?;
    // A timeout is no failure: writes wait for a leader themselves.
    let _elected = raft
        .wait(Some(LEADER_PATIENCE))
        .current_leader(id, "the lone node is elected")
        .await;
    Ok(())
}

fn raft_config(settings: &ReplicaSettings) -> openraft::Config {
    openraft::Config {
        cluster_name: "hdl".into(),
        heartbeat_interval: settings.heartbeat_ms,
        election_timeout_min: settings.election_min_ms,
        election_timeout_max: settings.election_max_ms,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(settings.snapshot_every),
        max_in_snapshot_log_to_keep: settings.keep_after_snapshot,
        ..openraft::Config::default()
    }
}

/// A one-member replica set over `store` in `data_dir`, for the tests of the layers
/// above: quick timing, a fixed secret, peers on a free loopback port.
#[cfg(test)]
pub(crate) async fn start_alone(store: Arc<Store>, data_dir: &Path, handle: SocketAddr) -> Replica {
    let settings = ReplicaSettings {
        id: 1,
        bootstrap: Bootstrap::Alone,
        heartbeat_ms: 50,
        election_min_ms: 150,
        election_max_ms: 300,
        snapshot_every: 5000,
        keep_after_snapshot: 1000,
    };
    let peers = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let secret = ClusterSecret::new(b"a shared cluster secret, 32 byte").unwrap();
    let public = PublicAddresses { handle, http: None };
    Replica::start(&settings, store, data_dir, peers, public, secret)
        .await
        .unwrap()
}
