//! Handles for a proxy route's tunnels (upgraded connections: WebSocket and other `Upgrade`
//! protocols): how many are open now, and how the finished ones ended.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;

/// How a tunnel ended: the `end` label of `sluice_tunnels_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TunnelEnd {
    /// Both sides finished their direction (or one closed and the other followed).
    Closed,
    /// No byte moved either way for the route's `tunnel_idle_timeout`.
    IdleTimeout,
    /// A read or write failed (a reset, a broken pipe).
    Error,
    /// The server shut down.
    Shutdown,
}

impl TunnelEnd {
    pub const ALL: [TunnelEnd; 4] = [
        TunnelEnd::Closed,
        TunnelEnd::IdleTimeout,
        TunnelEnd::Error,
        TunnelEnd::Shutdown,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            TunnelEnd::Closed => "closed",
            TunnelEnd::IdleTimeout => "idle_timeout",
            TunnelEnd::Error => "error",
            TunnelEnd::Shutdown => "shutdown",
        }
    }

    const fn index(self) -> usize {
        match self {
            TunnelEnd::Closed => 0,
            TunnelEnd::IdleTimeout => 1,
            TunnelEnd::Error => 2,
            TunnelEnd::Shutdown => 3,
        }
    }
}

/// Handles for one proxy route's tunnels. Cheap to clone.
#[derive(Clone, Debug)]
pub struct TunnelMetrics {
    pub(super) open: Gauge,
    /// Finished tunnels, indexed like [`TunnelEnd::ALL`].
    pub(super) ended: [Counter; 4],
}

impl TunnelMetrics {
    /// A tunnel opened: it counts as open until the guard is dropped, which must be told how
    /// it ended ([`OpenTunnel::end`]); dropped without, it counts as an error.
    pub fn opened(&self) -> OpenTunnel {
        self.open.inc();
        OpenTunnel {
            metrics: self.clone(),
            end: TunnelEnd::Error,
        }
    }
}

/// Keeps a tunnel counted as open; see [`TunnelMetrics::opened`].
#[derive(Debug)]
#[must_use = "the tunnel stops counting as open when the guard is dropped"]
pub struct OpenTunnel {
    metrics: TunnelMetrics,
    end: TunnelEnd,
}

impl OpenTunnel {
    /// Say how the tunnel ended; counted when the guard drops.
    pub fn end(&mut self, end: TunnelEnd) {
        self.end = end;
    }
}

impl Drop for OpenTunnel {
    fn drop(&mut self) {
        self.metrics.open.dec();
        self.metrics.ended[self.end.index()].inc();
    }
}
