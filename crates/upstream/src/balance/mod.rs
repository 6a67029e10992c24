//! Balancing policies: which peer of a tier (primaries or backups) gets the next request.
//!
//! Each policy lives in its own file and implements [`Balance`]; [`build`] turns the configured
//! [`BalancePolicy`] into one. A balancer owns the peers of its tier and is built once per group
//! (at start or reload), so everything that can be precomputed is: the round-robin schedule, the
//! hash ring, cumulative weights.
//!
//! The pick path takes no lock and allocates nothing: shared state is atomics (a ticket counter
//! for round robin, in-flight counts on the peers), randomness is `fastrand`'s thread-local
//! generator. What a pick may not use is decided by a [`Filter`]: the peer's own availability at
//! `now` and the request's `tried` list, so retries go to other peers.
//!
//! | policy | file | nginx equivalent |
//! |---|---|---|
//! | smooth weighted round robin | [`round_robin`] | default (`weight=`) |
//! | least connections | [`least_conn`] | `least_conn` |
//! | power of two choices | [`p2c`] | `random two least_conn` |
//! | consistent hash | [`hash`] | `hash $key consistent` |

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use sluice_config::BalancePolicy;

use crate::group::PickContext;
use crate::peer::Peer;

pub mod hash;
pub mod hash_key;
pub mod least_conn;
pub mod p2c;
pub mod round_robin;
pub mod schedule;

/// A balancing policy over a fixed set of peers.
pub trait Balance: Send + Sync + fmt::Debug {
    /// The peers this balancer picks from, in configuration order.
    fn peers(&self) -> &[Arc<Peer>];

    /// Pick a peer the filter allows; `None` when it allows none of them.
    fn pick(&self, ctx: &PickContext<'_>, filter: &Filter<'_>) -> Option<&Arc<Peer>>;
}

/// Build the configured policy over `peers` (one tier of a group).
pub fn build(policy: &BalancePolicy, peers: Vec<Arc<Peer>>) -> Box<dyn Balance> {
    match policy {
        BalancePolicy::RoundRobin => Box::new(round_robin::RoundRobin::new(peers)),
        BalancePolicy::LeastConnections => Box::new(least_conn::LeastConn::new(peers)),
        BalancePolicy::PowerOfTwoChoices => Box::new(p2c::PowerOfTwo::new(peers)),
        BalancePolicy::Hash(key) => Box::new(hash::Hash::new(key.clone(), peers)),
    }
}

/// Which peers a pick may return.
#[derive(Debug, Clone, Copy)]
pub struct Filter<'a> {
    pub now: Instant,
    /// Indices ([`Peer::index`]) this request already tried.
    pub tried: &'a [usize],
}

impl Filter<'_> {
    pub fn allows(&self, peer: &Peer) -> bool {
        peer.is_available(self.now) && !self.tried.contains(&peer.index())
    }
}

/// `a.in_flight / a.weight < b.in_flight / b.weight`, compared by cross-multiplying as nginx does
/// (no division, no floats; u128 so no weight or count can overflow).
pub(crate) fn less_loaded(a: &Peer, b: &Peer) -> bool {
    let load = |p: &Peer, other: &Peer| p.in_flight() as u128 * u128::from(other.weight());
    load(a, b) < load(b, a)
}

#[cfg(test)]
pub(crate) mod test_support {
    use std::collections::HashMap;
    use std::net::{IpAddr, Ipv4Addr};
    use std::sync::{Arc, LazyLock};

    use http::{HeaderMap, Uri};
    use sluice_config::{UpstreamAddress, UpstreamServer};

    use crate::group::PickContext;
    use crate::peer::Peer;

    pub fn server(name: &str, weight: u32) -> UpstreamServer {
        let mut s = UpstreamServer::new(UpstreamAddress::Tcp(format!("{name}:80")));
        s.weight = weight;
        s
    }

    /// Peers named `a`, `b`, … with the given weights.
    pub fn peers(weights: &[u32]) -> Vec<Arc<Peer>> {
        weights
            .iter()
            .enumerate()
            .map(|(i, &w)| Arc::new(Peer::new(i, server(&name(i), w))))
            .collect()
    }

    /// The index of the peer `balancer` picks now, skipping `tried`.
    pub fn pick(balancer: &impl super::Balance, tried: &[usize]) -> Option<usize> {
        let filter = super::Filter {
            now: std::time::Instant::now(),
            tried,
        };
        balancer.pick(&ctx(), &filter).map(|p| p.index())
    }

    pub fn name(index: usize) -> String {
        char::from(b'a' + index as u8).to_string()
    }

    static URI: LazyLock<Uri> = LazyLock::new(|| Uri::from_static("/"));
    static HEADERS: LazyLock<HeaderMap> = LazyLock::new(HeaderMap::new);

    pub fn ctx() -> PickContext<'static> {
        PickContext {
            client_ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            uri: &URI,
            headers: &HEADERS,
        }
    }

    /// How many times each peer index was picked.
    pub fn count(picks: impl IntoIterator<Item = usize>) -> HashMap<usize, usize> {
        let mut counts = HashMap::new();
        for i in picks {
            *counts.entry(i).or_default() += 1;
        }
        counts
    }
}
