//! The shared tier's circuit breaker: after [`TRIP_AFTER`] failures in a row (an error, a
//! timeout, a hung or refusing server) the tier is skipped for [`OPEN_FOR`], so a down Redis
//! costs requests nothing (not even the lookup deadline); then one probe goes through, and its
//! success closes the breaker again. Hand-written: a dozen lines of atomics, where the crates
//! that do this wrap tower services or futures in ways that do not fit a cache lookup.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Consecutive failures that open the breaker.
pub const TRIP_AFTER: u32 = 3;
/// How long an open breaker skips the tier before it lets one probe through.
pub const OPEN_FOR: Duration = Duration::from_secs(1);

pub struct Breaker {
    epoch: Instant,
    failures: AtomicU32,
    /// Milliseconds since `epoch` until which the breaker is open; 0: closed.
    open_until: AtomicU64,
    /// A probe is out (half-open): the others keep skipping until it answers.
    probing: AtomicBool,
    /// Times the breaker opened (metrics).
    pub trips: AtomicU64,
}

impl Default for Breaker {
    fn default() -> Self {
        Self {
            epoch: Instant::now(),
            failures: AtomicU32::new(0),
            open_until: AtomicU64::new(0),
            probing: AtomicBool::new(false),
            trips: AtomicU64::new(0),
        }
    }
}

impl Breaker {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// May a call go to the tier now?
    pub fn allow(&self) -> bool {
        let until = self.open_until.load(Ordering::Acquire);
        if until == 0 {
            return true;
        }
        if self.now_ms() < until {
            return false;
        }
        // Half-open: one caller probes.
        !self.probing.swap(true, Ordering::AcqRel)
    }

    /// A call succeeded; true when that closed an open breaker (the tier recovered).
    pub fn success(&self) -> bool {
        self.failures.store(0, Ordering::Release);
        self.probing.store(false, Ordering::Release);
        self.open_until.swap(0, Ordering::AcqRel) != 0
    }

    pub fn failure(&self) {
        let failures = self.failures.fetch_add(1, Ordering::AcqRel) + 1;
        let probe_failed = self.probing.swap(false, Ordering::AcqRel);
        if failures >= TRIP_AFTER || probe_failed {
            let was = self.open_until.swap(
                self.now_ms() + OPEN_FOR.as_millis() as u64,
                Ordering::AcqRel,
            );
            if was == 0 {
                self.trips.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Open (skipping the tier), for the breaker-state gauge.
    pub fn is_open(&self) -> bool {
        self.open_until.load(Ordering::Acquire) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_after_consecutive_failures_and_a_success_closes_it() {
        let breaker = Breaker::default();
        for _ in 0..TRIP_AFTER - 1 {
            breaker.failure();
            assert!(breaker.allow());
        }
        breaker.success();
        for _ in 0..TRIP_AFTER - 1 {
            breaker.failure();
        }
        assert!(!breaker.is_open(), "a success resets the count");
        breaker.failure();
        assert!(breaker.is_open());
        assert!(!breaker.allow());
        assert_eq!(breaker.trips.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn after_the_open_time_one_probe_goes_through() {
        let breaker = Breaker {
            epoch: Instant::now() - OPEN_FOR * 2,
            ..Breaker::default()
        };
        for _ in 0..TRIP_AFTER {
            breaker.failure();
        }
        // Opened "now"; move the deadline into the past as the clock would.
        breaker.open_until.store(1, Ordering::Release);
        assert!(breaker.allow(), "the probe");
        assert!(!breaker.allow(), "only one probe at a time");
        breaker.failure();
        assert!(
            breaker.is_open() && !breaker.allow(),
            "a failed probe reopens"
        );
        breaker.open_until.store(1, Ordering::Release);
        assert!(breaker.allow());
        breaker.success();
        assert!(!breaker.is_open() && breaker.allow());
    }
}
