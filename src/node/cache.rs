//! A caching resolver's process (`hdl serve --cache`): both edges (Handle protocol on
//! TCP and UDP, HTTP and HTTPS) answering from a [`CachingResolver`], with no store,
//! no replica set and no peer port.
//!
//! Owns [`CacheNode`] and [`CacheAddresses`]. The data directory holds only the
//! server key (signing answers asked for with CT) and, with `self_signed`, the TLS
//! certificate. Starts only with `[cache] enabled` and a GHR to resolve through
//! ([`crate::config::ConfigError::CacheWithoutRoot`] otherwise).

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::server_key::{NodeKeys, SERVER_KEY_FILE};
use super::{Edges, NodeError, data_dir};
use crate::caching::{CacheSettings, CachingResolver, DEFAULT_MAX_PENDING};
use crate::config::Config;
use crate::http::{HttpListeners, NodeInfo};
use crate::metrics::Metrics;
use crate::replication::Node as Member;
use crate::replication::admin::Member as SiteMember;
use crate::resolver::Resolver;
use crate::server::HandleListeners;
use crate::service::Status;
use crate::service::site::describe;

/// Where a started caching resolver listens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheAddresses {
    /// The Handle protocol address, TCP and UDP.
    pub handle: SocketAddr,
    /// The HTTP address.
    pub http: SocketAddr,
    /// The HTTPS address, when HTTPS is on.
    pub https: Option<SocketAddr>,
}

/// `handle=<addr> http=<addr>[ https=<addr>]`, as `hdl serve --cache` announces it.
impl fmt::Display for CacheAddresses {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "handle={} http={}", self.handle, self.http)?;
        match self.https {
            Some(https) => write!(f, " https={https}"),
            None => Ok(()),
        }
    }
}

/// A started caching resolver: its sockets bound, not serving yet.
pub struct CacheNode {
    addresses: CacheAddresses,
    edges: Edges,
}

impl fmt::Debug for CacheNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CacheNode")
            .field("addresses", &self.addresses)
            .finish_non_exhaustive()
    }
}

impl CacheNode {
    /// Binds the sockets of a caching resolver configured by `config`, signing with
    /// the key in `server_key` (default `<data_dir>/server_key.pem`, made on first
    /// start). Nothing is served until [`CacheNode::run`].
    pub async fn start(
        config: Config,
        server_key: Option<PathBuf>,
    ) -> Result<CacheNode, NodeError> {
        config.validate()?;
        data_dir::prepare(&config.data_dir, config.allow_shared_data_dir)?;
        let key_file = server_key.unwrap_or_else(|| config.data_dir.join(SERVER_KEY_FILE));
        let keys = NodeKeys::load_or_create(&key_file, config.cluster.node_id)?;
        let handle = HandleListeners::bind(config.handle.listen).await?;
        let http = HttpListeners::bind(&config.http, &config.data_dir).await?;
        let addresses = CacheAddresses {
            handle: handle.local_addr().map_err(NodeError::Address)?,
            http: http.local_addr().map_err(NodeError::Address)?,
            https: http.https_addr().map_err(NodeError::Address)?,
        };
        let mut metrics = Metrics::new();
        let settings = CacheSettings {
            max_bytes: config.cache.max_mib << 20,
            negative_ttl: Duration::from_secs(config.cache.negative_ttl_secs),
            max_pending: DEFAULT_MAX_PENDING,
        };
        let handler = CachingResolver::new(
            Resolver::new(config.resolver.ghr.clone()),
            settings,
            metrics.register_cache(),
            describe(
                &config.site,
                &[own_member(&config, &addresses)],
                None,
                &keys.members.snapshot(),
            ),
            Status::unjoined(),
        );
        let node = NodeInfo {
            id: config.cluster.node_id,
            handle: addresses.handle,
            http: addresses.http,
            https: addresses.https,
            peer: None,
        };
        let edges = Edges {
            config,
            node,
            handle,
            http,
            handler: Arc::new(handler),
            metrics: Arc::new(metrics),
            server_key: keys.signing,
        };
        Ok(CacheNode { addresses, edges })
    }

    /// Where it listens.
    pub fn addresses(&self) -> CacheAddresses {
        self.addresses
    }

    /// Serves until `shutdown` resolves, then drains both edges (each within
    /// [`super::DRAIN_DEADLINE`]).
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), NodeError> {
        self.edges.serve(shutdown).await
    }
}

/// The one server of the HS_SITE a caching resolver describes itself with (one
/// primary site, its server key in the entry).
fn own_member(config: &Config, addresses: &CacheAddresses) -> SiteMember {
    SiteMember {
        id: config.cluster.node_id,
        node: Member {
            handle: config.site.advertised_handle_addr(addresses.handle),
            http: Some(addresses.http),
            ..Member::default()
        },
        voter: true,
    }
}
