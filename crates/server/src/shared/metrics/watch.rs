//! Gauges read at scrape time from state that already exists elsewhere.
//!
//! An upstream peer already keeps its in-flight count and its availability in atomics (the
//! balancer needs them). Mirroring them into gauges on every change would cost the request path
//! an extra atomic per event, and could not follow passive health at all: a peer taken out for
//! `fail_timeout` comes back when time passes, with no event to hook. So the server registers a
//! reader per peer, and [`super::Metrics::render`] asks each reader right before encoding.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use prometheus_client::metrics::gauge::Gauge;

use super::labels::ServerLabels;

/// What a reader reports about one upstream server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerState {
    /// The balancer may pick it (not `down`, not held out by passive or active health).
    pub healthy: bool,
    /// Requests in progress on it.
    pub in_flight: i64,
    /// Connections open to it (the keep-alive pool's idle ones and the busy ones).
    pub connections: i64,
}

type Reader = Box<dyn Fn() -> ServerState + Send + Sync>;

/// The registered readers, keyed by server so a reload replaces a server's reader instead of
/// adding a second one. Locked only at registration and scrape, never per request.
#[derive(Default)]
pub(super) struct Watches {
    servers: Mutex<HashMap<ServerLabels, Watched>>,
}

struct Watched {
    /// healthy, in-flight, connections.
    gauges: [Gauge; 3],
    read: Reader,
}

impl Watches {
    pub(super) fn insert(&self, labels: ServerLabels, gauges: [Gauge; 3], read: Reader) {
        let watched = Watched { gauges, read };
        watched.refresh();
        // A panic elsewhere while holding the lock leaves the map intact; keep using it.
        let mut servers = self.servers.lock().unwrap_or_else(PoisonError::into_inner);
        servers.insert(labels, watched);
    }

    /// Drop the readers of servers `keep` refuses, returning their labels.
    pub(super) fn retain(&self, keep: impl Fn(&ServerLabels) -> bool) -> Vec<ServerLabels> {
        let mut servers = self.servers.lock().unwrap_or_else(PoisonError::into_inner);
        let gone: Vec<ServerLabels> = servers.keys().filter(|l| !keep(l)).cloned().collect();
        for labels in &gone {
            servers.remove(labels);
        }
        gone
    }

    /// Copy every reader's current state into its gauges.
    pub(super) fn refresh(&self) {
        let servers = self.servers.lock().unwrap_or_else(PoisonError::into_inner);
        for watched in servers.values() {
            watched.refresh();
        }
    }
}

impl Watched {
    fn refresh(&self) {
        let state = (self.read)();
        let [healthy, in_flight, connections] = &self.gauges;
        healthy.set(i64::from(state.healthy));
        in_flight.set(state.in_flight);
        connections.set(state.connections);
    }
}

impl std::fmt::Debug for Watches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let servers = self.servers.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("Watches")
            .field("servers", &servers.len())
            .finish()
    }
}
