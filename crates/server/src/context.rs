//! The per-request context: what the phases of one request know about it. `Pipeline::handle`
//! creates it once, when the request arrives, and passes it through every phase; a phase writes
//! what it learns (the route, the compression outcome, the upstream's timing) and the later
//! ones, the access log and the metrics included, read it there instead of copying from the
//! request, which the proxy consumes.
//!
//! Per-request cost: nothing here allocates. The method is a copy for every standard method,
//! `Accept-Encoding` is kept as a shared `HeaderValue` and only when the route needs it, and the
//! route is a reference into the router.
//!
//! The features (`compress`, `proxy/`) are handed the fields they read or fill, not the whole
//! context: this module names the route, so it sits above the router in the module graph, and
//! the features below it must not import it back (see the crate's README).

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use http::{Method, Request};

use crate::client::Client;
use crate::compress::{AcceptEncoding, Outcome};
use crate::proxy::UpstreamTiming;
use crate::router::CompiledRoute;

/// One request's context, borrowed from the listener's pipeline for `'r`.
pub struct RequestContext<'r> {
    /// Who sent the request, and whether over TLS.
    pub client: Client,
    /// When the pipeline got the request: where every duration (metrics, access log) starts.
    pub start: Instant,
    /// The request's method, kept past the action (a proxy consumes the request).
    pub method: Method,
    /// The matched route; `None` before routing, and when no route matched (404).
    pub route: Option<&'r CompiledRoute>,
    /// The request's `Accept-Encoding`, kept past the action when the route compresses;
    /// `Absent` otherwise.
    pub accept: AcceptEncoding,
    /// What response compression decided and sent, on routes that compress.
    pub compression: Option<Outcome>,
    /// What the response cache did with the request (coming: issue 10); nothing sets it yet.
    pub cache: Option<CacheStatus>,
    /// What the proxy measured of the upstream, on proxy routes.
    pub upstream: UpstreamTiming,
    /// Request body bytes read so far, when the request's body was forwarded.
    pub bytes_in: Option<Arc<AtomicU64>>,
}

impl<'r> RequestContext<'r> {
    /// The context of `req`, arrived just now from `client`; nothing is known of it yet.
    pub fn new<B>(client: Client, req: &Request<B>) -> Self {
        Self {
            client,
            start: Instant::now(),
            method: req.method().clone(),
            route: None,
            accept: AcceptEncoding::Absent,
            compression: None,
            cache: None,
            upstream: UpstreamTiming::default(),
            bytes_in: None,
        }
    }

    /// Whether the request came over TLS.
    pub fn tls(&self) -> bool {
        self.client.tls
    }
}

/// What the response cache did with a request, as nginx's `$upstream_cache_status` says it.
/// A placeholder until the cache lands (issue 10): the values are fixed, nothing sets them yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheStatus {
    /// Not in the cache: fetched, and stored if cacheable.
    Miss,
    /// Answered from the cache.
    Hit,
    /// In the cache but stale: fetched again.
    Expired,
    /// In the cache but stale, and served so (the upstream failed, or `stale-if-error`).
    Stale,
    /// Stale and served so while another request updates it.
    Updating,
    /// Stale, and the upstream said it is still good (304): served from the cache.
    Revalidated,
    /// Not looked up: the request may not be answered from a cache.
    Bypass,
}

impl CacheStatus {
    /// The status as logs and headers spell it (`MISS`, `HIT`, ...).
    pub const fn as_str(self) -> &'static str {
        match self {
            CacheStatus::Miss => "MISS",
            CacheStatus::Hit => "HIT",
            CacheStatus::Expired => "EXPIRED",
            CacheStatus::Stale => "STALE",
            CacheStatus::Updating => "UPDATING",
            CacheStatus::Revalidated => "REVALIDATED",
            CacheStatus::Bypass => "BYPASS",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_statuses_are_spelled_as_nginx_does() {
        let all = [
            CacheStatus::Miss,
            CacheStatus::Hit,
            CacheStatus::Expired,
            CacheStatus::Stale,
            CacheStatus::Updating,
            CacheStatus::Revalidated,
            CacheStatus::Bypass,
        ];
        assert_eq!(
            all.map(CacheStatus::as_str),
            [
                "MISS",
                "HIT",
                "EXPIRED",
                "STALE",
                "UPDATING",
                "REVALIDATED",
                "BYPASS"
            ]
        );
    }
}
