//! Least connections: the peer with the fewest in-flight requests relative to its weight.
//!
//! As nginx's `least_conn`
//! (<https://nginx.org/en/docs/http/ngx_http_upstream_module.html#least_conn>), peers are compared
//! by `in_flight / weight` (cross-multiplied, so no division), which keeps a 3:1 weighted pair at
//! 3:1 under load instead of equalising raw counts. "In flight" is what [`crate::Peer::start`]
//! counts: requests of this process, not connections seen by the server.
//!
//! Ties matter most: at low load every peer has zero requests in flight. nginx breaks them with
//! weighted round robin; sluice gets the same effect without a lock by starting the scan at the
//! peer that round robin's precomputed [`super::schedule`] names for this pick (one atomic
//! ticket) and letting the first of equals win. Idle peers thus share 3:1 for weights 3:1 and
//! plain round robin for equal weights. A pick scans every peer once: O(peers), as nginx's.

use std::sync::Arc;

use super::schedule::Schedule;
use super::{Balance, Filter, less_loaded};
use crate::group::PickContext;
use crate::peer::Peer;

/// Fewest in-flight requests per unit of weight.
#[derive(Debug)]
pub struct LeastConn {
    peers: Vec<Arc<Peer>>,
    /// Only used to choose where the scan starts, which decides ties.
    ties: Schedule,
}

impl LeastConn {
    pub fn new(peers: Vec<Arc<Peer>>) -> Self {
        let ties = Schedule::new(&peers);
        Self { peers, ties }
    }
}

impl Balance for LeastConn {
    fn peers(&self) -> &[Arc<Peer>] {
        &self.peers
    }

    fn pick(&self, _ctx: &PickContext<'_>, filter: &Filter<'_>) -> Option<&Arc<Peer>> {
        let n = self.peers.len();
        // An empty schedule means every peer is `down`; the filter would refuse them anyway.
        let start = self.ties.slot(self.ties.ticket())?;
        let mut best: Option<&Arc<Peer>> = None;
        for offset in 0..n {
            let Some(peer) = self.peers.get((start + offset) % n) else {
                continue;
            };
            if filter.allows(peer) && best.is_none_or(|b| less_loaded(peer, b)) {
                best = Some(peer);
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::balance::test_support::{count, peers, pick};

    #[test]
    fn prefers_the_idle_peer() {
        let ps = peers(&[1, 1, 1]);
        let lc = LeastConn::new(ps.clone());
        let _busy = [ps[0].start(), ps[0].start(), ps[2].start()];
        for _ in 0..10 {
            assert_eq!(pick(&lc, &[]), Some(1));
        }
    }

    #[test]
    fn load_is_divided_by_weight() {
        let ps = peers(&[3, 1]);
        let lc = LeastConn::new(ps.clone());
        // a: 2 in flight / weight 3 is less loaded than b: 1 / 1.
        let _busy = [ps[0].start(), ps[0].start(), ps[1].start()];
        assert_eq!(pick(&lc, &[]), Some(0));
        let _more = [ps[0].start(), ps[0].start()];
        // a: 4/3 > b: 1/1.
        assert_eq!(pick(&lc, &[]), Some(1));
    }

    #[test]
    fn ties_rotate_in_weight_proportion() {
        let equal = LeastConn::new(peers(&[1, 1, 1]));
        let counts = count((0..300).filter_map(|_| pick(&equal, &[])));
        assert_eq!((counts[&0], counts[&1], counts[&2]), (100, 100, 100));

        let weighted = LeastConn::new(peers(&[3, 1]));
        let counts = count((0..400).filter_map(|_| pick(&weighted, &[])));
        assert_eq!((counts[&0], counts[&1]), (300, 100));
    }

    #[test]
    fn keeps_requests_spread_while_they_are_held() {
        let ps = peers(&[1, 1, 1, 1]);
        let lc = LeastConn::new(ps.clone());
        let guards: Vec<_> = (0..40)
            .filter_map(|_| pick(&lc, &[]).map(|i| ps[i].start()))
            .collect();
        assert_eq!(guards.len(), 40);
        assert!(ps.iter().all(|p| p.in_flight() == 10));
    }

    #[test]
    fn skips_tried_and_unavailable() {
        let ps = peers(&[1, 1, 1]);
        let lc = LeastConn::new(ps.clone());
        ps[1].set_healthy(false);
        let _busy = ps[2].start();
        assert_eq!(pick(&lc, &[0]), Some(2), "busier, but the only one left");
        assert_eq!(pick(&lc, &[0, 2]), None);
    }
}
