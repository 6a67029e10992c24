//! Consistent hashing: the same key goes to the same peer while that peer is up, and when it is
//! not, only its own keys move.
//!
//! Each peer owns points on a 64-bit ring ([`POINTS_PER_WEIGHT`] per unit of weight, "virtual
//! nodes", so shares are even and proportional to weight); a key belongs to the first point at or
//! after its hash. When that point's peer is unavailable or already tried, the walk continues to
//! the next point of an allowed peer, so the keys of a missing peer spread over the others and
//! nobody else's keys move: nginx's `hash $key consistent` (ketama,
//! <https://nginx.org/en/docs/http/ngx_http_upstream_module.html#hash>), minimal remapping.
//!
//! Points are hashed from the peer's *address* (with the stable hash of [`super::hash_key`]), not
//! its position, so reordering servers in the config or adding one leaves the other peers' points
//! where they were. Peers marked `down` keep their points and are skipped like unavailable ones:
//! marking a server down is exactly as disruptive as it failing. The ring is built once per group
//! and bounded: past [`RING_BUDGET`] points, points per weight unit shrink (each peer keeping at
//! least [`MIN_POINTS`]), trading some evenness for memory.
//!
//! Requests without the key (no such header or cookie) are not hashed: they are balanced by smooth
//! weighted round robin over the same peers (see [`super::hash_key`] for why).

use std::sync::Arc;

use sluice_config::{HashKey, UpstreamAddress};

use super::hash_key::{Fnv, key_hash};
use super::round_robin::RoundRobin;
use super::{Balance, Filter};
use crate::group::PickContext;
use crate::peer::Peer;

/// Ring points per unit of weight. A peer's share varies by about `1/sqrt(points)`: ketama's 160
/// left four equal test peers 13% apart from even, 256 keeps them within 5% for 4 KiB a peer.
pub const POINTS_PER_WEIGHT: u64 = 256;
/// Ring size above which points per weight unit are scaled down.
pub const RING_BUDGET: u64 = 16_384;
/// Points every peer keeps however much its share is scaled down.
pub const MIN_POINTS: u64 = 40;

/// Consistent hash on a request key.
#[derive(Debug)]
pub struct Hash {
    key: HashKey,
    peers: Vec<Arc<Peer>>,
    /// Sorted by hash.
    ring: Vec<Point>,
    /// For requests that have no key.
    keyless: RoundRobin,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Point {
    hash: u64,
    /// Position in `peers`.
    peer: u32,
}

impl Hash {
    pub fn new(key: HashKey, peers: Vec<Arc<Peer>>) -> Self {
        let ring = ring(&peers);
        let keyless = RoundRobin::new(peers.clone());
        Self {
            key,
            peers,
            ring,
            keyless,
        }
    }

    /// The first peer at or after `hash` on the ring that the filter allows.
    fn owner(&self, hash: u64, filter: &Filter<'_>) -> Option<&Arc<Peer>> {
        let n = self.ring.len();
        let start = self.ring.partition_point(|p| p.hash < hash);
        for step in 0..n {
            let point = self.ring.get((start + step) % n)?;
            let peer = self.peers.get(point.peer as usize)?;
            if filter.allows(peer) {
                return Some(peer);
            }
            // The owner is out: before walking what may be a long stretch of unavailable peers'
            // points, make sure the walk can end. O(peers), only on this slow path.
            if step == 0 && !self.peers.iter().any(|p| filter.allows(p)) {
                return None;
            }
        }
        None
    }
}

impl Balance for Hash {
    fn peers(&self) -> &[Arc<Peer>] {
        &self.peers
    }

    fn pick(&self, ctx: &PickContext<'_>, filter: &Filter<'_>) -> Option<&Arc<Peer>> {
        match key_hash(&self.key, ctx) {
            Some(hash) => self.owner(hash, filter),
            None => self.keyless.pick(ctx, filter),
        }
    }
}

/// Every peer's points, sorted.
fn ring(peers: &[Arc<Peer>]) -> Vec<Point> {
    let total_weight: u64 = peers.iter().map(|p| u64::from(p.weight())).sum();
    let points_for = |weight: u64| -> u64 {
        let wanted = total_weight.saturating_mul(POINTS_PER_WEIGHT);
        let points = if wanted <= RING_BUDGET {
            weight * POINTS_PER_WEIGHT
        } else {
            // u128: weight (< 2^32) times the budget cannot overflow it.
            let scaled =
                u128::from(weight) * u128::from(RING_BUDGET) / u128::from(total_weight.max(1));
            u64::try_from(scaled).unwrap_or(RING_BUDGET)
        };
        points.max(MIN_POINTS)
    };
    let mut ring = Vec::new();
    for (position, peer) in peers.iter().enumerate() {
        let mut seed = Fnv::new();
        match peer.address() {
            UpstreamAddress::Tcp(host_port) => seed.write(host_port.as_bytes()),
            UpstreamAddress::Unix(path) => {
                seed.write(b"unix:");
                seed.write(path.as_os_str().as_encoded_bytes());
            }
        }
        for vnode in 0..points_for(u64::from(peer.weight())) {
            let mut h = seed.clone();
            h.write(b"#");
            h.write(&vnode.to_le_bytes());
            ring.push(Point {
                hash: h.finish(),
                peer: position as u32,
            });
        }
    }
    ring.sort_unstable();
    ring
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use http::{HeaderMap, HeaderValue, Uri};

    use super::*;
    use crate::balance::test_support::{count, ctx, peers, server};

    const KEYS: usize = 10_000;

    fn uris() -> Vec<Uri> {
        (0..KEYS)
            .map(|i| Uri::try_from(format!("/item/{i}?v=1")).unwrap())
            .collect()
    }

    /// The peer index each URI maps to.
    fn map(hash: &Hash, uris: &[Uri], tried: &[usize]) -> Vec<Option<usize>> {
        let headers = HeaderMap::new();
        let filter = Filter {
            now: Instant::now(),
            tried,
        };
        uris.iter()
            .map(|uri| {
                hash.pick(
                    &PickContext {
                        uri,
                        headers: &headers,
                        ..ctx()
                    },
                    &filter,
                )
                .map(|p| p.index())
            })
            .collect()
    }

    #[test]
    fn same_key_same_peer_and_even_spread() {
        let hash = Hash::new(HashKey::Uri, peers(&[1, 1, 1, 1]));
        let uris = uris();
        let first = map(&hash, &uris, &[]);
        assert_eq!(map(&hash, &uris, &[]), first);
        let counts = count(first.into_iter().flatten());
        assert!(
            counts.values().all(|&c| (1875..=3125).contains(&c)),
            "within ±25% of 2,500: {counts:?}"
        );
    }

    #[test]
    fn unavailable_peer_moves_only_its_own_keys() {
        let ps = peers(&[1, 1, 1, 1]);
        let hash = Hash::new(HashKey::Uri, ps.clone());
        let uris = uris();
        let before = map(&hash, &uris, &[]);
        ps[2].set_healthy(false);
        let after = map(&hash, &uris, &[]);
        let mut moved = 0;
        for (b, a) in before.iter().zip(&after) {
            if *b == Some(2) {
                assert!(a.is_some() && *a != Some(2));
                moved += 1;
            } else {
                assert_eq!(a, b, "a key of a healthy peer moved");
            }
        }
        // Its keys spread over all three others, not onto one neighbour.
        let spread = count(
            before
                .iter()
                .zip(&after)
                .filter(|(b, _)| **b == Some(2))
                .filter_map(|(_, a)| *a),
        );
        assert_eq!(spread.len(), 3, "{spread:?}");
        assert!(spread.values().all(|&c| c > moved / 6), "{spread:?}");

        ps[2].set_healthy(true);
        assert_eq!(map(&hash, &uris, &[]), before, "back: its keys come home");
        assert_eq!(
            map(&hash, &uris, &[2]),
            after,
            "tried is the same as unavailable"
        );
    }

    #[test]
    fn points_depend_on_addresses_not_order() {
        let uris = uris();
        let ps = peers(&[1, 1, 1]);
        let forward = Hash::new(HashKey::Uri, ps.clone());
        let reversed = Hash::new(HashKey::Uri, ps.iter().rev().cloned().collect());
        assert_eq!(map(&forward, &uris, &[]), map(&reversed, &uris, &[]));
    }

    #[test]
    fn weights_scale_shares() {
        let counts = count(
            map(&Hash::new(HashKey::Uri, peers(&[3, 1])), &uris(), &[])
                .into_iter()
                .flatten(),
        );
        assert!((6750..=8250).contains(&counts[&0]), "about 3:1: {counts:?}");
    }

    #[test]
    fn ring_is_bounded() {
        let ps: Vec<_> = (0..3)
            .map(|i| Arc::new(Peer::new(i, server(&format!("p{i}"), u32::MAX))))
            .collect();
        assert!(ring(&ps).len() as u64 <= RING_BUDGET + 3);
        let many: Vec<_> = (0..1000)
            .map(|i| Arc::new(Peer::new(i, server(&format!("p{i}"), 1))))
            .collect();
        assert_eq!(ring(&many).len() as u64, 1000 * MIN_POINTS);
    }

    #[test]
    fn keyless_requests_are_round_robin_and_none_when_all_out() {
        let ps = peers(&[1, 1]);
        let hash = Hash::new(
            HashKey::Header(http::HeaderName::from_static("x-user")),
            ps.clone(),
        );
        let filter = Filter {
            now: Instant::now(),
            tried: &[],
        };
        let picks: Vec<_> = (0..4)
            .filter_map(|_| hash.pick(&ctx(), &filter).map(|p| p.index()))
            .collect();
        assert_eq!(picks, [0, 1, 0, 1]);

        let mut headers = HeaderMap::new();
        headers.insert("x-user", HeaderValue::from_static("alice"));
        let keyed = PickContext {
            headers: &headers,
            ..ctx()
        };
        let alice = hash.pick(&keyed, &filter).map(|p| p.index());
        assert!((0..10).all(|_| hash.pick(&keyed, &filter).map(|p| p.index()) == alice));

        ps.iter().for_each(|p| p.set_healthy(false));
        assert!(hash.pick(&keyed, &filter).is_none());
        assert!(hash.pick(&ctx(), &filter).is_none());
    }
}
