//! The caching resolver (`hdl serve --cache`): a [`Handler`] with no store of its
//! own, answering resolutions of any handle by global resolution through a
//! [`Resolver`] (digest §9) and keeping the answers for their TTLs.
//!
//! Owns [`CachingResolver`] and [`CacheSettings`]; the cache of answers by handle and
//! value selection ([`answers`]: LRU within a bound in bytes) and the coalescing of
//! concurrent misses ([`flights`]: one upstream request per key at a time, at most
//! [`CacheSettings::max_pending`] keys under way). An answer with values is kept for
//! the shortest TTL among them (relative TTLs from when it was fetched, absolute ones
//! until their time, RFC 3651 §3.2; at most a day); "handle not found", "values not
//! found" and "no service for the prefix" for [`CacheSettings::negative_ttl`]. A
//! request with the AT flag (authoritative) is sent upstream, with the flag, whatever
//! the cache holds, and what it brings back replaces the cached answer. HS_ALIAS values are
//! answered as they are, as any server does: the client (or the web proxy) follows
//! them. Everything that is not a resolution — administration, sessions, listing,
//! search, authentication — is refused with RC 5 (operation not supported), saying
//! that this is a caching resolver.
//!
//! May depend on [`crate::names`], [`crate::values`], [`crate::codec`] and
//! [`crate::auth`] (the types the seam speaks), [`crate::metrics`],
//! [`crate::resolver`] and [`crate::service`] (the seam it implements, its errors
//! and records); it must not touch storage, replication, placement or sockets: the
//! edges in front of it are the node's own, and it holds nothing but answers.

pub mod answers;
pub mod flights;

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;

use crate::auth::{Challenge, ChallengeAnswer, Identity};
use crate::codec::{KeyExchange, ProtocolVersion, ResponseCode, VerifyRequest};
use crate::metrics::{CacheMetrics, UpstreamOutcome};
use crate::names::Handle;
use crate::resolver::cache::shortest_ttl;
use crate::resolver::{Recency, ResolveError, Resolver};
use crate::service::{
    Applied, Caller, ClientRequest, Error, Found, Freshness, HandleRecord, Handler, KeyAgreement,
    Missing, Operation, PrefixRecord, PrivateRead, SearchPosition, Status,
};
use crate::values::{HandleValue, SearchQuery, SiteInfo, ValueSelection};

use answers::{Answer, AnswerCache, CacheKey};
use flights::{FlightError, Flights, Joined};

/// How a caching resolver caches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheSettings {
    /// The most bytes its answers may take ([`answers::entry_size`]).
    pub max_bytes: usize,
    /// How long a negative answer is kept.
    pub negative_ttl: Duration,
    /// The most distinct resolutions under way upstream at once; a miss beyond them
    /// is answered busy (3).
    pub max_pending: usize,
}

/// The bytes of answers ([`answers::entry_size`]) a caching resolver with
/// `[cache] max_mib` holds: half of it. The other half is left for what malloc keeps
/// beside the blocks the answers hold (blocks freed by evictions and not yet reused,
/// and the hash map's table while it grows): in a running `hdl serve --cache`, the
/// resident memory the answers added was up to 1.58 times the bytes counted under
/// mimalloc with a node's settings, 1.26 under glibc with two arenas (README, "Caching
/// resolver").
pub fn answer_bytes(max_mib: usize) -> usize {
    (max_mib << 20) / 2
}

/// The most distinct resolutions a caching resolver sends upstream at once.
pub const DEFAULT_MAX_PENDING: usize = 10_000;

/// What an upstream resolution came to, as every asker of its key gets it.
type Outcome = Result<Answer, Arc<ResolveError>>;

/// A [`Handler`] answering resolutions from its cache, else through the GHR.
#[derive(Debug, Clone)]
pub struct CachingResolver {
    shared: Arc<Shared>,
    flights: Arc<Flights<CacheKey, Outcome>>,
}

/// What the handler and its upstream tasks share.
#[derive(Debug)]
struct Shared {
    resolver: Resolver,
    answers: Mutex<AnswerCache>,
    settings: CacheSettings,
    metrics: CacheMetrics,
    site: SiteInfo,
    status: Status,
}

impl CachingResolver {
    /// A caching resolver asking through `resolver`, recording into `metrics`, and
    /// describing itself with `site` and `status`.
    pub fn new(
        resolver: Resolver,
        settings: CacheSettings,
        metrics: CacheMetrics,
        site: SiteInfo,
        status: Status,
    ) -> Self {
        let shared = Shared {
            resolver,
            answers: Mutex::new(AnswerCache::new(settings.max_bytes)),
            settings,
            metrics,
            site,
            status,
        };
        CachingResolver {
            shared: Arc::new(shared),
            flights: Arc::new(Flights::new(settings.max_pending)),
        }
    }

    /// The answer for `key`: from the cache, else from the upstream request under way
    /// for it, else from a new one.
    async fn cached_or_fetched(
        &self,
        handle: &Handle,
        selection: &ValueSelection,
        key: CacheKey,
    ) -> Result<Answer, Error> {
        if let Some(answer) = self.shared.cached(&key) {
            return Ok(answer);
        }
        let shared = Arc::clone(&self.shared);
        let fetch = {
            let (handle, selection, key) = (handle.clone(), selection.clone(), key.clone());
            async move { shared.fetch(&handle, &selection, key, Recency::Any).await }
        };
        let ready = || self.shared.cached(&key).map(Ok);
        let joined = self.flights.join(key.clone(), ready, fetch).await;
        let (outcome, how) = joined.map_err(|error| match error {
            FlightError::TooMany { limit } => Error::TooManyPending { limit },
            // Only a panic in the upstream task loses its outcome.
            lost @ FlightError::Lost => Error::Remote {
                code: ResponseCode::Error,
                message: lost.to_string(),
            },
        })?;
        if how != Joined::Ready {
            self.shared.metrics.miss(how == Joined::Waited);
        }
        outcome.map_err(Error::Upstream)
    }
}

impl Shared {
    /// The cached answer for `key`, counted as a hit. An expired one is dropped (and
    /// what the cache holds told to the metrics).
    fn cached(&self, key: &CacheKey) -> Option<Answer> {
        let mut answers = self.answers();
        match answers.get(key, Instant::now()) {
            Some(answer) => {
                self.metrics.hit(answer.is_negative());
                Some(answer)
            }
            None => {
                self.metrics.held(answers.bytes(), answers.len(), 0);
                None
            }
        }
    }

    /// Resolves `handle` upstream, as current as `recency` asks, and caches what it
    /// learns.
    async fn fetch(
        &self,
        handle: &Handle,
        selection: &ValueSelection,
        key: CacheKey,
        recency: Recency,
    ) -> Outcome {
        let started = Instant::now();
        let resolved = self.resolver.resolve_as_current(handle, selection, recency);
        let resolved = resolved.await;
        let outcome = classify(handle, resolved);
        let label = match &outcome {
            Ok(answer) if answer.is_negative() => UpstreamOutcome::Negative,
            Ok(_) => UpstreamOutcome::Values,
            Err(_) => UpstreamOutcome::Error,
        };
        self.metrics.upstream(label, started.elapsed());
        if let Ok(answer) = &outcome {
            self.keep(key, answer.clone());
        }
        outcome.map_err(Arc::new)
    }

    /// Caches `answer` for its TTL.
    fn keep(&self, key: CacheKey, answer: Answer) {
        let ttl = match &answer {
            Answer::Values(record) => shortest_ttl(&record.values),
            Answer::HandleNotFound | Answer::ValuesNotFound => self.settings.negative_ttl,
        };
        let mut answers = self.answers();
        let inserted = answers.insert(key, answer, ttl, Instant::now());
        self.metrics
            .held(answers.bytes(), answers.len(), inserted.evicted);
    }

    fn answers(&self) -> MutexGuard<'_, AnswerCache> {
        self.answers.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The answer an upstream resolution of `handle` gave, negative ones included.
fn classify(
    handle: &Handle,
    resolved: Result<Vec<HandleValue>, ResolveError>,
) -> Result<Answer, ResolveError> {
    match resolved {
        Ok(values) if values.is_empty() => Ok(Answer::ValuesNotFound),
        Ok(values) => Ok(Answer::Values(Arc::new(HandleRecord {
            display: handle.as_str().to_owned(),
            values,
        }))),
        Err(error) => match error.response_code() {
            ResponseCode::HandleNotFound => Ok(Answer::HandleNotFound),
            ResponseCode::ValuesNotFound => Ok(Answer::ValuesNotFound),
            _ => Err(error),
        },
    }
}

/// The resolution's result for an answer.
fn record_of(answer: Answer) -> Result<HandleRecord, Error> {
    match answer {
        Answer::Values(record) => Ok(HandleRecord::clone(&record)),
        Answer::HandleNotFound => Err(Error::HandleNotFound),
        Answer::ValuesNotFound => Err(Error::ValuesNotFound),
    }
}

/// The refusal of `request`, which only the handle's own service carries out.
fn not_here<T>(request: &'static str) -> Result<T, Error> {
    Err(Error::ResolutionOnly { request })
}

#[async_trait]
impl Handler for CachingResolver {
    async fn resolve(
        &self,
        handle: &Handle,
        selection: &ValueSelection,
        freshness: Freshness,
    ) -> Result<HandleRecord, Error> {
        let key = CacheKey::new(handle, selection);
        let answer = match freshness {
            Freshness::Local => self.cached_or_fetched(handle, selection, key).await?,
            Freshness::Authoritative => {
                self.shared.metrics.miss(false);
                let fetched = self
                    .shared
                    .fetch(handle, selection, key, Recency::Authoritative);
                let fetched = fetched.await;
                fetched.map_err(Error::Upstream)?
            }
        };
        record_of(answer)
    }

    async fn missing(
        &self,
        _handle: &Handle,
        _selection: &ValueSelection,
    ) -> Result<Missing, Error> {
        // Resolution already went wherever the handle lives (whose service derives
        // what its templates make): "not found" is the answer.
        Ok(Missing::NotFound)
    }

    async fn private_read(
        &self,
        _handle: &Handle,
        _selection: &ValueSelection,
    ) -> Result<PrivateRead, Error> {
        // Only public values are fetched and answered.
        Ok(PrivateRead::Public)
    }

    async fn resolve_all(
        &self,
        _caller: &Caller,
        _handle: &Handle,
        _selection: &ValueSelection,
        _freshness: Freshness,
    ) -> Result<HandleRecord, Error> {
        not_here("reading values that are not public")
    }

    async fn administer(&self, _caller: &Caller, _operation: Operation) -> Result<Applied, Error> {
        not_here("administration")
    }

    async fn administer_request(
        &self,
        _caller: &Caller,
        _operation: Operation,
        _request: ClientRequest,
    ) -> Result<Applied, Error> {
        not_here("administration")
    }

    async fn mint(
        &self,
        _caller: &Caller,
        _base: &str,
        _values: Vec<HandleValue>,
    ) -> Result<(Handle, Applied), Error> {
        not_here("administration")
    }

    async fn count_handles(&self, _caller: &Caller, _prefix: &str) -> Result<u64, Error> {
        not_here("listing handles")
    }

    async fn list_handles(
        &self,
        _caller: &Caller,
        _prefix: &str,
        _after: Option<&Handle>,
        _limit: usize,
    ) -> Result<Vec<String>, Error> {
        not_here("listing handles")
    }

    async fn search_handles(
        &self,
        _caller: &Caller,
        _query: &SearchQuery,
        _after: Option<&SearchPosition>,
        _limit: usize,
    ) -> Result<Vec<Found>, Error> {
        not_here("search")
    }

    async fn list_prefixes(&self, _caller: &Caller) -> Result<Vec<PrefixRecord>, Error> {
        not_here("listing prefixes")
    }

    async fn site_info(&self) -> SiteInfo {
        self.shared.site.clone()
    }

    fn status(&self) -> Status {
        self.shared.status.clone()
    }

    async fn verify_answer(
        &self,
        _challenge: &Challenge,
        _answer: &ChallengeAnswer,
    ) -> Result<Identity, Error> {
        not_here("authentication (administration)")
    }

    async fn verify_secret(&self, _identity: &Identity, _secret: &[u8]) -> Result<Identity, Error> {
        not_here("authentication (administration)")
    }

    async fn verify_for_other_server(
        &self,
        _request: &VerifyRequest,
        _version: ProtocolVersion,
    ) -> Result<bool, Error> {
        not_here("checking answers for other servers")
    }

    async fn key_exchange(&self, _exchange: KeyExchange) -> Result<KeyAgreement, Error> {
        not_here("sessions")
    }
}
