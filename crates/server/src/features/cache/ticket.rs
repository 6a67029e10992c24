//! What the request phase's lookup hands on: an answer, or a ticket that says how to go
//! upstream and what the response phase must do with the answer.

use std::sync::Arc;
use std::time::SystemTime;

use http::Request;
use http::Response;
use http::request::Parts;
use sluice_cache::zone::{CacheStatus, Entry, Fence};
use sluice_core::{Body, Error};

use super::store;

/// A request the cache could not answer: the upstream's error, and the cache status to log.
pub struct Failed {
    pub error: Error,
    pub status: Option<CacheStatus>,
}

/// What the request phase's lookup decided.
pub enum Lookup {
    /// Answered from the cache (HIT, STALE, UPDATING; 504 for `only-if-cached`): the action
    /// is skipped.
    Answered(Outcome),
    /// Go upstream with [`RouteCache::upstream_request`](super::RouteCache::upstream_request), then hand the result to
    /// [`RouteCache::complete`](super::RouteCache::complete).
    Upstream(Ticket),
}

/// A request on its way upstream, and what the cache must do with the answer.
pub struct Ticket {
    pub(super) kind: Kind,
    pub(super) primary: String,
    /// The client's request head (its body, if any, goes upstream).
    pub(super) parts: Parts,
    /// RFC 9111 §4.2.3 `request_time`.
    pub(super) request_time: SystemTime,
    /// Taken when the request went upstream (`None` for methods the cache does not serve): a
    /// purge or an unsafe method on this key meanwhile means its response is not stored.
    pub(super) fence: Option<Fence>,
}

pub(super) enum Kind {
    /// A method the cache does not serve.
    Uncached { tls: bool },
    /// Nothing usable stored (or bypassed): fetch; `leader` wakes the requests collapsed on it.
    Fetch {
        leader: Option<store::Leader>,
        may_store: bool,
        status: CacheStatus,
    },
    /// A stored response that must be revalidated before it is served; `leader` wakes the
    /// requests collapsed on the revalidation.
    Revalidate {
        entry: Arc<Entry>,
        if_error: bool,
        may_store: bool,
        leader: Option<store::Leader>,
    },
}

impl Ticket {
    /// The request's target, for log lines.
    pub fn uri(&self) -> &http::Uri {
        &self.parts.uri
    }

    pub(super) fn uncached(parts: Parts, tls: bool) -> Self {
        Self {
            kind: Kind::Uncached { tls },
            primary: String::new(),
            parts,
            request_time: SystemTime::now(),
            fence: None,
        }
    }
}

/// A copy of a request's head (the request itself goes on to the action).
pub(super) fn head_of<B>(req: &Request<B>) -> Parts {
    let mut head = Request::new(());
    *head.method_mut() = req.method().clone();
    *head.uri_mut() = req.uri().clone();
    *head.version_mut() = req.version();
    *head.headers_mut() = req.headers().clone();
    head.into_parts().0
}

/// What the cache did with a request: the response and the status for `X-Cache-Status` and
/// the access log (`None`: the cache was not involved, e.g. a POST).
pub struct Outcome {
    pub response: Response<Body>,
    pub status: Option<CacheStatus>,
}

impl Outcome {
    pub(super) fn new(response: Response<Body>, status: Option<CacheStatus>) -> Self {
        Self { response, status }
    }
}
