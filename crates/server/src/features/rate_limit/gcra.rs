//! The token bucket, as GCRA (the generic cell rate algorithm, ITU-T I.371): instead of a token
//! count and a refill timestamp, a bucket is one number, its *theoretical arrival time* (TAT),
//! the time at which the bucket will be full again. That fits in one `AtomicU64`, so a bucket is
//! updated with a compare-and-swap and no lock, and the logic is a pure function of (state, now)
//! that the tests drive with made-up clocks instead of sleeping.
//!
//! Times are nanoseconds since the limiter's own epoch (an `Instant`, so monotonic): a `u64`
//! holds 584 years of them. A TAT of 0 is "full since forever", which is what a new (or evicted)
//! key starts with.

use std::time::Duration;

/// The rate and burst of one limit, in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gcra {
    /// Time for one token to come back (`per / requests`); at least 1 (the config checks it).
    interval: u64,
    /// How far the TAT may run ahead of now: `interval * (burst - 1)`. A full bucket lets
    /// `burst` requests through at once; the next waits one interval.
    tolerance: u64,
}

/// What a bucket says to one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Take the token: store `tat` as the bucket's new state.
    Allow { tat: u64 },
    /// No token: the next one comes in `retry_after`; the state is unchanged.
    Deny { retry_after: Duration },
}

impl Gcra {
    pub fn new(interval: Duration, burst: u32) -> Self {
        let interval = u64::try_from(interval.as_nanos())
            .unwrap_or(u64::MAX)
            .max(1);
        let tolerance = interval.saturating_mul(u64::from(burst.saturating_sub(1)));
        Self {
            interval,
            tolerance,
        }
    }

    /// The decision for a request at `now` on a bucket whose state is `tat`.
    pub fn check(&self, tat: u64, now: u64) -> Decision {
        // A bucket idle long enough is full; it does not save up tokens past that.
        let tat = tat.max(now);
        let ahead = tat - now;
        if ahead > self.tolerance {
            Decision::Deny {
                retry_after: Duration::from_nanos(ahead - self.tolerance),
            }
        } else {
            Decision::Allow {
                tat: tat.saturating_add(self.interval),
            }
        }
    }
}

/// `Retry-After` in whole seconds (RFC 9110 §10.2.3 has no fractions), rounded up so that a
/// client that waits that long finds a token, and at least 1: "0" would invite a retry loop.
pub fn retry_after_secs(wait: Duration) -> u64 {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    secs.max(1)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::panic)]
    use super::*;

    const MS: u64 = 1_000_000;

    /// Runs requests at `now` until one is denied: how many got through, the state after, and
    /// the denial's wait.
    fn drain(gcra: &Gcra, mut tat: u64, now: u64) -> (u32, u64, Duration) {
        let mut allowed = 0;
        loop {
            match gcra.check(tat, now) {
                Decision::Allow { tat: next } => {
                    allowed += 1;
                    tat = next;
                }
                Decision::Deny { retry_after } => return (allowed, tat, retry_after),
            }
        }
    }

    #[test]
    fn a_full_bucket_lets_the_burst_through_then_refills_at_the_rate() {
        // 10 per second, burst 5: 100ms per token.
        let gcra = Gcra::new(Duration::from_millis(100), 5);
        let start = 1_000 * MS;
        let (allowed, tat, wait) = drain(&gcra, 0, start);
        assert_eq!(allowed, 5);
        // The sixth waits for one token: 100ms.
        assert_eq!(wait, Duration::from_millis(100));
        // 250ms later, two tokens are back (not three: the third is 50ms away).
        let (allowed, tat, wait) = drain(&gcra, tat, start + 250 * MS);
        assert_eq!(allowed, 2);
        assert_eq!(wait, Duration::from_millis(50));
        // Idle for an hour: full again, but no fuller than the burst.
        let (allowed, _, _) = drain(&gcra, tat, start + 3_600_000 * MS);
        assert_eq!(allowed, 5);
    }

    #[test]
    fn a_steady_client_at_the_rate_is_never_refused() {
        let gcra = Gcra::new(Duration::from_millis(100), 1);
        let mut tat = 0;
        for i in 1..=50 {
            match gcra.check(tat, i * 100 * MS) {
                Decision::Allow { tat: next } => tat = next,
                Decision::Deny { .. } => panic!("request {i} refused"),
            }
        }
        assert!(matches!(
            gcra.check(tat, 5_000 * MS + 50 * MS),
            Decision::Deny { .. }
        ));
    }

    #[test]
    fn a_slow_rate_tells_how_long_to_wait() {
        // 1 per minute, burst 1: the second request waits the whole minute.
        let gcra = Gcra::new(Duration::from_secs(60), 1);
        let (allowed, _, wait) = drain(&gcra, 0, 10 * MS);
        assert_eq!((allowed, wait), (1, Duration::from_secs(60)));
        assert_eq!(retry_after_secs(wait), 60);
    }

    #[test]
    fn retry_after_is_whole_seconds_rounded_up_and_at_least_one() {
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(50)), 1);
        assert_eq!(retry_after_secs(Duration::from_secs(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1_001)), 2);
        assert_eq!(retry_after_secs(Duration::from_secs(60)), 60);
    }
}
