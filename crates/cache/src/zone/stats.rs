//! A zone's counters, read by the server's `/metrics`. Plain atomics: a hit adds to two of them.

use std::sync::atomic::{AtomicU64, Ordering};

use sluice_core::ContentCoding;

/// How a request was answered, as `X-Cache-Status` says it (nginx's `$upstream_cache_status`
/// words, plus `REVALIDATED` on a 304 from the origin).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CacheStatus {
    /// Fresh stored response.
    Hit,
    /// Nothing stored (or nothing usable): went upstream.
    Miss,
    /// Stored but stale, and the origin sent a new response.
    Expired,
    /// Stale response served (origin failing, or `stale-while-revalidate` started a refresh).
    Stale,
    /// Stale response served while another request's refresh is in flight.
    Updating,
    /// Stale, revalidated with the origin (304), served from storage.
    Revalidated,
    /// The route's `bypass` condition sent the request upstream.
    Bypass,
}

impl CacheStatus {
    pub const ALL: [CacheStatus; 7] = [
        CacheStatus::Hit,
        CacheStatus::Miss,
        CacheStatus::Expired,
        CacheStatus::Stale,
        CacheStatus::Updating,
        CacheStatus::Revalidated,
        CacheStatus::Bypass,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            CacheStatus::Hit => "HIT",
            CacheStatus::Miss => "MISS",
            CacheStatus::Expired => "EXPIRED",
            CacheStatus::Stale => "STALE",
            CacheStatus::Updating => "UPDATING",
            CacheStatus::Revalidated => "REVALIDATED",
            CacheStatus::Bypass => "BYPASS",
        }
    }

    /// Lowercase, for metric labels and the JSON log.
    pub const fn label(self) -> &'static str {
        match self {
            CacheStatus::Hit => "hit",
            CacheStatus::Miss => "miss",
            CacheStatus::Expired => "expired",
            CacheStatus::Stale => "stale",
            CacheStatus::Updating => "updating",
            CacheStatus::Revalidated => "revalidated",
            CacheStatus::Bypass => "bypass",
        }
    }

    const fn index(self) -> usize {
        match self {
            CacheStatus::Hit => 0,
            CacheStatus::Miss => 1,
            CacheStatus::Expired => 2,
            CacheStatus::Stale => 3,
            CacheStatus::Updating => 4,
            CacheStatus::Revalidated => 5,
            CacheStatus::Bypass => 6,
        }
    }
}

/// Counters of one zone.
#[derive(Default)]
pub struct Stats {
    statuses: [AtomicU64; 7],
    /// Requests that waited for another request's miss instead of going upstream.
    pub collapsed: AtomicU64,
    /// Followers whose lock timeout passed first.
    pub lock_timeouts: AtomicU64,
    /// Body bytes sent from stored objects.
    pub bytes_served: AtomicU64,
    /// Objects committed to storage.
    pub stored: AtomicU64,
    /// Stored variants made, per coding ([`ContentCoding::index`]): one compression (or
    /// decoding) each, whatever the number of hits they serve.
    variants_made: [AtomicU64; ContentCoding::ALL.len()],
    /// Responses not stored because storage failed (disk full, I/O error).
    pub store_errors: AtomicU64,
    /// Responses not stored because they outgrew the max object size.
    pub too_large: AtomicU64,
    /// Stale responses served because the origin failed (`stale-if-error`, `use_stale`).
    pub stale_on_error: AtomicU64,
    /// Background refreshes started (`stale-while-revalidate`).
    pub refreshes: AtomicU64,
    /// Entries removed by purge requests or unsafe methods (RFC 9111 §4.4).
    pub invalidated: AtomicU64,
}

impl Stats {
    pub fn count(&self, status: CacheStatus) {
        self.statuses[status.index()].fetch_add(1, Ordering::Relaxed);
    }

    pub fn status(&self, status: CacheStatus) -> u64 {
        self.statuses[status.index()].load(Ordering::Relaxed)
    }

    pub fn variant_made(&self, coding: ContentCoding) {
        self.variants_made[coding.index()].fetch_add(1, Ordering::Relaxed);
    }

    pub fn variants_made(&self, coding: ContentCoding) -> u64 {
        self.variants_made[coding.index()].load(Ordering::Relaxed)
    }

    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}
