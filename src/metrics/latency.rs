//! A latency histogram recorded with a few relaxed atomic adds and no lock: its
//! buckets are fixed (50 µs doubling to about 3.3 s), so an observation finds its
//! bucket by arithmetic on its nanoseconds, not by a search. prometheus-client's own
//! `Histogram` takes a mutex for every observation, which every request of every
//! edge paid. Rendered as a classic Prometheus histogram exactly as that one is.
//!
//! Owns nothing but its counts; knows nothing of labels or of what is timed.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};

/// The upper bound of the first bucket, in nanoseconds and in seconds.
const FIRST_BOUND_NANOS: u64 = 50_000;
const FIRST_BOUND_SECONDS: f64 = 0.000_05;

/// Buckets with a finite bound: 50 µs, 100 µs, … 50 µs × 2¹⁶ (about 3.3 s).
const BOUNDED_BUCKETS: usize = 17;

/// Counts of observations, by time taken: cheap to record from many threads at once.
/// Clones share their counts.
#[derive(Debug, Clone, Default)]
pub struct Latency {
    counts: Arc<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    /// Observations in each bucket alone (not cumulated), the last one unbounded.
    buckets: [AtomicU64; BOUNDED_BUCKETS + 1],
    /// The sum of the observations, in nanoseconds.
    sum_nanos: AtomicU64,
}

impl Latency {
    /// Counts one observation of `elapsed`.
    pub fn observe(&self, elapsed: Duration) {
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.counts.buckets[bucket_of(nanos)].fetch_add(1, Ordering::Relaxed);
        self.counts.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// Each bucket's upper bound in seconds with the observations in it alone (the
    /// last bound infinite), the sum in seconds, and the count.
    fn snapshot(&self) -> (Vec<(f64, u64)>, f64, u64) {
        let buckets: Vec<(f64, u64)> = self
            .counts
            .buckets
            .iter()
            .enumerate()
            .map(|(index, count)| (upper_bound(index), count.load(Ordering::Relaxed)))
            .collect();
        let count = buckets.iter().map(|&(_, count)| count).sum();
        let sum = Duration::from_nanos(self.counts.sum_nanos.load(Ordering::Relaxed));
        (buckets, sum.as_secs_f64(), count)
    }
}

/// The bucket an observation of `nanos` falls in: the first whose bound it does not
/// exceed.
fn bucket_of(nanos: u64) -> usize {
    let multiples = nanos.div_ceil(FIRST_BOUND_NANOS);
    if multiples <= 1 {
        return 0;
    }
    // The bound of bucket k is 2^k first bounds: k is ⌈log2(multiples)⌉.
    let index = (u64::BITS - (multiples - 1).leading_zeros()) as usize;
    index.min(BOUNDED_BUCKETS)
}

/// The upper bound of bucket `index`, in seconds.
fn upper_bound(index: usize) -> f64 {
    if index >= BOUNDED_BUCKETS {
        return f64::INFINITY;
    }
    // Doubling is exact in floating point: the bounds prometheus-client's
    // `exponential_buckets(0.000_05, 2.0, 17)` gives, digit for digit.
    FIRST_BOUND_SECONDS * f64::from(1u32 << index)
}

impl TypedMetric for Latency {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for Latency {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let (buckets, sum, count) = self.snapshot();
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
    use prometheus_client::registry::Registry;

    use super::*;

    fn rendered(name: &str, metric: impl prometheus_client::registry::Metric) -> String {
        let mut registry = Registry::default();
        registry.register(name, "help", metric);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("rendered");
        text
    }

    #[test]
    fn an_observation_lands_in_the_first_bucket_whose_bound_it_does_not_exceed() {
        let cases = [
            (0, 0),
            (1, 0),
            (50_000, 0),
            (50_001, 1),
            (100_000, 1),
            (100_001, 2),
            (200_000, 2),
            (FIRST_BOUND_NANOS << 16, 16),
            ((FIRST_BOUND_NANOS << 16) + 1, 17),
            (u64::MAX, 17),
        ];
        for (nanos, bucket) in cases {
            assert_eq!(bucket_of(nanos), bucket, "{nanos} ns");
        }
    }

    #[test]
    fn renders_as_prometheus_clients_own_histogram_of_the_same_buckets() {
        let ours = Latency::default();
        let theirs = Histogram::new(exponential_buckets(0.000_05, 2.0, 17));
        let observed = [
            0,
            20_000,
            50_000,
            75_000,
            3_000_000,
            900_000_000,
            10_000_000_000,
        ];
        for nanos in observed {
            ours.observe(Duration::from_nanos(nanos));
            theirs.observe(Duration::from_nanos(nanos).as_secs_f64());
        }
        // The sums are rounded differently (ours adds nanoseconds, theirs seconds).
        let without_sum = |text: String| {
            let lines = text.lines().filter(|line| !line.starts_with("latency_sum"));
            lines.collect::<Vec<_>>().join("\n")
        };
        assert_eq!(
            without_sum(rendered("latency", ours.clone())),
            without_sum(rendered("latency", theirs))
        );
        let (_, sum, count) = ours.snapshot();
        assert_eq!(count, observed.len() as u64);
        assert!((sum - 10.903_145).abs() < 1e-9, "{sum}");
    }
}
