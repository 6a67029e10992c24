//! `max_conns`: at most N requests in progress per server, the rest waiting in a bounded queue
//! for at most `queue_timeout` (nginx `max_conns` + `queue`, HAProxy `maxconn` + `timeout
//! queue`). A request that finds the queue full, or waits too long, is refused; the proxy
//! answers 503.
//!
//! One semaphore per peer, so a request waiting for one server takes no lock any other request
//! needs (the pool's included): the permit is taken before the pool is asked for a connection
//! and held, in the peer's [`crate::InFlight`] guard, until the response body is done.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use sluice_config::MaxConns;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// One server's slots and queue.
#[derive(Debug)]
pub struct ConnLimit {
    slots: Arc<Semaphore>,
    /// Requests waiting now.
    waiting: AtomicU32,
    queue_size: u32,
    queue_timeout: Duration,
}

/// Why a request got no slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueRefusal {
    /// `queue_size` requests were already waiting.
    Full,
    /// No slot came free within `queue_timeout`.
    TimedOut,
}

/// A slot of a server, held until the request is done.
#[derive(Debug)]
pub struct ConnSlot {
    _permit: OwnedSemaphorePermit,
}

impl ConnLimit {
    /// `None` when the group sets no `max_conns`.
    pub fn new(config: &MaxConns) -> Option<Self> {
        let per_server = config.per_server?;
        Some(Self {
            slots: Arc::new(Semaphore::new(
                (per_server as usize).min(Semaphore::MAX_PERMITS),
            )),
            waiting: AtomicU32::new(0),
            queue_size: config.queue_size,
            queue_timeout: config.queue_timeout,
        })
    }

    /// A free slot now, without waiting.
    pub fn try_acquire(&self) -> Option<ConnSlot> {
        self.slots
            .clone()
            .try_acquire_owned()
            .ok()
            .map(|permit| ConnSlot { _permit: permit })
    }

    /// Wait in the queue for a slot.
    pub async fn wait(&self) -> Result<ConnSlot, QueueRefusal> {
        // Take a place in the queue unless it is full (a compare-and-swap loop, so concurrent
        // arrivals cannot overfill it).
        let mut current = self.waiting.load(Ordering::Relaxed);
        loop {
            if current >= self.queue_size {
                return Err(QueueRefusal::Full);
            }
            match self.waiting.compare_exchange_weak(
                current,
                current + 1,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(now) => current = now,
            }
        }
        // Given back on drop, not after the await: a request whose client leaves while it
        // waits is dropped right here, and must not keep its place forever.
        let _place = QueuePlace(&self.waiting);
        let acquired =
            tokio::time::timeout(self.queue_timeout, self.slots.clone().acquire_owned()).await;
        match acquired {
            Ok(Ok(permit)) => Ok(ConnSlot { _permit: permit }),
            // The semaphore is never closed; a closed one would mean no slot ever.
            Ok(Err(_)) | Err(_) => Err(QueueRefusal::TimedOut),
        }
    }

    /// Requests waiting for a slot now.
    pub fn waiting(&self) -> u32 {
        self.waiting.load(Ordering::Relaxed)
    }
}

/// A place in a server's queue, given back when dropped.
struct QueuePlace<'a>(&'a AtomicU32);

impl Drop for QueuePlace<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(per_server: u32, queue_size: u32, timeout_ms: u64) -> ConnLimit {
        ConnLimit::new(&MaxConns {
            per_server: Some(per_server),
            queue_size,
            queue_timeout: Duration::from_millis(timeout_ms),
        })
        .unwrap()
    }

    #[tokio::test]
    async fn slots_then_queue_then_refusal() {
        let l = limit(1, 1, 5_000);
        let first = l.try_acquire().unwrap();
        assert!(l.try_acquire().is_none());
        // One may wait; a second waiter finds the queue full.
        let waiter = l.wait();
        tokio::pin!(waiter);
        assert!(futures_poll_once(waiter.as_mut()).await.is_none());
        assert_eq!(l.waiting(), 1);
        assert_eq!(l.wait().await.unwrap_err(), QueueRefusal::Full);
        drop(first);
        assert!(waiter.await.is_ok());
        assert_eq!(l.waiting(), 0);
    }

    #[tokio::test]
    async fn a_wait_longer_than_queue_timeout_is_refused() {
        let l = limit(1, 10, 50);
        let _held = l.try_acquire().unwrap();
        assert_eq!(l.wait().await.unwrap_err(), QueueRefusal::TimedOut);
        assert_eq!(l.waiting(), 0);
    }

    /// A client that leaves while queued drops its wait; its place must come back, or the
    /// queue fills with nobody in it and every later request gets 503.
    #[tokio::test]
    async fn a_dropped_wait_gives_its_place_back() {
        let l = limit(1, 2, 5_000);
        let _held = l.try_acquire().unwrap();
        for _ in 0..3 {
            let waiter = Box::pin(l.wait());
            let mut waiter = waiter;
            assert!(futures_poll_once(waiter.as_mut()).await.is_none());
            assert_eq!(l.waiting(), 1);
            drop(waiter);
            assert_eq!(l.waiting(), 0);
        }
    }

    #[test]
    fn no_max_conns_means_no_limit() {
        assert!(ConnLimit::new(&MaxConns::default()).is_none());
    }

    /// Poll a future once: `Some` if it finished.
    async fn futures_poll_once<F: std::future::Future + Unpin>(f: F) -> Option<F::Output> {
        let mut f = f;
        std::future::poll_fn(|cx| {
            std::task::Poll::Ready(match std::pin::Pin::new(&mut f).poll(cx) {
                std::task::Poll::Ready(v) => Some(v),
                std::task::Poll::Pending => None,
            })
        })
        .await
    }
}
