//! `max_conns`: a request takes one of its server's slots before it is sent, waiting in the
//! server's queue when all are busy (see `sluice_upstream::limit`).

use std::sync::Arc;

use sluice_core::{Error, ErrorKind, Side};
use sluice_upstream::health::active::address_label;
use sluice_upstream::{InFlight, Peer, QueueRefusal};

use super::ProxyHandler;
use crate::shared::metrics::UpstreamServerMetrics;

impl ProxyHandler {
    /// Count the request in flight on `peer`, first taking one of its `max_conns` slots when
    /// it has a limit: waiting in its queue when all are busy, refused with 503 when the queue
    /// is full or the wait outlasts `queue_timeout` (RFC 9110 §15.6.4: overloaded).
    pub(super) async fn admit(
        &self,
        peer: &Arc<Peer>,
        metrics: Option<&UpstreamServerMetrics>,
    ) -> Result<InFlight, Error> {
        let Some(limit) = peer.limit() else {
            return Ok(peer.start());
        };
        if let Some(slot) = limit.try_acquire() {
            return Ok(peer.start_in(slot));
        }
        // A guard, not a `dec()` after the await: a client that leaves while queued drops
        // this future, and the gauge must come down with it.
        let queued = metrics.map(|m| Queued::start(&m.queue.queued));
        let waited = limit.wait().await;
        drop(queued);
        let refusal = match waited {
            Ok(slot) => return Ok(peer.start_in(slot)),
            Err(refusal) => refusal,
        };
        let server = address_label(peer.address());
        let why = match refusal {
            QueueRefusal::Full => {
                if let Some(m) = metrics {
                    m.queue.full.inc();
                }
                "its queue is full"
            }
            QueueRefusal::TimedOut => {
                if let Some(m) = metrics {
                    m.queue.timeout.inc();
                }
                "no slot came free within queue_timeout"
            }
        };
        Err(Error::new(
            ErrorKind::Unavailable,
            Side::Upstream,
            format!(
                "upstream `{}` server {server} is at max_conns and {why}",
                self.group.name()
            ),
        ))
    }
}

/// One request in `sluice_upstream_queued` until dropped.
struct Queued(prometheus_client::metrics::gauge::Gauge);

impl Queued {
    fn start(gauge: &prometheus_client::metrics::gauge::Gauge) -> Self {
        gauge.inc();
        Self(gauge.clone())
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        self.0.dec();
    }
}
