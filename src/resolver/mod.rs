//! Global resolution (digest §9): finding the service responsible for a handle and
//! asking it, shared by the server (to check the keys of administrators whose identity
//! handles live at another service) and the client CLI (`hdl resolve --root`).
//!
//! Owns [`Resolver`], [`ResolveError`], [`Purpose`], the service cache ([`cache`]),
//! HS_ALIAS following (module `aliases`) and the trace of steps ([`Step`]). Depends on [`crate::client`] for the wire,
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
//! handle, reached at its TCP interface (or its UDP one when it has no TCP); a write
//! goes to primary sites only. A prefix referral (RC 303) from the GHR sends the same
//! prefix-handle request to the sites it names; a service referral (RC 302) from a
//! service sends the handle's request to the sites it names (at most
//! [`MAX_REFERRALS`]). What was learnt of a prefix's service is kept for the shortest
//! TTL of the values it came from, in a bounded [`ServiceCache`].
//!
//! Trust: answers are not certified (this server keeps no keys to check signatures
//! with), so what is fetched is only as trustworthy as the network path to the GHR and
//! to the service. Every request goes over TCP, which an off-path attacker cannot
//! spoof as easily as UDP.

mod aliases;
pub mod cache;
mod sites;
mod trace;

use std::net::SocketAddr;
use std::sync::Arc;

use thiserror::Error;

use crate::client::{Client, ClientError, Resolution, Transport};
use crate::codec::{ResponseCode, VerifyRequest};
use crate::names::Handle;
use crate::values::{HandleValue, SiteInfo, ValueSelection};

pub use aliases::{Aliases, MAX_ALIAS_DEPTH, Resolved};
pub use cache::ServiceCache;
pub use sites::MAX_SERVICE_DEPTH;
pub use trace::{Step, TraceSink};

/// How many service referrals (RC 302) one resolution follows.
pub const MAX_REFERRALS: usize = 4;

/// What the server picked will be asked to do: a read may go to any site of the
/// service, a write only to a primary one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// Resolution: every site, primary ones first.
    Read,
    /// Administration: primary sites only.
    Write,
}

/// How current the handle's service must be when it answers (the prefix's sites are
/// found as always).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recency {
    /// Whatever the server asked has applied.
    Any,
    /// Every write acknowledged before the request (the AT flag).
    Authoritative,
}

/// Why the responsible service could not be found or asked.
#[derive(Debug, Error)]
pub enum ResolveError {
    /// No Global Handle Registry is configured, so no other service can be found.
    #[error("no Global Handle Registry is configured ([resolver] ghr, or --root)")]
    NoRegistry,
    /// The GHR knows no service for the prefix.
    #[error("the Global Handle Registry names no service for prefix {prefix}")]
    NoService {
        /// The prefix.
        prefix: String,
    },
    /// HS_SERV values or prefix referrals went more than [`MAX_SERVICE_DEPTH`] deep.
    #[error("service handles of prefix {prefix} nest more than {MAX_SERVICE_DEPTH} deep")]
    TooDeep {
        /// The prefix.
        prefix: String,
    },
    /// Services referred the request on more than [`MAX_REFERRALS`] times.
    #[error("{handle}: more than {MAX_REFERRALS} service referrals")]
    TooManyReferrals {
        /// The handle.
        handle: String,
    },
    /// HS_ALIAS values lead back to a handle already met.
    #[error("alias loop: {}", .chain.join(" -> "))]
    AliasLoop {
        /// The handles met, the repeated one last.
        chain: Vec<String>,
    },
    /// HS_ALIAS values chain more than [`MAX_ALIAS_DEPTH`] deep.
    #[error("aliases chain more than {MAX_ALIAS_DEPTH} deep: {}", .chain.join(" -> "))]
    AliasTooDeep {
        /// The handles met.
        chain: Vec<String>,
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

impl ResolveError {
    /// The response code a server resolving for its clients (a caching resolver)
    /// answers this failure with: a service's "not found", "busy" or "invalid
    /// handle" as it said it; no answer at all busy (3: try again shortly); no
    /// service for the prefix "not found" (100); referrals, service handles or
    /// aliases nested too deep 6 (recursion count too high); anything else a general
    /// error (2), the message saying what the service answered.
    pub fn response_code(&self) -> ResponseCode {
        match self {
            ResolveError::Client { source, .. } => match source {
                ClientError::Server {
                    code:
                        code @ (ResponseCode::HandleNotFound
                        | ResponseCode::ValuesNotFound
                        | ResponseCode::ServerTooBusy
                        | ResponseCode::InvalidHandle),
                    ..
                } => *code,
                ClientError::NoAnswer { .. } => ResponseCode::ServerTooBusy,
                _ => ResponseCode::Error,
            },
            ResolveError::NoService { .. } => ResponseCode::HandleNotFound,
            ResolveError::TooDeep { .. }
            | ResolveError::TooManyReferrals { .. }
            | ResolveError::AliasLoop { .. }
            | ResolveError::AliasTooDeep { .. } => ResponseCode::RecursionCountTooHigh,
            ResolveError::NoRegistry => ResponseCode::Error,
        }
    }
}

/// Finds and asks the service responsible for a handle, starting at the GHR, and
/// remembers each prefix's service for its TTL.
#[derive(Clone)]
pub struct Resolver {
    registry: Client,
    cache: Arc<ServiceCache>,
    trace: Option<TraceSink>,
}

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolver")
            .field("registry", &self.registry.servers())
            .field("cached", &self.cache.len())
            .finish_non_exhaustive()
    }
}

impl Resolver {
    /// A resolver that starts at the GHR servers `registry`.
    pub fn new(registry: Vec<SocketAddr>) -> Self {
        Resolver {
            registry: Client::new(registry),
            cache: Arc::default(),
            trace: None,
        }
    }

    /// This resolver, telling `sink` each step it takes.
    pub fn with_trace(self, sink: TraceSink) -> Self {
        Resolver {
            trace: Some(sink),
            ..self
        }
    }

    /// The public values of `handle` that `selection` picks, from its service (an
    /// HS_ALIAS among them is not followed).
    pub async fn resolve(
        &self,
        handle: &Handle,
        selection: &ValueSelection,
    ) -> Result<Vec<HandleValue>, ResolveError> {
        self.resolve_as_current(handle, selection, Recency::Any)
            .await
    }

    /// [`Resolver::resolve`], the handle's service answering as current as `recency`
    /// asks.
    pub async fn resolve_as_current(
        &self,
        handle: &Handle,
        selection: &ValueSelection,
        recency: Recency,
    ) -> Result<Vec<HandleValue>, ResolveError> {
        let resolution = self.resolve_at_service(handle, selection, recency).await?;
        Ok(resolution.values)
    }

    /// Asks the service holding `handle` whether a secret-key answer is right
    /// (OC_VERIFY_RESPONSE, digest §3.7).
    pub async fn verify_secret_answer(
        &self,
        handle: &Handle,
        request: VerifyRequest,
    ) -> Result<bool, ResolveError> {
        let service = self.service_client(handle, Purpose::Read).await?;
        service
            .verify_answer(request)
            .await
            .map_err(|source| ResolveError::Client {
                what: format!("verifying an answer for {handle} at its service"),
                source,
            })
    }

    /// A client of the servers responsible for `handle` that `purpose` may use, in
    /// the order to ask them.
    pub async fn service_client(
        &self,
        handle: &Handle,
        purpose: Purpose,
    ) -> Result<Client, ResolveError> {
        let sites = self.sites_for(handle).await?;
        match sites {
            None => Ok(self.registry.clone()),
            Some(sites) => Ok(Client::new(sites::servers_of(
                sites,
                handle.as_str().as_bytes(),
                purpose,
            ))),
        }
    }

    /// The sites of `handle`'s service; `None` for the GHR's own handles.
    async fn sites_for(&self, handle: &Handle) -> Result<Option<Vec<SiteInfo>>, ResolveError> {
        if self.registry.servers().is_empty() {
            return Err(ResolveError::NoRegistry);
        }
        if sites::lives_at_registry(handle) {
            return Ok(None);
        }
        self.sites_of_prefix(handle.prefix()).await.map(Some)
    }

    /// Resolves `handle` at its service, following service referrals (at most
    /// [`MAX_REFERRALS`]).
    async fn resolve_at_service(
        &self,
        handle: &Handle,
        selection: &ValueSelection,
        recency: Recency,
    ) -> Result<Resolution, ResolveError> {
        let mut service = self.service_client(handle, Purpose::Read).await?;
        for _ in 0..=MAX_REFERRALS {
            self.trace(Step::Asking {
                handle: handle.to_string(),
                servers: service.servers().to_vec(),
            });
            let resolved = match recency {
                Recency::Any => service.resolve(handle, selection, Transport::Tcp).await,
                Recency::Authoritative => {
                    let asked = service.resolve_authoritatively(handle, selection, Transport::Tcp);
                    asked.await
                }
            };
            match resolved {
                Ok(resolution) => {
                    self.trace(Step::Resolved {
                        handle: handle.to_string(),
                        values: resolution.values.len(),
                    });
                    return Ok(resolution);
                }
                Err(ClientError::Referred {
                    code: code @ ResponseCode::ServiceReferral,
                    referral,
                }) => {
                    self.trace(Step::referred(code, &referral));
                    let values = referral.values.unwrap_or_default();
                    service = self
                        .referred_service(handle, &referral.handle, &values)
                        .await?;
                }
                Err(source) => {
                    return Err(ResolveError::Client {
                        what: format!("resolving {handle} at its service"),
                        source,
                    });
                }
            }
        }
        Err(ResolveError::TooManyReferrals {
            handle: handle.to_string(),
        })
    }

    /// The servers a service referral for `handle` names: the sites among its values,
    /// else those of the service handle it names (a prefix handle, at the GHR).
    async fn referred_service(
        &self,
        handle: &Handle,
        named: &[u8],
        values: &[HandleValue],
    ) -> Result<Client, ResolveError> {
        let mut sites = sites::sites_of(values);
        if sites.is_empty() {
            let prefix = std::str::from_utf8(named)
                .ok()
                .and_then(crate::names::named_prefix)
                .ok_or_else(|| ResolveError::NoService {
                    prefix: handle.prefix().to_owned(),
                })?;
            sites = self.sites_of_prefix(prefix).await?;
        }
        let servers = sites::servers_of(sites, handle.as_str().as_bytes(), Purpose::Read);
        if servers.is_empty() {
            return Err(ResolveError::NoService {
                prefix: handle.prefix().to_owned(),
            });
        }
        Ok(Client::new(servers))
    }

    /// Tells the trace sink, if any, about `step`.
    fn trace(&self, step: Step) {
        if let Some(sink) = &self.trace {
            sink(&step);
        }
    }
}
