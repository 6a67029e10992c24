//! Power of two choices: draw two distinct peers at random, send the request to the one with
//! fewer requests in flight.
//!
//! Mitzenmacher's result ("The Power of Two Choices in Randomized Load Balancing", 2001) is that
//! comparing just two random candidates gets almost all of least-connections' benefit while
//! reading two counters instead of all of them, and, unlike least-conn, it does not stampede the
//! one idle peer when many pickers see the same snapshot. nginx's equivalent is
//! `random two least_conn` (<https://nginx.org/en/docs/http/ngx_http_upstream_module.html#random>).
//!
//! Weights are honoured twice, both cheaply: candidates are drawn with probability proportional to
//! weight (binary search in precomputed cumulative weights), and they are compared by
//! `in_flight / weight` like least-conn, so a 3:1 pair stays 3:1 when its in-flight counts are in
//! that proportion rather than being pushed towards equal counts. Equal weights reduce to the
//! textbook algorithm. On a tie the first draw wins, which keeps idle peers weight-proportional.
//!
//! Unavailable and already-tried peers are redrawn a few times, then found by a scan from a
//! random start, so a pick is bounded even when most peers are out.

use std::sync::Arc;

use super::{Balance, Filter, less_loaded};
use crate::group::PickContext;
use crate::peer::Peer;

/// Random draws per candidate before scanning for an allowed peer instead.
const DRAWS: usize = 4;

/// Power of two choices by in-flight requests per unit of weight.
#[derive(Debug)]
pub struct PowerOfTwo {
    peers: Vec<Arc<Peer>>,
    /// `cumulative[i]` = sum of the weights of peers `0..=i`; `down` peers add nothing, so they
    /// are never drawn.
    cumulative: Vec<u64>,
}

impl PowerOfTwo {
    pub fn new(peers: Vec<Arc<Peer>>) -> Self {
        let cumulative = peers
            .iter()
            .scan(0u64, |sum, p| {
                *sum += if p.config().down {
                    0
                } else {
                    u64::from(p.weight())
                };
                Some(*sum)
            })
            .collect();
        Self { peers, cumulative }
    }

    /// One candidate the filter allows, other than `exclude`.
    fn draw(&self, filter: &Filter<'_>, exclude: Option<usize>) -> Option<usize> {
        let total = self.cumulative.last().copied().unwrap_or(0);
        if total == 0 {
            return None;
        }
        let allowed =
            |i: usize| Some(i) != exclude && self.peers.get(i).is_some_and(|p| filter.allows(p));
        for _ in 0..DRAWS {
            let r = fastrand::u64(..total);
            let i = self.cumulative.partition_point(|&c| c <= r);
            if allowed(i) {
                return Some(i);
            }
        }
        let n = self.peers.len();
        let start = fastrand::usize(..n);
        (0..n).map(|k| (start + k) % n).find(|&i| allowed(i))
    }
}

impl Balance for PowerOfTwo {
    fn peers(&self) -> &[Arc<Peer>] {
        &self.peers
    }

    fn pick(&self, _ctx: &PickContext<'_>, filter: &Filter<'_>) -> Option<&Arc<Peer>> {
        let first = self.draw(filter, None)?;
        let second = self.draw(filter, Some(first));
        let first = self.peers.get(first)?;
        match second.and_then(|i| self.peers.get(i)) {
            Some(second) if less_loaded(second, first) => Some(second),
            _ => Some(first),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::balance::test_support::{count, peers, pick};

    #[test]
    fn never_picks_the_busier_of_two() {
        let ps = peers(&[1, 1]);
        let p2c = PowerOfTwo::new(ps.clone());
        let _busy = [ps[0].start(), ps[0].start()];
        let _less = ps[1].start();
        assert!((0..1000).all(|_| pick(&p2c, &[]) == Some(1)));
    }

    #[test]
    fn idle_peers_share_in_weight_proportion() {
        let weighted = PowerOfTwo::new(peers(&[3, 1]));
        let counts = count((0..8000).filter_map(|_| pick(&weighted, &[])));
        assert!((5600..=6400).contains(&counts[&0]), "{counts:?}");

        let equal = PowerOfTwo::new(peers(&[1, 1, 1, 1]));
        let counts = count((0..8000).filter_map(|_| pick(&equal, &[])));
        assert!(
            counts.values().all(|&c| (1600..=2400).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn held_requests_stay_balanced() {
        let ps = peers(&[1, 1, 1, 1]);
        let p2c = PowerOfTwo::new(ps.clone());
        let guards: Vec<_> = (0..400)
            .filter_map(|_| pick(&p2c, &[]).map(|i| ps[i].start()))
            .collect();
        assert_eq!(guards.len(), 400);
        // Two choices keep the spread tight: at most 4 off in 3,000 trial runs, where a random
        // pick is typically ~15 off. 10 leaves room for luck and still catches most regressions.
        assert!(
            ps.iter().all(|p| p.in_flight().abs_diff(100) <= 10),
            "{:?}",
            ps.iter().map(|p| p.in_flight()).collect::<Vec<_>>()
        );
    }

    #[test]
    fn skips_tried_unavailable_and_down() {
        let ps = peers(&[1, 1, 1]);
        let mut config = ps[2].config().clone();
        config.down = true;
        let ps = vec![ps[0].clone(), ps[1].clone(), Arc::new(Peer::new(2, config))];
        let p2c = PowerOfTwo::new(ps.clone());
        assert!((0..200).all(|_| pick(&p2c, &[0]) == Some(1)));
        ps[1].set_healthy(false);
        assert!((0..200).all(|_| pick(&p2c, &[]) == Some(0)));
        assert_eq!(pick(&p2c, &[0]), None);
    }
}
