//! One hdl process: a node, assembled from the layers below and run until shutdown.
//!
//! Owns the order things start and stop in. [`Node::start`] creates the data
//! directory, binds every socket (Handle protocol TCP and UDP, HTTP and HTTPS, the peer
//! port), serves the peer port (its [`Registry`] answers every group and the node's own
//! calls, [`calls`]), starts the Raft groups this process belongs to ([`groups`]: its
//! replica set, through [`SetHost`], and the metadata group, each in a directory of
//! its own), builds the [`Router`] the edges answer with (the set's own service for its
//! slots, a forward over the peer port, [`forward`], for the others), starts the slot
//! mover ([`moves`]: it acts while this node leads the metadata group), and creates
//! the bootstrap administrator when asked. It loads or makes the server key
//! ([`server_key`]) the Handle edge signs certified answers with, and learns the other
//! members' keys for the HS_SITE it describes. A set whose store `hdl restore` made
//! ([`restore`]) is finished before the node serves; `hdl backup` is answered over
//! the peer port ([`backup`]). [`Node::run`] serves until its shutdown future
//! resolves, then hands the leadership of every group it leads to an up-to-date member
//! ([`hand_off`]), then drains: both edges stop accepting
//! and answer what they had accepted, within [`DRAIN_DEADLINE`]; only then are the
//! groups stopped (their Raft, then the peer port), since a write forwarded to the
//! primary while draining still needs the peer link. A group whose Raft stops on a
//! failure (a full or failing disk) stops the node at once, without draining: its
//! store no longer changes, so answering from it would serve stale reads and refuse
//! every write, while the rest of the set serves the same data; `hdl serve` exits
//! non-zero naming the group and the cause, for a supervisor to restart it once the
//! cause is fixed.
//!
//! The layer above every other library module: it may import any of them. The binary
//! (`hdl serve`) only reads arguments and the configuration, prints the
//! [`Addresses`] and hands [`Node::run`] the SIGINT/SIGTERM future. A caching
//! resolver (`hdl serve --cache`) is the other kind of process, [`CacheNode`]: the
//! same edges in front of a [`crate::caching::CachingResolver`], nothing else.

pub mod backup;
pub mod bulk;
pub mod cache;
pub mod calls;
pub mod data_dir;
mod error;
pub mod forward;
pub mod groups;
pub mod hand_off;
pub mod moves;
pub mod restore;
pub mod server_key;
mod set;
pub mod store_files;

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use cache::CacheNode;
pub use error::NodeError;
pub use hand_off::HandOffReport;
pub use set::{JoinError, SetHost};

use crate::auth::{Identity, SigningKey};
use crate::config::Config;
use crate::http::{HttpListeners, HttpShared, HttpState, NodeInfo, SessionTable};
use crate::metrics::Metrics;
use crate::placement::{MapGroup, Mover};
use crate::replication::network::{
    ClusterSecret, Dispatch, Links, PeerLimits, Registry, read_or_create_secret_file,
    serve as serve_peers,
};
use crate::replication::{AdminClient, GroupHost, GroupId, Node as Member};
use crate::routing::{Forwarder, Router};
use crate::server::answer_cache::Change;
use crate::server::{AnswerCache, AnswerCacheLimits, Answering, HandleListeners};
use crate::service::bootstrap::BootstrapAdmin;
use crate::service::{AuthPolicy, Handler, Service};
use crate::storage::{Changed, CommitWatch};
use calls::NodeEndpoint;
use forward::PeerLink;
use moves::PeerSets;
use server_key::{NodeKeys, SERVER_KEY_FILE, learn_member_keys};

/// How long a node waits for a member of another set to answer a step of a slot
/// move (a page of records is the longest).
const MOVE_CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a node waits for another member to tell its server key.
const KEY_CALL_TIMEOUT: Duration = Duration::from_secs(2);

/// How long the edges have, after shutdown begins, to answer what they had accepted;
/// what is still unanswered then is dropped and the groups are stopped.
pub const DRAIN_DEADLINE: Duration = Duration::from_secs(5);

/// What a node is started with.
#[derive(Debug)]
pub struct Settings {
    /// The configuration (already validated or not: [`Node::start`] validates it).
    pub config: Config,
    /// Server administrators besides those of `[auth] server_admins`.
    pub server_admins: Vec<Identity>,
    /// The first administrator to create on a new store, if any; needs
    /// `[cluster] bootstrap`.
    pub first_admin: Option<FirstAdmin>,
    /// The server key file; `None` for `<data_dir>/server_key.pem`, made on first
    /// start ([`server_key::load_or_create`]).
    pub server_key: Option<PathBuf>,
}

/// The first administrator of a new store: `0.NA/<prefix>` for each prefix, holding
/// the administrator's key.
#[derive(Debug)]
pub struct FirstAdmin {
    /// The administrator's key.
    pub admin: BootstrapAdmin,
    /// The prefixes it administers.
    pub prefixes: Vec<String>,
}

/// Where a started node listens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Addresses {
    /// The Handle protocol address, TCP and UDP.
    pub handle: SocketAddr,
    /// The HTTP address.
    pub http: SocketAddr,
    /// The peer address (Raft, forwarded requests, `hdl cluster`); none on a caching
    /// resolver, which has no replica set.
    pub peer: Option<SocketAddr>,
    /// The HTTPS address, when HTTPS is on.
    pub https: Option<SocketAddr>,
}

/// `handle=<addr> http=<addr>[ peer=<addr>][ https=<addr>]`, as `hdl serve` announces it.
impl fmt::Display for Addresses {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "handle={} http={}", self.handle, self.http)?;
        if let Some(peer) = self.peer {
            write!(f, " peer={peer}")?;
        }
        match self.https {
            Some(https) => write!(f, " https={https}"),
            None => Ok(()),
        }
    }
}

/// The peer port's server and what stops it.
struct PeerPort {
    server: JoinHandle<std::io::Result<()>>,
    stop: watch::Sender<bool>,
}

/// A started node: its sockets bound, its groups running, not serving yet.
pub struct Node {
    config: Config,
    addresses: Addresses,
    handle: HandleListeners,
    http: HttpListeners,
    peers: PeerPort,
    map: MapGroup,
    sets: Arc<SetHost>,
    mover: JoinHandle<()>,
    learner: JoinHandle<()>,
    router: Router,
    metrics: Arc<Metrics>,
    server_key: Arc<SigningKey>,
    answer_cache: Option<Arc<AnswerCache>>,
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Node")
            .field("id", &self.config.cluster.node_id)
            .field("addresses", &self.addresses)
            .finish_non_exhaustive()
    }
}

impl Node {
    /// Assembles a node: data directory, sockets, groups, service, bootstrap
    /// administrator. Nothing is served until [`Node::run`].
    pub async fn start(settings: Settings) -> Result<Node, NodeError> {
        let Settings {
            config,
            server_admins,
            first_admin,
            server_key,
        } = settings;
        config.validate()?;
        if first_admin.is_some() && !config.cluster.bootstrap {
            return Err(NodeError::FirstAdminWithoutOwnSet);
        }
        let mut policy = AuthPolicy {
            server_admins: config.auth.server_admin_identities()?,
        };
        policy.server_admins.extend(server_admins);
        data_dir::prepare(&config.data_dir, config.allow_shared_data_dir)?;
        let key_file = server_key.unwrap_or_else(|| config.data_dir.join(SERVER_KEY_FILE));
        let NodeKeys {
            signing: server_key,
            public: public_key,
            members: member_keys,
        } = NodeKeys::load_or_create(&key_file, config.cluster.node_id)?;
        let handle = HandleListeners::bind(config.handle.listen).await?;
        let peers = TcpListener::bind(config.cluster.peer_listen)
            .await
            .map_err(|source| NodeError::PeerListen {
                address: config.cluster.peer_listen,
                source,
            })?;
        let http = HttpListeners::bind(&config.http, &config.data_dir).await?;
        let peer = peers.local_addr().map_err(NodeError::Address)?;
        let addresses = Addresses {
            handle: handle.local_addr().map_err(NodeError::Address)?,
            http: http.local_addr().map_err(NodeError::Address)?,
            peer: Some(peer),
            https: http.https_addr().map_err(NodeError::Address)?,
        };
        let me = Member {
            handle: config.site.advertised_handle_addr(addresses.handle),
            peer,
            http: Some(addresses.http),
        };
        let registry = Arc::new(Registry::default());
        let secret = read_or_create_secret_file(&config.secret_path())?;
        let node_secret = secret.clone();
        let limits = PeerLimits {
            handshake_timeout: Duration::from_millis(config.cluster.peer_handshake_timeout_ms),
            ..PeerLimits::default()
        };
        let peers = serve_peer_port(peers, secret.clone(), limits, Arc::clone(&registry));
        let answer_cache = answer_cache(&config);
        let host = GroupHost {
            me,
            links: Links::new(config.cluster.node_id, secret),
            registry: Arc::clone(&registry),
            commits: answer_cache.clone().map(|cache| {
                let watch: Arc<dyn CommitWatch> = Arc::new(KeptAnswers(cache));
                watch
            }),
        };
        let map = groups::start_map(&groups::settings(&config), &config.data_dir, &host).await?;
        let mover = {
            let client = AdminClient::new(node_secret.clone(), MOVE_CALL_TIMEOUT);
            let mover = Mover::new(map.clone(), PeerSets::new(client, map.clone()));
            tokio::spawn(async move { mover.run().await })
        };
        let metrics = Arc::new(Metrics::new());
        let link = Arc::new(PeerLink::new(node_secret.clone()));
        let forwarder = Forwarder::new(
            map.clone(),
            link,
            config.cluster.node_id,
            Arc::clone(&metrics),
        );
        let records = Arc::new(forwarder.clone());
        let sets = SetHost::new(&config, policy, host, map.clone(), records);
        let sets = Arc::new(sets.with_member_keys(Arc::clone(&member_keys)));
        let router = Router::new(forwarder, sets.subscribe(), config.site.clone())
            .with_member_keys(Arc::clone(&member_keys));
        let endpoint = NodeEndpoint::new(Arc::clone(&sets), public_key, config.data_dir.clone());
        registry.set_node(Arc::new(endpoint));
        let learner = {
            let client = AdminClient::new(node_secret.clone(), KEY_CALL_TIMEOUT);
            let learn = learn_member_keys(member_keys, Arc::clone(&sets), client);
            tokio::spawn(learn)
        };
        sets.start_own().await?;
        if let Some(first_admin) = first_admin {
            // Bootstrap forms set 1 (or finds the node's own set), so there is one.
            let local = sets.local().ok_or(NodeError::FirstAdminWithoutOwnSet)?;
            create_first_admin(&local.service, &first_admin).await?;
        }
        Ok(Node {
            config,
            addresses,
            handle,
            http,
            peers,
            map,
            sets,
            mover,
            learner,
            router,
            metrics,
            server_key,
            answer_cache,
        })
    }

    /// Where the node listens.
    pub fn addresses(&self) -> Addresses {
        self.addresses
    }

    /// Serves until `shutdown` resolves; then hands off the groups it leads (each
    /// within [`hand_off::HAND_OFF_DEADLINE`], while the edges still serve), drains
    /// both edges (each within [`DRAIN_DEADLINE`]) and stops the groups; returns what
    /// each hand-off came to. A node that belongs to no replica set
    /// serves its edges once it joins one. If one of its groups fails (its Raft stops
    /// on a storage error), the node stops serving at once, without draining, stops
    /// the groups and returns [`NodeError::GroupFailed`]. The groups are stopped even
    /// when an edge failed; the first error is returned.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()>,
    ) -> Result<Vec<HandOffReport>, NodeError> {
        let Node {
            config,
            addresses,
            handle,
            http,
            peers,
            map,
            sets,
            mover,
            learner,
            router,
            metrics,
            server_key,
            answer_cache,
        } = self;
        // The mover stops with the metadata group; aborting it first stops a move's
        // step mid-way, which the next leader repeats.
        let mover = mover.abort_handle();
        let _learner = AbortOnDrop(learner);
        let edges = Edges {
            node: node_info(&config, &addresses),
            config,
            handle,
            http,
            handler: Arc::new(router),
            metrics,
            server_key,
            answer_cache,
        };
        let mut hand_offs = Vec::new();
        let planned = async {
            shutdown.await;
            hand_offs = hand_off::hand_off_all(&sets, &map).await;
        };
        let served = tokio::select! {
            served = edges.serve_once_joined(&sets, planned) => served,
            failed = first_failure(&sets, &map) => Err(failed),
        };
        tracing::info!("stopping the groups");
        mover.abort();
        let stopped = stop_groups(&sets, &map, peers).await;
        served.and(stopped).map(|()| hand_offs)
    }
}

/// What a node answers clients with: its edges and what they share.
struct Edges {
    config: Config,
    node: NodeInfo,
    handle: HandleListeners,
    http: HttpListeners,
    handler: Arc<dyn Handler>,
    metrics: Arc<Metrics>,
    server_key: Arc<SigningKey>,
    /// Kept answers to plain UDP resolutions; only for a handler answering from
    /// stores whose commits it is told of.
    answer_cache: Option<Arc<AnswerCache>>,
}

impl Edges {
    /// Serves once this node belongs to a replica set of `sets`, until `shutdown`
    /// resolves; then drains both edges (each within [`DRAIN_DEADLINE`]).
    async fn serve_once_joined(
        self,
        sets: &SetHost,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), NodeError> {
        let mut shutdown = std::pin::pin!(shutdown);
        let mut joined = sets.subscribe();
        let joined = tokio::select! {
            local = joined.wait_for(Option::is_some) => local.is_ok(),
            () = &mut shutdown => false,
        };
        if !joined {
            tracing::info!("stopped before joining a replica set");
            return Ok(());
        }
        self.serve(shutdown).await
    }

    /// Serves both edges until `shutdown` resolves; then drains them (each within
    /// [`DRAIN_DEADLINE`]).
    async fn serve(self, shutdown: impl Future<Output = ()>) -> Result<(), NodeError> {
        let Edges {
            config,
            node,
            handle,
            http,
            handler,
            metrics,
            server_key,
            answer_cache,
        } = self;
        tracing::info!(handle = %node.handle, http = %node.http, "serving");
        let (stop, stopped) = watch::channel(false);
        let state = http_state(&config, node, Arc::clone(&handler), Arc::clone(&metrics));
        // Aborted if the node stops on a failed group before it drained.
        let mut http = AbortOnDrop(tokio::spawn(http.serve(
            state,
            until(stopped.clone()),
            DRAIN_DEADLINE,
        )));
        let answering = Answering {
            handler,
            metrics,
            server_key,
            answer_cache,
        };
        let handle = handle.serve(answering, &config, until(stopped), DRAIN_DEADLINE);
        let signal = async move {
            shutdown.await;
            tracing::info!(deadline = ?DRAIN_DEADLINE, "shutting down: draining");
            stop.send_replace(true);
        };
        let (handle, http, ()) = tokio::join!(handle, &mut http.0, signal);
        let http = http.unwrap_or_else(|error| Err(std::io::Error::other(error)));
        tracing::info!("drained");
        handle.and(http).map_err(NodeError::Serve)
    }
}

/// The first of the node's groups to fail — the metadata group, or its replica set
/// once it belongs to one — as the error the node stops with; logged.
async fn first_failure(sets: &SetHost, map: &MapGroup) -> NodeError {
    let set_failed = async {
        let mut local = sets.subscribe();
        let set = match local.wait_for(Option::is_some).await {
            Ok(set) => set.clone(),
            Err(_) => None,
        };
        match set {
            Some(set) => (GroupId::Set(set.id), set.group.failed().await),
            None => std::future::pending().await,
        }
    };
    let (group, source) = tokio::select! {
        failed = map.group().failed() => (GroupId::Map, failed),
        failed = set_failed => failed,
    };
    tracing::error!(%group, error = %source, "a group stopped on a failure: stopping this node");
    NodeError::GroupFailed { group, source }
}

/// Serves the peer port with `registry`, within `limits`, until the returned
/// [`PeerPort`] is stopped.
fn serve_peer_port(
    listener: TcpListener,
    secret: ClusterSecret,
    limits: PeerLimits,
    registry: Arc<Registry>,
) -> PeerPort {
    let (stop, stopped) = watch::channel(false);
    let dispatch: Arc<dyn Dispatch> = registry;
    let serve = serve_peers(listener, secret, dispatch, limits, until(stopped));
    let server = tokio::spawn(serve);
    PeerPort { server, stop }
}

/// Stops the groups (their Raft; each stops answering its peer calls), then the peer
/// port. Every part is stopped even when one fails; the first error is returned.
async fn stop_groups(sets: &SetHost, map: &MapGroup, peers: PeerPort) -> Result<(), NodeError> {
    let set = sets.stop().await;
    let map = map.group().shutdown().await;
    peers.stop.send_replace(true);
    let port = match peers.server.await {
        Ok(served) => served.map_err(NodeError::Serve),
        Err(error) => Err(NodeError::Serve(std::io::Error::other(error))),
    };
    set.and(map).map_err(NodeError::StopGroup).and(port)
}

/// What `/status` says of a node listening on `addresses`.
fn node_info(config: &Config, addresses: &Addresses) -> NodeInfo {
    NodeInfo {
        id: config.cluster.node_id,
        handle: addresses.handle,
        http: addresses.http,
        https: addresses.https,
        peer: addresses.peer,
    }
}

/// What the HTTP handlers share.
fn http_state(
    config: &Config,
    node: NodeInfo,
    handler: Arc<dyn Handler>,
    metrics: Arc<Metrics>,
) -> HttpState {
    HttpState::new(HttpShared {
        handler,
        metrics,
        node,
        allow_plain_auth_from_loopback: config.http.allow_plain_auth_from_loopback,
        sessions: Arc::new(Mutex::new(SessionTable::new(
            config.auth.max_sessions,
            Duration::from_secs(config.auth.session_lifetime_secs),
        ))),
        guesses: Arc::default(),
        work: Arc::default(),
        secret_forms: config.auth.secret_forms(),
    })
}

/// The UDP edge's kept answers as `config` bounds them; `None` when it keeps none.
fn answer_cache(config: &Config) -> Option<Arc<AnswerCache>> {
    let limits = AnswerCacheLimits {
        entries: config.handle.udp_answer_cache_entries,
        octets: config.handle.udp_answer_cache_octets,
    };
    AnswerCache::new(limits, config.handle.response_validity_secs).map(Arc::new)
}

/// The UDP edge's kept answers, told of every commit of the node's stores: the only
/// way the storage layer reaches them.
#[derive(Debug)]
struct KeptAnswers(Arc<AnswerCache>);

impl CommitWatch for KeptAnswers {
    fn before_commit(&self, changed: Changed<'_>) {
        self.0.before_change(change_of(changed));
    }

    fn after_commit(&self, changed: Changed<'_>) {
        self.0.after_change(change_of(changed));
    }
}

fn change_of(changed: Changed<'_>) -> Change<'_> {
    match changed {
        Changed::Handles(keys) => Change::Handles(keys),
        Changed::Everything => Change::Everything,
    }
}

/// Creates the first administrator's prefix handles that do not exist yet.
async fn create_first_admin(service: &Service, first: &FirstAdmin) -> Result<(), NodeError> {
    let created = service
        .bootstrap(&first.admin, &first.prefixes)
        .await
        .map_err(NodeError::FirstAdmin)?;
    for handle in created {
        tracing::info!(%handle, "created the bootstrap administrator's prefix handle");
    }
    Ok(())
}

/// Aborts its task when dropped: the node's helpers end with [`Node::run`].
struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Resolves once `stopped` turns true (or its sender is gone).
async fn until(mut stopped: watch::Receiver<bool>) {
    let _ = stopped.wait_for(|stop| *stop).await;
}
