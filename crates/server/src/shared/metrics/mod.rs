//! Prometheus metrics: what sluice counts, under which names, and how it is rendered.
//!
//! The request path must stay free of locks and allocation, and prometheus-client's
//! `Family::get_or_create` takes a lock and hashes the labels on every call. So label sets are
//! resolved ONCE, when a route, upstream or listener is set up: [`Metrics::route`] and friends
//! return handles ([`RouteMetrics`], ...) holding clones of the counters, which share their atomics
//! with the registry. Per request, a handle only indexes an array and bumps atomics. Histograms
//! are our own lock-free [`DurationHistogram`] because prometheus-client's takes a mutex.
//!
//! One [`Metrics`] lives for the whole process (reloads included) and is shared as `Arc`.
//! `docs/metrics.md` lists every metric with example queries; the names below are the only place
//! they are spelled.

pub mod access;
pub mod acme;
pub mod cache;
pub mod compress_cpu;
pub mod dictionary;
pub mod dns;
mod handles;
mod histogram;
mod labels;
pub mod limits;
pub mod protocol;
#[cfg(test)]
mod tests;
mod tunnel;
mod watch;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use prometheus_client::encoding::EncodeMetric;
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Metric, Registry, Unit};
use sluice_core::Compression;

pub use handles::{
    CompressBytes, CompressMetrics, DecompressMetrics, DecompressOutcome, InFlightGuard,
    ListenerMetrics, OpenConnection, Parked, RouteMetrics, UpstreamMetrics, UpstreamOutcome,
    UpstreamServerMetrics,
};
pub use histogram::{DurationHistogram, bucket_bounds_seconds};
use labels::{
    AlgorithmLabels, BuildLabels, ListenerLabels, RouteAlgorithmLabels, RouteCodeLabels,
    RouteDecisionLabels, RouteEndLabels, RouteLabels, RouteOutcomeLabels, ServerLabels,
    ServerOutcomeLabels, UpstreamLabels,
};
pub use tunnel::{OpenTunnel, TunnelEnd, TunnelMetrics};
pub use watch::ServerState;
use watch::Watches;

// The names as they appear in the exposition and in PromQL. Counters end in `_total` and units
// are spelled in the name (Prometheus conventions); `register` derives the OpenMetrics family
// name and `# UNIT` from these suffixes, so they are written once, here.
pub const REQUESTS_TOTAL: &str = "sluice_requests_total";
pub const REQUEST_DURATION_SECONDS: &str = "sluice_request_duration_seconds";
pub const REQUEST_BYTES_TOTAL: &str = "sluice_request_bytes_total";
pub const RESPONSE_BYTES_TOTAL: &str = "sluice_response_bytes_total";
pub const UPSTREAM_CONNECT_DURATION_SECONDS: &str = "sluice_upstream_connect_duration_seconds";
pub const UPSTREAM_RESPONSE_DURATION_SECONDS: &str = "sluice_upstream_response_duration_seconds";
pub const UPSTREAM_REQUESTS_TOTAL: &str = "sluice_upstream_requests_total";
pub const UPSTREAM_RETRIES_TOTAL: &str = "sluice_upstream_retries_total";
pub const UPSTREAM_RESPONSE_BODY_ERRORS_TOTAL: &str = "sluice_upstream_response_body_errors_total";
pub const UPSTREAM_NO_PEER_TOTAL: &str = "sluice_upstream_no_peer_total";
pub const UPSTREAM_PANIC_PICKS_TOTAL: &str = "sluice_upstream_panic_picks_total";
pub const UPSTREAM_SERVER_HEALTHY: &str = "sluice_upstream_server_healthy";
pub const UPSTREAM_IN_FLIGHT: &str = "sluice_upstream_in_flight";
pub const UPSTREAM_CONNECTIONS: &str = "sluice_upstream_connections";
pub const CONNECTIONS_OPEN: &str = "sluice_connections_open";
pub const CONNECTIONS_TOTAL: &str = "sluice_connections_total";
pub const CONNECTIONS_PARKED: &str = "sluice_connections_parked";
pub const TLS_HANDSHAKE_FAILURES_TOTAL: &str = "sluice_tls_handshake_failures_total";
pub const PROXY_PROTOCOL_ERRORS_TOTAL: &str = "sluice_proxy_protocol_errors_total";
pub const BUILD_INFO: &str = "sluice_build_info";
pub const COMPRESS_RESPONSES_TOTAL: &str = "sluice_compress_responses_total";
pub const COMPRESS_BYTES_IN_TOTAL: &str = "sluice_compress_bytes_in_total";
pub const COMPRESS_BYTES_OUT_TOTAL: &str = "sluice_compress_bytes_out_total";
pub const COMPRESS_CPU_SECONDS_TOTAL: &str = "sluice_compress_cpu_seconds_total";
pub const COMPRESS_VARIANTS_MADE_TOTAL: &str = "sluice_compress_variants_made_total";
pub const COMPRESS_VARIANT_HITS_TOTAL: &str = "sluice_compress_variant_hits_total";
pub const DECOMPRESS_REQUESTS_TOTAL: &str = "sluice_decompress_requests_total";
pub const DECOMPRESS_BYTES_IN_TOTAL: &str = "sluice_decompress_bytes_in_total";
pub const DECOMPRESS_BYTES_OUT_TOTAL: &str = "sluice_decompress_bytes_out_total";
pub const RATE_LIMITED_TOTAL: &str = "sluice_rate_limited_total";
pub const RATE_LIMIT_FALLBACKS_TOTAL: &str = "sluice_rate_limit_fallbacks_total";
pub const TUNNELS_OPEN: &str = "sluice_tunnels_open";
pub const TUNNELS_TOTAL: &str = "sluice_tunnels_total";

/// Every metric name, for tests and docs checks.
pub const ALL_NAMES: [&str; 52] = [
    REQUESTS_TOTAL,
    REQUEST_DURATION_SECONDS,
    REQUEST_BYTES_TOTAL,
    RESPONSE_BYTES_TOTAL,
    UPSTREAM_CONNECT_DURATION_SECONDS,
    UPSTREAM_RESPONSE_DURATION_SECONDS,
    UPSTREAM_REQUESTS_TOTAL,
    UPSTREAM_RETRIES_TOTAL,
    UPSTREAM_NO_PEER_TOTAL,
    UPSTREAM_SERVER_HEALTHY,
    UPSTREAM_IN_FLIGHT,
    UPSTREAM_CONNECTIONS,
    CONNECTIONS_OPEN,
    CONNECTIONS_TOTAL,
    TLS_HANDSHAKE_FAILURES_TOTAL,
    PROXY_PROTOCOL_ERRORS_TOTAL,
    BUILD_INFO,
    COMPRESS_RESPONSES_TOTAL,
    COMPRESS_BYTES_IN_TOTAL,
    COMPRESS_BYTES_OUT_TOTAL,
    COMPRESS_CPU_SECONDS_TOTAL,
    COMPRESS_VARIANTS_MADE_TOTAL,
    COMPRESS_VARIANT_HITS_TOTAL,
    DECOMPRESS_REQUESTS_TOTAL,
    DECOMPRESS_BYTES_IN_TOTAL,
    DECOMPRESS_BYTES_OUT_TOTAL,
    RATE_LIMITED_TOTAL,
    RATE_LIMIT_FALLBACKS_TOTAL,
    TUNNELS_OPEN,
    TUNNELS_TOTAL,
    limits::CONNECTION_LIMIT_REACHED_TOTAL,
    limits::REQUEST_LIMIT_EXCEEDED_TOTAL,
    limits::UPSTREAM_QUEUED,
    limits::UPSTREAM_QUEUE_REJECTED_TOTAL,
    limits::ACCESS_LOG_DROPPED_TOTAL,
    protocol::PROTOCOL_REQUESTS_TOTAL,
    protocol::QUIC_RETRIES_TOTAL,
    compress_cpu::COMPRESS_LEVEL,
    compress_cpu::PROCESS_CPU_PERCENT,
    dictionary::DICTIONARY_OFFERED_TOTAL,
    dictionary::DICTIONARY_STORED_TOTAL,
    dictionary::DICTIONARY_EVICTED_TOTAL,
    dictionary::DICTIONARY_DELTAS_MADE_TOTAL,
    dictionary::DICTIONARY_HITS_TOTAL,
    dictionary::DICTIONARY_SAVED_BYTES_TOTAL,
    access::ACCESS_DENIED_TOTAL,
    access::FORWARD_AUTH_REQUESTS_TOTAL,
    dns::UPSTREAM_DNS_REFRESHES_TOTAL,
    dns::UPSTREAM_DNS_CHANGES_TOTAL,
    dns::UPSTREAM_DNS_LAST_GOOD_AGE,
    acme::ACME_ORDERS_TOTAL,
    acme::ACME_CERTIFICATE_EXPIRY_SECONDS,
];

/// The `route` label of requests that matched no route (they get a 404). Counting them shows
/// scanners and clients sent to the wrong host; the parentheses keep it apart from route names.
pub const UNMATCHED_ROUTE: &str = "(unmatched)";

/// The `code` label values, indexed by status class - 1.
const CODE_CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// The registry and every metric family. Create once with [`Metrics::new`]; hand out handles at
/// start-up (and on reload); render on scrape.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<RouteCodeLabels, Counter>,
    request_duration: Family<RouteLabels, DurationHistogram>,
    request_bytes: Family<RouteLabels, Counter>,
    response_bytes: Family<RouteLabels, Counter>,
    upstream_connect: Family<ServerLabels, DurationHistogram>,
    upstream_response: Family<ServerLabels, DurationHistogram>,
    upstream_requests: Family<ServerOutcomeLabels, Counter>,
    upstream_body_errors: Family<ServerOutcomeLabels, Counter>,
    upstream_healthy: Family<ServerLabels, Gauge>,
    upstream_in_flight: Family<ServerLabels, Gauge>,
    upstream_connections: Family<ServerLabels, Gauge>,
    upstream_retries: Family<UpstreamLabels, Counter>,
    upstream_no_peer: Family<UpstreamLabels, Counter>,
    upstream_panic_picks: Family<UpstreamLabels, Counter>,
    connections_open: Family<ListenerLabels, Gauge>,
    connections: Family<ListenerLabels, Counter>,
    connections_parked: Family<ListenerLabels, Gauge>,
    tls_failures: Family<ListenerLabels, Counter>,
    proxy_protocol_errors: Family<ListenerLabels, Counter>,
    compress_responses: Family<RouteDecisionLabels, Counter>,
    compress_bytes_in: Family<AlgorithmLabels, Counter>,
    compress_cpu_seconds: Family<AlgorithmLabels, Counter<f64, std::sync::atomic::AtomicU64>>,
    compress_bytes_out: Family<AlgorithmLabels, Counter>,
    compress_variants_made: Family<RouteAlgorithmLabels, Counter>,
    compress_variant_hits: Family<RouteAlgorithmLabels, Counter>,
    decompress_requests: Family<RouteOutcomeLabels, Counter>,
    decompress_bytes_in: Family<RouteLabels, Counter>,
    decompress_bytes_out: Family<RouteLabels, Counter>,
    rate_limited: Family<RouteLabels, Counter>,
    rate_limit_fallbacks: Family<RouteLabels, Counter>,
    tunnels_open: Family<RouteLabels, Gauge>,
    tunnels: Family<RouteEndLabels, Counter>,
    limits: limits::LimitFamilies,
    dns: dns::DnsFamilies,
    access: access::AccessFamilies,
    protocol: protocol::ProtocolFamilies,
    compress_cpu: compress_cpu::CompressCpuFamilies,
    dictionaries: dictionary::DictionaryFamilies,
    acme: acme::AcmeFamilies,
    /// Upstream server state read at scrape time (see [`Metrics::watch_upstream_server`]).
    watches: Watches,
    /// Cache zones read at scrape time (see [`cache`]).
    caches: Arc<cache::CacheCollector>,
    /// Length of the last rendering, so the next one allocates its buffer once.
    last_render_len: AtomicUsize,
}

impl Metrics {
    pub fn new() -> Arc<Self> {
        let mut registry = Registry::default();
        let r = &mut registry;
        let requests = register(
            r,
            REQUESTS_TOTAL,
            "Finished requests by route and status class",
        );
        let request_duration = register(
            r,
            REQUEST_DURATION_SECONDS,
            "Time from request headers received to the end of the response body, by route",
        );
        let request_bytes = register(r, REQUEST_BYTES_TOTAL, "Request body bytes received");
        let response_bytes = register(r, RESPONSE_BYTES_TOTAL, "Response body bytes sent");
        let upstream_connect = register(
            r,
            UPSTREAM_CONNECT_DURATION_SECONDS,
            "Time to open a new connection to an upstream server",
        );
        let upstream_response = register(
            r,
            UPSTREAM_RESPONSE_DURATION_SECONDS,
            "Time from sending a request to an upstream server to its response headers",
        );
        let upstream_requests = register(
            r,
            UPSTREAM_REQUESTS_TOTAL,
            "Attempts sent to an upstream server, by outcome",
        );
        let upstream_body_errors = register(
            r,
            UPSTREAM_RESPONSE_BODY_ERRORS_TOTAL,
            "Upstream response bodies that broke off or stalled after their headers",
        );
        let upstream_retries = register(
            r,
            UPSTREAM_RETRIES_TOTAL,
            "Requests retried on another server of the upstream group",
        );
        let upstream_no_peer = register(
            r,
            UPSTREAM_NO_PEER_TOTAL,
            "Requests that found no usable server in the upstream group",
        );
        let upstream_panic_picks = register(
            r,
            UPSTREAM_PANIC_PICKS_TOTAL,
            "Requests sent to the server out the longest because every server was out on passive health",
        );
        let upstream_healthy = register(
            r,
            UPSTREAM_SERVER_HEALTHY,
            "1 if the upstream server may be picked, 0 while health checks hold it out",
        );
        let upstream_in_flight = register(
            r,
            UPSTREAM_IN_FLIGHT,
            "Requests currently in progress on an upstream server",
        );
        let upstream_connections = register(
            r,
            UPSTREAM_CONNECTIONS,
            "Connections open to an upstream server, idle in the keep-alive pool or busy",
        );
        let connections_open = register(r, CONNECTIONS_OPEN, "Client connections open now");
        let connections = register(r, CONNECTIONS_TOTAL, "Client connections accepted");
        let connections_parked = register(
            r,
            CONNECTIONS_PARKED,
            "Idle HTTP/1.1 client connections parked now, their HTTP buffers freed",
        );
        let tls_failures = register(
            r,
            TLS_HANDSHAKE_FAILURES_TOTAL,
            "TLS handshakes that failed or timed out",
        );
        let proxy_protocol_errors = register(
            r,
            PROXY_PROTOCOL_ERRORS_TOTAL,
            "Connections closed for a missing, malformed or late PROXY protocol header",
        );
        let compress_responses = register(
            r,
            COMPRESS_RESPONSES_TOTAL,
            "Responses of routes with compression on, by decision (compressed or why not)",
        );
        let compress_bytes_in = register(
            r,
            COMPRESS_BYTES_IN_TOTAL,
            "Identity bytes fed to response compressors, by algorithm",
        );
        let compress_cpu_seconds = register(
            r,
            COMPRESS_CPU_SECONDS_TOTAL,
            "Seconds spent in response compressors (streamed bodies and kept variants), by algorithm",
        );
        let compress_bytes_out = register(
            r,
            COMPRESS_BYTES_OUT_TOTAL,
            "Compressed bytes produced by response compressors, by algorithm",
        );
        let compress_variants_made = register(
            r,
            COMPRESS_VARIANTS_MADE_TOTAL,
            "Compressed variants of static files made and kept in memory, one compression each",
        );
        let compress_variant_hits = register(
            r,
            COMPRESS_VARIANT_HITS_TOTAL,
            "Compressed responses served from a kept variant, without compressing",
        );
        let decompress_requests = register(
            r,
            DECOMPRESS_REQUESTS_TOTAL,
            "Encoded request bodies on routes with decompress_requests, by outcome",
        );
        let decompress_bytes_in = register(
            r,
            DECOMPRESS_BYTES_IN_TOTAL,
            "Encoded request body bytes fed to request decoders",
        );
        let decompress_bytes_out = register(
            r,
            DECOMPRESS_BYTES_OUT_TOTAL,
            "Decoded request body bytes sent upstream",
        );
        let rate_limited = register(
            r,
            RATE_LIMITED_TOTAL,
            "Requests refused with 429 by a route's rate limit",
        );
        let rate_limit_fallbacks = register(
            r,
            RATE_LIMIT_FALLBACKS_TOTAL,
            "Checks of a shared rate limit decided by on_error because Redis failed or was late",
        );
        let tunnels_open = register(
            r,
            TUNNELS_OPEN,
            "Upgraded connections (WebSocket and other Upgrade protocols) open now, by route",
        );
        let tunnels = register(
            r,
            TUNNELS_TOTAL,
            "Upgraded connections that ended, by route and how they ended",
        );
        let limits = limits::LimitFamilies::register(r);
        let dns = dns::DnsFamilies::register(r);
        let access = access::AccessFamilies::register(r);
        let protocol = protocol::ProtocolFamilies::register(r);
        let compress_cpu = compress_cpu::CompressCpuFamilies::register(r);
        let dictionaries = dictionary::DictionaryFamilies::register(r);
        let acme = acme::AcmeFamilies::register(r);
        let build: Family<BuildLabels, Gauge> = register(
            r,
            BUILD_INFO,
            "Always 1; the labels say which sluice build is running",
        );
        build
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
            })
            .set(1);
        let caches = Arc::new(cache::CacheCollector::default());
        registry.register_collector(Box::new(caches.clone()));
        Arc::new(Metrics {
            registry,
            requests,
            request_duration,
            request_bytes,
            response_bytes,
            upstream_connect,
            upstream_response,
            upstream_requests,
            upstream_body_errors,
            upstream_healthy,
            upstream_in_flight,
            upstream_connections,
            upstream_retries,
            upstream_no_peer,
            upstream_panic_picks,
            connections_open,
            connections,
            connections_parked,
            tls_failures,
            proxy_protocol_errors,
            compress_responses,
            compress_bytes_in,
            compress_cpu_seconds,
            compress_bytes_out,
            compress_variants_made,
            compress_variant_hits,
            decompress_requests,
            decompress_bytes_in,
            decompress_bytes_out,
            rate_limited,
            rate_limit_fallbacks,
            tunnels_open,
            tunnels,
            limits,
            dns,
            access,
            protocol,
            compress_cpu,
            dictionaries,
            acme,
            watches: Watches::default(),
            caches,
            last_render_len: AtomicUsize::new(4096),
        })
    }

    /// Handles for one route, labelled with the route's name. Call at start-up; the handle is
    /// used per request without locks. The same name always yields handles sharing counts.
    pub fn route(&self, route: &str) -> RouteMetrics {
        let labels = RouteLabels {
            route: route.to_owned(),
        };
        // All five classes exist from the start: `observe` only indexes, and `rate()` sees a 0
        // instead of a missing series before the first error.
        let requests = CODE_CLASSES.map(|code| {
            self.requests.get_or_create_owned(&RouteCodeLabels {
                route: route.to_owned(),
                code,
            })
        });
        RouteMetrics {
            requests,
            duration: self.request_duration.get_or_create_owned(&labels),
            bytes_in: self.request_bytes.get_or_create_owned(&labels),
            bytes_out: self.response_bytes.get_or_create_owned(&labels),
        }
    }

    /// The level gauge of `algorithm` on a route with `max_cpu` (`sluice_compress_level`).
    pub fn compress_level(&self, route: &str, algorithm: Compression) -> Gauge {
        self.compress_cpu
            .level
            .get_or_create_owned(&RouteAlgorithmLabels {
                route: route.to_owned(),
                algorithm: algorithm.as_str(),
            })
    }

    /// The gauge of the process's sampled CPU share, in percent (`sluice_process_cpu_percent`).
    pub fn process_cpu_percent(&self) -> Gauge {
        self.compress_cpu.cpu_percent.clone()
    }

    /// Handles for a route with compression on. Every decision and algorithm exists from the
    /// start, so dashboards see zeros rather than missing series.
    pub fn compress(&self, route: &str) -> CompressMetrics {
        let decisions = CompressMetrics::DECISIONS.map(|decision| {
            self.compress_responses
                .get_or_create_owned(&RouteDecisionLabels {
                    route: route.to_owned(),
                    decision,
                })
        });
        let bytes = Compression::ALL.map(|algorithm| {
            let labels = AlgorithmLabels {
                algorithm: algorithm.as_str(),
            };
            CompressBytes {
                bytes_in: self.compress_bytes_in.get_or_create_owned(&labels),
                bytes_out: self.compress_bytes_out.get_or_create_owned(&labels),
                cpu_seconds: self.compress_cpu_seconds.get_or_create_owned(&labels),
            }
        });
        let by_algorithm = |family: &Family<RouteAlgorithmLabels, Counter>| {
            Compression::ALL.map(|algorithm| {
                family.get_or_create_owned(&RouteAlgorithmLabels {
                    route: route.to_owned(),
                    algorithm: algorithm.as_str(),
                })
            })
        };
        CompressMetrics {
            decisions,
            bytes,
            variants_made: by_algorithm(&self.compress_variants_made),
            variant_hits: by_algorithm(&self.compress_variant_hits),
        }
    }

    /// The counter of requests a route's rate limit refused; call at start-up, for routes with
    /// a `rate_limit`.
    /// A route's access-control counters (`sluice_access_denied_total`,
    /// `sluice_forward_auth_requests_total`).
    pub fn access(&self, route: &str) -> access::AccessMetrics {
        self.access.route(route)
    }

    pub fn rate_limited(&self, route: &str) -> Counter {
        self.rate_limited.get_or_create_owned(&RouteLabels {
            route: route.to_owned(),
        })
    }

    /// Handles for an ACME certificate, by its first name.
    pub fn acme(&self, certificate: &str) -> acme::AcmeMetrics {
        self.acme.certificate(certificate)
    }

    /// Handles for a route's compression dictionaries.
    pub fn dictionary(&self, route: &str) -> dictionary::DictionaryMetrics {
        self.dictionaries.route(route)
    }

    /// The counter of a shared rate limit's checks decided by its `on_error`.
    pub fn rate_limit_fallbacks(&self, route: &str) -> Counter {
        self.rate_limit_fallbacks.get_or_create_owned(&RouteLabels {
            route: route.to_owned(),
        })
    }

    /// Handles for a proxy route's tunnels (upgraded connections). Every `end` exists from the
    /// start.
    pub fn tunnels(&self, route: &str) -> TunnelMetrics {
        let open = self.tunnels_open.get_or_create_owned(&RouteLabels {
            route: route.to_owned(),
        });
        let ended = TunnelEnd::ALL.map(|end| {
            self.tunnels.get_or_create_owned(&RouteEndLabels {
                route: route.to_owned(),
                end: end.as_str(),
            })
        });
        TunnelMetrics { open, ended }
    }

    /// Handles for a route with `decompress_requests`. Every outcome exists from the start.
    pub fn decompress(&self, route: &str) -> DecompressMetrics {
        let outcomes = DecompressOutcome::ALL.map(|outcome| {
            self.decompress_requests
                .get_or_create_owned(&RouteOutcomeLabels {
                    route: route.to_owned(),
                    outcome: outcome.as_str(),
                })
        });
        let labels = RouteLabels {
            route: route.to_owned(),
        };
        DecompressMetrics {
            outcomes,
            bytes_in: self.decompress_bytes_in.get_or_create_owned(&labels),
            bytes_out: self.decompress_bytes_out.get_or_create_owned(&labels),
        }
    }

    /// Handles for one server of an upstream group; `server` as written in the config
    /// (`host:port` or `unix:/path`).
    pub fn upstream_server(&self, upstream: &str, server: &str) -> UpstreamServerMetrics {
        let labels = ServerLabels {
            upstream: upstream.to_owned(),
            server: server.to_owned(),
        };
        let outcomes = UpstreamOutcome::ALL.map(|outcome| {
            self.upstream_requests
                .get_or_create_owned(&ServerOutcomeLabels {
                    upstream: upstream.to_owned(),
                    server: server.to_owned(),
                    outcome: outcome.as_str(),
                })
        });
        // Only these two can end a body early: it stalled (`idle`) or broke off.
        let body_errors = [UpstreamOutcome::Timeout, UpstreamOutcome::Reset].map(|outcome| {
            self.upstream_body_errors
                .get_or_create_owned(&ServerOutcomeLabels {
                    upstream: upstream.to_owned(),
                    server: server.to_owned(),
                    outcome: outcome.as_str(),
                })
        });
        // A server starts healthy (as in nginx) until a check says otherwise; asking again for
        // the same server (a reload) keeps what the checks last said.
        let healthy = match self.upstream_healthy.get(&labels) {
            Some(existing) => existing.clone(),
            None => {
                let gauge = self.upstream_healthy.get_or_create_owned(&labels);
                gauge.set(1);
                gauge
            }
        };
        UpstreamServerMetrics {
            connect: self.upstream_connect.get_or_create_owned(&labels),
            response: self.upstream_response.get_or_create_owned(&labels),
            outcomes,
            body_errors,
            healthy,
            in_flight: self.upstream_in_flight.get_or_create_owned(&labels),
            queue: self.limits.upstream_queue(upstream, server),
        }
    }

    /// Report a cache zone's counters and storage use at every scrape (a zone opened again
    /// under the same name, on reload, replaces the old one).
    pub fn watch_cache_zone(&self, zone: Arc<sluice_cache::zone::Zone>) {
        self.caches.watch(zone);
    }

    /// Read `sluice_upstream_server_healthy`, `sluice_upstream_in_flight` and
    /// `sluice_upstream_connections` for this server
    /// from `read` at every scrape, instead of setting them per event: the peer already tracks
    /// both, and passive health recovers with time, not with an event. Registering the same
    /// server again (a reload) replaces its reader. Do not also call
    /// [`UpstreamServerMetrics::set_healthy`] / [`UpstreamServerMetrics::in_flight`] for it.
    pub fn watch_upstream_server(
        &self,
        upstream: &str,
        server: &str,
        read: impl Fn() -> ServerState + Send + Sync + 'static,
    ) {
        let labels = ServerLabels {
            upstream: upstream.to_owned(),
            server: server.to_owned(),
        };
        let healthy = self.upstream_healthy.get_or_create_owned(&labels);
        let in_flight = self.upstream_in_flight.get_or_create_owned(&labels);
        let connections = self.upstream_connections.get_or_create_owned(&labels);
        self.watches
            .insert(labels, [healthy, in_flight, connections], Box::new(read));
    }

    /// After a reload: stop reading the upstream servers for which `keep(upstream, server)` is
    /// false (their group was removed, or replaced by one without them), so their peers and
    /// pools can be freed, and drop their three scrape-time gauges (a removed server is neither
    /// healthy nor unhealthy). Their counters and histograms stay: metrics survive reloads.
    pub fn retain_upstream_servers(&self, keep: impl Fn(&str, &str) -> bool) {
        for labels in self.watches.retain(|l| keep(&l.upstream, &l.server)) {
            self.upstream_healthy.remove(&labels);
            self.upstream_in_flight.remove(&labels);
            self.upstream_connections.remove(&labels);
        }
    }

    /// After a reload: stop reporting the cache zones whose names `keep` refuses (removed from
    /// the config), so their storage can be freed.
    pub fn retain_cache_zones(&self, keep: impl Fn(&str) -> bool) {
        self.caches.retain(keep);
    }

    /// Handles for one `dns+` server of an upstream group (`name` as written: `dns+a:…`).
    pub fn upstream_dns(&self, upstream: &str, name: &str) -> dns::DnsMetrics {
        self.dns.handles(upstream, name)
    }

    /// Handles for an upstream group as a whole.
    pub fn upstream(&self, upstream: &str) -> UpstreamMetrics {
        let labels = UpstreamLabels {
            upstream: upstream.to_owned(),
        };
        UpstreamMetrics {
            retries: self.upstream_retries.get_or_create_owned(&labels),
            no_peer: self.upstream_no_peer.get_or_create_owned(&labels),
            panic_picks: self.upstream_panic_picks.get_or_create_owned(&labels),
        }
    }

    /// Handles for one listener, labelled with its name.
    pub fn listener(&self, listener: &str) -> ListenerMetrics {
        let labels = ListenerLabels {
            listener: listener.to_owned(),
        };
        ListenerMetrics {
            open: self.connections_open.get_or_create_owned(&labels),
            total: self.connections.get_or_create_owned(&labels),
            parked: self.connections_parked.get_or_create_owned(&labels),
            tls_failures: self.tls_failures.get_or_create_owned(&labels),
            proxy_protocol_errors: self.proxy_protocol_errors.get_or_create_owned(&labels),
            limit_reached: self.limits.connection_limit(listener),
            protocol: self.protocol.listener(listener),
        }
    }

    /// The request-limit counters of one listener (`sluice_request_limit_exceeded_total`).
    pub fn request_limits(&self, listener: &str) -> limits::RequestLimitMetrics {
        self.limits.request_limits(listener)
    }

    /// The `max_conns` queue gauges and counters of one upstream server.
    pub fn upstream_queue(&self, upstream: &str, server: &str) -> limits::UpstreamQueueMetrics {
        self.limits.upstream_queue(upstream, server)
    }

    /// `sluice_access_log_dropped_total`.
    pub fn access_log_dropped(&self) -> Counter {
        self.limits.access_log_dropped()
    }

    /// The exposition in OpenMetrics text format (ends with `# EOF`). Prometheus's classic text
    /// parser reads it too.
    pub fn render(&self) -> String {
        // Room for the page to have grown a little since last time, so it is allocated once.
        let hint = self.last_render_len.load(Ordering::Relaxed);
        let mut out = String::with_capacity(hint + hint / 8);
        self.watches.refresh();
        // Writing to a String cannot fail; an error here would be a bug in the encoder, and a
        // partial page is more useful to an operator than none.
        if let Err(err) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::error!("encoding metrics failed: {err}");
        }
        self.last_render_len.store(out.len(), Ordering::Relaxed);
        out
    }
}

/// Register a new family under `name`. OpenMetrics names a counter family without its `_total`
/// suffix and wants units declared, so both are derived from the Prometheus-style name. `help`
/// has no final period: the encoder adds one.
fn register<S, M>(registry: &mut Registry, name: &str, help: &str) -> Family<S, M>
where
    Family<S, M>: Metric + Default + Clone,
{
    let family = Family::<S, M>::default();
    let mut base = name;
    if matches!(family.metric_type(), MetricType::Counter) {
        base = base.strip_suffix("_total").unwrap_or(base);
    }
    let unit = [("_seconds", Unit::Seconds), ("_bytes", Unit::Bytes)]
        .into_iter()
        .find_map(|(suffix, unit)| Some((base.strip_suffix(suffix)?, unit)));
    match unit {
        Some((stem, unit)) => registry.register_with_unit(stem, help, unit, family.clone()),
        None => registry.register(base, help, family.clone()),
    }
    family
}
