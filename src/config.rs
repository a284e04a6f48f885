//! Node configuration: the TOML file `hdl serve --config FILE` reads.
//!
//! Owns the configuration's shape and defaults; every field has a documented default,
//! and unknown fields are an error so a typo never passes silently. Pure data: reading
//! the file is the caller's business.
//!
//! ```toml
//! # Where the node keeps its store. Default: "hdl-data".
//! data_dir = "hdl-data"
//!
//! [handle]
//! # Address of the Handle protocol listeners, TCP and UDP on the same port.
//! # Default: "0.0.0.0:2641". Port 0 picks a free port (for tests).
//! listen = "0.0.0.0:2641"
//! # Seconds a response stays valid for the client (its ExpirationTime). Default: 43200.
//! response_validity_secs = 43200
//! # Seconds a TCP connection has to send each whole request (counted from its start
//! # or from the previous answer) and to take each answer; then it is closed.
//! # Default: 30.
//! tcp_idle_timeout_secs = 30
//! # TCP connections one source address may hold open; more are closed at once.
//! # Default: 256.
//! tcp_connections_per_source = 256
//! # The most octets a handle's values may take, counted in their RFC 3652 encoding
//! # (14 octets, the type, the data and the references of each value, plus 4): a
//! # create, add or modify (Handle protocol or HTTP) that would make a handle larger
//! # is refused with 202 (invalid value; HTTP 400). At most, and by default, 253952
//! # (256 KiB less 8 KiB), so every handle fits one resolution answer over TCP.
//! max_handle_octets = 253952
//! # The most octets (datagrams, envelopes included) one answer may take over UDP. A
//! # larger answer is replaced by RC_ERROR (2), "ask over TCP", on which J9 and hdl
//! # clients turn to TCP at once. A forged 63-octet request then draws at most this
//! # much. From 512 (one datagram) to 272804 (every answer, no cap). Default: 4096.
//! udp_answer_max_octets = 4096
//! # Reader threads resolutions over UDP are handed to, at most, while the store is
//! # read from the disk (a store larger than memory): an answer in the receiving loop
//! # taking udp_slow_answer_micros or longer, most of it waiting rather than
//! # preempted, means the loop waited (for the disk, most likely), and for a second
//! # after such an answer resolutions are read and answered on those threads, many
//! # disk reads in flight at once, the loop free to receive; with every reader busy
//! # the loop answers itself. From memory, answers stay in the loop (no thread hop).
//! # 0 readers answers everything in the loop.
//! # Defaults: 32 (0 to 512) and 250 (0, every answer counts as slow, to 1000000).
//! udp_disk_readers = 32
//! udp_slow_answer_micros = 250
//! # Answers to plain resolutions over UDP (one datagram, outside a session, PO set,
//! # no AT, CT or ENC, RC 1 from this node's store) are kept whole, and a repeated
//! # request answered with a copy. Every store commit that may change an answer drops
//! # it first, so a kept answer is what a fresh read would give. At most this many
//! # answers and octets (requests, answers and 128 octets each of overhead); either
//! # 0 keeps none. Defaults: 65536 (0 to 16777216) and 33554432, 32 MiB (0 to
//! # 4294967296).
//! udp_answer_cache_entries = 65536
//! udp_answer_cache_octets = 33554432
//!
//! [http]
//! # Address of the HTTP listener: the JSON API, the web proxy, /status, /metrics.
//! # Default: "0.0.0.0:8000". Port 0 picks a free port (for tests).
//! listen = "0.0.0.0:8000"
//! # Address of the HTTPS listener, a port of its own (HTTP and HTTPS do not share
//! # one). Bound only when a certificate is configured or self_signed is true.
//! # Default: "0.0.0.0:8443".
//! https_listen = "0.0.0.0:8443"
//! # PEM files of the certificate chain and its private key. Default: none.
//! # tls_cert = "/etc/hdl/cert.pem"
//! # tls_key = "/etc/hdl/key.pem"
//! # For development: without tls_cert/tls_key, generate a self-signed certificate
//! # for localhost into <data_dir>/tls/ at first start and serve HTTPS with it.
//! # Default: false.
//! self_signed = false
//! # Honour credentials (Authorization: Basic) sent over plain HTTP when they come from
//! # a loopback address; otherwise credentials are honoured only over HTTPS.
//! # Default: false.
//! allow_plain_auth_from_loopback = false
//! # Connections each listener (HTTP, HTTPS) serves at once, and those one source
//! # address may hold; more are closed at once. Defaults: 512 and 64.
//! max_connections = 512
//! connections_per_source = 64
//! # Seconds a client has to send a request's headers (on a new connection, or the
//! # next request on a kept-alive one), and to send its body and get its answer.
//! # Defaults: 10 and 30.
//! header_timeout_secs = 10
//! request_timeout_secs = 30
//!
//! [site]
//! # The HS_SITE serial number; bump it when the site changes. Default: 1.
//! serial = 1
//! # The site's "desc" attribute. Default: "hdl handle server".
//! description = "hdl handle server"
//! # Address advertised in HS_SITE when the listener is bound to 0.0.0.0 or ::.
//! # Default: the listen address when it is specific, else 127.0.0.1.
//! # advertise = "192.0.2.10"
//!
//! [cluster]
//! # This node's id in its replica set, also its server id in HS_SITE; 1 to 4294967295.
//! # Default: 1. Every member of a set needs its own.
//! node_id = 1
//! # Address of the peer listener (Raft and forwarded requests between members, and the
//! # `hdl cluster` commands). Default: "127.0.0.1:0", loopback on a free port. Members of
//! # a multi-node set need a fixed port reachable by the others: the set's membership
//! # records it, and a member that comes back on another port is not found.
//! peer_listen = "127.0.0.1:0"
//! # Milliseconds a new peer connection has to prove the cluster secret (a member does
//! # it in one round trip). Default: 2000. Connections still proving it are bounded
//! # besides: 64 at once, 8 from one address, a newcomer taking the place of the oldest.
//! peer_handshake_timeout_ms = 2000
//! # File holding the cluster secret (hex) that authenticates peers; the same file on
//! # every member. Default: "<data_dir>/cluster.secret", created with 32 random bytes
//! # and mode 0600 when absent.
//! # secret_file = "/etc/hdl/cluster.secret"
//! # On first start with an empty log, form a replica set of this node alone, so a
//! # lone `hdl serve` accepts writes at once. Default: true. Set it to false (or pass
//! # --no-bootstrap) on nodes that will join a set with `hdl cluster init` or
//! # `hdl cluster add-secondary`.
//! bootstrap = true
//! # Milliseconds between the primary's heartbeats; a secondary also checks this
//! # often whether it still hears the primary. Default: 50.
//! heartbeat_ms = 50
//! # The primary's lease is the maximum (milliseconds): a secondary that has not heard
//! # the primary for that long asks the other voters (a canvass, as Raft's pre-vote);
//! # when a quorum no longer hears it, the member with the furthest log stands for
//! # election at once, so a primary that dies is replaced after about max + one
//! # heartbeat. After standing, a member waits a random time in [min, max] before it
//! # may stand again. Defaults: 150 and 250; the minimum must exceed the heartbeat.
//! # Raise both on a network whose round trips or pauses approach the lease.
//! election_timeout_min_ms = 150
//! election_timeout_max_ms = 250
//! # Take a snapshot (the store's applied position: no file is written; a member
//! # behind is sent the store as it is then) after this many log entries since the
//! # last one; the log is purged behind it. Default: 5000.
//! snapshot_every = 5000
//! # Log entries kept after a snapshot covers them, so a briefly absent member catches
//! # up from the log rather than from a whole snapshot. Default: 1000.
//! keep_after_snapshot = 1000
//! # The primary also keeps the entries a member has not received yet (a member
//! # catching up, installing a snapshot, or down), so that a member installing a
//! # snapshot under writes then catches up from the log instead of being sent a newer
//! # snapshot; but at most this many behind the snapshot (never fewer than
//! # keep_after_snapshot), so a member gone for good does not keep the log growing:
//! # past it the primary purges, and that member is sent a snapshot again. Default:
//! # 200000.
//! keep_for_members = 200000
//! # Hash slots of the ring a node that forms its own set makes (`bootstrap`), when the
//! # cluster has none yet: a power of two from 1 to 16384, fixed for the cluster's
//! # life (see DESIGN.md §3: 64 for a handful of replica sets, 256 for dozens).
//! # Default: 256. `hdl cluster up` takes the cluster file's `slot_count` instead.
//! slot_count = 256
//!
//! [auth]
//! # Server administrators, `INDEX:HANDLE`: they may do everything on this server
//! # (J9 `server_admins` with `server_admin_full_access`). Index 0 means any index of
//! # that handle; a handle holding an HS_VLIST names a group. Default: none.
//! server_admins = []
//! # Seconds a challenge (RC_AUTHEN_NEEDED) waits for its answer. Default: 20, as J9's
//! # `max_auth_time`.
//! challenge_lifetime_secs = 20
//! # Seconds an authenticated session (Handle protocol OC 400, HTTP `/api/sessions`)
//! # lives after it was opened, whatever its client asks for. Default: 86400, as J9's
//! # `max_session_time`.
//! session_lifetime_secs = 86400
//! # Sessions a node holds at once, per protocol. A full table drops expired sessions,
//! # then the oldest one nobody authenticated in; only a table full of authenticated
//! # sessions refuses new ones (server busy). Default: 10000.
//! max_sessions = 10000
//! # Whether secret-key (HS_SECKEY) answers are checked in every form of protocol
//! # §8.5, MD5, SHA-1, SHA-256 and HMAC among them, as clients older than protocol
//! # 2.7 send them. Each of those costs one hash to test a guess of the secret, so an
//! # answer seen on the wire can be brute-forced offline at hash speed. Default:
//! # false: only PBKDF2-HMAC-SHA1 of at least 10000 iterations (every J9 client since
//! # 2.7, and hdl's), anything else is refused 402 with a message saying so.
//! legacy_secret_answers = false
//!
//! [storage]
//! # MiB of memory each handle store may use to cache its pages (redb's page cache;
//! # redb's own default is 1 GiB a file, which a large store fills, so a node's
//! # memory would grow with its handles). A page not cached is read from the
//! # operating system's page cache (not counted in the node's memory) or the disk.
//! # Default: 16, 1 to 65536.
//! cache_mib = 16
//! # MiB the metadata group's small store (the cluster map) may cache. (Logs, which
//! # this also sized when they were redb files, keep no cache: their newest entries
//! # are held in memory, older ones read from the operating system's page cache.)
//! # Default: 4, 1 to 65536.
//! log_cache_mib = 4
//!
//! [search]
//! # Value types indexed for reverse lookup (`GET /api/handles?URL=…`, `hdl search`),
//! # compared ASCII case-insensitively, at most 64. A search needs a TYPE=PATTERN of an
//! # indexed type; patterns of other types only filter what it finds. The index is kept
//! # in the same transaction as the handles; changing the list rebuilds it at the next
//! # start (one pass over the store). Every node of a cluster should index the same
//! # types. Default: ["URL", "EMAIL"].
//! indexed_types = ["URL", "EMAIL"]
//!
//! [resolver]
//! # Servers (HOST:PORT, TCP) of the Global Handle Registry, asked to find the service
//! # of an administrator's identity handle that this node does not hold, so that its
//! # HS_PUBKEY can be resolved there or its HS_SECKEY answer checked there (OC 201).
//! # Default: none; such identities are then refused (406).
//! ghr = []
//! # Whether a resolution of a missing handle under a prefix this node does not serve
//! # (not homed with `hdl home`, no handle under it, no prefix handle 0.NA/<prefix>
//! # here) is answered 301 ("that prefix doesn't live here", as the reference server
//! # does) rather than 100 (not found). Set it on services under a Global Handle
//! # Registry, so that a misdirected client learns it asked the wrong service.
//! # Default: true when `ghr` names a GHR (the service is one of a namespace's), else
//! # false (a service on its own is the whole namespace and answers every prefix).
//! # refuse_unserved = true
//!
//! [cache]
//! # Run as a caching resolver (as `hdl serve --cache`): no store, no replica set;
//! # every resolution is answered by global resolution through the GHR of
//! # [resolver] ghr (which must then name at least one server, or `--root` given),
//! # and cached for the shortest TTL of the values answered (at most a day).
//! # Anything else (administration, sessions, listing) is refused with 5 (operation
//! # not supported). Default: false.
//! enabled = false
//! # MiB of resident memory the cached answers may take: they are counted (keys,
//! # values and bookkeeping) against half of it, the least recently used dropped to
//! # stay within that; the other half is malloc's slack. Default: 64, 1 to 65536.
//! max_mib = 64
//! # Seconds a negative answer ("handle not found", "values not found", no service
//! # for the prefix) is cached; 0 caches none. Default: 60, at most 86400.
//! negative_ttl_secs = 60
//! ```

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use serde::Deserialize;

use crate::auth::{Identity, SecretForms};
use crate::codec::{
    DATAGRAM_PAYLOAD_LEN, ENVELOPE_LEN, MAX_DATAGRAM_LEN, MAX_MESSAGE_LEN, MAX_VALUE_LIST_LEN,
};
use crate::names::Handle;

/// The whole configuration of one node.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Directory of the node's store.
    pub data_dir: PathBuf,
    /// Start even when other users may read the data directory (it holds every
    /// HS_SECKEY and the node's keys); off by default.
    pub allow_shared_data_dir: bool,
    /// The Handle protocol listeners.
    pub handle: HandleConfig,
    /// The HTTP and HTTPS listeners.
    pub http: HttpConfig,
    /// How the node describes itself in HS_SITE.
    pub site: SiteConfig,
    /// Its membership of a replica set.
    pub cluster: ClusterConfig,
    /// Who administers it.
    pub auth: AuthConfig,
    /// How it finds other services.
    pub resolver: ResolverConfig,
    /// How its files use memory.
    pub storage: StorageConfig,
    /// Its reverse lookup.
    pub search: SearchConfig,
    /// Whether it is a caching resolver, and its cache.
    pub cache: CacheConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            data_dir: PathBuf::from("hdl-data"),
            allow_shared_data_dir: false,
            handle: HandleConfig::default(),
            http: HttpConfig::default(),
            site: SiteConfig::default(),
            cluster: ClusterConfig::default(),
            auth: AuthConfig::default(),
            resolver: ResolverConfig::default(),
            storage: StorageConfig::default(),
            search: SearchConfig::default(),
            cache: CacheConfig::default(),
        }
    }
}

/// Settings of the Handle protocol (RFC 3652) listeners.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HandleConfig {
    /// TCP and UDP listen address.
    pub listen: SocketAddr,
    /// How long a response stays valid, in seconds.
    pub response_validity_secs: u32,
    /// How long a TCP connection has to send a whole request (from its start or
    /// the previous answer) or to take an answer, in seconds.
    pub tcp_idle_timeout_secs: u64,
    /// TCP connections one source address may hold open.
    pub tcp_connections_per_source: u32,
    /// The most octets a handle's values may take (RFC 3652 value list encoding).
    pub max_handle_octets: usize,
    /// The most octets, datagrams and envelopes included, of one answer over UDP.
    pub udp_answer_max_octets: usize,
    /// The most reader threads resolutions over UDP are handed to at once.
    pub udp_disk_readers: usize,
    /// Microseconds an answer in the UDP receiving loop takes for the loop to count
    /// as blocked (and hand resolutions to the readers for a while).
    pub udp_slow_answer_micros: usize,
    /// The most answers to plain UDP resolutions kept whole; 0 keeps none.
    pub udp_answer_cache_entries: usize,
    /// The most octets those kept answers take; 0 keeps none.
    pub udp_answer_cache_octets: usize,
}

impl Default for HandleConfig {
    fn default() -> Self {
        HandleConfig {
            listen: SocketAddr::from(([0, 0, 0, 0], 2641)),
            response_validity_secs: 43_200,
            tcp_idle_timeout_secs: 30,
            tcp_connections_per_source: 256,
            max_handle_octets: MAX_VALUE_LIST_LEN,
            udp_answer_max_octets: DEFAULT_UDP_ANSWER_MAX_OCTETS,
            udp_disk_readers: 32,
            udp_slow_answer_micros: 250,
            udp_answer_cache_entries: 65_536,
            udp_answer_cache_octets: 32 << 20,
        }
    }
}

/// Settings of the HTTP edge: the JSON API, the proxy and the pages.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// HTTP listen address.
    pub listen: SocketAddr,
    /// HTTPS listen address, used only when TLS is configured.
    pub https_listen: SocketAddr,
    /// PEM certificate chain for HTTPS.
    pub tls_cert: Option<PathBuf>,
    /// PEM private key for HTTPS.
    pub tls_key: Option<PathBuf>,
    /// Generate (once) and use a self-signed certificate when none is configured.
    pub self_signed: bool,
    /// Honour credentials sent over plain HTTP from a loopback address (else only
    /// over HTTPS).
    pub allow_plain_auth_from_loopback: bool,
    /// Connections each listener serves at once.
    pub max_connections: u32,
    /// Connections one source address may hold on each listener.
    pub connections_per_source: u32,
    /// Seconds to send a request's headers.
    pub header_timeout_secs: u64,
    /// Seconds to send a request's body and get its answer.
    pub request_timeout_secs: u64,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            listen: SocketAddr::from(([0, 0, 0, 0], 8000)),
            https_listen: SocketAddr::from(([0, 0, 0, 0], 8443)),
            tls_cert: None,
            tls_key: None,
            self_signed: false,
            allow_plain_auth_from_loopback: false,
            max_connections: 512,
            connections_per_source: 64,
            header_timeout_secs: 10,
            request_timeout_secs: 30,
        }
    }
}

/// How this server appears in its HS_SITE record.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SiteConfig {
    /// Site serial number.
    pub serial: u16,
    /// The `desc` attribute.
    pub description: String,
    /// Address to advertise instead of an unspecified listen address.
    pub advertise: Option<IpAddr>,
}

impl Default for SiteConfig {
    fn default() -> Self {
        SiteConfig {
            serial: 1,
            description: "hdl handle server".into(),
            advertise: None,
        }
    }
}

impl SiteConfig {
    /// The Handle protocol address a node bound to `handle_addr` records in its set's
    /// membership: the configured advertised address, else the listen address, else
    /// loopback when the listener is bound to every interface.
    pub fn advertised_handle_addr(&self, handle_addr: SocketAddr) -> SocketAddr {
        let ip = match self.advertise {
            Some(address) => address,
            None if handle_addr.ip().is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            None => handle_addr.ip(),
        };
        SocketAddr::new(ip, handle_addr.port())
    }
}

/// How the node takes part in its replica set.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterConfig {
    /// This node's id in its set (1 to `u32::MAX`: it is also the HS_SITE server id).
    pub node_id: u64,
    /// The peer listener's address.
    pub peer_listen: SocketAddr,
    /// Milliseconds a new peer connection has to authenticate.
    pub peer_handshake_timeout_ms: u64,
    /// The cluster secret file; `None` means `<data_dir>/cluster.secret`.
    pub secret_file: Option<PathBuf>,
    /// Whether a node with an empty log forms a set of its own.
    pub bootstrap: bool,
    /// Milliseconds between heartbeats (and between a secondary's checks that it
    /// still hears the primary).
    pub heartbeat_ms: u64,
    /// Least back-off, in milliseconds, after a member stood for election.
    pub election_timeout_min_ms: u64,
    /// The primary's lease, in milliseconds: the silence after which a secondary
    /// canvasses for an election; also the greatest back-off after standing.
    pub election_timeout_max_ms: u64,
    /// Entries applied between snapshots.
    pub snapshot_every: u64,
    /// Entries kept in the log behind a snapshot.
    pub keep_after_snapshot: u64,
    /// Entries the primary keeps at most behind a snapshot for members that have not
    /// received them yet.
    pub keep_for_members: u64,
    /// Slots of the ring a bootstrapping node makes (checked by [`Config::validate`]).
    pub slot_count: u32,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            node_id: 1,
            peer_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            peer_handshake_timeout_ms: 2000,
            secret_file: None,
            bootstrap: true,
            heartbeat_ms: 50,
            election_timeout_min_ms: 150,
            election_timeout_max_ms: 250,
            snapshot_every: 5000,
            keep_after_snapshot: 1000,
            keep_for_members: 200_000,
            slot_count: DEFAULT_SLOT_COUNT,
        }
    }
}

/// How a node's files use memory.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StorageConfig {
    /// MiB of page cache of each handle store.
    pub cache_mib: usize,
    /// MiB of page cache of the metadata group's store.
    pub log_cache_mib: usize,
}

impl Default for StorageConfig {
    fn default() -> Self {
        StorageConfig {
            cache_mib: 16,
            log_cache_mib: 4,
        }
    }
}

/// How a node finds other handle services.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ResolverConfig {
    /// Servers of the Global Handle Registry.
    pub ghr: Vec<SocketAddr>,
    /// Answer 301 rather than 100 under a prefix not served here; unset: when a GHR
    /// is configured ([`ResolverConfig::refuses_unserved`]).
    pub refuse_unserved: Option<bool>,
}

impl ResolverConfig {
    /// Whether a missing handle under a prefix not served here is answered 301: as
    /// set, else when this service knows a GHR (it is then one service of a
    /// namespace, and a client asking it about another's prefix asked the wrong one).
    pub fn refuses_unserved(&self) -> bool {
        self.refuse_unserved.unwrap_or(!self.ghr.is_empty())
    }
}

/// A caching resolver's settings.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CacheConfig {
    /// Run as a caching resolver.
    pub enabled: bool,
    /// MiB of resident memory the cached answers may take (counted against half of
    /// it: `caching::answer_bytes`).
    pub max_mib: usize,
    /// Seconds a negative answer is cached.
    pub negative_ttl_secs: u64,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            enabled: false,
            max_mib: 64,
            negative_ttl_secs: 60,
        }
    }
}

/// The most value types a node indexes for reverse lookup.
pub const MAX_INDEXED_TYPES: usize = 64;

/// Reverse lookup settings.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SearchConfig {
    /// The value types indexed (checked by [`Config::validate`]).
    pub indexed_types: Vec<String>,
}

impl Default for SearchConfig {
    fn default() -> Self {
        SearchConfig {
            indexed_types: vec!["URL".to_owned(), "EMAIL".to_owned()],
        }
    }
}

/// Authentication and authorisation settings.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// Server administrators as `INDEX:HANDLE` (checked by [`Config::validate`]).
    pub server_admins: Vec<String>,
    /// Seconds a challenge may wait for its answer.
    pub challenge_lifetime_secs: u64,
    /// Seconds a session lives at most after it was opened.
    pub session_lifetime_secs: u64,
    /// Sessions held at once, per protocol.
    pub max_sessions: usize,
    /// Whether secret-key answers are checked in every form, not only PBKDF2.
    pub legacy_secret_answers: bool,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            server_admins: Vec::new(),
            challenge_lifetime_secs: 20,
            session_lifetime_secs: 86_400,
            max_sessions: 10_000,
            legacy_secret_answers: false,
        }
    }
}

impl AuthConfig {
    /// The forms of secret-key answer this node checks.
    pub fn secret_forms(&self) -> SecretForms {
        if self.legacy_secret_answers {
            SecretForms::Legacy
        } else {
            SecretForms::Strong
        }
    }

    /// The server administrators, parsed.
    pub fn server_admin_identities(&self) -> Result<Vec<Identity>, ConfigError> {
        self.server_admins
            .iter()
            .map(|text| parse_identity(text).ok_or_else(|| ConfigError::Identity(text.clone())))
            .collect()
    }
}

/// Parses `INDEX:HANDLE` (e.g. `300:0.NA/TEST`); `None` if it is not one.
pub fn parse_identity(text: &str) -> Option<Identity> {
    let (index, handle) = text.split_once(':')?;
    let index = index.parse().ok()?;
    let handle = Handle::parse(handle).ok()?;
    Some(Identity {
        handle: handle.as_str().to_owned(),
        index,
    })
}

/// Why a configuration could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The text is not valid TOML for this shape (names the line and field).
    #[error("invalid configuration: {0}")]
    Invalid(#[from] toml::de::Error),
    /// The node id is 0 or does not fit an HS_SITE server id.
    #[error("node id {0} is out of range: it must be 1 to 4294967295")]
    NodeId(u64),
    /// A server administrator is not `INDEX:HANDLE`.
    #[error("server administrator {0:?} is not INDEX:HANDLE, e.g. 300:0.NA/TEST")]
    Identity(String),
    /// A slot count that is not a power of two from 1 to [`MAX_SLOT_COUNT`].
    #[error("slot_count {0}: it must be a power of two from 1 to 16384")]
    SlotCount(u32),
    /// A limit or timeout of 0, which would refuse everything.
    #[error("{0} must be at least 1")]
    Zero(&'static str),
    /// An indexed type that is not a value type name.
    #[error("[search] indexed_types: {0:?} is not a value type name (1 to 1024 octets)")]
    IndexedType(String),
    /// A caching resolver with no GHR to resolve through.
    #[error(
        "a caching resolver needs the Global Handle Registry to resolve through: \
         --root HOST:PORT or [resolver] ghr"
    )]
    CacheWithoutRoot,
    /// A size limit the node cannot honour.
    #[error("{key} = {value}: it must be from {min} to {max}")]
    OutOfRange {
        /// The setting.
        key: &'static str,
        /// Its value.
        value: usize,
        /// The smallest allowed.
        min: usize,
        /// The largest allowed.
        max: usize,
    },
}

/// The default of `[handle] udp_answer_max_octets`: 8 datagrams, most handles' whole
/// answer.
pub const DEFAULT_UDP_ANSWER_MAX_OCTETS: usize = 4096;

/// The octets of the largest answer over UDP: a message of [`MAX_MESSAGE_LEN`] in
/// datagrams of 492 octets, each with its envelope.
pub const LARGEST_UDP_ANSWER: usize =
    MAX_MESSAGE_LEN + MAX_MESSAGE_LEN.div_ceil(DATAGRAM_PAYLOAD_LEN) * ENVELOPE_LEN;

/// The slots of a new cluster's ring when nothing says otherwise.
pub const DEFAULT_SLOT_COUNT: u32 = 256;

/// The most slots a ring made from a configuration may have: an HS_SITE lists one
/// server entry per slot, each carrying its server's key, so the record stays under a
/// few megabytes.
pub const MAX_SLOT_COUNT: u32 = 16384;

/// Checks a ring's slot count: a power of two from 1 to [`MAX_SLOT_COUNT`].
pub fn check_slot_count(count: u32) -> Result<u32, ConfigError> {
    if count.is_power_of_two() && count <= MAX_SLOT_COUNT {
        Ok(count)
    } else {
        Err(ConfigError::SlotCount(count))
    }
}

/// Checks that `value` of setting `key` lies in `range`.
fn check_range(
    key: &'static str,
    value: usize,
    range: std::ops::RangeInclusive<usize>,
) -> Result<(), ConfigError> {
    if range.contains(&value) {
        return Ok(());
    }
    Err(ConfigError::OutOfRange {
        key,
        value,
        min: *range.start(),
        max: *range.end(),
    })
}

impl Config {
    /// Parses a TOML configuration; missing fields take their defaults.
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(text)?;
        config.validate()?;
        Ok(config)
    }

    /// Checks what the shape alone cannot (call it again after overriding fields).
    pub fn validate(&self) -> Result<(), ConfigError> {
        let id = self.cluster.node_id;
        match u32::try_from(id) {
            Ok(fits) if fits > 0 => {}
            _ => return Err(ConfigError::NodeId(id)),
        }
        check_slot_count(self.cluster.slot_count)?;
        if self.handle.tcp_connections_per_source == 0 {
            return Err(ConfigError::Zero("[handle] tcp_connections_per_source"));
        }
        if self.handle.tcp_idle_timeout_secs == 0 {
            return Err(ConfigError::Zero("[handle] tcp_idle_timeout_secs"));
        }
        if self.cluster.peer_handshake_timeout_ms == 0 {
            return Err(ConfigError::Zero("[cluster] peer_handshake_timeout_ms"));
        }
        check_range(
            "[handle] max_handle_octets",
            self.handle.max_handle_octets,
            1..=MAX_VALUE_LIST_LEN,
        )?;
        check_range(
            "[handle] udp_answer_max_octets",
            self.handle.udp_answer_max_octets,
            MAX_DATAGRAM_LEN..=LARGEST_UDP_ANSWER,
        )?;
        check_range(
            "[handle] udp_disk_readers",
            self.handle.udp_disk_readers,
            0..=512,
        )?;
        check_range(
            "[handle] udp_slow_answer_micros",
            self.handle.udp_slow_answer_micros,
            0..=1_000_000,
        )?;
        check_range(
            "[handle] udp_answer_cache_entries",
            self.handle.udp_answer_cache_entries,
            0..=1 << 24,
        )?;
        check_range(
            "[handle] udp_answer_cache_octets",
            self.handle.udp_answer_cache_octets,
            0..=1 << 32,
        )?;
        let http = [
            (
                "[http] max_connections",
                u64::from(self.http.max_connections),
            ),
            (
                "[http] connections_per_source",
                u64::from(self.http.connections_per_source),
            ),
            ("[http] header_timeout_secs", self.http.header_timeout_secs),
            (
                "[http] request_timeout_secs",
                self.http.request_timeout_secs,
            ),
        ];
        if let Some((name, _)) = http.iter().find(|(_, value)| *value == 0) {
            return Err(ConfigError::Zero(name));
        }
        check_range("[storage] cache_mib", self.storage.cache_mib, 1..=65_536)?;
        check_range(
            "[storage] log_cache_mib",
            self.storage.log_cache_mib,
            1..=65_536,
        )?;
        let indexed = &self.search.indexed_types;
        check_range(
            "[search] indexed_types (how many)",
            indexed.len(),
            0..=MAX_INDEXED_TYPES,
        )?;
        if let Some(bad) = indexed
            .iter()
            .find(|name| name.is_empty() || name.len() > 1024)
        {
            return Err(ConfigError::IndexedType(bad.clone()));
        }
        self.validate_cache()?;
        self.auth.server_admin_identities().map(drop)
    }

    /// Checks the `[cache]` section (and, for a caching resolver, its GHR).
    fn validate_cache(&self) -> Result<(), ConfigError> {
        check_range("[cache] max_mib", self.cache.max_mib, 1..=65_536)?;
        let negative = usize::try_from(self.cache.negative_ttl_secs).unwrap_or(usize::MAX);
        check_range("[cache] negative_ttl_secs", negative, 0..=86_400)?;
        if self.cache.enabled && self.resolver.ghr.is_empty() {
            return Err(ConfigError::CacheWithoutRoot);
        }
        Ok(())
    }

    /// The cluster secret file.
    pub fn secret_path(&self) -> PathBuf {
        self.cluster
            .secret_file
            .clone()
            .unwrap_or_else(|| self.data_dir.join("cluster.secret"))
    }
}

/// The first ```` ```toml ```` block of a module's `//!` doc, as TOML text: tests
/// check that every documented example parses.
#[cfg(test)]
pub(crate) fn toml_example(source: &str) -> String {
    source
        .lines()
        .skip_while(|l| !l.starts_with("//! ```toml"))
        .skip(1)
        .take_while(|l| !l.starts_with("//! ```"))
        .map(|l| format!("{}\n", l.trim_start_matches("//!").trim_start()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_advertised_address_replaces_an_unspecified_one() {
        let any: SocketAddr = "0.0.0.0:2641".parse().unwrap();
        let default = SiteConfig::default().advertised_handle_addr(any);
        assert_eq!(default.to_string(), "127.0.0.1:2641");
        let site = SiteConfig {
            advertise: Some("192.0.2.10".parse().unwrap()),
            ..SiteConfig::default()
        };
        let specific: SocketAddr = "127.0.0.1:1".parse().unwrap();
        assert_eq!(
            site.advertised_handle_addr(specific).to_string(),
            "192.0.2.10:1"
        );
    }

    #[test]
    fn empty_file_gives_every_default() {
        assert_eq!(Config::from_toml("").unwrap(), Config::default());
    }

    #[test]
    fn documented_example_parses() {
        let example = toml_example(include_str!("config.rs"));
        assert_eq!(Config::from_toml(&example).unwrap(), Config::default());
    }

    #[test]
    fn a_service_under_a_ghr_refuses_unserved_prefixes_unless_told_otherwise() {
        let resolver = |toml: &str| Config::from_toml(toml).unwrap().resolver;
        assert!(
            !resolver("").refuses_unserved(),
            "no GHR: the whole namespace"
        );
        let under = "[resolver]\nghr = [\"127.0.0.1:2641\"]\n";
        assert!(resolver(under).refuses_unserved());
        let told = format!("{under}refuse_unserved = false\n");
        assert!(!resolver(&told).refuses_unserved());
        assert!(resolver("[resolver]\nrefuse_unserved = true\n").refuses_unserved());
    }

    #[test]
    fn node_ids_must_fit_a_server_id() {
        assert!(Config::from_toml("[cluster]\nnode_id = 0\n").is_err());
        assert!(Config::from_toml("[cluster]\nnode_id = 4294967296\n").is_err());
        let config = Config::from_toml("[cluster]\nnode_id = 4294967295\n").unwrap();
        assert_eq!(
            config.secret_path(),
            PathBuf::from("hdl-data/cluster.secret")
        );
    }

    #[test]
    fn size_limits_stay_within_what_a_message_carries() {
        assert_eq!(LARGEST_UDP_ANSWER, 272_804);
        let handle = |key: &str, value: usize| {
            Config::from_toml(&format!("[handle]\n{key} = {value}\n")).map(|c| c.handle)
        };
        assert_eq!(
            handle("max_handle_octets", 65_536)
                .unwrap()
                .max_handle_octets,
            65_536
        );
        assert_eq!(
            handle("udp_answer_max_octets", 512)
                .unwrap()
                .udp_answer_max_octets,
            512
        );
        let readers = handle("udp_disk_readers", 0).unwrap();
        assert_eq!(readers.udp_disk_readers, 0);
        let slow = handle("udp_slow_answer_micros", 0).unwrap();
        assert_eq!(slow.udp_slow_answer_micros, 0);
        let uncached = handle("udp_answer_cache_entries", 0).unwrap();
        assert_eq!(uncached.udp_answer_cache_entries, 0);
        for (key, bad) in [
            ("max_handle_octets", 0),
            ("max_handle_octets", MAX_VALUE_LIST_LEN + 1),
            ("udp_answer_max_octets", 511),
            ("udp_answer_max_octets", LARGEST_UDP_ANSWER + 1),
            ("udp_disk_readers", 513),
            ("udp_slow_answer_micros", 1_000_001),
            ("udp_answer_cache_entries", (1 << 24) + 1),
            ("udp_answer_cache_octets", (1 << 32) + 1),
        ] {
            let error = handle(key, bad).unwrap_err().to_string();
            assert!(
                error.contains(key) && error.contains("must be from"),
                "{error}"
            );
        }
    }

    #[test]
    fn the_slot_count_is_a_power_of_two_up_to_16384() {
        for good in [1, 64, 16384] {
            let text = format!("[cluster]\nslot_count = {good}\n");
            assert_eq!(Config::from_toml(&text).unwrap().cluster.slot_count, good);
        }
        for bad in [0, 3, 100, 32768] {
            let text = format!("[cluster]\nslot_count = {bad}\n");
            let error = Config::from_toml(&text).unwrap_err().to_string();
            assert!(error.contains("power of two"), "{bad}: {error}");
        }
    }

    #[test]
    fn server_admins_must_be_identities() {
        let config = Config::from_toml("[auth]\nserver_admins = [\"300:0.NA/TEST\"]\n").unwrap();
        let admins = config.auth.server_admin_identities().unwrap();
        assert_eq!(admins[0].index, 300);
        assert_eq!(admins[0].handle, "0.NA/TEST");
        for bad in ["0.NA/TEST", "x:0.NA/TEST", "300:NOSLASH"] {
            let text = format!("[auth]\nserver_admins = [{bad:?}]\n");
            assert!(Config::from_toml(&text).is_err(), "{bad}");
        }
    }

    #[test]
    fn indexed_types_are_bounded_type_names() {
        let config = Config::from_toml("[search]\nindexed_types = [\"URL\", \"10320/loc\"]\n");
        assert_eq!(config.unwrap().search.indexed_types, ["URL", "10320/loc"]);
        assert!(Config::from_toml("[search]\nindexed_types = []\n").is_ok());
        let error = Config::from_toml("[search]\nindexed_types = [\"\"]\n").unwrap_err();
        assert!(error.to_string().contains("indexed_types"), "{error}");
        let many: Vec<String> = (0..=MAX_INDEXED_TYPES)
            .map(|n| format!("\"T{n}\""))
            .collect();
        let text = format!("[search]\nindexed_types = [{}]\n", many.join(", "));
        assert!(Config::from_toml(&text).is_err());
    }

    #[test]
    fn a_caching_resolver_needs_a_root() {
        let error = Config::from_toml("[cache]\nenabled = true\n").unwrap_err();
        assert!(error.to_string().contains("--root"), "{error}");
        let text = "[cache]\nenabled = true\nmax_mib = 2\n[resolver]\nghr = [\"127.0.0.1:2641\"]\n";
        assert_eq!(Config::from_toml(text).unwrap().cache.max_mib, 2);
        for bad in ["max_mib = 0", "negative_ttl_secs = 86401"] {
            let error = Config::from_toml(&format!("[cache]\n{bad}\n")).unwrap_err();
            assert!(error.to_string().contains("[cache]"), "{bad}: {error}");
        }
    }

    #[test]
    fn unknown_field_is_an_error_naming_it() {
        let error = Config::from_toml("[handle]\nlisten_addr = \"127.0.0.1:1\"\n").unwrap_err();
        assert!(error.to_string().contains("listen_addr"), "{error}");
    }

    #[test]
    fn the_three_host_example_is_one_set_of_three_members_in_var_lib_hdl() {
        let files = [
            include_str!("../cluster/three-hosts/node-1.toml"),
            include_str!("../cluster/three-hosts/node-2.toml"),
            include_str!("../cluster/three-hosts/node-3.toml"),
        ];
        for (id, text) in (1..).zip(files) {
            let config = Config::from_toml(text).unwrap();
            let host: IpAddr = format!("192.0.2.1{id}").parse().unwrap();
            assert_eq!(config.cluster.node_id, id);
            assert_eq!(config.handle.listen, SocketAddr::new(host, 2641));
            assert_eq!(config.cluster.peer_listen, SocketAddr::new(host, 2651));
            assert!(!config.cluster.bootstrap, "node {id} waits to be joined");
            assert_eq!(config.data_dir, PathBuf::from("/var/lib/hdl"));
            let secret = config.secret_path();
            assert_eq!(secret, PathBuf::from("/etc/hdl/cluster.secret"));
        }
        // The unit runs them from where they are installed, their data_dir its
        // StateDirectory.
        let unit = include_str!("../cluster/hdl.service");
        assert!(unit.contains("ExecStart=/usr/local/bin/hdl serve --config /etc/hdl/hdl.toml\n"));
        assert!(unit.contains("StateDirectory=hdl\n"));
    }
}
