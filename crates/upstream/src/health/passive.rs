//! Passive health: failures seen by real traffic take a peer out for a while.
//!
//! Semantics follow nginx's `max_fails` / `fail_timeout`
//! (<https://nginx.org/en/docs/http/ngx_http_upstream_module.html#max_fails>): `max_fails`
//! failures within `fail_timeout` take the peer out for `fail_timeout`; `max_fails = 0` disables
//! the accounting. Two details are nginx's too and easy to miss:
//!
//! - **Probation.** When the peer comes back its failure count is *not* cleared; only a success
//!   clears it. So the first failure after a comeback takes the peer out again at once, instead of
//!   sending it another `max_fails - 1` requests to fail (nginx keeps `fails` until a success).
//! - **Successes do not end an ejection early.** A request that started before the ejection and
//!   then succeeds clears the count, but the peer still sits out the rest of its `fail_timeout`.
//!
//! One difference: a failure reported while the peer is already out (a request that was in
//! flight when it was ejected, or one [panic routing](crate::group) sent to it) is ignored
//! rather than extending the ejection, so a peer is out for exactly `fail_timeout` from the
//! failure that took it out.
//!
//! And one addition, for panic routing (the group sends requests to a peer that is out when every
//! peer is): a success of a request *sent while the peer was out* ends the ejection at once. That
//! request could only get there by panic routing, and its answer is as good a proof that the
//! server is back as an active check's; without it, every request would keep going to the one
//! peer panic routing chose until the others' `fail_timeout` ran out.
//!
//! The pick path only reads one atomic (`out_until`); the counting itself sits behind a mutex,
//! taken on failures and on the first success after a failure, which are rare by comparison.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The passive health state of one peer.
#[derive(Debug)]
pub struct Passive {
    max_fails: u32,
    fail_timeout: Duration,
    /// Times are stored as nanoseconds since this instant so they fit in atomics. Instants before
    /// it count as the epoch itself; real callers pass `Instant::now()`, which is always later.
    epoch: Instant,
    /// The peer is out while `now < out_until` (nanoseconds since `epoch`); 0 = never out.
    out_until: AtomicU64,
    /// True while the window below counts at least one failure: lets `report_success` skip the
    /// lock (and any write to a shared cache line) in the common case of a healthy peer.
    dirty: AtomicBool,
    window: Mutex<Window>,
}

/// Failures counted since `start`.
#[derive(Debug, Default)]
struct Window {
    fails: u32,
    start: u64,
}

impl Passive {
    /// Failures can take the peer out (`max_fails` above 0).
    pub fn is_on(&self) -> bool {
        self.max_fails > 0
    }

    pub fn new(max_fails: u32, fail_timeout: Duration) -> Self {
        Self {
            max_fails,
            fail_timeout,
            epoch: Instant::now(),
            out_until: AtomicU64::new(0),
            dirty: AtomicBool::new(false),
            window: Mutex::new(Window::default()),
        }
    }

    /// True while failures keep the peer out.
    pub fn is_out(&self, now: Instant) -> bool {
        // Checked first so a peer that never failed costs one load, not a clock subtraction.
        let until = self.out_until.load(Ordering::Acquire);
        until != 0 && self.nanos(now) < until
    }

    /// Count a failure; true when this failure just took the peer out.
    pub fn report_failure(&self, now: Instant) -> bool {
        if self.max_fails == 0 {
            return false;
        }
        let now = self.nanos(now);
        let timeout = u64::try_from(self.fail_timeout.as_nanos()).unwrap_or(u64::MAX);
        // A poisoned lock only means another thread panicked mid-update of two integers; the
        // state is still meaningful, so keep going rather than spreading the panic.
        let mut window = self.window.lock().unwrap_or_else(PoisonError::into_inner);
        if now < self.out_until.load(Ordering::Acquire) {
            return false;
        }
        // A full count is kept across the ejection (probation, see the module docs); a partial
        // count older than `fail_timeout` no longer counts.
        if window.fails < self.max_fails && now.saturating_sub(window.start) > timeout {
            window.fails = 0;
        }
        if window.fails == 0 {
            window.start = now;
        }
        window.fails = window.fails.saturating_add(1);
        self.dirty.store(true, Ordering::Relaxed);
        if window.fails < self.max_fails {
            return false;
        }
        // `max(1)`: 0 means "never out", and a zero `fail_timeout` still ejects for a moment.
        self.out_until
            .store(now.saturating_add(timeout).max(1), Ordering::Release);
        true
    }

    /// A request sent at `sent` succeeded: forget the failures counted so far; and if the peer
    /// was already out when it was sent (only panic routing sends such requests), end the
    /// ejection. True when it ended one.
    pub fn report_success(&self, sent: Instant) -> bool {
        if self.out_since(sent).is_some_and(|since| since <= sent) {
            self.reset();
            return true;
        }
        if !self.dirty.load(Ordering::Relaxed) {
            return false;
        }
        let mut window = self.window.lock().unwrap_or_else(PoisonError::into_inner);
        window.fails = 0;
        self.dirty.store(false, Ordering::Relaxed);
        false
    }

    /// When the ejection that keeps the peer out at `now` began; `None` when it is not out.
    /// Panic routing sends a request to the peer out the longest (the earliest of these).
    pub fn out_since(&self, now: Instant) -> Option<Instant> {
        let until = self.out_until.load(Ordering::Acquire);
        if until == 0 || self.nanos(now) >= until {
            return None;
        }
        let timeout = u64::try_from(self.fail_timeout.as_nanos()).unwrap_or(u64::MAX);
        let since = Duration::from_nanos(until.saturating_sub(timeout));
        Some(self.epoch.checked_add(since).unwrap_or(self.epoch))
    }

    /// Forget failures and end an ejection: an active health check just proved the peer well.
    pub fn reset(&self) {
        let mut window = self.window.lock().unwrap_or_else(PoisonError::into_inner);
        window.fails = 0;
        self.out_until.store(0, Ordering::Release);
        self.dirty.store(false, Ordering::Relaxed);
    }

    fn nanos(&self, now: Instant) -> u64 {
        let since = now.saturating_duration_since(self.epoch);
        u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn reset_ends_an_ejection_at_once() {
        let p = Passive::new(1, 10 * SECOND);
        let t0 = Instant::now();
        assert!(p.report_failure(t0));
        assert!(p.is_out(t0 + SECOND));
        p.reset();
        assert!(!p.is_out(t0 + SECOND));
        // Counting starts afresh: the next failure ejects again (max_fails = 1).
        assert!(p.report_failure(t0 + 2 * SECOND));
    }

    fn passive(max_fails: u32, timeout_secs: u64) -> (Passive, Instant) {
        let p = Passive::new(max_fails, Duration::from_secs(timeout_secs));
        (p, Instant::now())
    }

    #[test]
    fn max_fails_within_timeout_takes_out_then_back_after_timeout() {
        let (p, t0) = passive(2, 10);
        assert!(!p.report_failure(t0));
        assert!(!p.is_out(t0));
        assert!(
            p.report_failure(t0 + SECOND),
            "second failure within 10s ejects"
        );
        assert!(p.is_out(t0 + SECOND));
        assert!(p.is_out(t0 + 10 * SECOND), "out for the whole fail_timeout");
        assert!(
            !p.is_out(t0 + 11 * SECOND + Duration::from_millis(1)),
            "back after it"
        );
    }

    #[test]
    fn failures_spread_wider_than_timeout_do_not_eject() {
        let (p, t0) = passive(2, 10);
        assert!(!p.report_failure(t0));
        assert!(
            !p.report_failure(t0 + 11 * SECOND),
            "the first one has expired"
        );
        assert!(!p.is_out(t0 + 11 * SECOND));
        assert!(p.report_failure(t0 + 12 * SECOND), "two within 10s now");
    }

    #[test]
    fn zero_max_fails_never_ejects() {
        let (p, t0) = passive(0, 10);
        for i in 0..100 {
            assert!(!p.report_failure(t0 + i * Duration::from_millis(1)));
        }
        assert!(!p.is_out(t0 + SECOND));
    }

    #[test]
    fn ejection_is_reported_once_and_not_extended() {
        let (p, t0) = passive(1, 10);
        assert!(p.report_failure(t0));
        assert!(
            !p.report_failure(t0 + 5 * SECOND),
            "already out: not reported again"
        );
        assert!(
            !p.is_out(t0 + 10 * SECOND + Duration::from_millis(1)),
            "not extended"
        );
    }

    #[test]
    fn success_resets_the_count() {
        let (p, t0) = passive(2, 10);
        assert!(!p.report_failure(t0));
        assert!(!p.report_success(t0));
        assert!(
            !p.report_failure(t0 + SECOND),
            "count restarted at the success"
        );
        assert!(p.report_failure(t0 + 2 * SECOND));
    }

    #[test]
    fn first_failure_after_comeback_ejects_again_unless_a_success_came_first() {
        let (p, t0) = passive(3, 10);
        for i in 0..3 {
            p.report_failure(t0 + i * SECOND);
        }
        let back = t0 + 13 * SECOND;
        assert!(!p.is_out(back));
        assert!(p.report_failure(back), "probation: one failure is enough");
        assert!(p.is_out(back + SECOND));

        let back = back + 11 * SECOND;
        assert!(!p.report_success(back));
        assert!(!p.report_failure(back), "a success ended the probation");
        assert!(!p.is_out(back));
    }

    #[test]
    fn success_of_a_request_sent_before_the_ejection_does_not_end_it() {
        let (p, t0) = passive(1, 10);
        assert!(p.report_failure(t0 + SECOND));
        assert!(
            !p.report_success(t0),
            "sent before the failure that took it out"
        );
        assert!(p.is_out(t0 + 5 * SECOND));
    }

    #[test]
    fn success_of_a_request_sent_while_out_ends_the_ejection() {
        // Only panic routing sends a request to a peer that is out; its success proves the
        // server back.
        let (p, t0) = passive(2, 10);
        p.report_failure(t0);
        assert!(p.report_failure(t0 + SECOND));
        assert!(p.report_success(t0 + 2 * SECOND));
        assert!(!p.is_out(t0 + 2 * SECOND));
        assert_eq!(p.out_since(t0 + 2 * SECOND), None);
        assert!(
            !p.report_failure(t0 + 3 * SECOND),
            "the count was cleared: max_fails failures again to take it out"
        );
    }

    #[test]
    fn out_since_is_when_the_ejection_began() {
        let (p, t0) = passive(1, 10);
        assert_eq!(p.out_since(t0), None, "never out");
        assert!(p.report_failure(t0 + 3 * SECOND));
        let since = p.out_since(t0 + 4 * SECOND);
        assert_eq!(since.map(|s| s.duration_since(t0)), Some(3 * SECOND));
        assert_eq!(
            p.out_since(t0 + 13 * SECOND + Duration::from_millis(1)),
            None,
            "back"
        );
    }
}
