//! A route's `rate_limit` option: a token bucket per client, as nginx's
//! `limit_req zone=... rate=10r/s burst=5 nodelay` does it.
//!
//! The bucket of each key (the client's IP, or a request header's value) holds at most `burst`
//! tokens and gains one every `per / requests`; a request takes one token or is refused with
//! 429 Too Many Requests. There is no queueing (nginx's behaviour without `nodelay`): a proxy
//! that delays requests holds their connections, which is what a limit is meant to prevent.

use std::num::NonZeroU32;
use std::time::Duration;

use http::HeaderName;

/// `rate_limit = { requests = 100, per = "1s", burst = 50, key = "client_ip" }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimit {
    /// Tokens added per `per`: the sustained rate is `requests / per`.
    pub requests: NonZeroU32,
    /// The period `requests` are spread over; never zero, and at least `requests` nanoseconds
    /// so that one token's interval is at least 1ns.
    pub per: Duration,
    /// Most tokens a bucket holds: requests a client may send at once after being idle.
    /// Defaults to `requests`.
    pub burst: NonZeroU32,
    /// Whose bucket a request takes its token from.
    pub key: RateLimitKey,
    /// One limit for a whole fleet, kept in Redis (`shared = "redis://..."`); `None`: this
    /// instance's own buckets.
    pub shared: Option<SharedRateLimit>,
}

/// `shared`, `on_error`, `fleet_size` and `deadline` of a `rate_limit`: the same GCRA, run
/// atomically in Redis (one script call per request), so N instances enforce one limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedRateLimit {
    /// `redis://host:port/db` or `redis+unix:///path`.
    pub redis: String,
    /// What a request gets when Redis fails or is slower than `deadline`.
    pub on_error: OnError,
    /// Instances sharing the limit: with `on_error = "local"` each allows `requests /
    /// fleet_size` (and that share of the burst, at least 1) on its own. Default 1.
    pub fleet_size: NonZeroU32,
    /// The most a check may take before `on_error` decides. Default 20 ms.
    pub deadline: Duration,
}

/// `on_error` of a shared rate limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnError {
    /// This instance's own limiter at its share of the rate (the default).
    #[default]
    Local,
    /// Let every request through.
    Allow,
    /// Refuse every request (429).
    Deny,
}

impl OnError {
    pub fn as_str(self) -> &'static str {
        match self {
            OnError::Local => "local",
            OnError::Allow => "allow",
            OnError::Deny => "deny",
        }
    }
}

impl RateLimit {
    /// A limit of `requests` per `per`, `burst` = `requests`, by client IP.
    pub fn new(requests: NonZeroU32, per: Duration) -> Self {
        Self {
            requests,
            per,
            burst: requests,
            key: RateLimitKey::ClientIp,
            shared: None,
        }
    }

    /// Time for one token to come back: `per / requests`.
    pub fn interval(&self) -> Duration {
        self.per / self.requests.get()
    }
}

/// What identifies a client for a rate limit (`key = ...`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum RateLimitKey {
    /// `"client_ip"`: the client address: the connection's peer, or, when the peer is one of the
    /// listener's `trusted_proxies`, the address its `X-Forwarded-For` names (never what an
    /// untrusted client writes there).
    #[default]
    ClientIp,
    /// `"header:NAME"`: the value of a request header, e.g. an API key. Requests without the
    /// header fall back to the client's IP, so leaving it out does not escape the limit.
    Header(HeaderName),
}
