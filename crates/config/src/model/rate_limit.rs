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
}

impl RateLimit {
    /// A limit of `requests` per `per`, `burst` = `requests`, by client IP.
    pub fn new(requests: NonZeroU32, per: Duration) -> Self {
        Self {
            requests,
            per,
            burst: requests,
            key: RateLimitKey::ClientIp,
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
