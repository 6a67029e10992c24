//! Consistent hashing, nginx's `hash $key consistent` (ketama): the same key goes to the same peer
//! while that peer is up, and when it is not, only its own keys move.
//!
//! It maps keys to peers *as nginx does*, so a fleet moved from nginx to sluice (or running both
//! during the move) sends each key to the same server, and the servers' caches stay warm:
//! - each peer owns [`POINTS_PER_WEIGHT`] (160) points per unit of weight on a 32-bit ring; its
//!   points are CRC-32 of `HOST \0 PORT PREV`, where `HOST` and `PORT` are its address as
//!   written (`10.0.0.1:8080` → `10.0.0.1`, `8080`; `unix:/run/a.sock` → `/run/a.sock`, no port)
//!   and `PREV` is the previous point's value, 4 bytes little-endian (0 for the first); points of
//!   equal value are kept once, the first peer's;
//! - a key (see [`super::hash_key`]) is CRC-32 of its bytes and belongs to the first point at or
//!   after it, wrapping around.
//!
//! The test `same_mapping_as_nginx` pins key → peer pairs observed from nginx 1.22.1. The mapping
//! is the same when the two configs write each server the same way, port included: nginx hashes
//! `server 10.0.0.1;` (no port) differently from `server 10.0.0.1:80;`, and sluice always has the
//! port. It differs where sluice chooses to:
//! - when the owner is unavailable or already tried, sluice walks on to the next point of an
//!   allowed peer however far that is; nginx gives up after 20 points and falls back to round
//!   robin (only when over 20 points in a row belong to peers that are out);
//! - past [`RING_BUDGET`] points (a total weight over 1,024), points per weight unit shrink (each
//!   peer keeping at least [`MIN_POINTS`]), trading nginx's mapping for bounded memory;
//! - two servers with the same address are one point set in nginx (it picks between them by
//!   round robin); here the first one owns them.
//!
//! Points come from the peer's *address*, not its position, so reordering servers in the config or
//! adding one leaves the other peers' points where they were. Peers marked `down` keep their points
//! and are skipped like unavailable ones: marking a server down is exactly as disruptive as it
//! failing.
//!
//! Requests without the key (no such header or cookie) are not hashed: they are balanced by smooth
//! weighted round robin over the same peers (see [`super::hash_key`] for why).

use std::sync::Arc;

use sluice_config::{HashKey, UpstreamAddress};

use super::hash_key::key_hash;
use super::round_robin::RoundRobin;
use super::{Balance, Filter};
use crate::group::PickContext;
use crate::peer::Peer;

/// Ring points per unit of weight: nginx's (and ketama's) 160. A peer's share varies by about
/// `1/sqrt(points)`: four equal peers get 10,000 test keys within ±10% of even.
pub const POINTS_PER_WEIGHT: u64 = 160;
/// Ring size above which points per weight unit are scaled down: 160 points for each of 1,024
/// weight units, 1.25 MiB (8 bytes a point).
pub const RING_BUDGET: u64 = POINTS_PER_WEIGHT * 1024;
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
    hash: u32,
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
    fn owner(&self, hash: u32, filter: &Filter<'_>) -> Option<&Arc<Peer>> {
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

/// Every peer's points, sorted, one per value.
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
        // CRC-32 of `HOST \0 PORT`, continued with each previous point.
        let mut base = crc32fast::Hasher::new();
        match peer.address() {
            UpstreamAddress::Tcp(host_port) => {
                let (host, port) = split_port(host_port.as_bytes());
                base.update(host);
                base.update(b"\0");
                base.update(port);
            }
            UpstreamAddress::Unix(path) => {
                base.update(path.as_os_str().as_encoded_bytes());
                base.update(b"\0");
            }
            // Never a peer's address (peers of `dns+` servers are their resolved addresses).
            UpstreamAddress::Dns(records) => {
                base.update(records.to_string().as_bytes());
                base.update(b"\0");
            }
        }
        let mut prev: u32 = 0;
        for _ in 0..points_for(u64::from(peer.weight())) {
            let mut point = base.clone();
            point.update(&prev.to_le_bytes());
            prev = point.finalize();
            ring.push(Point {
                hash: prev,
                peer: position as u32,
            });
        }
    }
    // By value, then by position: of equal values, the first peer's is kept, as nginx's sort
    // (stable in glibc's merge sort) and de-duplication keep it.
    ring.sort_unstable();
    ring.dedup_by_key(|p| p.hash);
    ring
}

/// nginx's split of a server's address: the digits after the last `:` are the port; without
/// them the whole text is the host and the port is empty.
fn split_port(address: &[u8]) -> (&[u8], &[u8]) {
    match address.iter().rposition(|&b| b == b':') {
        Some(colon)
            if address
                .get(colon + 1..)
                .is_some_and(|port| port.iter().all(u8::is_ascii_digit)) =>
        {
            (&address[..colon], &address[colon + 1..])
        }
        _ => (address, &[]),
    }
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
        // Up to the budget, nginx's 160 a weight unit (less the rare equal values: 32 bits).
        let within: Vec<_> = (0..1000)
            .map(|i| Arc::new(Peer::new(i, server(&format!("p{i}"), 1))))
            .collect();
        let len = ring(&within).len() as u64;
        assert!((1000 * POINTS_PER_WEIGHT - 20..=1000 * POINTS_PER_WEIGHT).contains(&len));
        // Past it, every peer keeps its minimum.
        let many: Vec<_> = (0..5000)
            .map(|i| Arc::new(Peer::new(i, server(&format!("p{i}"), 1))))
            .collect();
        let len = ring(&many).len() as u64;
        assert!((5000 * MIN_POINTS - 20..=5000 * MIN_POINTS).contains(&len));
    }

    #[test]
    fn addresses_split_as_nginx_does() {
        let split = |a: &'static str| split_port(a.as_bytes());
        assert_eq!(split("10.0.0.1:8080"), (&b"10.0.0.1"[..], &b"8080"[..]));
        assert_eq!(split("[::1]:443"), (&b"[::1]"[..], &b"443"[..]));
        assert_eq!(split("[::1]"), (&b"[::1]"[..], &b""[..]));
        assert_eq!(split("backend"), (&b"backend"[..], &b""[..]));
    }

    /// Peers at `127.0.0.1:18081`, `:18082`, ... with `weights`.
    fn nginx_peers(weights: &[u32]) -> Vec<Arc<Peer>> {
        weights
            .iter()
            .enumerate()
            .map(|(i, &weight)| {
                let address = UpstreamAddress::Tcp(format!("127.0.0.1:{}", 18081 + i));
                let mut s = sluice_config::UpstreamServer::new(address);
                s.weight = weight;
                Arc::new(Peer::new(i, s))
            })
            .collect()
    }

    /// Key → peer as nginx 1.22.1 chose them, each peer answering its own letter, for
    /// `upstream { hash $request_uri consistent; server 127.0.0.1:18081; server
    /// 127.0.0.1:18082; ... }` and `curl http://front/item/N?v=1`, N from 0 to 199 (`a` is
    /// 18081); then with `server 127.0.0.1:18081 weight=3; server 127.0.0.1:18082;`; then
    /// `hash $http_x_user consistent` over three servers. A change here moves keys away from
    /// where nginx sends them.
    #[test]
    fn same_mapping_as_nginx() {
        const EVEN: &str = "\
            dbddcccadcadbbacccbadbdddbacddacabcddbdbdacbdcdacbbbbdddcbcccacb\
            caaaadabacccacaadcacbcadbcddcccdbadbabcbcaaabbaddbdacddaacabcbad\
            cbdaccccbcabdbbaddbcbddadbdccabdcbcdabadcabcbdbdacbbdbdbcadddbab\
            dbddadbd";
        const WEIGHTED: &str = "\
            baaaaaaaaaaaaaaaaabaabaaabaabaaaaaaaaaabaabbbaaaabbbaaaaaaabaaab\
            aaaaaaababaaaaaabaaabaaabbaabaaabaaaababaaaaaaaabaaaaaaaabababaa\
            abaaaaaabaababbaabbbaabaabaaaabaabaaabaaaabababbaabbabaaaabaabab\
            abaaaaba";
        let letters = |hash: &Hash| -> String {
            map(hash, &uris()[..200], &[])
                .into_iter()
                .map(|p| char::from(b'a' + p.unwrap() as u8))
                .collect()
        };
        assert_eq!(
            letters(&Hash::new(HashKey::Uri, nginx_peers(&[1, 1, 1, 1]))),
            EVEN
        );
        assert_eq!(
            letters(&Hash::new(HashKey::Uri, nginx_peers(&[3, 1]))),
            WEIGHTED
        );

        let user = Hash::new(
            HashKey::Header(http::HeaderName::from_static("x-user")),
            nginx_peers(&[1, 1, 1]),
        );
        let filter = Filter {
            now: Instant::now(),
            tried: &[],
        };
        for (name, peer) in [
            ("alice", 2),
            ("bob", 2),
            ("carol", 0),
            ("dave", 0),
            ("erin", 2),
            ("frank", 0),
            ("grace", 2),
            ("heidi", 0),
        ] {
            let mut headers = HeaderMap::new();
            headers.insert("x-user", HeaderValue::from_static(name));
            let ctx = PickContext {
                headers: &headers,
                ..ctx()
            };
            assert_eq!(
                user.pick(&ctx, &filter).map(|p| p.index()),
                Some(peer),
                "{name}"
            );
        }
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
