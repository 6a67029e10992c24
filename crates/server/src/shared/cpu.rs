//! The process's CPU share, sampled by one background task and handed to whoever adapts to it
//! (CPU-adaptive compression, `max_cpu`: `docs/performance.md`).
//!
//! Every [`SAMPLE_PERIOD`] the task reads the CPU time the whole process has used (user plus
//! system, every thread: `getrusage(RUSAGE_SELF)` through `nix`, one system call per sample,
//! none per request) and divides what was used since the last sample by the wall time times
//! the server's worker threads: 100% is every worker busy the whole period. A share of the
//! workers rather than of one core, so `max_cpu = "80%"` means the same load on 1 or 16
//! workers; blocking-pool threads count too (their CPU competes with the workers'), so a
//! reading can pass 100%.
//!
//! The task runs only while something watches: it starts with the first [`CpuLoad::watch`]
//! and ends at the first sample that finds every watcher dropped (a reload removed the last
//! route with `max_cpu`) or the [`CpuLoad`] itself gone (the server stopped).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use prometheus_client::metrics::gauge::Gauge;

/// How often the CPU is sampled: often enough that a burst is answered within a fraction of a
/// second, rarely enough that the sampling itself costs nothing measurable (4 system calls a
/// second).
pub const SAMPLE_PERIOD: Duration = Duration::from_millis(250);

/// Told every sample, in permille of the workers' capacity (1000 = every worker busy).
pub trait CpuWatcher: Send + Sync {
    fn sampled(&self, permille: u32);
}

/// The process's sampler: one per running server, kept across reloads. Cheap to clone.
#[derive(Clone)]
pub struct CpuLoad {
    inner: Arc<Inner>,
}

struct Inner {
    watchers: Mutex<Watchers>,
    /// The threads that serve connections: 100% is all of them busy.
    threads: usize,
    /// `sluice_process_cpu_percent`.
    gauge: Gauge,
    /// Set by [`CpuLoad::sample_for_tests`]: real samples are measured but not handed on, so
    /// a test's reading stays until it gives another.
    pinned: AtomicBool,
}

#[derive(Default)]
struct Watchers {
    list: Vec<Weak<dyn CpuWatcher>>,
    /// Whether the sampling task is running.
    sampling: bool,
}

impl CpuLoad {
    /// A sampler whose readings are shares of `threads` threads' time (the server's worker
    /// threads: `Workers::threads`).
    pub fn new(gauge: Gauge, threads: usize) -> Self {
        Self {
            inner: Arc::new(Inner {
                watchers: Mutex::default(),
                threads,
                gauge,
                pinned: AtomicBool::new(false),
            }),
        }
    }

    /// Hand every sample from now on to `watcher`, until it is dropped; starts the sampling
    /// task if it is not running. Outside a tokio runtime nothing is sampled (the watcher
    /// stays at its first state): there is no runtime whose workers could be measured.
    pub fn watch(&self, watcher: Weak<dyn CpuWatcher>) {
        let mut watchers = self.inner.lock();
        watchers.list.push(watcher);
        if watchers.sampling || self.inner.pinned.load(Ordering::Relaxed) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!("no runtime: max_cpu has no CPU readings and never adapts");
            return;
        };
        watchers.sampling = true;
        runtime.spawn(sample(Arc::downgrade(&self.inner), self.inner.threads));
    }

    /// Test hook: take `percent` as the reading of one sample, now, and from then on ignore
    /// real samples, so a test drives the watchers step by step without load or sleeps.
    pub fn sample_for_tests(&self, percent: u32) {
        self.inner.pinned.store(true, Ordering::Relaxed);
        self.inner.publish(percent.saturating_mul(10));
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, Watchers> {
        self.watchers.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Hand `permille` to every live watcher; `false` (and the task marked stopped) when none
    /// is left.
    fn publish(&self, permille: u32) -> bool {
        self.gauge.set(i64::from(permille / 10));
        let mut watchers = self.lock();
        watchers.list.retain(|watcher| match watcher.upgrade() {
            Some(watcher) => {
                watcher.sampled(permille);
                true
            }
            None => false,
        });
        if watchers.list.is_empty() {
            watchers.sampling = false;
            return false;
        }
        true
    }
}

/// The sampling task.
async fn sample(inner: Weak<Inner>, workers: usize) {
    let mut interval = tokio::time::interval(SAMPLE_PERIOD);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last: Option<(Instant, Duration)> = None;
    loop {
        interval.tick().await;
        let Some(inner) = inner.upgrade() else { return };
        let Some(used) = process_cpu_time() else {
            // getrusage(RUSAGE_SELF) cannot fail on Linux; if it ever did, skip the sample.
            continue;
        };
        let now = Instant::now();
        let previous = last.replace((now, used));
        let Some((then, used_then)) = previous else {
            continue;
        };
        if inner.pinned.load(Ordering::Relaxed) {
            continue;
        }
        let permille = share(used.saturating_sub(used_then), now - then, workers);
        if !inner.publish(permille) {
            return;
        }
    }
}

/// CPU time used by the whole process so far (every thread, user and system).
fn process_cpu_time() -> Option<Duration> {
    use nix::sys::resource::{UsageWho, getrusage};
    let usage = getrusage(UsageWho::RUSAGE_SELF).ok()?;
    let time = |tv: nix::sys::time::TimeVal| {
        let secs = u64::try_from(tv.tv_sec()).unwrap_or(0);
        let micros = u32::try_from(tv.tv_usec()).unwrap_or(0);
        Duration::from_secs(secs) + Duration::from_micros(u64::from(micros))
    };
    Some(time(usage.user_time()) + time(usage.system_time()))
}

/// `used` CPU time over `wall` time on `workers` threads, in permille (1000 = every worker
/// busy all the time). Saturates rather than overflowing; 0 for an empty period.
pub fn share(used: Duration, wall: Duration, workers: usize) -> u32 {
    let capacity = wall.as_micros() * workers.max(1) as u128;
    if capacity == 0 {
        return 0;
    }
    u32::try_from(used.as_micros() * 1000 / capacity).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    #[test]
    fn share_is_of_all_workers() {
        let ms = Duration::from_millis;
        assert_eq!(share(ms(250), ms(250), 1), 1000);
        assert_eq!(share(ms(250), ms(250), 2), 500);
        assert_eq!(share(ms(200), ms(250), 4), 200);
        assert_eq!(
            share(ms(600), ms(250), 2),
            1200,
            "blocking threads can pass 100%"
        );
        assert_eq!(share(ms(1), Duration::ZERO, 2), 0);
        assert_eq!(share(ms(10), ms(250), 0), 40, "0 workers counts as one");
    }

    struct Last(AtomicU32);

    impl CpuWatcher for Last {
        fn sampled(&self, permille: u32) {
            self.0.store(permille, Ordering::Relaxed);
        }
    }

    #[test]
    fn test_samples_reach_live_watchers_and_dropped_ones_are_forgotten() {
        let load = CpuLoad::new(Gauge::default(), 1);
        load.inner.pinned.store(true, Ordering::Relaxed);
        let watcher = Arc::new(Last(AtomicU32::new(0)));
        let weak: Weak<dyn CpuWatcher> = Arc::downgrade(&watcher) as Weak<dyn CpuWatcher>;
        load.watch(weak);
        load.sample_for_tests(73);
        assert_eq!(watcher.0.load(Ordering::Relaxed), 730);
        assert_eq!(load.inner.gauge.get(), 73);
        drop(watcher);
        load.sample_for_tests(10);
        assert!(load.inner.lock().list.is_empty());
    }

    #[test]
    fn the_process_cpu_time_is_read() {
        assert!(process_cpu_time().is_some_and(|t| t > Duration::ZERO));
    }
}
