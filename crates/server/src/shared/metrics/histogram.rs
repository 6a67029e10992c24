//! A lock-free duration histogram.
//!
//! prometheus-client's `Histogram` keeps its buckets behind a `Mutex`, so every observation would
//! take a lock shared by all worker threads serving the same route or upstream server. This one
//! is a fixed array of atomic counters: an observation is a binary search over 16 integers and
//! two relaxed `fetch_add`s, with no lock and no allocation. It encodes through prometheus-client's
//! own histogram encoder, so the exposition is the same.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};

/// Upper bounds of the buckets, in microseconds (exact integers, so an observation is compared
/// without floating point). From 100 µs (a cached or static response on loopback) to 10 s (a
/// slow upstream near its timeout); slower observations land in `+Inf`.
const BOUNDS_US: [u64; 16] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000,
];

/// The same bounds in nanoseconds, the unit observations are counted in.
const BOUNDS_NS: [u64; BOUNDS_US.len()] = {
    let mut ns = [0; BOUNDS_US.len()];
    let mut i = 0;
    while i < ns.len() {
        ns[i] = BOUNDS_US[i] * 1_000;
        i += 1;
    }
    ns
};

/// The bucket bounds in seconds, as exposed in the `le` label.
pub fn bucket_bounds_seconds() -> impl Iterator<Item = f64> {
    BOUNDS_US.iter().map(|&us| us as f64 / 1e6)
}

/// A histogram of durations in seconds. Clones share their counters.
#[derive(Clone, Debug, Default)]
pub struct DurationHistogram {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Non-cumulative counts: `buckets[i]` counts observations in `(BOUNDS[i-1], BOUNDS[i]]`;
    /// the last one counts those above every bound (`+Inf`).
    buckets: [AtomicU64; BOUNDS_NS.len() + 1],
    /// Sum of all observations in nanoseconds: an integer add instead of a compare-and-swap loop
    /// on an `f64`; it overflows after 584 years of summed request time.
    sum_ns: AtomicU64,
}

impl DurationHistogram {
    pub fn observe(&self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        // Prometheus buckets are "less than or equal": the first bound >= the value.
        let bucket = BOUNDS_NS.partition_point(|&bound| bound < ns);
        self.inner.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.inner.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// How many observations were made (the `_count` sample).
    pub fn count(&self) -> u64 {
        self.inner
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .sum()
    }

    /// Sum of the observations in seconds (the `_sum` sample).
    pub fn sum_seconds(&self) -> f64 {
        self.inner.sum_ns.load(Ordering::Relaxed) as f64 / 1e9
    }
}

impl TypedMetric for DurationHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for DurationHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let buckets: Vec<(f64, u64)> = bucket_bounds_seconds()
            .chain(std::iter::once(f64::INFINITY))
            .zip(self.inner.buckets.iter().map(|b| b.load(Ordering::Relaxed)))
            .collect();
        // `_count` is the sum of the buckets read here, not a separate counter: with concurrent
        // observations a separate read could disagree with the `+Inf` bucket, which Prometheus
        // requires to be equal.
        let count = buckets.iter().map(|&(_, n)| n).sum();
        encoder.encode_histogram::<NoLabelSet>(self.sum_seconds(), count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(h: &DurationHistogram) -> Vec<u64> {
        h.inner
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect()
    }

    #[test]
    fn bounds_are_sorted_and_match_in_both_units() {
        assert!(BOUNDS_US.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(BOUNDS_NS[0], 100_000);
        let seconds: Vec<f64> = bucket_bounds_seconds().collect();
        assert_eq!(seconds.first(), Some(&0.0001));
        assert_eq!(seconds.last(), Some(&10.0));
    }

    #[test]
    fn observation_on_a_bound_counts_in_that_bucket() {
        let h = DurationHistogram::default();
        h.observe(Duration::from_micros(100)); // le=0.0001
        h.observe(Duration::from_nanos(100_001)); // le=0.00025
        h.observe(Duration::ZERO); // le=0.0001
        h.observe(Duration::from_secs(60)); // +Inf
        let c = counts(&h);
        assert_eq!(c[0], 2);
        assert_eq!(c[1], 1);
        assert_eq!(c[BOUNDS_NS.len()], 1);
        assert_eq!(h.count(), 4);
        assert!((h.sum_seconds() - 60.000_200_001).abs() < 1e-9);
    }

    #[test]
    fn clones_share_counts() {
        let h = DurationHistogram::default();
        h.clone().observe(Duration::from_millis(3));
        assert_eq!(h.count(), 1);
    }

    #[test]
    fn huge_durations_saturate_instead_of_panicking() {
        let h = DurationHistogram::default();
        h.observe(Duration::MAX);
        assert_eq!(h.count(), 1);
    }
}
