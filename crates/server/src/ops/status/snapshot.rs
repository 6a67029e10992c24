//! Build `/status.json` from one rendering of the metrics and the running server's state.

use std::collections::BTreeMap;
use std::time::{Instant, SystemTime};

use serde_json::{Map, Value, json};

use super::exposition::{Sample, parse, quantile};
use super::{SCHEMA, Status, certs, unix_seconds};
use crate::shared::metrics::{self as m, Metrics, cache as c, protocol as p};

/// The latency quantiles reported, with their JSON names.
const QUANTILES: [(&str, f64); 3] = [("p50", 0.5), ("p90", 0.9), ("p99", 0.99)];
/// The status classes, in order.
const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// The whole `/status.json` document.
pub fn snapshot(metrics: &Metrics, status: &Status) -> Value {
    let samples = parse(&metrics.render());
    let now = SystemTime::now();
    let view = status.view.load();
    let config = status.config().clone();
    let index = Index::new(&samples);
    json!({
        "schema": SCHEMA,
        "version": env!("CARGO_PKG_VERSION"),
        "generated_at": unix_seconds(now),
        "started_at": unix_seconds(status.started_at),
        "config": {
            "source": config.source.map(|p| p.display().to_string()),
            "loaded_at": unix_seconds(config.loaded_at),
            "last_reload": config.last_reload.map(|r| json!({
                "at": unix_seconds(r.at),
                "ok": r.error.is_none(),
                "error": r.error,
            })),
        },
        "routes": routes(&index),
        "upstreams": upstreams(&index, &view.upstreams),
        "cache_zones": cache_zones(&index, &view.shared_zones),
        "compression": compression(&index),
        "listeners": listeners(&index, &view.listeners),
        "certificates": view.certificates.iter().map(|cert| {
            // An ACME certificate changes while the config stays: read it now.
            let renewal = cert.acme.as_ref().map(|acme| acme.renewal());
            let not_before = renewal.as_ref().map_or(cert.not_before, |r| unix(r.not_before));
            let not_after = renewal.as_ref().map_or(cert.not_after, |r| unix(r.not_after));
            json!({
                "listener": cert.listener,
                "source": cert.source,
                "file": cert.file,
                "sni": cert.sni,
                "subject": cert.subject,
                "issuer": cert.issuer,
                "names": cert.names,
                "not_before": not_before,
                "not_after": not_after,
                "expires_in_seconds": not_after.map(|t| certs::expires_in(t, now)),
                "error": cert.error,
                // ACME's renewal state (docs/acme.md); null for files and self-signed ones.
                "renewal": renewal.map(|r| json!({
                    "issued": r.issued,
                    "renew_at": unix(r.renew_at),
                    "failures": r.failures,
                    "last_error": r.last_error,
                    "retry_at": unix(r.retry_at),
                })),
            })
        }).collect::<Vec<_>>(),
    })
}

/// The samples by metric name.
struct Index<'a> {
    by_name: BTreeMap<&'a str, Vec<&'a Sample>>,
}

impl<'a> Index<'a> {
    fn new(samples: &'a [Sample]) -> Self {
        let mut by_name: BTreeMap<&str, Vec<&Sample>> = BTreeMap::new();
        for s in samples {
            by_name.entry(s.name.as_str()).or_default().push(s);
        }
        Index { by_name }
    }

    fn all(&self, name: &str) -> &[&'a Sample] {
        self.by_name.get(name).map_or(&[], Vec::as_slice)
    }

    /// The sum of the samples of `name` whose labels include every `(key, value)` of `with`.
    fn sum(&self, name: &str, with: &[(&str, &str)]) -> f64 {
        self.all(name)
            .iter()
            .filter(|s| with.iter().all(|(k, v)| s.label(k) == *v))
            .map(|s| s.value)
            .sum()
    }

    /// Whether some sample of `name` has these labels.
    fn has(&self, name: &str, with: &[(&str, &str)]) -> bool {
        self.all(name)
            .iter()
            .any(|s| with.iter().all(|(k, v)| s.label(k) == *v))
    }

    /// The distinct values of label `key` over the samples of `name`, sorted.
    fn values(&self, name: &str, key: &str) -> Vec<&'a str> {
        let mut out: Vec<&str> = self.all(name).iter().map(|s| s.label(key)).collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// `{count, sum_seconds, p50, p90, p99}` of the histogram `name` (without `_bucket`) over
    /// the samples with these labels.
    fn latency(&self, name: &str, with: &[(&str, &str)]) -> Value {
        let matching = |suffix: &str| {
            self.all(&format!("{name}{suffix}"))
                .iter()
                .filter(|s| with.iter().all(|(k, v)| s.label(k) == *v))
                .copied()
                .collect::<Vec<_>>()
        };
        let mut buckets: Vec<(f64, f64)> = matching("_bucket")
            .iter()
            .filter_map(|s| {
                let le = match s.label("le") {
                    "+Inf" => f64::INFINITY,
                    other => other.parse().ok()?,
                };
                Some((le, s.value))
            })
            .collect();
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        let count: f64 = matching("_count").iter().map(|s| s.value).sum();
        let sum: f64 = matching("_sum").iter().map(|s| s.value).sum();
        let mut out = Map::new();
        out.insert("count".into(), json!(count as u64));
        out.insert("sum_seconds".into(), json!(sum));
        for (key, q) in QUANTILES {
            out.insert(key.into(), json!(quantile(&buckets, q)));
        }
        Value::Object(out)
    }
}

fn int(v: f64) -> Value {
    json!(v as i64)
}

fn routes(index: &Index) -> Vec<Value> {
    index
        .values(m::REQUESTS_TOTAL, "route")
        .into_iter()
        .map(|route| {
            let r = [("route", route)];
            let mut classes = Map::new();
            let mut total = 0.0;
            for class in CLASSES {
                let n = index.sum(m::REQUESTS_TOTAL, &[("route", route), ("code", class)]);
                total += n;
                classes.insert(class.into(), int(n));
            }
            json!({
                "name": route,
                "requests": total as u64,
                "status": classes,
                "request_bytes": int(index.sum(m::REQUEST_BYTES_TOTAL, &r)),
                "response_bytes": int(index.sum(m::RESPONSE_BYTES_TOTAL, &r)),
                "latency": index.latency(m::REQUEST_DURATION_SECONDS, &r),
            })
        })
        .collect()
}

fn upstreams(index: &Index, running: &crate::features::upstreams::Upstreams) -> Vec<Value> {
    let mut names: Vec<&String> = running.keys().collect();
    names.sort();
    let now = Instant::now();
    names
        .into_iter()
        .map(|name| {
            let group = &running[name].group;
            let active_checks = group.config().health_check.is_some();
            let u = [("upstream", name.as_str())];
            let servers: Vec<Value> = group
                .peers()
                .iter()
                .map(|peer| {
                    let server = sluice_upstream::health::active::address_label(peer.address());
                    let s = [("upstream", name.as_str()), ("server", server.as_str())];
                    let mut attempts = Map::new();
                    for outcome in m::UpstreamOutcome::ALL {
                        let with = [s[0], s[1], ("outcome", outcome.as_str())];
                        attempts.insert(
                            outcome.as_str().into(),
                            int(index.sum(m::UPSTREAM_REQUESTS_TOTAL, &with)),
                        );
                    }
                    let passive_out = peer.passively_out_since(now).is_some();
                    let down = peer.config().down;
                    json!({
                        "server": server,
                        "weight": peer.weight(),
                        "backup": peer.config().backup,
                        // Why it may or may not be picked: `down` in the config, the active
                        // checker's verdict (null without checks), passive health
                        // (`max_fails`/`fail_timeout`). `available` is all three together,
                        // what the balancer and `sluice_upstream_server_healthy` use.
                        "available": peer.is_available(now),
                        "down": down,
                        "active_health": if active_checks { json!(peer.is_healthy()) } else { Value::Null },
                        "passive_out": passive_out,
                        "in_flight": int(index.sum(m::UPSTREAM_IN_FLIGHT, &s)),
                        "connections": int(index.sum(m::UPSTREAM_CONNECTIONS, &s)),
                        "queued": int(index.sum(m::limits::UPSTREAM_QUEUED, &s)),
                        "attempts": attempts,
                        "response_latency": index.latency(m::UPSTREAM_RESPONSE_DURATION_SECONDS, &s),
                    })
                })
                .collect();
            json!({
                "name": name,
                "retries": int(index.sum(m::UPSTREAM_RETRIES_TOTAL, &u)),
                "no_peer": int(index.sum(m::UPSTREAM_NO_PEER_TOTAL, &u)),
                "panic_picks": int(index.sum(m::UPSTREAM_PANIC_PICKS_TOTAL, &u)),
                "active_checks": active_checks,
                "servers": servers,
            })
        })
        .collect()
}

fn cache_zones(index: &Index, shared: &[String]) -> Vec<Value> {
    index
        .values(c::CACHE_OBJECTS, "zone")
        .into_iter()
        .map(|zone| {
            let z = [("zone", zone)];
            let mut requests = Map::new();
            let mut total = 0.0;
            for s in index.all(c::CACHE_REQUESTS_TOTAL) {
                if s.label("zone") == zone {
                    total += s.value;
                    requests.insert(s.label("status").into(), int(s.value));
                }
            }
            let hits = index.sum(c::CACHE_REQUESTS_TOTAL, &[("zone", zone), ("status", "hit")]);
            let tier = index
                .all(c::CACHE_OBJECTS)
                .iter()
                .find(|s| s.label("zone") == zone)
                .map_or("memory", |s| s.label("tier"));
            let shared_tier = if shared.iter().any(|s| s == zone)
                || index.has(c::CACHE_SHARED_CONNECTED, &z)
            {
                let by_result = |name: &str| {
                    let mut out = Map::new();
                    for s in index.all(name) {
                        if s.label("zone") == zone {
                            out.insert(s.label("result").into(), int(s.value));
                        }
                    }
                    Value::Object(out)
                };
                json!({
                    "connected": index.sum(c::CACHE_SHARED_CONNECTED, &z) > 0.0,
                    "breaker_open": index.sum(c::CACHE_SHARED_BREAKER_OPEN, &z) > 0.0,
                    "breaker_trips": int(index.sum(c::CACHE_SHARED_BREAKER_TRIPS_TOTAL, &z)),
                    "lookups": by_result(c::CACHE_SHARED_LOOKUPS_TOTAL),
                    "writes": by_result(c::CACHE_SHARED_WRITES_TOTAL),
                })
            } else {
                Value::Null
            };
            json!({
                "name": zone,
                "tier": tier,
                "requests": total as u64,
                "status": requests,
                "hit_ratio": if total > 0.0 { json!(hits / total) } else { Value::Null },
                "bytes": int(index.sum(c::CACHE_BYTES, &z)),
                "objects": int(index.sum(c::CACHE_OBJECTS, &z)),
                "evictions": int(index.sum(c::CACHE_EVICTIONS_TOTAL, &z)),
                "stale_served": int(
                    index.sum(c::CACHE_REQUESTS_TOTAL, &[("zone", zone), ("status", "stale")])
                        + index.sum(c::CACHE_REQUESTS_TOTAL, &[("zone", zone), ("status", "updating")])
                ),
                "stale_on_error": int(index.sum(c::CACHE_STALE_ON_ERROR_TOTAL, &z)),
                "served_bytes": int(index.sum(c::CACHE_SERVED_BYTES_TOTAL, &z)),
                "shared": shared_tier,
            })
        })
        .collect()
}

fn compression(index: &Index) -> Value {
    let algorithms: Vec<Value> = index
        .values(m::COMPRESS_BYTES_IN_TOTAL, "algorithm")
        .into_iter()
        .map(|algorithm| {
            let a = [("algorithm", algorithm)];
            let bytes_in = index.sum(m::COMPRESS_BYTES_IN_TOTAL, &a);
            let bytes_out = index.sum(m::COMPRESS_BYTES_OUT_TOTAL, &a);
            json!({
                "algorithm": algorithm,
                "bytes_in": int(bytes_in),
                "bytes_out": int(bytes_out),
                "saved_bytes": int((bytes_in - bytes_out).max(0.0)),
                "cpu_seconds": index.sum(m::COMPRESS_CPU_SECONDS_TOTAL, &a),
            })
        })
        .collect();
    let routes: Vec<Value> = index
        .values(m::COMPRESS_RESPONSES_TOTAL, "route")
        .into_iter()
        .map(|route| {
            let mut decisions = Map::new();
            for s in index.all(m::COMPRESS_RESPONSES_TOTAL) {
                if s.label("route") == route {
                    decisions.insert(s.label("decision").into(), int(s.value));
                }
            }
            let mut levels = Map::new();
            for s in index.all(m::compress_cpu::COMPRESS_LEVEL) {
                if s.label("route") == route {
                    levels.insert(s.label("algorithm").into(), int(s.value));
                }
            }
            json!({
                "route": route,
                "responses": decisions,
                // Only routes with `max_cpu`: the level used now per algorithm, -1 = identity.
                "adaptive_levels": if levels.is_empty() { Value::Null } else { Value::Object(levels) },
            })
        })
        .collect();
    json!({
        "algorithms": algorithms,
        "routes": routes,
        "process_cpu_percent": int(index.sum(m::compress_cpu::PROCESS_CPU_PERCENT, &[])),
    })
}

fn listeners(index: &Index, listeners: &[super::ListenerInfo]) -> Vec<Value> {
    listeners
        .iter()
        .map(|listener| {
            let l = [("listener", listener.name.as_str())];
            let mut by_protocol = Map::new();
            for protocol in ["http/1.1", "h2", "h3"] {
                let with = [l[0], ("protocol", protocol)];
                by_protocol.insert(
                    protocol.into(),
                    int(index.sum(p::PROTOCOL_REQUESTS_TOTAL, &with)),
                );
            }
            json!({
                "name": listener.name,
                "address": listener.address.to_string(),
                "tls": listener.tls,
                "protocols": listener.protocols,
                "connections_open": int(index.sum(m::CONNECTIONS_OPEN, &l)),
                "connections_total": int(index.sum(m::CONNECTIONS_TOTAL, &l)),
                "connections_parked": int(index.sum(m::CONNECTIONS_PARKED, &l)),
                "requests_by_protocol": by_protocol,
                "tls_handshake_failures": int(index.sum(m::TLS_HANDSHAKE_FAILURES_TOTAL, &l)),
            })
        })
        .collect()
}

/// Seconds since the Unix epoch, as the certificates' other times are given.
fn unix(time: Option<std::time::SystemTime>) -> Option<i64> {
    let since = time?.duration_since(std::time::UNIX_EPOCH).ok()?;
    i64::try_from(since.as_secs()).ok()
}
