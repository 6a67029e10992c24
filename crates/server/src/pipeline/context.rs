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

use crate::features::compress::{AcceptEncoding, Outcome};
use crate::features::proxy::UpstreamTiming;
use crate::pipeline::router::CompiledRoute;
use crate::shared::client::Client;

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
    /// What the response cache did with the request, on routes with a cache.
    pub cache: Option<CacheStatus>,
    /// A cache miss or revalidation on its way upstream: what the response phase must store.
    /// Boxed: it is large and only cached routes have one.
    pub ticket: Option<Box<crate::features::cache::Ticket>>,
    /// What the proxy measured of the upstream, on proxy routes.
    pub upstream: UpstreamTiming,
    /// Request body bytes read so far, when the request's body was forwarded.
    pub bytes_in: Option<Arc<AtomicU64>>,
    /// What dictionary compression needs of the request, on routes with `dictionary`.
    /// Boxed: only those routes pay for it.
    pub dictionary: Option<Box<crate::features::dictionary::DictionaryRequest>>,
    /// Why the route's access control refused the request (`client`, `auth`, ...), for the
    /// access log's `deny=`.
    pub deny: Option<&'static str>,
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
            ticket: None,
            upstream: UpstreamTiming::default(),
            bytes_in: None,
            dictionary: None,
            deny: None,
        }
    }

    /// Whether the request came over TLS.
    pub fn tls(&self) -> bool {
        self.client.tls
    }
}

pub use sluice_cache::zone::CacheStatus;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_statuses_are_spelled_as_nginx_does() {
        assert_eq!(
            CacheStatus::ALL.map(CacheStatus::as_str),
            [
                "HIT",
                "MISS",
                "EXPIRED",
                "STALE",
                "UPDATING",
                "REVALIDATED",
                "BYPASS"
            ]
        );
    }
}
