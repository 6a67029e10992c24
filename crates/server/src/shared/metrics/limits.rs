//! The metrics of limits: connections refused by waiting at a listener's or the server's
//! `max_connections`, requests refused by a request limit (URI length, content codings, body
//! size and time), upstream requests queued or refused at a server's `max_conns`, and access-log
//! lines dropped because the writer fell behind. `docs/operations.md` ("Limits") says which
//! limit counts where.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::labels::ServerLabels;
use super::register;

pub const CONNECTION_LIMIT_REACHED_TOTAL: &str = "sluice_connection_limit_reached_total";
pub const REQUEST_LIMIT_EXCEEDED_TOTAL: &str = "sluice_request_limit_exceeded_total";
pub const UPSTREAM_QUEUED: &str = "sluice_upstream_queued";
pub const UPSTREAM_QUEUE_REJECTED_TOTAL: &str = "sluice_upstream_queue_rejected_total";
pub const ACCESS_LOG_DROPPED_TOTAL: &str = "sluice_access_log_dropped_total";

/// Every name of this file, for [`super::ALL_NAMES`].
pub const NAMES: [&str; 5] = [
    CONNECTION_LIMIT_REACHED_TOTAL,
    REQUEST_LIMIT_EXCEEDED_TOTAL,
    UPSTREAM_QUEUED,
    UPSTREAM_QUEUE_REJECTED_TOTAL,
    ACCESS_LOG_DROPPED_TOTAL,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ListenerScopeLabels {
    listener: String,
    /// `listener` (its own `max_connections`) or `server` (`[server] max_connections`).
    scope: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ListenerLimitLabels {
    listener: String,
    limit: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerReasonLabels {
    upstream: String,
    server: String,
    reason: &'static str,
}

/// The families, registered once in [`super::Metrics::new`].
#[derive(Debug)]
pub(super) struct LimitFamilies {
    connection_limit: Family<ListenerScopeLabels, Counter>,
    request_limit: Family<ListenerLimitLabels, Counter>,
    upstream_queued: Family<ServerLabels, Gauge>,
    upstream_rejected: Family<ServerReasonLabels, Counter>,
    access_log_dropped: Counter,
}

impl LimitFamilies {
    pub(super) fn register(r: &mut Registry) -> Self {
        let access_log_dropped = Counter::default();
        r.register(
            ACCESS_LOG_DROPPED_TOTAL
                .strip_suffix("_total")
                .unwrap_or(ACCESS_LOG_DROPPED_TOTAL),
            "Access-log lines dropped because the writer fell behind (the queue was full)",
            access_log_dropped.clone(),
        );
        Self {
            connection_limit: register(
                r,
                CONNECTION_LIMIT_REACHED_TOTAL,
                "Times a listener stopped accepting because max_connections was reached",
            ),
            request_limit: register(
                r,
                REQUEST_LIMIT_EXCEEDED_TOTAL,
                "Requests refused by a request limit (uri_length 414, content_codings 415, body_size 413, body_timeout 408)",
            ),
            upstream_queued: register(
                r,
                UPSTREAM_QUEUED,
                "Requests waiting for a free slot of an upstream server at its max_conns",
            ),
            upstream_rejected: register(
                r,
                UPSTREAM_QUEUE_REJECTED_TOTAL,
                "Requests answered 503 at an upstream server's max_conns: queue full or wait timed out",
            ),
            access_log_dropped,
        }
    }

    /// `[listener scope, server scope]` counters of one listener.
    pub(super) fn connection_limit(&self, listener: &str) -> [Counter; 2] {
        ["listener", "server"].map(|scope| {
            self.connection_limit
                .get_or_create_owned(&ListenerScopeLabels {
                    listener: listener.to_owned(),
                    scope,
                })
        })
    }

    pub(super) fn request_limits(&self, listener: &str) -> RequestLimitMetrics {
        RequestLimitMetrics {
            exceeded: RequestLimit::ALL.map(|limit| {
                self.request_limit
                    .get_or_create_owned(&ListenerLimitLabels {
                        listener: listener.to_owned(),
                        limit: limit.as_str(),
                    })
            }),
        }
    }

    pub(super) fn upstream_queue(&self, upstream: &str, server: &str) -> UpstreamQueueMetrics {
        let labels = ServerLabels {
            upstream: upstream.to_owned(),
            server: server.to_owned(),
        };
        let rejected = ["full", "timeout"].map(|reason| {
            self.upstream_rejected
                .get_or_create_owned(&ServerReasonLabels {
                    upstream: upstream.to_owned(),
                    server: server.to_owned(),
                    reason,
                })
        });
        UpstreamQueueMetrics {
            queued: self.upstream_queued.get_or_create_owned(&labels),
            full: rejected[0].clone(),
            timeout: rejected[1].clone(),
        }
    }

    pub(super) fn access_log_dropped(&self) -> Counter {
        self.access_log_dropped.clone()
    }
}

/// Which request limit refused a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestLimit {
    UriLength,
    ContentCodings,
    BodySize,
    BodyTimeout,
}

impl RequestLimit {
    const ALL: [RequestLimit; 4] = [
        RequestLimit::UriLength,
        RequestLimit::ContentCodings,
        RequestLimit::BodySize,
        RequestLimit::BodyTimeout,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RequestLimit::UriLength => "uri_length",
            RequestLimit::ContentCodings => "content_codings",
            RequestLimit::BodySize => "body_size",
            RequestLimit::BodyTimeout => "body_timeout",
        }
    }
}

/// Handles of one listener's request-limit counters. Cheap to clone.
#[derive(Clone, Debug)]
pub struct RequestLimitMetrics {
    exceeded: [Counter; 4],
}

impl RequestLimitMetrics {
    pub fn exceeded(&self, limit: RequestLimit) {
        self.exceeded[limit as usize].inc();
    }
}

/// Handles of one upstream server's `max_conns` queue. Cheap to clone.
#[derive(Clone, Debug)]
pub struct UpstreamQueueMetrics {
    pub queued: Gauge,
    pub full: Counter,
    pub timeout: Counter,
}
