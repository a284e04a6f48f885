//! A caching resolver's process (`hdl serve --cache`): both edges (Handle protocol on
//! TCP and UDP, HTTP and HTTPS) answering from a [`CachingResolver`], with no store,
//! no replica set and no peer port.
//!
//! Owns [`CacheNode`]. The data directory holds only the
//! server key (signing answers asked for with CT) and, with `self_signed`, the TLS
//! certificate. Starts only with `[cache] enabled` and a GHR to resolve through
//! ([`crate::config::ConfigError::CacheWithoutRoot`] otherwise).

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::server_key::{NodeKeys, SERVER_KEY_FILE};
use super::{Addresses, Edges, NodeError, data_dir, node_info};
use crate::caching::{CacheSettings, CachingResolver, DEFAULT_MAX_PENDING, answer_bytes};
use crate::config::Config;
use crate::http::HttpListeners;
use crate::metrics::Metrics;
use crate::replication::Node as Member;
use crate::replication::admin::Member as SiteMember;
use crate::resolver::Resolver;
use crate::server::HandleListeners;
use crate::service::Status;
use crate::service::site::describe;

/// A started caching resolver: its sockets bound, not serving yet.
pub struct CacheNode {
    addresses: Addresses,
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
        let addresses = Addresses {
            handle: handle.local_addr().map_err(NodeError::Address)?,
            http: http.local_addr().map_err(NodeError::Address)?,
            peer: None,
            https: http.https_addr().map_err(NodeError::Address)?,
        };
        let mut metrics = Metrics::new();
        let settings = CacheSettings {
            max_bytes: answer_bytes(config.cache.max_mib),
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
        let edges = Edges {
            node: node_info(&config, &addresses),
            config,
            handle,
            http,
            handler: Arc::new(handler),
            metrics: Arc::new(metrics),
            server_key: keys.signing,
            answer_cache: None,
        };
        Ok(CacheNode { addresses, edges })
    }

    /// Where it listens.
    pub fn addresses(&self) -> Addresses {
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
fn own_member(config: &Config, addresses: &Addresses) -> SiteMember {
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
