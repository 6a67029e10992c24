//! One server of an upstream group and everything the balancer needs to know about it right now:
//! how many requests it is serving (least-conn and p2c read it), whether passive health has taken
//! it out (see [`crate::health::passive`]) and whether the active checker considers it healthy.
//!
//! A peer is shared as `Arc<Peer>` between the group, in-flight requests and the health checker;
//! all of its state is atomics, so reading it on the pick path takes no lock.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

use sluice_config::{UpstreamAddress, UpstreamServer};

use crate::health::passive::Passive;
use crate::limit::{ConnLimit, ConnSlot};

/// One server of a group.
#[derive(Debug)]
pub struct Peer {
    index: usize,
    config: UpstreamServer,
    in_flight: AtomicUsize,
    /// Set by the active checker; peers start healthy so a new group serves at once.
    healthy: AtomicBool,
    passive: Passive,
    /// `max_conns` of the group, per server; `None`: no limit.
    limit: Option<ConnLimit>,
    /// For a peer discovered by DNS, the name it was found under with its port
    /// (`app.internal:8080`): its `Host` header and health checks' `Host`, where a configured
    /// server's `host:port` is used. `None` for configured servers.
    host: Option<Arc<str>>,
}

impl Peer {
    /// The server at position `index` of its group's configuration.
    pub fn new(index: usize, config: UpstreamServer) -> Self {
        let passive = Passive::new(config.max_fails, config.fail_timeout);
        Self {
            index,
            config,
            in_flight: AtomicUsize::new(0),
            healthy: AtomicBool::new(true),
            passive,
            limit: None,
            host: None,
        }
    }

    /// A peer discovered by DNS under `host` (`name:port`).
    pub fn with_host(mut self, host: Arc<str>) -> Self {
        self.host = Some(host);
        self
    }

    /// The `name:port` a discovered peer was found under (see the field).
    pub fn host(&self) -> Option<&str> {
        self.host.as_deref()
    }

    /// Never take this peer out on passive failures (`max_fails` and `fail_timeout` ignored):
    /// the group gives it for the only server of a group, which has nowhere else to send a
    /// request (nginx's rule for a single server).
    pub fn without_passive_health(mut self) -> Self {
        self.passive = Passive::new(0, self.config.fail_timeout);
        self
    }

    /// Whether passive health can take this peer out (see [`Self::without_passive_health`]).
    pub fn passive_health_on(&self) -> bool {
        self.passive.is_on()
    }

    /// Limit requests in progress on this peer (`max_conns`, see [`crate::limit`]).
    pub fn with_limit(mut self, limit: Option<ConnLimit>) -> Self {
        self.limit = limit;
        self
    }

    /// The peer's `max_conns` slots and queue, if it has a limit.
    pub fn limit(&self) -> Option<&ConnLimit> {
        self.limit.as_ref()
    }

    /// The peer's number in its group, stable for the peer's life: its position in the
    /// configuration for a configured server; for one discovered by DNS, a number given when its
    /// address first appeared and never given to another address while it stays. The pool, the
    /// connector and per-server metrics key peers by it, and a request's retries list the
    /// peers it tried by it.
    pub fn index(&self) -> usize {
        self.index
    }

    pub fn config(&self) -> &UpstreamServer {
        &self.config
    }

    pub fn address(&self) -> &UpstreamAddress {
        &self.config.address
    }

    /// The configured weight, with 0 (impossible from a validated config, possible from code)
    /// read as 1 so no policy divides by zero or starves the peer.
    pub fn weight(&self) -> u32 {
        self.config.weight.max(1)
    }

    /// Requests currently counted by an [`InFlight`] guard.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Count a request as in flight until the returned guard is dropped.
    pub fn start(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight {
            peer: Arc::clone(self),
            _slot: None,
        }
    }

    /// Like [`Self::start`], holding a `max_conns` slot until the guard is dropped.
    pub fn start_in(self: &Arc<Self>, slot: ConnSlot) -> InFlight {
        let mut guard = self.start();
        guard._slot = Some(slot);
        guard
    }

    /// Usable now: not `down`, not failed out by passive health, not marked unhealthy by active
    /// checks.
    pub fn is_available(&self, now: Instant) -> bool {
        !self.config.down && self.is_healthy() && !self.passive.is_out(now)
    }

    /// Passive health: count a failed request (nginx's `max_fails` / `fail_timeout`). True when
    /// this failure just took the peer out, so the caller logs the ejection once.
    pub fn report_failure(&self, now: Instant) -> bool {
        self.passive.report_failure(now)
    }

    /// Passive health: a request sent at `sent` succeeded, so failures counted so far are
    /// forgotten; one sent while the peer was out (by panic routing) also ends the ejection.
    /// True when it did, so the caller logs the server's return once.
    pub fn report_success(&self, sent: Instant) -> bool {
        self.passive.report_success(sent)
    }

    /// When passive health took the peer out, if it is out at `now` (see [`crate::group`]'s
    /// panic routing).
    pub fn passively_out_since(&self, now: Instant) -> Option<Instant> {
        self.passive.out_since(now)
    }

    /// Active health result: `false` takes the peer out until it is set `true` again. `true`
    /// also ends a passive ejection: `rise` passing checks are stronger evidence than the
    /// failures real traffic saw while the server was down.
    pub fn set_healthy(&self, healthy: bool) {
        if healthy {
            self.passive.reset();
        }
        self.healthy.store(healthy, Ordering::Relaxed);
    }

    /// The active checker's verdict only (passive health and `down` are not included).
    pub fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::Relaxed)
    }
}

/// A request in flight to a peer; dropping it (response done, error, cancellation) ends the count.
#[derive(Debug)]
#[must_use = "the request counts as in flight only while this guard is alive"]
pub struct InFlight {
    peer: Arc<Peer>,
    /// The peer's `max_conns` slot, freed with the guard.
    _slot: Option<ConnSlot>,
}

impl InFlight {
    pub fn peer(&self) -> &Arc<Peer> {
        &self.peer
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.peer.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn peer() -> Arc<Peer> {
        Arc::new(Peer::new(
            0,
            UpstreamServer::new(UpstreamAddress::Tcp("a:80".into())),
        ))
    }

    #[test]
    fn in_flight_counts_guards() {
        let p = peer();
        let a = p.start();
        let b = p.start();
        assert_eq!(p.in_flight(), 2);
        drop(a);
        assert_eq!(p.in_flight(), 1);
        drop(b);
        assert_eq!(p.in_flight(), 0);
    }

    #[test]
    fn availability_combines_down_active_and_passive() {
        let p = peer();
        let now = Instant::now();
        assert!(p.is_available(now));

        p.set_healthy(false);
        assert!(!p.is_available(now) && !p.is_healthy());
        p.set_healthy(true);
        assert!(p.is_available(now));

        // nginx defaults: max_fails 1, fail_timeout 10s.
        assert!(p.report_failure(now));
        assert!(!p.is_available(now + Duration::from_secs(5)));
        assert!(
            p.is_healthy(),
            "passive health does not touch the active verdict"
        );
        assert!(p.is_available(now + Duration::from_secs(11)));

        let mut config = UpstreamServer::new(UpstreamAddress::Tcp("b:80".into()));
        config.down = true;
        assert!(!Peer::new(1, config).is_available(now));
    }

    #[test]
    fn without_passive_health_failures_never_take_it_out() {
        let p = Peer::new(0, UpstreamServer::new(UpstreamAddress::Tcp("a:80".into())))
            .without_passive_health();
        let now = Instant::now();
        assert!((0..10).all(|_| !p.report_failure(now)));
        assert!(p.is_available(now + Duration::from_secs(1)));
        assert_eq!(p.passively_out_since(now), None);
    }
}
