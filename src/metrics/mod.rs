//! The node's metrics registry: request counts by protocol, operation and response
//! code, and latency histograms by protocol and operation, rendered in the Prometheus
//! text format for `/metrics` and summarised on `/status`; requests forwarded to the
//! replica set owning their handle's slot, by kind; the UDP edge's kept answers (hits
//! and insertions); and, on a caching resolver, its cache ([`CacheMetrics`]).
//!
//! Every edge records into one shared [`Metrics`] in one place per edge (the Handle
//! protocol's responder, the HTTP edge). Recording a request is a probe of a small
//! table and three relaxed atomic adds after its label set's first use
//! ([`recorded`], [`latency`]): no lock, no hashing of labels. Depends on nothing
//! else in the crate.

mod latency;
mod recorded;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use latency::Latency;
use recorded::RecordedTable;

/// The protocol a request came in by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// The Handle protocol (RFC 3652) over TCP or UDP.
    Handle,
    /// HTTP: the JSON API, the proxy and the pages.
    Http,
}

impl Protocol {
    /// The `protocol` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Handle => "handle",
            Protocol::Http => "http",
        }
    }

    fn slot(self) -> usize {
        match self {
            Protocol::Handle => 0,
            Protocol::Http => 1,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RequestLabels {
    protocol: &'static str,
    op: &'static str,
    code: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct LatencyLabels {
    protocol: &'static str,
    op: &'static str,
}

/// What a forwarded request does: the `kind` label of `hdl_forwarded_requests_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForwardKind {
    /// A read: resolution, listing, an authorisation or key look-up.
    Read,
    /// An administrative change.
    Write,
}

impl ForwardKind {
    /// The `kind` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ForwardKind::Read => "read",
            ForwardKind::Write => "write",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ForwardLabels {
    kind: &'static str,
}

/// The label of a replica-set member's lag.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct MemberLabels {
    member: u64,
}

/// A node's replication state at one moment, as `/metrics` reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplicationState {
    /// Index of the last entry applied to the store.
    pub applied: Option<u64>,
    /// Index of the last entry in the log.
    pub last_log: Option<u64>,
    /// Whether this node is the primary.
    pub primary: bool,
    /// The Raft term.
    pub term: u64,
    /// On the primary, each other member's lag in log entries.
    pub lag: Vec<(u64, u64)>,
    /// Snapshots this node installed, sent by its primary, since it started.
    pub snapshots_installed: u64,
    /// The octets of snapshot data it received for them.
    pub snapshot_octets_installed: u64,
}

/// The metrics of one node, shared by every listener.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: Family<LatencyLabels, Latency>,
    recorded: RecordedTable,
    uptime: Gauge,
    applied: Gauge,
    last_log: Gauge,
    primary: Gauge,
    term: Gauge,
    lag: Family<MemberLabels, Gauge>,
    snapshots_installed: Counter,
    snapshot_octets_installed: Counter,
    forwarded: Family<ForwardLabels, Counter>,
    handed_off: Counter,
    answer_cache_hits: Counter,
    answer_cache_insertions: Counter,
    totals: [AtomicU64; 2],
    started: Instant,
}

/// A counter registered in `registry` under `name`, described by `help`.
fn registered_counter(registry: &mut Registry, name: &str, help: &str) -> Counter {
    let counter = Counter::default();
    registry.register(name, help, counter.clone());
    counter
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// An empty registry; uptime counts from now.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("hdl");
        let requests = Family::<RequestLabels, Counter>::default();
        let latency = Family::<LatencyLabels, Latency>::default();
        let uptime = Gauge::default();
        registry.register(
            "requests",
            "Requests answered, by protocol, operation and response code",
            requests.clone(),
        );
        registry.register(
            "request_duration_seconds",
            "Time from a request's arrival to its answer, by protocol and operation",
            latency.clone(),
        );
        registry.register(
            "uptime_seconds",
            "Seconds since the node started",
            uptime.clone(),
        );
        let (applied, last_log, primary) = (Gauge::default(), Gauge::default(), Gauge::default());
        registry.register(
            "raft_applied_index",
            "Index of the last replicated log entry applied to this node's store (an apply a secondary holds uncommitted, for at most 5 ms, counted)",
            applied.clone(),
        );
        registry.register(
            "raft_last_log_index",
            "Index of the last entry in this node's replicated log",
            last_log.clone(),
        );
        registry.register(
            "raft_is_primary",
            "1 when this node is its replica set's primary",
            primary.clone(),
        );
        let (term, lag) = (Gauge::default(), Family::<MemberLabels, Gauge>::default());
        registry.register("raft_term", "The Raft term this node is in", term.clone());
        registry.register(
            "replication_lag_entries",
            "On the primary: log entries each other member has not received yet",
            lag.clone(),
        );
        let snapshots_installed = registered_counter(
            &mut registry,
            "raft_snapshots_installed",
            "Snapshots this node installed, sent by its primary to catch up, since it started",
        );
        let snapshot_octets_installed = registered_counter(
            &mut registry,
            "raft_snapshot_octets_installed",
            "Octets of snapshot data this node received for the snapshots it installed, since it started",
        );
        let forwarded = Family::<ForwardLabels, Counter>::default();
        registry.register(
            "forwarded_requests",
            "Requests this node sent on to another node of the set owning their handle's slot, by kind",
            forwarded.clone(),
        );
        let handed_off = registered_counter(
            &mut registry,
            "udp_answers_handed_off",
            "Resolutions over UDP answered on a reader thread rather than in the receiving loop, the store being read from the disk",
        );
        let answer_cache_hits = registered_counter(
            &mut registry,
            "udp_answer_cache_hits",
            "Resolutions over UDP answered with a copy of a kept answer",
        );
        let answer_cache_insertions = registered_counter(
            &mut registry,
            "udp_answer_cache_insertions",
            "Answers to resolutions over UDP kept for later requests",
        );
        Metrics {
            registry,
            requests,
            latency,
            recorded: RecordedTable::default(),
            uptime,
            applied,
            last_log,
            primary,
            term,
            lag,
            snapshots_installed,
            snapshot_octets_installed,
            forwarded,
            handed_off,
            answer_cache_hits,
            answer_cache_insertions,
            totals: [AtomicU64::new(0), AtomicU64::new(0)],
            started: Instant::now(),
        }
    }

    /// Records one answered request: `op` names the operation, `code` the outcome (a
    /// Handle protocol response code, or an HTTP status).
    pub fn record(&self, protocol: Protocol, op: &'static str, code: u32, elapsed: Duration) {
        let labels = || {
            let requests = RequestLabels {
                protocol: protocol.as_str(),
                op,
                code,
            };
            let latency = LatencyLabels {
                protocol: protocol.as_str(),
                op,
            };
            (requests, latency)
        };
        let counts = || {
            let (requests, latency) = labels();
            let requests = self.requests.get_or_create_owned(&requests);
            (requests, self.latency.get_or_create_owned(&latency))
        };
        match self.recorded.get_or_make(protocol, op, code, counts) {
            Some(recorded) => {
                recorded.requests.inc();
                recorded.latency.observe(elapsed);
            }
            None => {
                let (requests, latency) = labels();
                self.requests.get_or_create(&requests).inc();
                self.latency.get_or_create(&latency).observe(elapsed);
            }
        }
        self.totals[protocol.slot()].fetch_add(1, Ordering::Relaxed);
    }

    /// Records one request sent on to the set owning its handle's slot.
    pub fn forwarded(&self, kind: ForwardKind) {
        let labels = ForwardLabels {
            kind: kind.as_str(),
        };
        self.forwarded.get_or_create(&labels).inc();
    }

    /// Counts one resolution over UDP handed to a reader thread.
    pub fn handed_off(&self) {
        self.handed_off.inc();
    }

    /// Counts one resolution over UDP answered with a copy of a kept answer.
    pub fn answer_cache_hit(&self) {
        self.answer_cache_hits.inc();
    }

    /// Counts one answer to a resolution over UDP kept for later requests.
    pub fn answer_cache_inserted(&self) {
        self.answer_cache_insertions.inc();
    }

    /// Requests answered by `protocol` since the start.
    pub fn total(&self, protocol: Protocol) -> u64 {
        self.totals[protocol.slot()].load(Ordering::Relaxed)
    }

    /// Time since the registry was made.
    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// Records the node's replication state as of now (read when `/metrics` is asked);
    /// an index not yet known is -1. Lag is reported only while this node is primary.
    pub fn observe_replication(&self, state: &ReplicationState) {
        let gauge = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
        let index = |index: Option<u64>| index.map_or(-1, gauge);
        self.applied.set(index(state.applied));
        self.last_log.set(index(state.last_log));
        self.primary.set(i64::from(state.primary));
        self.term.set(gauge(state.term));
        let counted = self.snapshots_installed.get();
        self.snapshots_installed
            .inc_by(state.snapshots_installed.saturating_sub(counted));
        let counted = self.snapshot_octets_installed.get();
        self.snapshot_octets_installed
            .inc_by(state.snapshot_octets_installed.saturating_sub(counted));
        self.lag.clear();
        for &(member, entries) in &state.lag {
            self.lag
                .get_or_create(&MemberLabels { member })
                .set(gauge(entries));
        }
    }

    /// Registers the metrics of a caching resolver's cache (`hdl_cache_…`), which
    /// its handler records into; only a caching resolver has them.
    pub fn register_cache(&mut self) -> CacheMetrics {
        let cache = CacheMetrics {
            hits: Counter::default(),
            negative_hits: Counter::default(),
            misses: Counter::default(),
            coalesced: Counter::default(),
            evictions: Counter::default(),
            upstream: Family::default(),
            upstream_latency: Latency::default(),
            bytes: Gauge::default(),
            entries: Gauge::default(),
        };
        let registry = &mut self.registry;
        let counters = [
            (
                "cache_hits",
                "Resolutions answered with values from the cache",
                &cache.hits,
            ),
            (
                "cache_negative_hits",
                "Resolutions answered \"not found\" from the cache",
                &cache.negative_hits,
            ),
            (
                "cache_misses",
                "Resolutions the cache held no answer for",
                &cache.misses,
            ),
            (
                "cache_coalesced",
                "Misses answered by another request's upstream resolution",
                &cache.coalesced,
            ),
            (
                "cache_evictions",
                "Answers dropped, least recently used, to stay within the bound",
                &cache.evictions,
            ),
        ];
        for (name, help, counter) in counters {
            registry.register(name, help, counter.clone());
        }
        registry.register(
            "cache_upstream_requests",
            "Resolutions sent upstream (through the GHR), by outcome",
            cache.upstream.clone(),
        );
        registry.register(
            "cache_upstream_duration_seconds",
            "Time an upstream resolution took",
            cache.upstream_latency.clone(),
        );
        registry.register(
            "cache_bytes",
            "Bytes the cache holds, by its count",
            cache.bytes.clone(),
        );
        registry.register(
            "cache_entries",
            "Answers the cache holds",
            cache.entries.clone(),
        );
        cache
    }

    /// Every metric in the Prometheus text exposition format.
    pub fn render(&self) -> String {
        let seconds = i64::try_from(self.uptime().as_secs()).unwrap_or(i64::MAX);
        self.uptime.set(seconds);
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

/// How an upstream resolution ended: the `outcome` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamOutcome {
    /// The values.
    Values,
    /// Not found: no such handle, no such value, no service for the prefix.
    Negative,
    /// It failed.
    Error,
}

impl UpstreamOutcome {
    /// The `outcome` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            UpstreamOutcome::Values => "values",
            UpstreamOutcome::Negative => "negative",
            UpstreamOutcome::Error => "error",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

/// A caching resolver's cache, as `/metrics` shows it ([`Metrics::register_cache`]).
#[derive(Debug, Clone)]
pub struct CacheMetrics {
    hits: Counter,
    negative_hits: Counter,
    misses: Counter,
    coalesced: Counter,
    evictions: Counter,
    upstream: Family<OutcomeLabels, Counter>,
    upstream_latency: Latency,
    bytes: Gauge,
    entries: Gauge,
}

impl CacheMetrics {
    /// A resolution answered from the cache: with values, or negatively.
    pub fn hit(&self, negative: bool) {
        if negative {
            self.negative_hits.inc();
        } else {
            self.hits.inc();
        }
    }

    /// A resolution the cache held no answer for; `coalesced` when it waited for
    /// another's upstream request.
    pub fn miss(&self, coalesced: bool) {
        self.misses.inc();
        if coalesced {
            self.coalesced.inc();
        }
    }

    /// One upstream resolution, how it ended and how long it took.
    pub fn upstream(&self, outcome: UpstreamOutcome, elapsed: Duration) {
        let labels = OutcomeLabels {
            outcome: outcome.as_str(),
        };
        self.upstream.get_or_create(&labels).inc();
        self.upstream_latency.observe(elapsed);
    }

    /// What the cache holds now, and how many answers it just evicted.
    pub fn held(&self, bytes: usize, entries: usize, evicted: usize) {
        let gauge = |value: usize| i64::try_from(value).unwrap_or(i64::MAX);
        self.bytes.set(gauge(bytes));
        self.entries.set(gauge(entries));
        self.evictions
            .inc_by(u64::try_from(evicted).unwrap_or(u64::MAX));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_label_set_is_counted_whether_the_table_holds_it_or_not() {
        let metrics = Metrics::new();
        for code in 0..200 {
            for _ in 0..=code % 3 {
                metrics.record(
                    Protocol::Handle,
                    "resolution",
                    code,
                    Duration::from_micros(60),
                );
            }
        }
        let text = metrics.render();
        for code in 0..200 {
            let line = format!(
                r#"hdl_requests_total{{protocol="handle",op="resolution",code="{code}"}} {}"#,
                code % 3 + 1
            );
            assert!(text.lines().any(|l| l == line), "{line} missing");
        }
        let count = r#"hdl_request_duration_seconds_count{protocol="handle",op="resolution"} 399"#;
        assert!(text.lines().any(|l| l == count), "{text}");
        let bucket = r#"hdl_request_duration_seconds_bucket{le="0.0001",protocol="handle",op="resolution"} 399"#;
        assert!(text.contains(bucket), "{text}");
    }

    #[test]
    fn records_show_up_in_the_text_format() {
        let metrics = Metrics::new();
        metrics.record(Protocol::Handle, "resolution", 1, Duration::from_micros(80));
        metrics.record(
            Protocol::Handle,
            "resolution",
            100,
            Duration::from_millis(2),
        );
        metrics.record(Protocol::Http, "api_get", 200, Duration::from_millis(1));
        let text = metrics.render();
        assert!(
            text.contains(r#"hdl_requests_total{protocol="handle",op="resolution",code="100"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(
                r#"hdl_request_duration_seconds_count{protocol="handle",op="resolution"} 2"#
            ),
            "{text}"
        );
        assert!(text.contains("hdl_uptime_seconds"), "{text}");
        metrics.forwarded(ForwardKind::Write);
        let text = metrics.render();
        assert!(
            text.contains(r#"hdl_forwarded_requests_total{kind="write"} 1"#),
            "{text}"
        );
        assert_eq!(metrics.total(Protocol::Handle), 2);
        assert_eq!(metrics.total(Protocol::Http), 1);
        assert!(
            !text.contains("hdl_cache"),
            "only a caching resolver has them"
        );
    }

    #[test]
    fn a_caching_resolver_shows_its_cache() {
        let mut metrics = Metrics::new();
        let cache = metrics.register_cache();
        cache.hit(false);
        cache.hit(true);
        cache.miss(true);
        cache.upstream(UpstreamOutcome::Values, Duration::from_millis(3));
        cache.held(4096, 3, 2);
        let text = metrics.render();
        for line in [
            "hdl_cache_hits_total 1",
            "hdl_cache_negative_hits_total 1",
            "hdl_cache_misses_total 1",
            "hdl_cache_coalesced_total 1",
            "hdl_cache_evictions_total 2",
            r#"hdl_cache_upstream_requests_total{outcome="values"} 1"#,
            "hdl_cache_upstream_duration_seconds_count 1",
            "hdl_cache_bytes 4096",
            "hdl_cache_entries 3",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
    }
}
