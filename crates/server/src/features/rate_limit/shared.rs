//! A fleet-wide rate limit (`rate_limit = { ..., shared = "redis://..." }`): the same GCRA as
//! the local one ([`super::gcra`]), run atomically in Redis by one script call per request, so
//! N instances enforce one limit. The script reads Redis's own clock (`TIME`), so instances
//! whose clocks differ agree on every bucket.
//!
//! When Redis fails, refuses, or answers later than the deadline, `on_error` decides, counted
//! in `sluice_rate_limit_fallbacks_total`: `local` (the default) asks this instance's own
//! limiter at its share of the rate (`requests / fleet_size`), `allow` lets the request through,
//! `deny` refuses it. A circuit breaker (the shared cache tier's type; on a cluster one per
//! master) skips Redis for a second after three failures in a row, so a down Redis costs a request nothing. The connection (the
//! shared tier's [`Engine`]: one server, or a Redis Cluster, where the bucket's one key is in
//! one slot) is made in the background, never on a request's path.

use std::sync::Arc;
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use sluice_cache::storage::shared::Engine;
use sluice_config::{OnError, SharedRateLimit};

/// GCRA in microseconds on Redis's clock. KEYS[1]: the bucket; ARGV: interval, tolerance (µs).
/// Returns {1, 0} (allowed) or {0, µs until the next token}. The key expires once its bucket
/// would be full again, so idle clients cost Redis nothing.
const SCRIPT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local ahead = tat - now
if ahead > tolerance then return {0, ahead - tolerance} end
local nxt = tat + interval
redis.call('SET', KEYS[1], string.format('%d', nxt), 'PX', math.floor((nxt - now) / 1000) + 1000)
return {1, 0}
";

/// What Redis said, or why it said nothing.
pub enum Verdict {
    Allow,
    Deny(Duration),
    Failed,
}

pub struct Shared {
    engine: Arc<Engine>,
    script: redis::Script,
    interval_us: u64,
    tolerance_us: u64,
    pub config: SharedRateLimit,
    pub fallbacks: Counter,
}

impl Shared {
    pub fn new(
        config: &SharedRateLimit,
        interval: Duration,
        burst: u32,
        fallbacks: Counter,
    ) -> Option<Arc<Self>> {
        let engine = match Engine::new(&config.redis) {
            Ok(engine) => engine,
            Err(err) => {
                // `sluice check` validated the URL; what it cannot see is reported here.
                tracing::error!("shared rate limit {err}; on_error decides every request");
                return None;
            }
        };
        let interval_us = u64::try_from(interval.as_micros())
            .unwrap_or(u64::MAX)
            .max(1);
        let shared = Arc::new(Self {
            engine,
            script: redis::Script::new(SCRIPT),
            interval_us,
            tolerance_us: interval_us.saturating_mul(u64::from(burst.saturating_sub(1))),
            config: config.clone(),
            fallbacks,
        });
        shared.engine.conn();
        Some(shared)
    }

    /// One token from the fleet's bucket `key`, within the deadline.
    pub async fn take(self: &Arc<Self>, key: &str) -> Verdict {
        let Some(mut conn) = self.engine.conn() else {
            return Verdict::Failed;
        };
        // On a cluster, the breaker of the key's master: one that is down makes only the keys
        // of its slots fall back.
        let breaker = self.engine.breaker_for(&conn, Some(key));
        if !breaker.allow() {
            return Verdict::Failed;
        }
        let mut invocation = self.script.key(key);
        invocation.arg(self.interval_us).arg(self.tolerance_us);
        let deadline = Instant::now() + self.config.deadline;
        let call = invocation.invoke_async::<(u8, u64)>(&mut conn);
        match tokio::time::timeout_at(deadline.into(), call).await {
            Ok(Ok((allowed, wait_us))) => {
                breaker.success();
                if allowed == 1 {
                    Verdict::Allow
                } else {
                    Verdict::Deny(Duration::from_micros(wait_us.max(1)))
                }
            }
            Ok(Err(err)) => {
                tracing::debug!("shared rate limit: {err}");
                breaker.failure();
                Verdict::Failed
            }
            Err(_) => {
                breaker.failure();
                Verdict::Failed
            }
        }
    }

    pub fn on_error(&self) -> OnError {
        self.config.on_error
    }
}
