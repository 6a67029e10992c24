//! Tunnels: a connection that switched protocols (HTTP/1.1 `101 Switching Protocols`, RFC 9110
//! §7.8, or an HTTP/2 extended CONNECT, RFC 8441) is spliced byte for byte to the upstream's
//! upgraded connection, in both directions, until both sides are done.
//!
//! The proxy (`proxy/upgrade.rs`) decides whether a request may switch and rewrites the
//! exchange; this module runs what comes after: [`Tunnel::run`] waits for both upgraded
//! connections and splices them (`splice.rs`). A tunnel ends when both directions have ended
//! (each side's end of stream is passed on as the other's: a TCP half-close, or the end of the
//! HTTP/2 stream), when no byte has moved either way for the route's `tunnel_idle_timeout`,
//! when either side fails, or when the server shuts down: tunnels are long-lived by design
//! (WebSockets stay open for hours), so a drain that waited for them would wait out its whole
//! timeout; they are closed at once instead, and clients reconnect.
//!
//! The connection a tunnel came in on knows nothing of it after the switch; what it needs to
//! know travels in the request as a [`ConnLink`]: the shutdown signal, and a count of busy
//! requests that keeps an HTTP/2 connection carrying a quiet tunnel from being closed as idle
//! by the listener's `idle_timeout` (the tunnel has its own).

mod splice;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;

use crate::shared::metrics::{TunnelEnd, TunnelMetrics};
pub use crate::shared::upgrade::{ConnLink, asks_to_switch, has_token, requested};

/// A switched exchange, ready to splice once both sides have handed over their connections.
pub struct Tunnel {
    /// The client's side (hyper's upgrade of the downstream request).
    pub downstream: OnUpgrade,
    /// The upstream's side (hyper's upgrade of the upstream response).
    pub upstream: OnUpgrade,
    pub idle_timeout: Duration,
    /// The route's tunnel metrics (none in unit tests that build a bare proxy).
    pub metrics: Option<TunnelMetrics>,
    pub link: Option<ConnLink>,
    /// For log lines: the route and the protocol switched to.
    pub route: String,
    pub protocol: String,
    /// Held for the tunnel's life (the upstream peer's in-flight count, so `least_conn` sees
    /// open tunnels as load).
    pub hold: Box<dyn Send + Sync>,
}

impl Tunnel {
    /// Run the tunnel in a task of its own.
    pub fn spawn(self) {
        tokio::spawn(self.run());
    }

    /// Wait for both upgraded connections (bounded by the idle timeout: the client must take
    /// the 101 and the upstream must hand over its socket), then splice them until the end.
    pub async fn run(self) {
        let Tunnel {
            downstream,
            upstream,
            idle_timeout,
            metrics,
            link,
            route,
            protocol,
            hold,
        } = self;
        let _busy = link.as_ref().map(|link| Busy::start(&link.conn.busy()));
        let mut open = metrics.as_ref().map(TunnelMetrics::opened);
        let mut end = |how| {
            if let Some(open) = &mut open {
                open.end(how);
            }
        };
        let started = Instant::now();
        let both = async { tokio::try_join!(downstream, upstream) };
        let (client, server) = match tokio::time::timeout(idle_timeout, both).await {
            Ok(Ok(both)) => both,
            Ok(Err(err)) => {
                end(TunnelEnd::Error);
                return tracing::debug!(%route, %protocol, "tunnel not opened: {err}");
            }
            Err(_) => {
                end(TunnelEnd::IdleTimeout);
                return tracing::debug!(%route, %protocol, "tunnel not opened within {idle_timeout:?}");
            }
        };
        let shutdown = link.map(|link| link.shutdown);
        let spliced = splice::splice(
            TokioIo::new(client),
            TokioIo::new(server),
            idle_timeout,
            shutdown,
        )
        .await;
        end(spliced.end);
        drop(open);
        drop(hold);
        tracing::debug!(
            %route,
            %protocol,
            end = spliced.end.as_str(),
            bytes_from_client = spliced.from_client,
            bytes_from_upstream = spliced.from_upstream,
            "tunnel closed after {:?}",
            started.elapsed()
        );
    }
}

/// Counts the tunnel as a busy request of its connection until dropped.
struct Busy(Arc<AtomicU64>);

impl Busy {
    fn start(count: &Arc<AtomicU64>) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Self(count.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}
