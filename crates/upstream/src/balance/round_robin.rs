//! Smooth weighted round robin, nginx's algorithm (the default policy; plain round robin when the
//! weights are equal).
//!
//! nginx (`ngx_http_upstream_get_peer` in `ngx_http_upstream_round_robin.c`, described at
//! <https://nginx.org/en/docs/http/ngx_http_upstream_module.html#upstream> and in the commit that
//! introduced it, "smooth weighted round-robin balancing") keeps a `current_weight` per peer; on
//! every pick each peer's `current_weight` grows by its weight, the largest wins (the first in
//! configuration order on a tie) and loses the total. Weights 3:1 give `a a b a`, 5:1:1 give
//! `a a b a c a a`: the heavy peer's turns are spread out rather than sent in bursts.
//!
//! nginx runs that loop under a lock on every request. The sequence only depends on the weights,
//! so sluice runs it once, at construction, into a [`super::schedule`] (one cycle,
//! `sum(weights)` slots, after which every `current_weight` is back to zero) and serves picks by
//! taking a ticket from an atomic counter: the pick path is one `fetch_add` and a slot read.
//!
//! The trade-off: while every peer is available the sequence is exactly nginx's (the tests check
//! it against a direct implementation of nginx's loop). When a peer is unavailable or already
//! tried, nginx reruns the loop without it; sluice walks forward in the schedule to the next
//! allowed slot and advances the counter past the slots it skipped, which is the same as deleting
//! the unavailable peer's slots from the cycle: the others keep their ratio and interleaving, but
//! the exact order can differ from nginx's for that while. Under concurrency the skip is a
//! best-effort compare-and-swap, so shares are exact in the long run, not per request.
//!
//! Weights are normalised first (see [`super::schedule`]): divided by their gcd and, for very long
//! cycles, scaled down to at most [`super::schedule::MAX_SCHEDULE`] slots.

use std::sync::Arc;

use super::schedule::Schedule;
use super::{Balance, Filter};
use crate::group::PickContext;
use crate::peer::Peer;

/// Schedule slots tried after the ticket's own before falling back to a weighted scan, which
/// bounds a pick when long stretches of the schedule belong to unavailable peers.
const WALK: usize = 64;

/// Smooth weighted round robin over a precomputed schedule.
#[derive(Debug)]
pub struct RoundRobin {
    peers: Vec<Arc<Peer>>,
    schedule: Schedule,
}

impl RoundRobin {
    pub fn new(peers: Vec<Arc<Peer>>) -> Self {
        let schedule = Schedule::new(&peers);
        Self { peers, schedule }
    }

    /// Weighted choice among the allowed peers by `ticket`: used when the schedule walk finds
    /// nothing nearby. Two passes over the peers, no allocation.
    fn fallback(&self, ticket: usize, filter: &Filter<'_>) -> Option<&Arc<Peer>> {
        let allowed = || self.peers.iter().filter(|p| filter.allows(p));
        let total: u64 = allowed().map(|p| u64::from(p.weight())).sum();
        if total == 0 {
            return None;
        }
        let mut rest = ticket as u64 % total;
        let mut last = None;
        for peer in allowed() {
            let weight = u64::from(peer.weight());
            if rest < weight {
                return Some(peer);
            }
            rest -= weight;
            last = Some(peer);
        }
        // Availability changed between the passes; any allowed peer will do.
        last
    }
}

impl Balance for RoundRobin {
    fn peers(&self) -> &[Arc<Peer>] {
        &self.peers
    }

    fn pick(&self, _ctx: &PickContext<'_>, filter: &Filter<'_>) -> Option<&Arc<Peer>> {
        let len = self.schedule.len();
        if len == 0 {
            return None;
        }
        let ticket = self.schedule.ticket();
        for step in 0..len.min(WALK) {
            let Some(peer) = self
                .schedule
                .slot(ticket.wrapping_add(step))
                .and_then(|i| self.peers.get(i))
            else {
                continue;
            };
            if filter.allows(peer) {
                if step > 0 {
                    self.schedule.skip(ticket, step);
                }
                return Some(peer);
            }
        }
        self.fallback(ticket, filter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::balance::test_support::{count, ctx, peers};
    use std::time::Instant;

    /// nginx's `ngx_http_upstream_get_peer`, written straight from the C, over the peers the
    /// filter allows: the reference the schedule must reproduce.
    struct Nginx {
        current: Vec<i64>,
    }

    impl Nginx {
        fn pick(&mut self, peers: &[Arc<Peer>], allowed: impl Fn(&Peer) -> bool) -> Option<usize> {
            let (mut best, mut total) = (None::<usize>, 0);
            for (i, p) in peers.iter().enumerate().filter(|(_, p)| allowed(p)) {
                self.current[i] += i64::from(p.weight());
                total += i64::from(p.weight());
                if best.is_none_or(|b| self.current[i] > self.current[b]) {
                    best = Some(i);
                }
            }
            self.current[best?] -= total;
            best
        }
    }

    fn run(rr: &RoundRobin, n: usize, tried: &[usize]) -> Vec<usize> {
        let filter = Filter {
            now: Instant::now(),
            tried,
        };
        (0..n)
            .filter_map(|_| rr.pick(&ctx(), &filter).map(|p| p.index()))
            .collect()
    }

    fn max_run(seq: &[usize], who: usize) -> usize {
        seq.split(|&i| i != who)
            .map(<[usize]>::len)
            .max()
            .unwrap_or(0)
    }

    #[test]
    fn matches_nginx_sequence_while_all_are_up() {
        for weights in [
            &[3, 1][..],
            &[1, 1],
            &[5, 1, 1],
            &[2, 3, 5],
            &[1, 7, 2, 4],
            &[4],
        ] {
            let ps = peers(weights);
            let rr = RoundRobin::new(ps.clone());
            let mut nginx = Nginx {
                current: vec![0; ps.len()],
            };
            let expected: Vec<usize> = (0..1000)
                .filter_map(|_| nginx.pick(&ps, |_| true))
                .collect();
            assert_eq!(run(&rr, 1000, &[]), expected, "weights {weights:?}");
        }
    }

    #[test]
    fn weighted_three_to_one_is_exact_and_interleaved() {
        let ps = peers(&[3, 1]);
        let seq = run(&RoundRobin::new(ps.clone()), 4000, &[]);
        let counts = count(seq.iter().copied());
        assert_eq!((counts[&0], counts[&1]), (3000, 1000));
        assert_eq!(
            &seq[..8],
            &[0, 0, 1, 0, 0, 0, 1, 0],
            "nginx's a a b a, cycle after cycle"
        );
        let mut nginx = Nginx {
            current: vec![0; 2],
        };
        let reference: Vec<usize> = (0..4000)
            .filter_map(|_| nginx.pick(&ps, |_| true))
            .collect();
        // 3 (the last `a` of one cycle and the first two of the next), never a longer burst.
        assert_eq!(max_run(&seq, 0), max_run(&reference, 0));
        assert_eq!(max_run(&seq, 0), 3);
    }

    #[test]
    fn equal_weights_alternate() {
        assert_eq!(
            run(&RoundRobin::new(peers(&[1, 1])), 6, &[]),
            [0, 1, 0, 1, 0, 1]
        );
        assert_eq!(
            run(&RoundRobin::new(peers(&[2, 2, 2])), 6, &[]),
            [0, 1, 2, 0, 1, 2]
        );
    }

    #[test]
    fn tried_peers_are_skipped() {
        let rr = RoundRobin::new(peers(&[1, 1, 1]));
        let seq = run(&rr, 100, &[1]);
        assert!(!seq.contains(&1));
        assert_eq!(seq.len(), 100);
        assert!(run(&rr, 1, &[0, 1, 2]).is_empty());
    }

    #[test]
    fn down_peer_gets_no_slots_and_the_rest_follow_nginx() {
        let ps = peers(&[3, 2, 1]);
        let mut config = ps[1].config().clone();
        config.down = true;
        let ps = vec![ps[0].clone(), Arc::new(Peer::new(1, config)), ps[2].clone()];
        let rr = RoundRobin::new(ps.clone());
        let mut nginx = Nginx {
            current: vec![0; 3],
        };
        let expected: Vec<usize> = (0..600)
            .filter_map(|_| nginx.pick(&ps, |p| !p.config().down))
            .collect();
        assert_eq!(run(&rr, 600, &[]), expected);
    }

    #[test]
    fn unavailable_peer_share_is_spread_not_handed_to_its_neighbour() {
        let ps = peers(&[1, 1, 1]);
        ps[2].set_healthy(false);
        let counts = count(run(&RoundRobin::new(ps), 1000, &[]));
        assert_eq!((counts[&0], counts[&1]), (500, 500));
    }

    #[test]
    fn long_unavailable_stretch_falls_back_to_the_others() {
        let ps = peers(&[1000, 1, 3]);
        ps[0].set_healthy(false);
        let counts = count(run(&RoundRobin::new(ps), 4000, &[]));
        assert_eq!(counts.get(&0), None);
        let (b, c) = (counts[&1], counts[&2]);
        assert_eq!(b + c, 4000);
        assert!((700..=1300).contains(&b), "about 1:3, got {b}:{c}");
    }

    #[test]
    fn nothing_available_gives_none() {
        let ps = peers(&[2, 1]);
        ps.iter().for_each(|p| p.set_healthy(false));
        assert!(run(&RoundRobin::new(ps), 10, &[]).is_empty());
        assert!(run(&RoundRobin::new(Vec::new()), 10, &[]).is_empty());
    }
}
