//! A fleet-wide rate limit (`rate_limit = { ..., shared = "redis://..." }`): the same GCRA as
//! the local one ([`super::gcra`]), run atomically in Redis by one script call per request, so
//! N instances enforce one limit. The script reads Redis's own clock (`TIME`), so instances
//! whose clocks differ agree on every bucket.
//!
//! When Redis fails, refuses, or answers later than the deadline, `on_error` decides, counted
//! in `sluice_rate_limit_fallbacks_total`: `local` (the default) asks this instance's own
//! limiter at its share of the rate (`requests / fleet_size`), `allow` lets the request through,
//! `deny` refuses it. A circuit breaker (the shared cache tier's) skips Redis for a second
//! after three failures in a row, so a down Redis costs a request nothing. The connection is
//! made in the background, never on a request's path.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use sluice_cache::storage::shared::Breaker;
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
    client: redis::Client,
    conn: Mutex<Option<ConnectionManager>>,
    connecting: AtomicBool,
    breaker: Breaker,
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
        let client = match redis::Client::open(config.redis.as_str()) {
            Ok(client) => client,
            Err(err) => {
                // `sluice check` validated the URL; what it cannot see is reported here.
                tracing::error!(
                    "shared rate limit `{}`: {err}; on_error decides every request",
                    config.redis
                );
                return None;
            }
        };
        let interval_us = u64::try_from(interval.as_micros())
            .unwrap_or(u64::MAX)
            .max(1);
        let shared = Arc::new(Self {
            client,
            conn: Mutex::new(None),
            connecting: AtomicBool::new(false),
            breaker: Breaker::default(),
            script: redis::Script::new(SCRIPT),
            interval_us,
            tolerance_us: interval_us.saturating_mul(u64::from(burst.saturating_sub(1))),
            config: config.clone(),
            fallbacks,
        });
        shared.connect_in_background();
        Some(shared)
    }

    fn connect_in_background(self: &Arc<Self>) {
        if self.connecting.swap(true, Ordering::AcqRel) {
            return;
        }
        let weak = Arc::downgrade(self);
        let client = self.client.clone();
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(1)))
            .set_number_of_retries(2)
            .set_max_delay(Duration::from_millis(500));
        tokio::spawn(async move {
            let mut pause = Duration::from_millis(100);
            loop {
                match client
                    .get_connection_manager_with_config(config.clone())
                    .await
                {
                    Ok(manager) => {
                        if let Some(shared) = weak.upgrade() {
                            *shared.conn.lock().unwrap_or_else(PoisonError::into_inner) =
                                Some(manager);
                            shared.connecting.store(false, Ordering::Release);
                        }
                        return;
                    }
                    Err(_) if weak.strong_count() == 0 => return,
                    Err(err) => {
                        tracing::debug!("shared rate limit: connecting failed: {err}");
                        tokio::time::sleep(pause).await;
                        pause = (pause * 2).min(Duration::from_secs(2));
                    }
                }
            }
        });
    }

    /// One token from the fleet's bucket `key`, within the deadline.
    pub async fn take(self: &Arc<Self>, key: &str) -> Verdict {
        let conn = self
            .conn
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let Some(mut conn) = conn else {
            self.connect_in_background();
            return Verdict::Failed;
        };
        if !self.breaker.allow() {
            return Verdict::Failed;
        }
        let mut invocation = self.script.key(key);
        invocation.arg(self.interval_us).arg(self.tolerance_us);
        let deadline = Instant::now() + self.config.deadline;
        let call = invocation.invoke_async::<(u8, u64)>(&mut conn);
        match tokio::time::timeout_at(deadline.into(), call).await {
            Ok(Ok((allowed, wait_us))) => {
                self.breaker.success();
                if allowed == 1 {
                    Verdict::Allow
                } else {
                    Verdict::Deny(Duration::from_micros(wait_us.max(1)))
                }
            }
            Ok(Err(err)) => {
                tracing::debug!("shared rate limit: {err}");
                self.breaker.failure();
                Verdict::Failed
            }
            Err(_) => {
                self.breaker.failure();
                Verdict::Failed
            }
        }
    }

    pub fn on_error(&self) -> OnError {
        self.config.on_error
    }
}
