//! RFC 9111 (HTTP Caching, <https://www.rfc-editor.org/rfc/rfc9111>) as pure functions over
//! `http` types and times, for a **shared** cache. "Now" is always a parameter.
//!
//! The zone calls, in the order of a request:
//!
//! 1. [`RequestDirectives::parse`] (§5.2.1), then for a stored response [`evaluate`]: serve it,
//!    serve it stale (while revalidating, or if the origin fails), revalidate, or answer 504
//!    for `only-if-cached` (§4, §4.2, §4.2.4, §5.2.1, RFC 5861). [`client_not_modified`] and
//!    [`not_modified_headers`] answer a client's own conditional request from a fresh entry
//!    (RFC 9110 §13, §15.4.5); [`age_value`] and [`strip_not_served`] prepare the headers (§5.1).
//! 2. To the origin: [`revalidation_headers`] (§4.3.1); on a 304, [`freshen`] (§3.2, §4.3.4).
//! 3. On a response: [`storable`] (§3, §3.5) and [`headers_to_store`] (§3.1); after an unsafe
//!    method, [`invalidation`] (§4.4).
//!
//! Directives come from `Cache-Control` or, when present and valid, from the first targeted
//! field of [`Settings::targeted`] (RFC 9213): see [`ResponseDirectives`].
//!
//! # Why not the `http-cache-semantics` crate
//!
//! It was the candidate (DESIGN.md §6) and does not fit: it implements RFC 7234 (its
//! heuristically cacheable statuses lack 308; no `must-understand`), knows no targeted fields
//! (RFC 9213), no configured lifetimes per status (nginx's `proxy_cache_valid`), no
//! `stale-if-error` or configured stale use, no `Accept-Encoding` normalisation for `Vary`, and
//! keeps its state as a serialised copy of whole request and response header maps, where the
//! zone wants [`crate::meta::Meta`] (one compact blob beside the body) and a secondary key it
//! can look up. It also reads the clock itself. Wrapping it would mean re-deciding most rules
//! around it; the rules are short when written against the RFC's own sections, which is what
//! the files here do, each rule citing its section and tested by a test named after it.
//!
//! Files: `directives.rs` and `structured.rs` (parsing), `storable.rs` (§3), `freshness.rs`
//! (§4.2.1–§4.2.3, §5.1), `evaluate.rs` (§4, §4.2.4, §5.2.1), `conditional.rs` (§4.3 and RFC
//! 9110 §13), `invalidate.rs` (§4.4); tests in `tests/`, one file per area.

mod conditional;
mod directives;
mod evaluate;
mod freshness;
mod invalidate;
mod retention;
mod storable;
mod structured;

use std::time::Duration;

use http::{HeaderName, StatusCode};

pub use conditional::{client_not_modified, freshen, not_modified_headers, revalidation_headers};
pub use directives::{DirectiveSource, MaxStale, RequestDirectives, ResponseDirectives};
pub use evaluate::{Evaluation, Reuse, evaluate};
pub use freshness::{
    Lifetime, LifetimeSource, age_value, current_age, freshness_lifetime, lifetime_of,
};
pub use invalidate::invalidation;
pub use retention::{expire_now, retention};
pub use storable::{NotStorable, headers_to_store, storable, strip_not_served};

/// sluice's own targeted field (RFC 9213 §2): directives for this cache alone, stripped before
/// a response goes downstream.
pub const SLUICE_CACHE_CONTROL: HeaderName = HeaderName::from_static("sluice-cache-control");

/// The targeted field for CDNs (RFC 9213 §3); forwarded downstream, so caches after sluice see
/// it too.
pub const CDN_CACHE_CONTROL: HeaderName = HeaderName::from_static("cdn-cache-control");

/// What a zone or route configures.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Lifetimes for responses that carry no explicit expiration time (nginx's
    /// `proxy_cache_valid`). An exact status wins over [`StatusMatch::Any`], whatever the
    /// order. Configuring a status also makes it storable without explicit freshness (an
    /// out-of-band agreement with the origin, which RFC 9111 §3 allows as a cache extension).
    pub valid: Vec<(StatusMatch, Duration)>,
    /// Heuristic freshness from `Last-Modified` (§4.2.2); off by default.
    pub heuristic: Option<Heuristic>,
    /// Store responses carrying `Set-Cookie` (nginx does not by default; neither does sluice:
    /// a cookie meant for one client would be replayed to every other).
    pub store_set_cookie: bool,
    /// Targeted fields in precedence order (RFC 9213 §2.2): the first one present and valid
    /// replaces `Cache-Control` and `Expires` for this cache's decisions.
    pub targeted: Vec<HeaderName>,
    /// Stale use the operator allows on top of what responses say.
    pub use_stale: UseStale,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            valid: Vec::new(),
            heuristic: None,
            store_set_cookie: false,
            targeted: vec![SLUICE_CACHE_CONTROL, CDN_CACHE_CONTROL],
            use_stale: UseStale::default(),
        }
    }
}

impl Settings {
    /// The configured lifetime for `status`: its own entry, else `any`.
    pub fn valid_for(&self, status: StatusCode) -> Option<Duration> {
        let exact = self
            .valid
            .iter()
            .find(|(m, _)| *m == StatusMatch::Code(status));
        let any = || self.valid.iter().find(|(m, _)| *m == StatusMatch::Any);
        exact.or_else(any).map(|(_, lifetime)| *lifetime)
    }
}

/// Which responses a [`Settings::valid`] entry applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusMatch {
    Code(StatusCode),
    /// nginx's `any`.
    Any,
}

/// §4.2.2: a fraction of the time since `Last-Modified`, capped.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Heuristic {
    /// The RFC's "typical setting" is 10%.
    pub fraction: f64,
    /// The cap (RFC 9111 gives none; a day or a week is usual).
    pub max: Duration,
}

impl Default for Heuristic {
    fn default() -> Self {
        Heuristic {
            fraction: 0.1,
            max: Duration::from_secs(24 * 3600),
        }
    }
}

/// Stale use the operator allows by configuration, an "out-of-band contract" in the words of
/// §4.2.4. Never overrides `no-cache`, `must-revalidate`, `proxy-revalidate` or `s-maxage`.
/// `Duration::MAX` means no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UseStale {
    /// Serve a stale response while one request revalidates it (nginx's `updating`), up to
    /// this long after it became stale; like `stale-while-revalidate` for every response.
    pub updating: Option<Duration>,
    /// Serve a stale response when the origin fails (nginx's `error`, `timeout`, `http_5xx`:
    /// which failures count is the zone's business), up to this long after it became stale;
    /// like `stale-if-error` for every response.
    pub error: Option<Duration>,
}

/// Statuses that are heuristically cacheable (RFC 9110 §15.1: "200, 203, 204, 206, 300, 301,
/// 308, 404, 405, 410, 414, and 501").
pub(crate) fn heuristically_cacheable(status: StatusCode) -> bool {
    matches!(
        status.as_u16(),
        200 | 203 | 204 | 206 | 300 | 301 | 308 | 404 | 405 | 410 | 414 | 501
    )
}

/// §1.2.2: delta-seconds beyond what a cache can represent are taken as 2^31 seconds.
pub(crate) const DELTA_SECONDS_MAX: u64 = 1 << 31;

#[cfg(test)]
mod tests;
