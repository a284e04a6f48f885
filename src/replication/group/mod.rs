//! A running group: this node's member of one Raft group (a replica set, or the
//! metadata group), whatever its [`Machine`].
//!
//! [`Group`] is the application API over openraft: it opens the group's log and state
//! machine in the group's own directory, starts Raft, registers the group with the
//! node's peer [`Registry`] (one peer port serves every group), and offers what the
//! layers above need — [`Group::client_write`] (proposed on the leader, forwarded from
//! any other member over the node's shared [`Links`]), [`Group::ensure_fresh_read`]
//! (linearizable reads), and the membership and status. [`AdminClient`] is the
//! `hdl cluster` side of the admin calls.
//!
//! Invariants: a write is acknowledged only once the leader has committed and applied
//! it; a fresh read returns only after the local store applied the leader's read index;
//! every wait is bounded. A leader that is stopping hands its leadership to an
//! up-to-date voter first ([`Group::hand_off`], in [`hand_off`]). A Raft that stops
//! on a storage failure says so ([`Group::failed`]), so the node can stop rather than
//! serve a store that no longer changes.

mod admin_client;
mod election;
mod error;
mod hand_off;
mod leader;
mod purge;

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use openraft::error::Fatal;
use openraft::{Raft, SnapshotPolicy};
use tokio::sync::oneshot;

pub use admin_client::AdminClient;
pub use error::{GroupError, HandOffError};
pub use hand_off::HandOff;
pub use purge::Keep;

use super::admin::{self, Member, MemberStatus};
use super::contact::LeaderContact;
use super::held::HeldCommits;
use super::machine::Machine;
use super::network::{GroupEndpoint, GroupNetwork, Links, Registry};
use super::proposer::Proposer;
use super::state_machine::{Installed, Installs, Stopping};
use super::{GroupConfig, GroupId, LogStore, Node, NodeId, Request, RequestId, StateMachine};
use crate::storage::{CacheSizes, CommitWatch, Store};
use leader::{ReadIndex, Write};

/// How long a write or a fresh read waits for a reachable leader, retries included.
pub const LEADER_PATIENCE: Duration = Duration::from_secs(5);

/// Whether a node with an empty log forms a group of its own at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bootstrap {
    /// Form a one-member group of itself, so a lone node accepts writes at once.
    Alone,
    /// Wait to be made a member by `hdl cluster init` or `add-secondary`.
    Wait,
}

/// How a node runs its groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSettings {
    /// This node's id, the same in every group.
    pub id: NodeId,
    /// What to do with an empty log.
    pub bootstrap: Bootstrap,
    /// Milliseconds between the leader's heartbeats.
    pub heartbeat_ms: u64,
    /// Least back-off, in milliseconds, after this node stood for election.
    pub election_min_ms: u64,
    /// The leader's lease in milliseconds: after that long without a leader, a
    /// follower canvasses for an election ([`election`]); also the greatest back-off.
    pub election_max_ms: u64,
    /// Build a snapshot after this many entries applied since the last one.
    pub snapshot_every: u64,
    /// Entries kept in the log after a snapshot covers them, for members behind
    /// ([`purge`]).
    pub keep: Keep,
    /// The page caches of the group's files.
    pub caches: CacheSizes,
}

/// What a group runs on: the node's addresses, its peer links, its peer registry and
/// what is told of its store's commits.
#[derive(Debug, Clone)]
pub struct GroupHost {
    /// This node's addresses, as the group's membership records them.
    pub me: Node,
    /// The node's connections to its peers, shared by all its groups.
    pub links: Links,
    /// What the node's peer port answers; the group adds itself.
    pub registry: Arc<Registry>,
    /// Told of every commit of the group's store (applies, snapshot installs, slot
    /// changes), installed before the group's state machine opens it; `None`: nothing.
    pub commits: Option<Arc<dyn CommitWatch>>,
}

/// This node's member of one group; clones share it.
pub struct Group<M: Machine> {
    inner: Arc<Inner<M>>,
}

impl<M: Machine> Clone for Group<M> {
    fn clone(&self) -> Self {
        Group {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<M: Machine> fmt::Debug for Group<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Group")
            .field("group", &self.inner.group)
            .field("id", &self.inner.id)
            .field("node", &self.inner.me)
            .finish_non_exhaustive()
    }
}

struct Inner<M: Machine> {
    group: GroupId,
    id: NodeId,
    me: Node,
    raft: Raft<GroupConfig<M>>,
    proposer: Proposer<M>,
    network: GroupNetwork<M>,
    registry: Arc<Registry>,
    next_request: AtomicU64,
    /// Set once its Raft stopped: snapshot work in progress gives up.
    stopping: Stopping,
    /// Snapshots its state machine installed since the start.
    installs: Installs,
    /// Commits what its state machine holds, for fresh reads.
    held: HeldCommits,
    /// Dropped with the group, which ends its election driver.
    _elections: oneshot::Sender<()>,
    /// Dropped with the group, which ends its purge driver.
    _purges: oneshot::Sender<()>,
}

impl<M: Machine> Group<M> {
    /// Opens the log and state machine of `group` in `dir` over `store`, starts Raft
    /// and answers the group's peer calls through `host`'s registry.
    pub async fn start(
        settings: &GroupSettings,
        group: GroupId,
        store: Arc<Store>,
        dir: &Path,
        host: GroupHost,
    ) -> Result<Group<M>, GroupError> {
        if let Some(watch) = &host.commits {
            store.watch(Arc::clone(watch));
        }
        let (owned, id) = (dir.to_owned(), settings.id);
        let (log, state_machine) = tokio::task::spawn_blocking(move || {
            let state_machine = StateMachine::<M>::open(store, &owned)?.applying_for(id);
            let log = LogStore::<M>::open_beside(&owned, &state_machine, id)?;
            Ok::<_, super::Error>((log, state_machine))
        })
        .await??;
        let (stopping, installs) = (state_machine.stopping(), state_machine.installs());
        let held = state_machine.held_commits();
        let network = GroupNetwork::new(host.links, group, log.sync());
        let config = Arc::new(raft_config(settings).validate()?);
        let log_reader = log.clone();
        let raft = Raft::new(settings.id, config, network.clone(), log, state_machine)
            .await
            .map_err(GroupError::Stopped)?;
        let proposer = Proposer::start(raft.clone());
        let contact = Arc::new(LeaderContact::new(Duration::from_millis(
            settings.election_max_ms,
        )));
        let endpoint = GroupEndpoint::new(
            raft.clone(),
            proposer.clone(),
            Arc::clone(&contact),
            log_reader.clone(),
            held.clone(),
            host.me.clone(),
        );
        host.registry.add_group(group, Arc::new(endpoint));
        if settings.bootstrap == Bootstrap::Alone {
            bootstrap(&raft, settings.id, &host.me).await?;
        }
        let elections = election::Driver {
            raft: raft.clone(),
            log: log_reader,
            network: network.clone(),
            contact,
            pace: election::Pace::of(settings),
            id: settings.id,
        }
        .start();
        let purges = purge::Driver {
            raft: raft.clone(),
            keep: settings.keep,
            tick: Duration::from_millis(settings.heartbeat_ms),
        }
        .start();
        let next_request = AtomicU64::new(getrandom::u64().unwrap_or_default());
        let inner = Inner {
            group,
            id: settings.id,
            me: host.me,
            raft,
            proposer,
            network,
            registry: host.registry,
            next_request,
            stopping,
            installs,
            held,
            _elections: elections,
            _purges: purges,
        };
        Ok(Group {
            inner: Arc::new(inner),
        })
    }

    /// Which group this is.
    pub fn id(&self) -> GroupId {
        self.inner.group
    }

    /// This node's addresses.
    pub fn node(&self) -> &Node {
        &self.inner.me
    }

    /// Proposes `command` at the leader and returns its output once committed and
    /// applied there. From a follower or learner the command is forwarded. The leader
    /// proposes writes made at once together, in one log entry ([`Proposer`]).
    pub async fn client_write(&self, command: M::Command) -> Result<M::Output, GroupError> {
        let id = RequestId(self.inner.next_request.fetch_add(1, Ordering::Relaxed));
        self.client_write_as(id, command).await
    }

    /// [`Group::client_write`] under request `id`, which the caller chose: proposed
    /// again under the same id within the window, the command changes nothing more and
    /// is answered with its first settled output ([`Machine::settles`]).
    pub async fn client_write_as(
        &self,
        id: RequestId,
        command: M::Command,
    ) -> Result<M::Output, GroupError> {
        self.at_leader(&Write::<M>(Request { id, command })).await
    }

    /// Returns once the local store reflects every write acknowledged before the
    /// call: asks the leader for its read index (confirming its leadership with a
    /// quorum) and waits until this node has applied it.
    pub async fn ensure_fresh_read(&self) -> Result<(), GroupError> {
        let Some(index) = self.at_leader(&ReadIndex).await? else {
            return Ok(());
        };
        let waited = LEADER_PATIENCE;
        self.inner
            .raft
            .wait(Some(waited))
            .applied_index_at_least(Some(index), "the read index is applied")
            .await
            .map_err(|_| GroupError::Behind { index, waited })?;
        // openraft counts an apply held uncommitted (module `held`): commit it.
        Ok(self.inner.held.commit_now().await?)
    }

    /// This node's view of itself and its group.
    pub fn status(&self) -> MemberStatus {
        admin::status(&self.inner.raft, &self.inner.me)
    }

    /// How many snapshots this member installed (sent by a leader) since it started,
    /// and their octets.
    pub fn snapshots_installed(&self) -> Installed {
        self.inner.installs.installed()
    }

    /// Every member of the group, by id, and the leader this node knows of.
    pub fn members(&self) -> (Vec<Member>, Option<NodeId>) {
        let leader = self.inner.raft.metrics().borrow().current_leader;
        (admin::members(&self.inner.raft), leader)
    }

    /// Watches this node's view of the group (its membership, its leader, its log).
    pub fn watch(&self) -> GroupWatch {
        GroupWatch::Everything(self.inner.raft.metrics())
    }

    /// Watches this node's view of the group's membership and leader only: unlike
    /// [`Group::watch`], not woken by every append and apply.
    pub fn watch_members(&self) -> GroupWatch {
        GroupWatch::Members(self.inner.raft.server_metrics())
    }

    /// Resolves, with the reason, once this node's Raft of the group has stopped on a
    /// failure (a storage error, or a panic): it then neither writes nor applies, and
    /// its store is frozen. Never resolves while the group runs, nor after a shutdown.
    ///
    /// It waits on the server metrics (vote, state, leader, membership), which openraft
    /// sends only when they change and whose sender goes with its core, rather than on
    /// the full metrics, which it sends after every append and apply: a waiter there was
    /// woken several times a write for nothing. The core says why it stopped in the full
    /// metrics before it ends.
    pub async fn failed(&self) -> GroupError {
        let mut server = self.inner.raft.server_metrics();
        while server.changed().await.is_ok() {}
        let running = self.inner.raft.metrics().borrow().running_state.clone();
        match running {
            Err(Fatal::Stopped) => std::future::pending().await,
            Err(fatal) => GroupError::Stopped(fatal),
            Ok(()) => GroupError::Stopped(Fatal::Panicked),
        }
    }

    /// Builds a snapshot of everything this member has applied and purges its log
    /// behind it, waiting (up to `patience` for each) until both are done: from then
    /// on a member that joins receives the store as the snapshot, never by replaying
    /// the log. For a store that held records before its group's log began (one
    /// `hdl restore` made), which the log alone would never give a new member.
    pub async fn snapshot_and_purge(&self, patience: Duration) -> Result<(), GroupError> {
        let raft = &self.inner.raft;
        let not_done = |index| GroupError::NotCompacted {
            index,
            waited: patience,
        };
        // The snapshot is to cover every entry in the log: wait until they are applied.
        let caught_up = raft
            .wait(Some(patience))
            .metrics(
                |m| {
                    m.last_log_index.is_some()
                        && m.last_applied.map(|a| a.index) == m.last_log_index
                },
                "every entry of the log applied",
            )
            .await;
        let last = raft.metrics().borrow().last_log_index.unwrap_or_default();
        let index = caught_up
            .ok()
            .and_then(|metrics| metrics.last_applied)
            .ok_or(not_done(last))?
            .index;
        let covers =
            |log_id: Option<super::types::LogId>| log_id.is_some_and(|id| id.index >= index);
        raft.trigger()
            .snapshot()
            .await
            .map_err(GroupError::Stopped)?;
        raft.wait(Some(patience))
            .metrics(|m| covers(m.snapshot), "a snapshot of the applied state")
            .await
            .map_err(|_| not_done(index))?;
        raft.trigger()
            .purge_log(index)
            .await
            .map_err(GroupError::Stopped)?;
        raft.wait(Some(patience))
            .metrics(|m| covers(m.purged), "the log purged behind it")
            .await
            .map_err(|_| not_done(index))?;
        Ok(())
    }

    /// Stops answering the group's peer calls and stops its Raft, then the snapshot
    /// installs it left running (on tokio's blocking pool, which the process waits for
    /// before it exits): they give up at their next record. A snapshot being sent stops
    /// at its next chunk, once its send is dropped with the Raft.
    pub async fn shutdown(&self) -> Result<(), GroupError> {
        self.inner.registry.remove_group(self.inner.group);
        let stopped = self.inner.raft.shutdown().await;
        self.inner.stopping.stop();
        stopped?;
        Ok(())
    }
}

/// News of a group: resolves when this node's view of it changes.
#[derive(Debug)]
pub enum GroupWatch {
    /// Any change: membership, leader, log, applied state.
    Everything(tokio::sync::watch::Receiver<openraft::RaftMetrics<NodeId, Node>>),
    /// A change of vote, state, leader or membership.
    Members(tokio::sync::watch::Receiver<openraft::metrics::RaftServerMetrics<NodeId, Node>>),
}

impl GroupWatch {
    /// Waits until this node's view of the group changes; `false` once the group has
    /// stopped and nothing will change any more.
    pub async fn changed(&mut self) -> bool {
        match self {
            GroupWatch::Everything(metrics) => metrics.changed().await.is_ok(),
            GroupWatch::Members(metrics) => metrics.changed().await.is_ok(),
        }
    }
}

/// Forms a group of this node alone if its log is empty, and waits (bounded) until it
/// is its leader, so a lone node takes writes and describes its group once started.
async fn bootstrap<M: Machine>(
    raft: &Raft<GroupConfig<M>>,
    id: NodeId,
    me: &Node,
) -> Result<(), GroupError> {
    if raft.is_initialized().await.map_err(GroupError::Stopped)? {
        return Ok(());
    }
    let alone = BTreeMap::from([(id, me.clone())]);
    raft.initialize(alone)
        .await
        .map_err(|error| GroupError::Refused(error.into()))?;
    // A timeout is no failure: writes wait for a leader themselves.
    let _elected = raft
        .wait(Some(LEADER_PATIENCE))
        .current_leader(id, "the lone node is elected")
        .await;
    Ok(())
}

/// Runs `driver` (a task of the group's, such as [`election`] or [`purge`]) until it
/// ends or the returned sender is dropped.
fn run_until_dropped(driver: impl Future<Output = ()> + Send + 'static) -> oneshot::Sender<()> {
    let (stop, stopped) = oneshot::channel();
    tokio::spawn(async move {
        tokio::select! {
            () = driver => {}
            _ = stopped => {}
        }
    });
    stop
}

fn raft_config(settings: &GroupSettings) -> openraft::Config {
    openraft::Config {
        cluster_name: "hdl".into(),
        heartbeat_interval: settings.heartbeat_ms,
        election_timeout_min: settings.election_min_ms,
        election_timeout_max: settings.election_max_ms,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(settings.snapshot_every),
        // The purge driver purges instead ([`purge`]).
        max_in_snapshot_log_to_keep: u64::MAX,
        // The election driver calls elections ([`election`]), with pre-vote.
        enable_elect: false,
        ..openraft::Config::default()
    }
}

/// Settings for a node that forms a group alone, with quick timing, for the tests and
/// benchmarks of the layers above.
pub fn alone_settings() -> GroupSettings {
    GroupSettings {
        id: 1,
        bootstrap: Bootstrap::Alone,
        heartbeat_ms: 50,
        election_min_ms: 150,
        election_max_ms: 300,
        snapshot_every: 5000,
        keep: Keep::default(),
        caches: CacheSizes::default(),
    }
}

/// A host for node 1's groups, for the tests and benchmarks of the layers above: a
/// fixed, published cluster secret (never a real node's), peers served on a free
/// loopback port, `handle` as its Handle protocol address.
///
/// # Panics
/// When no loopback port can be bound.
pub async fn test_host(handle: std::net::SocketAddr) -> GroupHost {
    let peers = (tokio::net::TcpListener::bind("127.0.0.1:0").await)
        .expect("a free loopback port for the peer link");
    let me = Node {
        handle,
        peer: peers.local_addr().expect("a bound socket has an address"),
        http: None,
    };
    let secret = super::network::ClusterSecret::new(b"a shared cluster secret, 32 byte")
        .expect("32 octets make a cluster secret");
    let registry = Arc::new(Registry::default());
    let dispatch: Arc<dyn super::network::Dispatch> = registry.clone();
    tokio::spawn(super::network::serve(
        peers,
        secret.clone(),
        dispatch,
        super::network::PeerLimits::default(),
        std::future::pending(),
    ));
    GroupHost {
        me,
        links: Links::new(1, secret),
        registry,
        commits: None,
    }
}

/// A one-member handle set over `store` in `data_dir`, for the tests and benchmarks of
/// the layers above (see [`test_host`]).
///
/// # Panics
/// When the set cannot start (no loopback port, the store or the data directory
/// failing).
pub async fn start_alone(
    store: Arc<Store>,
    data_dir: &Path,
    handle: std::net::SocketAddr,
) -> Group<super::HandleSet> {
    let host = test_host(handle).await;
    let group = GroupId::Set(super::SetId(1));
    Group::start(&alone_settings(), group, store, data_dir, host)
        .await
        .expect("a lone set starts")
}

#[cfg(test)]
mod tests;
