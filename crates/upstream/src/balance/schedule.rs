//! One cycle of nginx's smooth weighted round robin, precomputed, and served by an atomic ticket
//! counter: round robin's schedule, and least-conn's tie-breaker.
//!
//! The cycle is `sum(weights)` picks long; after it every `current_weight` of nginx's loop is
//! back to zero, so repeating it reproduces nginx's sequence forever. Weights are normalised
//! first: divided by their greatest common divisor (6:2 schedules as 3:1: `current_weight` just
//! scales, so the sequence is the same) and, if the cycle would still be longer than
//! [`MAX_SCHEDULE`] slots, scaled down proportionally (each peer keeping at least one slot), which
//! bounds memory (4 bytes a slot) at the cost of ratios rounded to about 1 part in 10,000.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::peer::Peer;

/// Longest schedule cycle kept; longer ones are scaled down.
pub const MAX_SCHEDULE: u64 = 10_000;

/// One cycle of nginx's smooth weighted round robin, indexed by an atomic ticket counter.
/// Also used by least-conn to break ties in weight proportion.
#[derive(Debug)]
pub(crate) struct Schedule {
    /// Positions into the peer list, in pick order.
    slots: Vec<u32>,
    next: AtomicUsize,
}

impl Schedule {
    /// The schedule for `peers`' weights; peers marked `down` get no slots.
    pub(crate) fn new(peers: &[Arc<Peer>]) -> Self {
        let weights: Vec<u64> = peers
            .iter()
            .map(|p| {
                if p.config().down {
                    0
                } else {
                    u64::from(p.weight())
                }
            })
            .collect();
        Self {
            slots: swrr(&normalise(weights)),
            next: AtomicUsize::new(0),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// The next ticket; tickets wrap around `usize`, which only matters every 2^64 picks.
    pub(crate) fn ticket(&self) -> usize {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// The peer position scheduled for `ticket`.
    pub(crate) fn slot(&self, ticket: usize) -> Option<usize> {
        let len = self.slots.len();
        if len == 0 {
            return None;
        }
        self.slots.get(ticket % len).map(|&i| i as usize)
    }

    /// The holder of `ticket` used the slot `step` further on: consume the skipped slots too, so
    /// the next request does not land on the same peer again (see [`super::round_robin`]). Lost
    /// races are fine: another request moved the counter, and the shares even out over the cycle.
    pub(crate) fn skip(&self, ticket: usize, step: usize) {
        let expected = ticket.wrapping_add(1);
        let skipped = ticket.wrapping_add(step).wrapping_add(1);
        let _ = self
            .next
            .compare_exchange(expected, skipped, Ordering::Relaxed, Ordering::Relaxed);
    }
}

/// Divide the weights by their gcd, then scale them down if their sum exceeds [`MAX_SCHEDULE`].
fn normalise(mut weights: Vec<u64>) -> Vec<u64> {
    let divisor = weights.iter().copied().fold(0, gcd);
    if divisor > 1 {
        weights.iter_mut().for_each(|w| *w /= divisor);
    }
    let total: u64 = weights.iter().sum();
    if total > MAX_SCHEDULE {
        for w in weights.iter_mut().filter(|w| **w > 0) {
            // u128: weight (< 2^32) times MAX_SCHEDULE cannot overflow it.
            let scaled = u128::from(*w) * u128::from(MAX_SCHEDULE) / u128::from(total);
            *w = u64::try_from(scaled).unwrap_or(MAX_SCHEDULE).max(1);
        }
    }
    weights
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// nginx's loop, run for one full cycle: `sum(weights)` picks.
fn swrr(weights: &[u64]) -> Vec<u32> {
    let total: u64 = weights.iter().sum();
    // After normalisation every weight and the total are at most ~MAX_SCHEDULE + peers.
    let total_i = i64::try_from(total).unwrap_or(i64::MAX);
    let mut current = vec![0i64; weights.len()];
    let mut slots = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
    for _ in 0..total {
        let mut best: Option<usize> = None;
        for (i, &w) in weights.iter().enumerate() {
            if w == 0 {
                continue;
            }
            current[i] += i64::try_from(w).unwrap_or(i64::MAX);
            if best.is_none_or(|b| current[i] > current[b]) {
                best = Some(i);
            }
        }
        let Some(best) = best else { break };
        current[best] -= total_i;
        slots.push(best as u32);
    }
    slots
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::balance::test_support::{count, peers};

    #[test]
    fn weights_are_normalised() {
        assert_eq!(Schedule::new(&peers(&[6, 2])).len(), 4);
        assert_eq!(Schedule::new(&peers(&[u32::MAX, u32::MAX])).len(), 2);
        let big = Schedule::new(&peers(&[u32::MAX, 1, u32::MAX / 2]));
        assert!(big.len() as u64 <= MAX_SCHEDULE + 3, "len {}", big.len());
        let counts = count((0..big.len()).filter_map(|t| big.slot(t)));
        assert_eq!(counts[&1], 1, "a tiny weight keeps one slot");
        assert!(
            counts[&0].abs_diff(2 * counts[&2]) <= 2,
            "2:1 kept: {counts:?}"
        );
    }
}
