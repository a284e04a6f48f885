//! Finding the service responsible for a handle and asking it (digest §9): the part of
//! the global resolution procedure a server needs to check the keys of administrators
//! whose identity handles live at another service.
//!
//! Owns [`Resolver`] and [`ResolveError`]. Depends on [`crate::client`] for the wire,
//! [`crate::codec`] for the server hash (§7) and the verification body (§3.7), and
//! [`crate::values`] for HS_SITE and HS_SERV. Knows nothing of the store: the caller
//! decides what it holds itself.
//!
//! The procedure: a handle of the `0.` naming authority (or one without `/`) lives at
//! the Global Handle Registry, whose servers are configured. For any other handle the
//! prefix handle `0.NA/<PREFIX>` is resolved at the GHR for HS_SITE, HS_SITE.6 and
//! HS_SERV; an HS_SERV names a service handle whose values are resolved there in turn
//! (at most [`MAX_SERVICE_DEPTH`] deep, so a loop ends). Of the sites found, primary
//! sites come first; within a site the server is the one the site's hash picks for the
//! handle, reached at its TCP interface (or its UDP one when it has no TCP). Prefix
//! referrals (RC 301–303) are not followed: such a prefix is reported as without a
//! service.
//!
//! Trust: answers are not certified (this server keeps no keys to check signatures
//! with), so what is fetched is only as trustworthy as the network path to the GHR and
//! to the service. Every request goes over TCP, which an off-path attacker cannot
//! spoof as easily as UDP.

mod sites;

use std::net::SocketAddr;

use thiserror::Error;

use crate::client::{Client, ClientError, Transport};
use crate::codec::VerifyRequest;
use crate::names::Handle;
use crate::values::{HandleValue, ValueSelection};

pub use sites::MAX_SERVICE_DEPTH;

/// Why the responsible service could not be found or asked.
#[derive(Debug, Error)]
pub enum ResolveError {
    /// No Global Handle Registry is configured, so no other service can be found.
    #[error("no Global Handle Registry is configured ([resolver] ghr)")]
    NoRegistry,
    /// The GHR knows no service for the prefix (or delegates it by referral).
    #[error("the Global Handle Registry names no service for prefix {prefix}")]
    NoService {
        /// The prefix.
        prefix: String,
    },
    /// HS_SERV values named services more than [`MAX_SERVICE_DEPTH`] deep.
    #[error("service handles of prefix {prefix} nest more than {MAX_SERVICE_DEPTH} deep")]
    TooDeep {
        /// The prefix.
        prefix: String,
    },
    /// A service could not be asked or refused.
    #[error("{what}: {source}")]
    Client {
        /// What was being asked.
        what: String,
        /// Why it failed.
        source: ClientError,
    },
}

/// Finds and asks the service responsible for a handle, starting at the GHR.
#[derive(Debug, Clone)]
pub struct Resolver {
    registry: Client,
}

impl Resolver {
    /// A resolver that starts at the GHR servers `registry`.
    pub fn new(registry: Vec<SocketAddr>) -> Self {
        Resolver {
            registry: Client::new(registry),
        }
    }

    /// The values of `handle` that `selection` picks and its service shows to anyone.
    pub async fn resolve(
        &self,
        handle: &Handle,
        selection: &ValueSelection,
    ) -> Result<Vec<HandleValue>, ResolveError> {
        let service = self.service_of(handle).await?;
        let resolution = service
            .resolve(handle, selection, Transport::Tcp)
            .await
            .map_err(|source| ResolveError::Client {
                what: format!("resolving {handle} at its service"),
                source,
            })?;
        Ok(resolution.values)
    }

    /// Asks the service holding `handle` whether a secret-key answer is right
    /// (OC_VERIFY_RESPONSE, digest §3.7).
    pub async fn verify_secret_answer(
        &self,
        handle: &Handle,
        request: VerifyRequest,
    ) -> Result<bool, ResolveError> {
        let service = self.service_of(handle).await?;
        service
            .verify_answer(request)
            .await
            .map_err(|source| ResolveError::Client {
                what: format!("verifying an answer for {handle} at its service"),
                source,
            })
    }

    /// A client of the servers responsible for `handle`, in the order to ask them.
    async fn service_of(&self, handle: &Handle) -> Result<Client, ResolveError> {
        if self.registry.servers().is_empty() {
            return Err(ResolveError::NoRegistry);
        }
        if sites::lives_at_registry(handle) {
            return Ok(self.registry.clone());
        }
        let servers = sites::servers_for(&self.registry, handle).await?;
        Ok(Client::new(servers))
    }
}
