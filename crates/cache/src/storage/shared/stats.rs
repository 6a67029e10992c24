//! The shared tier's counters, read by the server's `/metrics`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the lookup latency histogram, in seconds (Prometheus `le`), then +Inf.
pub const LATENCY_BUCKETS: [f64; 9] = [
    0.000_25, 0.000_5, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1,
];

#[derive(Default)]
pub struct SharedStats {
    /// Lookups asked of the tier (local misses), by result.
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub errors: AtomicU64,
    pub timeouts: AtomicU64,
    /// Not tried: breaker open or no connection.
    pub skipped: AtomicU64,
    pub writes: AtomicU64,
    pub writes_dropped: AtomicU64,
    /// Purges whose removal from the tier failed (the entry may be served until its TTL).
    pub removes_failed: AtomicU64,
    /// Purges published to the other instances, and received from them.
    pub purges_sent: AtomicU64,
    pub purges_received: AtomicU64,
    /// Local flushes of the zone after a gap in the purge channel (or a recovered tier).
    pub gap_flushes: AtomicU64,
    pub bytes_read: AtomicU64,
    pub bytes_written: AtomicU64,
    /// Latency histogram of lookups that went to the server: counts per bucket (the last is
    /// +Inf), and the sum in microseconds.
    latency: [AtomicU64; LATENCY_BUCKETS.len() + 1],
    latency_sum_us: AtomicU64,
}

impl SharedStats {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    pub fn observe(&self, took: Duration) {
        let secs = took.as_secs_f64();
        let bucket = LATENCY_BUCKETS
            .iter()
            .position(|le| secs <= *le)
            .unwrap_or(LATENCY_BUCKETS.len());
        self.latency[bucket].fetch_add(1, Ordering::Relaxed);
        self.latency_sum_us.fetch_add(
            u64::try_from(took.as_micros()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }

    /// Counts per bucket (not cumulative; the last is +Inf) and the sum in seconds.
    pub fn latency(&self) -> (Vec<u64>, f64) {
        let counts = self
            .latency
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        let sum = self.latency_sum_us.load(Ordering::Relaxed) as f64 / 1e6;
        (counts, sum)
    }
}
