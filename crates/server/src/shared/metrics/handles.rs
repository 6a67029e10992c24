//! Per-route, per-upstream and per-listener handles: clones of the registry's counters, resolved
//! once, so recording on the request path is a few relaxed atomic adds and nothing else.

use std::time::Duration;

use http::StatusCode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use sluice_core::Compression;
use sluice_http::compress_policy::{Decision, SkipReason};

use super::DurationHistogram;

/// Handles for one route. Cheap to clone (reference counts only).
#[derive(Clone, Debug)]
pub struct RouteMetrics {
    /// Finished requests by status class, `[1xx, 2xx, 3xx, 4xx, 5xx]`.
    pub(super) requests: [Counter; 5],
    pub(super) duration: DurationHistogram,
    pub(super) bytes_in: Counter,
    pub(super) bytes_out: Counter,
}

impl RouteMetrics {
    /// One finished request: its final status (counted by class as label `code`), how long it
    /// took until the response body ended, request body bytes received and response body bytes
    /// sent. Call once per request, errors and aborted responses included.
    pub fn observe(&self, status: StatusCode, duration: Duration, bytes_in: u64, bytes_out: u64) {
        // `StatusCode` admits 100..=999; codes of 600 and above, which only a misbehaving upstream
        // sends, are counted as 5xx: sluice passed on something that is not valid HTTP.
        let class = usize::from(status.as_u16() / 100).clamp(1, 5) - 1;
        self.requests[class].inc();
        self.duration.observe(duration);
        if bytes_in > 0 {
            self.bytes_in.inc_by(bytes_in);
        }
        if bytes_out > 0 {
            self.bytes_out.inc_by(bytes_out);
        }
    }
}

/// Handles for a route with compression on. Cheap to clone.
#[derive(Clone, Debug)]
pub struct CompressMetrics {
    /// Responses by decision, indexed like [`Self::DECISIONS`].
    pub(super) decisions: [Counter; 10],
    /// Byte counters by algorithm, indexed by [`Compression::index`].
    pub(super) bytes: [CompressBytes; Compression::ALL.len()],
    /// Variants of static files made, and responses served from them, by algorithm.
    pub(super) variants_made: [Counter; Compression::ALL.len()],
    pub(super) variant_hits: [Counter; Compression::ALL.len()],
}

impl CompressMetrics {
    /// The `decision` label values: `compressed`, then every [`SkipReason`].
    pub const DECISIONS: [&'static str; 10] = [
        "compressed",
        SkipReason::Status.as_str(),
        SkipReason::Range.as_str(),
        SkipReason::AlreadyEncoded.as_str(),
        SkipReason::NoTransform.as_str(),
        SkipReason::Type.as_str(),
        SkipReason::TooSmall.as_str(),
        SkipReason::NotAccepted.as_str(),
        SkipReason::Precompressed.as_str(),
        SkipReason::Cpu.as_str(),
    ];

    /// Count one response's decision.
    pub fn decided(&self, decision: Decision) {
        // Exhaustive, so a new reason cannot go uncounted.
        let index = match decision {
            Decision::Compress(_) => 0,
            Decision::Skip(reason) => match reason {
                SkipReason::Status => 1,
                SkipReason::Range => 2,
                SkipReason::AlreadyEncoded => 3,
                SkipReason::NoTransform => 4,
                SkipReason::Type => 5,
                SkipReason::TooSmall => 6,
                SkipReason::NotAccepted => 7,
                SkipReason::Precompressed => 8,
                SkipReason::Cpu => 9,
            },
        };
        self.decisions[index].inc();
    }

    /// The byte counters of `algorithm`, to be handed to its response body.
    pub fn bytes(&self, algorithm: Compression) -> CompressBytes {
        self.bytes[algorithm.index()].clone()
    }

    /// A variant was compressed and kept (its bytes go to [`Self::bytes`] too).
    pub fn variant_made(&self, algorithm: Compression) {
        self.variants_made[algorithm.index()].inc();
    }

    /// A response was served from a kept variant, with no compression work.
    pub fn variant_hit(&self, algorithm: Compression) {
        self.variant_hits[algorithm.index()].inc();
    }
}

/// Identity bytes in, encoded bytes out and encoder time of one algorithm's compressors.
#[derive(Clone, Debug)]
pub struct CompressBytes {
    pub(super) bytes_in: Counter,
    pub(super) bytes_out: Counter,
    pub(super) cpu_seconds: Counter<f64, std::sync::atomic::AtomicU64>,
}

impl CompressBytes {
    /// One response body (or kept variant) is done: add what it compressed and the time its
    /// encoder took.
    pub fn add(&self, bytes_in: u64, bytes_out: u64, took: std::time::Duration) {
        if bytes_in > 0 {
            self.bytes_in.inc_by(bytes_in);
        }
        if bytes_out > 0 {
            self.bytes_out.inc_by(bytes_out);
        }
        if !took.is_zero() {
            self.cpu_seconds.inc_by(took.as_secs_f64());
        }
    }
}

/// How an encoded request body on a `decompress_requests` route ended; the `outcome` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecompressOutcome {
    /// Decoded to its end and forwarded.
    Decoded,
    /// Refused with 413: decoded size or ratio beyond the route's limits.
    TooLarge,
    /// Refused with 400: corrupt or truncated data.
    Corrupt,
    /// Refused with 415: a coding sluice does not decode.
    Unsupported,
}

impl DecompressOutcome {
    pub const ALL: [DecompressOutcome; 4] = [
        DecompressOutcome::Decoded,
        DecompressOutcome::TooLarge,
        DecompressOutcome::Corrupt,
        DecompressOutcome::Unsupported,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            DecompressOutcome::Decoded => "decoded",
            DecompressOutcome::TooLarge => "too_large",
            DecompressOutcome::Corrupt => "corrupt",
            DecompressOutcome::Unsupported => "unsupported",
        }
    }
}

/// Handles for a route with `decompress_requests`. Cheap to clone.
#[derive(Clone, Debug)]
pub struct DecompressMetrics {
    /// Request bodies by outcome, indexed like [`DecompressOutcome::ALL`].
    pub(super) outcomes: [Counter; 4],
    pub(super) bytes_in: Counter,
    pub(super) bytes_out: Counter,
}

impl DecompressMetrics {
    /// Count one request body's outcome.
    pub fn outcome(&self, outcome: DecompressOutcome) {
        let index = match outcome {
            DecompressOutcome::Decoded => 0,
            DecompressOutcome::TooLarge => 1,
            DecompressOutcome::Corrupt => 2,
            DecompressOutcome::Unsupported => 3,
        };
        self.outcomes[index].inc();
    }

    /// A decoder is done (finished, failed or dropped): add what it read and wrote.
    pub fn bytes(&self, encoded: u64, decoded: u64) {
        if encoded > 0 {
            self.bytes_in.inc_by(encoded);
        }
        if decoded > 0 {
            self.bytes_out.inc_by(decoded);
        }
    }
}

/// How one attempt on an upstream server ended; the `outcome` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpstreamOutcome {
    /// A response with a status below 500.
    Ok,
    /// No connection could be opened (refused, unreachable, connect timeout).
    ConnectError,
    /// Connected, but the TLS handshake failed (a certificate the group does not trust, a
    /// name that does not match, an alert from the server).
    TlsError,
    /// Connected, but the response headers did not arrive in time.
    Timeout,
    /// The connection broke (reset, closed, unparsable response) before response headers.
    Reset,
    /// The server answered with a 5xx status.
    HttpError,
    /// The keep-alive race: a kept-alive connection that had carried a response broke as the
    /// request went out on it, the server having closed it at its idle timeout (RFC 9112
    /// §9.3.1). Not the server's failure; the request goes again on a new connection.
    KeepaliveClosed,
}

impl UpstreamOutcome {
    pub const ALL: [UpstreamOutcome; 7] = [
        Self::Ok,
        Self::ConnectError,
        Self::TlsError,
        Self::Timeout,
        Self::Reset,
        Self::HttpError,
        Self::KeepaliveClosed,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::ConnectError => "connect_error",
            Self::TlsError => "tls_error",
            Self::Timeout => "timeout",
            Self::Reset => "reset",
            Self::HttpError => "http_error",
            Self::KeepaliveClosed => "keepalive_closed",
        }
    }

    /// The outcome of an attempt that produced response headers with this status.
    pub fn for_status(status: StatusCode) -> Self {
        if status.is_server_error() {
            Self::HttpError
        } else {
            Self::Ok
        }
    }
}

/// Handles for one server of an upstream group. Cheap to clone.
#[derive(Clone, Debug)]
pub struct UpstreamServerMetrics {
    pub(super) connect: DurationHistogram,
    pub(super) response: DurationHistogram,
    /// Attempts by outcome, indexed like [`UpstreamOutcome::ALL`].
    pub(super) outcomes: [Counter; UpstreamOutcome::ALL.len()],
    /// Response bodies cut off after the head: `[timeout, reset]`.
    pub(super) body_errors: [Counter; 2],
    pub(super) healthy: Gauge,
    pub(super) in_flight: Gauge,
    /// Its `max_conns` queue.
    pub queue: super::limits::UpstreamQueueMetrics,
}

impl UpstreamServerMetrics {
    /// Time to open a new connection (pooled connections are not observed: they took no time).
    pub fn connect_time(&self, d: Duration) {
        self.connect.observe(d);
    }

    /// Time from writing the request to receiving the response headers.
    pub fn response_time(&self, d: Duration) {
        self.response.observe(d);
    }

    /// One attempt on this server ended this way (a retried request counts once per attempt).
    pub fn request(&self, outcome: UpstreamOutcome) {
        self.outcomes[outcome as usize].inc();
    }

    /// A response body from this server ended early: it stalled past `idle` (`timeout`), or
    /// anything else (`reset`: the connection broke or closed short of the framing).
    pub fn body_error(&self, stalled: bool) {
        self.body_errors[usize::from(!stalled)].inc();
    }

    pub fn set_healthy(&self, healthy: bool) {
        self.healthy.set(i64::from(healthy));
    }

    /// Set the in-flight count from a counter the balancer already keeps (least connections).
    /// Do not mix with [`Self::in_flight`] for the same server.
    pub fn set_in_flight(&self, n: i64) {
        self.in_flight.set(n);
    }

    /// Count a request as in flight until the guard is dropped (on every path, errors and
    /// cancelled requests included).
    pub fn in_flight(&self) -> InFlightGuard {
        self.in_flight.inc();
        InFlightGuard {
            gauge: self.in_flight.clone(),
        }
    }
}

/// Decrements the in-flight gauge when dropped; see [`UpstreamServerMetrics::in_flight`].
#[derive(Debug)]
#[must_use = "the request stops counting as in flight when the guard is dropped"]
pub struct InFlightGuard {
    gauge: Gauge,
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

/// Handles for an upstream group as a whole. Cheap to clone.
#[derive(Clone, Debug)]
pub struct UpstreamMetrics {
    pub(super) retries: Counter,
    pub(super) no_peer: Counter,
    pub(super) panic_picks: Counter,
}

impl UpstreamMetrics {
    /// A request is being tried again on another server.
    pub fn retry(&self) {
        self.retries.inc();
    }

    /// The balancer found no usable server (all down or all excluded by earlier attempts).
    pub fn no_peer_available(&self) {
        self.no_peer.inc();
    }

    /// Every server that could take the request was out on passive health, and panic routing
    /// sent it to the one out the longest (see `sluice_upstream::group`).
    pub fn panic_pick(&self) {
        self.panic_picks.inc();
    }
}

/// Handles for one listener. Cheap to clone.
#[derive(Clone, Debug)]
pub struct ListenerMetrics {
    pub(super) open: Gauge,
    pub(super) total: Counter,
    pub(super) parked: Gauge,
    pub(super) tls_failures: Counter,
    pub(super) proxy_protocol_errors: Counter,
    /// Times accepting paused at `[listener, server]` `max_connections`.
    pub(super) limit_reached: [Counter; 2],
    /// Requests by HTTP version, QUIC Retries.
    pub(super) protocol: super::protocol::ProtocolMetrics,
}

impl ListenerMetrics {
    /// A connection was accepted. Pair with [`Self::connection_closed`], or use
    /// [`Self::connection`], which cannot forget to.
    pub fn connection_opened(&self) {
        self.total.inc();
        self.open.inc();
    }

    pub fn connection_closed(&self) {
        self.open.dec();
    }

    /// Count a connection as open until the guard is dropped.
    pub fn connection(&self) -> OpenConnection {
        self.connection_opened();
        OpenConnection {
            open: self.open.clone(),
        }
    }

    /// Count an idle connection as parked (`crate::net::h1`) until the guard is dropped.
    pub fn parked(&self) -> Parked {
        self.parked.inc();
        Parked {
            parked: self.parked.clone(),
        }
    }

    /// A request arrived in `version` (counted by the front end that read it).
    pub fn request(&self, version: http::Version) {
        self.protocol.request(version);
    }

    /// The per-protocol counters alone, for a connection to hold (cheaper to clone than all).
    pub fn protocols(&self) -> super::protocol::ProtocolMetrics {
        self.protocol.clone()
    }

    /// A QUIC Retry was sent to validate a client's address.
    pub fn quic_retry(&self) {
        self.protocol.quic_retry();
    }

    /// A TLS handshake failed or timed out (the connection is closed and counted closed as usual).
    pub fn tls_handshake_failed(&self) {
        self.tls_failures.inc();
    }

    /// Accepting paused because this listener's own `max_connections` was reached.
    pub fn listener_limit_reached(&self) {
        self.limit_reached[0].inc();
    }

    /// Accepting paused because `[server] max_connections` was reached.
    pub fn server_limit_reached(&self) {
        self.limit_reached[1].inc();
    }

    /// A connection on a `proxy_protocol` listener did not start with a valid PROXY header in
    /// time (it is closed without a response).
    pub fn proxy_protocol_failed(&self) {
        self.proxy_protocol_errors.inc();
    }
}

/// Keeps a connection counted as open; see [`ListenerMetrics::connection`].
#[derive(Debug)]
#[must_use = "the connection stops counting as open when the guard is dropped"]
pub struct OpenConnection {
    open: Gauge,
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.open.dec();
    }
}

/// Keeps a connection counted as parked; see [`ListenerMetrics::parked`].
#[derive(Debug)]
#[must_use = "the connection stops counting as parked when the guard is dropped"]
pub struct Parked {
    parked: Gauge,
}

impl Drop for Parked {
    fn drop(&mut self) {
        self.parked.dec();
    }
}
