//! Connection limits: a listener's `max_connections` and the process-wide
//! `[server] max_connections`, as two semaphores whose permits each open connection holds.
//!
//! The accept loop waits for room under both limits *before* it accepts: at a limit it simply
//! stops calling `accept`, so new connections wait in the kernel's listen backlog (and clients see a slow
//! connect, not a reset) until a connection closes and gives its permits back. Nothing is
//! accepted only to be closed again, and nothing crashes however many clients knock.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::metrics::ListenerMetrics;

/// The two semaphores a listener's accept loop takes a permit of per connection.
#[derive(Clone, Debug)]
pub struct ConnectionSlots {
    listener: Arc<Semaphore>,
    server: Arc<Semaphore>,
}

/// Held by a connection for its whole life (TLS handshake included); dropping it frees a slot.
#[derive(Debug)]
pub struct ConnectionPermit {
    _listener: OwnedSemaphorePermit,
    _server: OwnedSemaphorePermit,
}

impl ConnectionSlots {
    /// `server` is shared by every listener of the process; `listener_max` is this listener's.
    pub fn new(listener_max: usize, server: Arc<Semaphore>) -> Self {
        Self {
            listener: Arc::new(Semaphore::new(listener_max.min(Semaphore::MAX_PERMITS))),
            server,
        }
    }

    /// The process-wide semaphore for `[server] max_connections`.
    pub fn server_wide(max: usize) -> Arc<Semaphore> {
        Arc::new(Semaphore::new(max.min(Semaphore::MAX_PERMITS)))
    }

    /// Wait until one more connection may be accepted: take this listener's permit (only this
    /// loop takes those, so holding it while `accept` waits is fine) and wait until the
    /// server-wide limit has room, without holding that permit: an accept loop waiting for a
    /// client must not keep the slot from another listener's client. Each wait that starts is
    /// counted. `None` only if a semaphore was closed, which nothing does.
    pub async fn ready(&self, metrics: &ListenerMetrics) -> Option<ListenerSlot> {
        let listener = match self.listener.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                metrics.listener_limit_reached();
                tracing::debug!("listener at max_connections: accepting paused");
                self.listener.clone().acquire_owned().await.ok()?
            }
        };
        if self.server.available_permits() == 0 {
            metrics.server_limit_reached();
            tracing::debug!("server at max_connections: accepting paused");
            drop(self.server.acquire().await.ok()?);
        }
        Some(ListenerSlot(listener))
    }

    /// The permit of a connection just accepted: the server-wide one is taken now, waiting in
    /// the rare case that another listener took the last one since [`Self::ready`] (so at most
    /// one accepted connection per listener waits for it).
    pub async fn admit(
        &self,
        slot: ListenerSlot,
        metrics: &ListenerMetrics,
    ) -> Option<ConnectionPermit> {
        let server = match self.server.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                metrics.server_limit_reached();
                self.server.clone().acquire_owned().await.ok()?
            }
        };
        Some(ConnectionPermit {
            _listener: slot.0,
            _server: server,
        })
    }
}

/// This listener's permit, taken before `accept`.
#[derive(Debug)]
pub struct ListenerSlot(OwnedSemaphorePermit);
