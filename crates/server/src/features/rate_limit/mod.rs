//! Per-client rate limits on routes (`rate_limit = { requests, per, burst, key }`): a token
//! bucket per key, checked in the pipeline's request phase after routing; a request without a
//! token gets 429 Too Many Requests with `Retry-After` and is not forwarded. nginx users know it
//! as `limit_req ... nodelay`; `docs/config.md` has the keys.
//!
//! Why hand-written GCRA over `quick_cache` rather than `governor`: governor's keyed store is a
//! map that grows with every key until someone prunes it, on a timer, so memory between prunes
//! is whatever the clients made it. A `quick_cache` is bounded by construction (the crate
//! already uses it) and GCRA is a few lines (`gcra`).
//!
//! Memory: at most [`KEYS_PER_ROUTE`] buckets per route, each a `u64` key (a hash of the
//! client's IP or header value, never the value itself, so a long header costs nothing) and an
//! `Arc<AtomicU64>`: about 100 bytes each with the map's overhead, ~10 MB per limited route at
//! most. The trade-off: a key evicted to make room (quick_cache keeps the ones used often and
//! recently) comes back with a full bucket, so a client among more than that many active ones
//! may get up to one extra burst. Collisions of the 64-bit keyed hash are negligible, and the
//! key is random per process, so clients cannot aim for one.

mod gcra;
mod shared;

use std::hash::{BuildHasher, Hash, Hasher, RandomState};
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use http::HeaderMap;
use prometheus_client::metrics::counter::Counter;
use quick_cache::sync::Cache;
use sluice_config::{RateLimit, RateLimitKey};

pub use gcra::retry_after_secs;
use gcra::{Decision, Gcra};

/// Most client keys a route's limiter remembers.
pub const KEYS_PER_ROUTE: usize = 100_000;

/// One route's limiter: the buckets of its clients, by key hash.
pub struct RouteRateLimit {
    gcra: Gcra,
    key: RateLimitKey,
    buckets: Cache<u64, Arc<AtomicU64>>,
    hasher: RandomState,
    /// Where bucket times count from: every `now` is nanoseconds since this.
    epoch: Instant,
    /// `sluice_rate_limited_total{route}`.
    limited: Counter,
    /// A fleet-wide limit in Redis, with this instance's share of it as the `local` fallback.
    fleet: Option<Fleet>,
}

struct Fleet {
    shared: Arc<shared::Shared>,
    /// The limiter at `requests / fleet_size` for `on_error = "local"`.
    local: Box<RouteRateLimit>,
    /// Names the route in bucket keys: two routes' limits are two buckets.
    route: String,
}

impl RouteRateLimit {
    pub fn new(config: &RateLimit, limited: Counter) -> Self {
        Self::with_capacity(config, limited, KEYS_PER_ROUTE)
    }

    /// A limiter remembering at most about `keys` clients (tests use small ones).
    pub fn with_capacity(config: &RateLimit, limited: Counter, keys: usize) -> Self {
        Self {
            gcra: Gcra::new(config.interval(), config.burst.get()),
            key: config.key.clone(),
            buckets: Cache::new(keys),
            hasher: RandomState::new(),
            epoch: Instant::now(),
            limited,
            fleet: None,
        }
    }

    /// A route's limiter, fleet-wide when the config says `shared` (`fallbacks` counts the
    /// checks `on_error` decided).
    pub fn for_route(
        config: &RateLimit,
        route: &str,
        limited: Counter,
        fallbacks: Counter,
    ) -> Self {
        let mut limiter = Self::new(config, limited.clone());
        let Some(fleet) = &config.shared else {
            return limiter;
        };
        let Some(shared) =
            shared::Shared::new(fleet, config.interval(), config.burst.get(), fallbacks)
        else {
            return limiter;
        };
        // This instance's share: `requests / fleet_size` (the same requests over a period
        // fleet_size times longer), and that share of the burst, at least one.
        let n = fleet.fleet_size.get();
        let share = RateLimit {
            per: config.per.saturating_mul(n),
            burst: std::num::NonZeroU32::new(config.burst.get() / n)
                .unwrap_or(std::num::NonZeroU32::MIN),
            shared: None,
            ..config.clone()
        };
        limiter.fleet = Some(Fleet {
            shared,
            local: Box::new(Self::new(&share, limited)),
            route: route.to_string(),
        });
        limiter
    }

    /// [`RouteRateLimit::check`], from the fleet's bucket when the limit is shared.
    pub async fn check_request(&self, ip: IpAddr, headers: &HeaderMap) -> Result<(), Duration> {
        let Some(fleet) = &self.fleet else {
            return self.check(ip, headers);
        };
        let key = self.fleet_key(&fleet.route, ip, headers);
        match fleet.shared.take(&key).await {
            shared::Verdict::Allow => Ok(()),
            shared::Verdict::Deny(wait) => {
                self.limited.inc();
                Err(wait)
            }
            shared::Verdict::Failed => {
                fleet.shared.fallbacks.inc();
                match fleet.shared.on_error() {
                    sluice_config::OnError::Local => fleet.local.check(ip, headers),
                    sluice_config::OnError::Allow => Ok(()),
                    sluice_config::OnError::Deny => {
                        self.limited.inc();
                        Err(Duration::from_secs(1))
                    }
                }
            }
        }
    }

    /// The bucket of this request in Redis: a hash the same on every instance (the local
    /// buckets' hasher is random per process), of the route and the client's key.
    fn fleet_key(&self, route: &str, ip: IpAddr, headers: &HeaderMap) -> String {
        use sha2::{Digest, Sha256};
        let mut hasher = Sha256::new();
        hasher.update((route.len() as u64).to_be_bytes());
        hasher.update(route.as_bytes());
        match &self.key {
            RateLimitKey::Header(name) if headers.contains_key(name) => {
                hasher.update([1u8]);
                hasher.update(headers.get(name).map(|v| v.as_bytes()).unwrap_or_default());
            }
            _ => {
                hasher.update([0u8]);
                hasher.update(ip.to_string().as_bytes());
            }
        }
        format!("sluice:rl:{{{}}}", hex::encode(&hasher.finalize()[..12]))
    }

    /// Takes a token for this request's client: `Ok` to go on, `Err(wait)` (counted in the
    /// metric) when its bucket is empty and the next token comes after `wait`.
    pub fn check(&self, ip: IpAddr, headers: &HeaderMap) -> Result<(), Duration> {
        let key = self.key_of(ip, headers);
        let now = self.now();
        match self.take(key, now) {
            Ok(()) => Ok(()),
            Err(wait) => {
                self.limited.inc();
                Err(wait)
            }
        }
    }

    /// Whether `ip`'s bucket (keyed by client address) has a token now, without taking it:
    /// `Err(wait)` when it is empty. Basic auth looks before checking a password and takes a
    /// token ([`Self::check`]) only for a wrong one.
    pub fn peek(&self, ip: IpAddr) -> Result<(), Duration> {
        let key = self.key_of(ip, &HeaderMap::new());
        let Some(bucket) = self.buckets.get(&key) else {
            return Ok(());
        };
        match self.gcra.check(bucket.load(Ordering::Acquire), self.now()) {
            Decision::Deny { retry_after } => Err(retry_after),
            Decision::Allow { .. } => Ok(()),
        }
    }

    /// How many client keys are remembered now.
    pub fn keys(&self) -> usize {
        self.buckets.len()
    }

    /// The bucket's decision for `key` at `now`, stored with a compare-and-swap so that
    /// concurrent requests of one client each take their own token.
    fn take(&self, key: u64, now: u64) -> Result<(), Duration> {
        let bucket = self
            .buckets
            .get_or_insert_with(&key, || Ok::<_, std::convert::Infallible>(Arc::default()))
            .unwrap_or_else(|never| match never {});
        let mut tat = bucket.load(Ordering::Acquire);
        loop {
            match self.gcra.check(tat, now) {
                Decision::Deny { retry_after } => return Err(retry_after),
                Decision::Allow { tat: next } => {
                    match bucket.compare_exchange_weak(
                        tat,
                        next,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    ) {
                        Ok(_) => return Ok(()),
                        Err(current) => tat = current,
                    }
                }
            }
        }
    }

    /// The client's key: a hash of its IP, or of the header's value. A request without the
    /// header is keyed by its IP, so leaving the header out does not escape the limit.
    fn key_of(&self, ip: IpAddr, headers: &HeaderMap) -> u64 {
        let mut h = self.hasher.build_hasher();
        // The tag keeps a header value from sharing a bucket with an address.
        match &self.key {
            RateLimitKey::Header(name) => match headers.get(name) {
                Some(value) => {
                    1u8.hash(&mut h);
                    value.as_bytes().hash(&mut h);
                }
                None => {
                    0u8.hash(&mut h);
                    ip.hash(&mut h);
                }
            },
            RateLimitKey::ClientIp => {
                0u8.hash(&mut h);
                ip.hash(&mut h);
            }
        }
        h.finish()
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests;
