//! Cache metrics, read from the zones' own counters at scrape time. A zone already counts in
//! atomics (the request path adds to them once); a collector encodes them when Prometheus asks,
//! so nothing is mirrored and a zone that outlives a reload keeps its numbers.

use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use sluice_cache::zone::{CacheStatus, Stats, Zone};
use sluice_core::ContentCoding;

pub const CACHE_REQUESTS_TOTAL: &str = "sluice_cache_requests_total";
pub const CACHE_COLLAPSED_TOTAL: &str = "sluice_cache_collapsed_total";
pub const CACHE_LOCK_TIMEOUTS_TOTAL: &str = "sluice_cache_lock_timeouts_total";
pub const CACHE_SERVED_BYTES_TOTAL: &str = "sluice_cache_served_bytes_total";
pub const CACHE_STORED_TOTAL: &str = "sluice_cache_stored_total";
pub const CACHE_VARIANTS_MADE_TOTAL: &str = "sluice_cache_variants_made_total";
pub const CACHE_STORE_ERRORS_TOTAL: &str = "sluice_cache_store_errors_total";
pub const CACHE_TOO_LARGE_TOTAL: &str = "sluice_cache_too_large_total";
pub const CACHE_STALE_ON_ERROR_TOTAL: &str = "sluice_cache_stale_on_error_total";
pub const CACHE_REFRESHES_TOTAL: &str = "sluice_cache_refreshes_total";
pub const CACHE_INVALIDATED_TOTAL: &str = "sluice_cache_invalidated_total";
pub const CACHE_OBJECTS: &str = "sluice_cache_objects";
pub const CACHE_BYTES: &str = "sluice_cache_bytes";
pub const CACHE_EVICTIONS_TOTAL: &str = "sluice_cache_evictions_total";
pub const CACHE_SHARED_LOOKUPS_TOTAL: &str = "sluice_cache_shared_lookups_total";
pub const CACHE_SHARED_LOOKUP_SECONDS: &str = "sluice_cache_shared_lookup_seconds";
pub const CACHE_SHARED_WRITES_TOTAL: &str = "sluice_cache_shared_writes_total";
pub const CACHE_SHARED_BYTES_TOTAL: &str = "sluice_cache_shared_bytes_total";
pub const CACHE_SHARED_BREAKER_OPEN: &str = "sluice_cache_shared_breaker_open";
pub const CACHE_SHARED_BREAKER_TRIPS_TOTAL: &str = "sluice_cache_shared_breaker_trips_total";
pub const CACHE_SHARED_CLUSTER_MASTERS: &str = "sluice_cache_shared_cluster_masters";
pub const CACHE_SHARED_CONNECTED: &str = "sluice_cache_shared_connected";
pub const CACHE_SHARED_PURGES_TOTAL: &str = "sluice_cache_shared_purges_total";

/// The shared tier's metric names (zones with `[caches.NAME.shared]` only).
pub const CACHE_SHARED_NAMES: [&str; 9] = [
    CACHE_SHARED_CONNECTED,
    CACHE_SHARED_PURGES_TOTAL,
    CACHE_SHARED_LOOKUPS_TOTAL,
    CACHE_SHARED_LOOKUP_SECONDS,
    CACHE_SHARED_WRITES_TOTAL,
    CACHE_SHARED_BYTES_TOTAL,
    CACHE_SHARED_BREAKER_OPEN,
    CACHE_SHARED_BREAKER_TRIPS_TOTAL,
    CACHE_SHARED_CLUSTER_MASTERS,
];

/// Every cache metric name, for tests and docs checks.
pub const CACHE_NAMES: [&str; 14] = [
    CACHE_REQUESTS_TOTAL,
    CACHE_COLLAPSED_TOTAL,
    CACHE_LOCK_TIMEOUTS_TOTAL,
    CACHE_SERVED_BYTES_TOTAL,
    CACHE_STORED_TOTAL,
    CACHE_VARIANTS_MADE_TOTAL,
    CACHE_STORE_ERRORS_TOTAL,
    CACHE_TOO_LARGE_TOTAL,
    CACHE_STALE_ON_ERROR_TOTAL,
    CACHE_REFRESHES_TOTAL,
    CACHE_INVALIDATED_TOTAL,
    CACHE_OBJECTS,
    CACHE_BYTES,
    CACHE_EVICTIONS_TOTAL,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ZoneLabels {
    zone: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabels {
    zone: String,
    status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodingLabels {
    zone: String,
    coding: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TierLabels {
    zone: String,
    tier: &'static str,
}

/// The zones to report, by name (a zone opened again under the same name replaces the old).
#[derive(Default)]
pub struct CacheCollector {
    zones: Mutex<Vec<Arc<Zone>>>,
}

impl std::fmt::Debug for CacheCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheCollector").finish_non_exhaustive()
    }
}

impl CacheCollector {
    pub fn watch(&self, zone: Arc<Zone>) {
        let mut zones = self.zones.lock().unwrap_or_else(PoisonError::into_inner);
        zones.retain(|z| z.name() != zone.name());
        zones.push(zone);
    }

    /// Stop reporting (and holding) the zones whose names `keep` refuses.
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        let mut zones = self.zones.lock().unwrap_or_else(PoisonError::into_inner);
        zones.retain(|z| keep(z.name()));
    }
}

/// One gauge family of a tier's usage: `(name, help, value)`.
type UsageGauge = (
    &'static str,
    &'static str,
    fn(&sluice_cache::storage::Usage) -> u64,
);

/// One counter family: `(help, value of a zone)`.
type ZoneCounter = (&'static str, &'static str, fn(&Stats) -> u64);

const ZONE_COUNTERS: [ZoneCounter; 9] = [
    (
        CACHE_COLLAPSED_TOTAL,
        "Requests that waited for another request's miss instead of going upstream.",
        |s| Stats::get(&s.collapsed),
    ),
    (
        CACHE_LOCK_TIMEOUTS_TOTAL,
        "Waiting requests whose lock timeout passed first (they went upstream).",
        |s| Stats::get(&s.lock_timeouts),
    ),
    (
        CACHE_SERVED_BYTES_TOTAL,
        "Body bytes sent from stored objects.",
        |s| Stats::get(&s.bytes_served),
    ),
    (
        CACHE_STORED_TOTAL,
        "Objects (responses and variants) committed to storage.",
        |s| Stats::get(&s.stored),
    ),
    (
        CACHE_STORE_ERRORS_TOTAL,
        "Responses not stored because the storage failed (served anyway).",
        |s| Stats::get(&s.store_errors),
    ),
    (
        CACHE_TOO_LARGE_TOTAL,
        "Responses streamed through unstored for exceeding max_object_size.",
        |s| Stats::get(&s.too_large),
    ),
    (
        CACHE_STALE_ON_ERROR_TOTAL,
        "Stale responses served because the origin failed (stale-if-error, use_stale).",
        |s| Stats::get(&s.stale_on_error),
    ),
    (
        CACHE_REFRESHES_TOTAL,
        "Background refreshes started for stale-while-revalidate.",
        |s| Stats::get(&s.refreshes),
    ),
    (
        CACHE_INVALIDATED_TOTAL,
        "Stored responses removed by purge or by an unsafe method (RFC 9111 4.4).",
        |s| Stats::get(&s.invalidated),
    ),
];

fn base(name: &str) -> &str {
    name.strip_suffix("_total").unwrap_or(name)
}

impl Collector for CacheCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let zones = self
            .zones
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        {
            let mut family = encoder.encode_descriptor(
                base(CACHE_REQUESTS_TOTAL),
                "Requests on cached routes by cache status (X-Cache-Status).",
                None,
                MetricType::Counter,
            )?;
            for zone in &zones {
                for status in CacheStatus::ALL {
                    let labels = StatusLabels {
                        zone: zone.name().to_string(),
                        status: status.label(),
                    };
                    ConstCounter::new(zone.stats().status(status))
                        .encode(family.encode_family(&labels)?)?;
                }
            }
        }
        for (name, help, read) in ZONE_COUNTERS {
            let mut family =
                encoder.encode_descriptor(base(name), help, None, MetricType::Counter)?;
            for zone in &zones {
                let labels = ZoneLabels {
                    zone: zone.name().to_string(),
                };
                ConstCounter::new(read(zone.stats())).encode(family.encode_family(&labels)?)?;
            }
        }
        {
            let mut family = encoder.encode_descriptor(
                base(CACHE_VARIANTS_MADE_TOTAL),
                "Stored variants made, one compression (or decoding) each, by content coding.",
                None,
                MetricType::Counter,
            )?;
            for zone in &zones {
                for coding in ContentCoding::ALL {
                    let labels = CodingLabels {
                        zone: zone.name().to_string(),
                        coding: coding.as_str(),
                    };
                    ConstCounter::new(zone.stats().variants_made(coding))
                        .encode(family.encode_family(&labels)?)?;
                }
            }
        }
        let usage: Vec<_> = zones
            .iter()
            .map(|zone| {
                (
                    zone.name().to_string(),
                    zone.storage().name(),
                    zone.storage().usage(),
                )
            })
            .collect();
        let gauges: [UsageGauge; 2] = [
            (CACHE_OBJECTS, "Objects stored, by tier.", |u| u.objects),
            (CACHE_BYTES, "Bytes stored, by tier.", |u| u.bytes),
        ];
        for (name, help, read) in gauges {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for (zone, tier, usage) in &usage {
                let labels = TierLabels {
                    zone: zone.clone(),
                    tier,
                };
                ConstGauge::new(read(usage) as i64).encode(family.encode_family(&labels)?)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            base(CACHE_EVICTIONS_TOTAL),
            "Objects dropped to stay within a tier's budget.",
            None,
            MetricType::Counter,
        )?;
        for (zone, tier, usage) in &usage {
            let labels = TierLabels {
                zone: zone.clone(),
                tier,
            };
            ConstCounter::new(usage.evictions).encode(family.encode_family(&labels)?)?;
        }
        encode_shared(&zones, &mut encoder)
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    zone: String,
    result: &'static str,
}

/// The shared tier's families, for the zones that have one.
fn encode_shared(zones: &[Arc<Zone>], encoder: &mut DescriptorEncoder) -> std::fmt::Result {
    use sluice_cache::storage::shared::{LATENCY_BUCKETS, SharedStats};
    let tiers: Vec<_> = zones
        .iter()
        .filter_map(|z| Some((z.name().to_string(), z.shared()?.clone())))
        .collect();
    if tiers.is_empty() {
        return Ok(());
    }
    type Results = [(&'static str, fn(&SharedStats) -> u64)];
    let counters: [(&str, &str, &Results); 4] = [
        (
            CACHE_SHARED_PURGES_TOTAL,
            "Purges across the fleet: sent to the others, received from them, and local flushes of the zone after a gap in the purge channel.",
            &[
                ("sent", |s| SharedStats::get(&s.purges_sent)),
                ("received", |s| SharedStats::get(&s.purges_received)),
                ("gap_flush", |s| SharedStats::get(&s.gap_flushes)),
            ],
        ),
        (
            CACHE_SHARED_LOOKUPS_TOTAL,
            "Local misses looked up in the shared tier, by result (skipped: breaker open or not connected).",
            &[
                ("hit", |s| SharedStats::get(&s.hits)),
                ("miss", |s| SharedStats::get(&s.misses)),
                ("error", |s| SharedStats::get(&s.errors)),
                ("timeout", |s| SharedStats::get(&s.timeouts)),
                ("skipped", |s| SharedStats::get(&s.skipped)),
            ],
        ),
        (
            CACHE_SHARED_WRITES_TOTAL,
            "Objects written to the shared tier after their response, by result (dropped: an error, not retried).",
            &[
                ("written", |s| SharedStats::get(&s.writes)),
                ("dropped", |s| SharedStats::get(&s.writes_dropped)),
                ("remove_failed", |s| SharedStats::get(&s.removes_failed)),
            ],
        ),
        (
            CACHE_SHARED_BYTES_TOTAL,
            "Body bytes read from and written to the shared tier.",
            &[
                ("read", |s| SharedStats::get(&s.bytes_read)),
                ("written", |s| SharedStats::get(&s.bytes_written)),
            ],
        ),
    ];
    for (name, help, results) in counters {
        let mut family = encoder.encode_descriptor(base(name), help, None, MetricType::Counter)?;
        for (zone, tier) in &tiers {
            for (result, read) in results {
                let labels = ResultLabels {
                    zone: zone.clone(),
                    result,
                };
                ConstCounter::new(read(tier.stats())).encode(family.encode_family(&labels)?)?;
            }
        }
    }
    {
        let mut family = encoder.encode_descriptor(
            CACHE_SHARED_BREAKER_OPEN,
            "1 while the shared tier's circuit breaker is open (lookups skip it), else 0.",
            None,
            MetricType::Gauge,
        )?;
        for (zone, tier) in &tiers {
            let labels = ZoneLabels { zone: zone.clone() };
            ConstGauge::new(i64::from(tier.breaker_open()))
                .encode(family.encode_family(&labels)?)?;
        }
    }
    {
        let mut family = encoder.encode_descriptor(
            CACHE_SHARED_CONNECTED,
            "1 once a connection to the shared tier has been made, else 0 (never blocks start-up).",
            None,
            MetricType::Gauge,
        )?;
        for (zone, tier) in &tiers {
            let labels = ZoneLabels { zone: zone.clone() };
            ConstGauge::new(i64::from(tier.connected())).encode(family.encode_family(&labels)?)?;
        }
    }
    {
        let mut family = encoder.encode_descriptor(
            CACHE_SHARED_CLUSTER_MASTERS,
            "Masters of the Redis Cluster the shared tier knows, each with its own breaker (0: one server).",
            None,
            MetricType::Gauge,
        )?;
        for (zone, tier) in &tiers {
            let labels = ZoneLabels { zone: zone.clone() };
            let masters = i64::try_from(tier.cluster_masters()).unwrap_or(i64::MAX);
            ConstGauge::new(masters).encode(family.encode_family(&labels)?)?;
        }
    }
    {
        let mut family = encoder.encode_descriptor(
            base(CACHE_SHARED_BREAKER_TRIPS_TOTAL),
            "Times the shared tier's circuit breaker opened.",
            None,
            MetricType::Counter,
        )?;
        for (zone, tier) in &tiers {
            let labels = ZoneLabels { zone: zone.clone() };
            let trips = tier.breaker_trips();
            ConstCounter::new(trips).encode(family.encode_family(&labels)?)?;
        }
    }
    let mut family = encoder.encode_descriptor(
        CACHE_SHARED_LOOKUP_SECONDS,
        "Time of shared-tier lookups that went to the server (index and body).",
        None,
        MetricType::Histogram,
    )?;
    for (zone, tier) in &tiers {
        let (counts, sum) = tier.stats().latency();
        // Per bucket, not cumulative: the encoder adds them up.
        let total: u64 = counts.iter().sum();
        let buckets: Vec<(f64, u64)> = counts
            .iter()
            .enumerate()
            .map(|(i, count)| {
                let le = LATENCY_BUCKETS.get(i).copied().unwrap_or(f64::INFINITY);
                (le, *count)
            })
            .collect();
        let labels = ZoneLabels { zone: zone.clone() };
        let mut metric = family.encode_family(&labels)?;
        metric.encode_histogram::<prometheus_client::encoding::NoLabelSet>(
            sum, total, &buckets, None,
        )?;
    }
    Ok(())
}
