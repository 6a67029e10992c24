//! Connection limits: a listener's `max_connections` and the process-wide
//! `[server] max_connections`, as two semaphores whose permits each open connection holds.
//!
//! The accept loop waits for room under both limits *before* it accepts: at a limit it simply
//! stops calling `accept`, so new connections wait in the kernel's listen backlog (and clients see a slow
//! connect, not a reset) until a connection closes and gives its permits back. Nothing is
//! accepted only to be closed again, and nothing crashes however many clients knock.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::shared::metrics::ListenerMetrics;

/// The two semaphores a listener's accept loop takes a permit of per connection.
#[derive(Clone, Debug)]
pub struct ConnectionSlots {
    listener: Arc<Limit>,
    server: Arc<Limit>,
}

/// A connection limit whose size a reload can change in place: connections opened before the
/// reload keep counting against it, and an accept loop waiting at the old limit wakes when the
/// limit is raised.
#[derive(Debug)]
pub struct Limit {
    permits: Arc<Semaphore>,
    max: Mutex<usize>,
    /// Permits still to take away after the limit was lowered below what is in use: the next
    /// connections to close keep theirs out of the semaphore instead of giving them back (a
    /// waiting accept loop, first in the semaphore's queue, must not get them).
    debt: std::sync::atomic::AtomicUsize,
}

impl Limit {
    fn new(max: usize) -> Arc<Self> {
        let max = max.min(Semaphore::MAX_PERMITS);
        Arc::new(Self {
            permits: Arc::new(Semaphore::new(max)),
            max: Mutex::new(max),
            debt: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    /// The limit `max`, from now on. Raising it frees permits at once (waking a waiting accept
    /// loop); lowering it takes free permits away now and the rest as connections close, so
    /// the open connections are never cut, only no new one is let in until they are under the
    /// new limit.
    pub fn resize(&self, max: usize) {
        let max = max.min(Semaphore::MAX_PERMITS);
        let mut current = self
            .max
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if max > *current {
            let mut raise = max - *current;
            // A lowering not yet paid off is cancelled first.
            let _ = self.debt.fetch_update(Relaxed, Relaxed, |debt| {
                let paid = debt.min(raise);
                raise -= paid;
                Some(debt - paid)
            });
            self.permits.add_permits(raise);
        } else if max < *current {
            let shrink = *current - max;
            let taken = self.permits.forget_permits(shrink);
            self.debt.fetch_add(shrink - taken, Relaxed);
        }
        *current = max;
    }

    /// A permit of this limit is given back: kept out instead while the limit owes some.
    fn release(&self, permit: OwnedSemaphorePermit) {
        let owed = self
            .debt
            .fetch_update(Relaxed, Relaxed, |debt| debt.checked_sub(1))
            .is_ok();
        if owed {
            permit.forget();
        }
    }

    /// The limit in force.
    pub fn max(&self) -> usize {
        *self
            .max
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Held by a connection for its whole life (TLS handshake included); dropping it frees a slot.
#[derive(Debug)]
pub struct ConnectionPermit {
    listener: Option<(Arc<Limit>, OwnedSemaphorePermit)>,
    server: Option<(Arc<Limit>, OwnedSemaphorePermit)>,
}

impl Drop for ConnectionPermit {
    fn drop(&mut self) {
        for (limit, permit) in [self.listener.take(), self.server.take()]
            .into_iter()
            .flatten()
        {
            limit.release(permit);
        }
    }
}

impl ConnectionSlots {
    /// `server` is shared by every listener of the process; `listener_max` is this listener's.
    pub fn new(listener_max: usize, server: Arc<Limit>) -> Self {
        Self {
            listener: Limit::new(listener_max),
            server,
        }
    }

    /// The process-wide limit, `[server] max_connections`.
    pub fn server_wide(max: usize) -> Arc<Limit> {
        Limit::new(max)
    }

    /// This listener's own limit (a reload resizes it in place).
    pub fn listener_limit(&self) -> &Limit {
        &self.listener
    }

    /// Wait until one more connection may be accepted: take this listener's permit (only this
    /// loop takes those, so holding it while `accept` waits is fine) and wait until the
    /// server-wide limit has room, without holding that permit: an accept loop waiting for a
    /// client must not keep the slot from another listener's client. Each wait that starts is
    /// counted. `None` only if a semaphore was closed, which nothing does.
    pub async fn ready(&self, metrics: &ListenerMetrics) -> Option<ListenerSlot> {
        let listener = match self.listener.permits.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                metrics.listener_limit_reached();
                tracing::debug!("listener at max_connections: accepting paused");
                self.listener.permits.clone().acquire_owned().await.ok()?
            }
        };
        if self.server.permits.available_permits() == 0 {
            metrics.server_limit_reached();
            tracing::debug!("server at max_connections: accepting paused");
            drop(self.server.permits.acquire().await.ok()?);
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
        let server = match self.server.permits.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                metrics.server_limit_reached();
                self.server.permits.clone().acquire_owned().await.ok()?
            }
        };
        Some(ConnectionPermit {
            listener: Some((self.listener.clone(), slot.0)),
            server: Some((self.server.clone(), server)),
        })
    }
}

impl ConnectionSlots {
    /// A permit now, or `None` (counted) when this listener or the server is at its
    /// `max_connections`: for QUIC, whose connection attempts have no backlog to wait in.
    pub fn try_admit(&self, metrics: &ListenerMetrics) -> Option<ConnectionPermit> {
        let Ok(listener) = self.listener.permits.clone().try_acquire_owned() else {
            metrics.listener_limit_reached();
            return None;
        };
        let Ok(server) = self.server.permits.clone().try_acquire_owned() else {
            metrics.server_limit_reached();
            return None;
        };
        Some(ConnectionPermit {
            listener: Some((self.listener.clone(), listener)),
            server: Some((self.server.clone(), server)),
        })
    }
}

/// This listener's permit, taken before `accept`.
#[derive(Debug)]
pub struct ListenerSlot(OwnedSemaphorePermit);
