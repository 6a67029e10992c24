//! An upstream group: its peers and the policy that picks one per request. This is what the proxy
//! calls: `pick` a peer, `start` it to count the request in flight, report the outcome with
//! `report_success` / `report_failure`, and on a connection failure `pick` again with the peers
//! already tried, so the retry goes elsewhere.
//!
//! Backup servers form a second tier with its own balancer, used only when the primary tier has no
//! peer to offer: all unavailable, or all already tried by this request. That is nginx's `backup`
//! (<https://nginx.org/en/docs/http/ngx_http_upstream_module.html#server>): a retry that has
//! exhausted the primaries goes on to the backups, and as soon as a primary is back, new requests
//! go to it and the backups fall idle again. Both tiers use the group's policy.
//!
//! Two rules keep one failure from becoming an outage:
//!
//! - **A single server is never taken out.** A group of one server and no backup ignores that
//!   server's `max_fails` / `fail_timeout`, as nginx does (`peers->single` in
//!   `ngx_http_upstream_round_robin.c`; "if there is only a single server in a group, max_fails,
//!   fail_timeout and slow_start parameters are ignored, and such a server will never be
//!   considered unavailable"): taking out the only server turns one reset connection into
//!   `fail_timeout` of 502s for every request, on every URL, even after the server is back.
//! - **Panic routing.** When no primary and no backup can be picked, but some of the servers
//!   are out only because passive health took them out, the request goes to the one taken out
//!   the longest ago (the most likely to be back; ties: primaries first, then configuration
//!   order) rather than failing without a try (Envoy's panic threshold at its limit: when too
//!   few hosts are healthy it routes to all of them). The pick says so ([`Picked::panic`]) for
//!   the proxy's `sluice_upstream_panic_picks_total`. A server marked `down`, one the active
//!   checker holds out, and one this request already tried are never picked in panic. A success
//!   of a panic-routed request ends that server's ejection ([`crate::health::passive`]). Order:
//!   primaries, then backups, then panic over every tier.
//!
//! A group is built from the typed config (at start and on every reload, when the old group
//! is dropped with its last request). Its peers and balancers form one snapshot, precomputed
//! (schedules, rings) and swapped whole when servers discovered by DNS change
//! ([`Group::update`]); picking loads the snapshot and takes no lock.
//!
//! **Servers discovered by DNS.** A `dns+` server stands for the addresses its name resolves
//! to; [`Group::update`] is the one place that turns resolved sets into peers. An address that
//! stays keeps its [`Peer`] (its number, in-flight count, passive and active health, and so its
//! pool, which is keyed by the number); a new one gets a new peer with a number never used by
//! another address of the group while it stays; a gone one leaves the snapshot, and requests
//! already on it finish on the peer they hold. SRV priorities are backup levels: the lowest is
//! primary, each higher one a further tier, after the configured backups of the same level
//! (level = the priority's rank among the name's priorities, plus 1 for a server marked
//! `backup`). Picking walks the tiers in level order, as it walks primaries then backups.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use arc_swap::ArcSwap;
use http::{HeaderMap, Uri};
use sluice_config::{Upstream, UpstreamAddress, UpstreamServer};

use crate::balance::{self, Balance, Filter};
use crate::peer::Peer;

/// What a policy may look at in a request (the hash policy's keys).
#[derive(Debug, Clone, Copy)]
pub struct PickContext<'a> {
    pub client_ip: IpAddr,
    pub uri: &'a Uri,
    pub headers: &'a HeaderMap,
}

/// A peer picked for a request.
#[derive(Debug, Clone)]
pub struct Picked {
    pub peer: Arc<Peer>,
    /// Picked by panic routing: every server that could take the request was out on passive
    /// health, and this one has been out the longest.
    pub panic: bool,
}

/// One address a `dns+` server resolved to, as [`Group::update`] takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub address: SocketAddr,
    /// The name and port it was found under (`app.internal:8080`; for SRV, the target's).
    pub host: String,
    /// SRV weight (scaled to the balancer's range), or `None`: the server's configured weight.
    pub weight: Option<u32>,
    /// Rank of the SRV priority among the name's priorities (0 = the lowest = primary).
    pub level: u32,
}

/// The peers added and removed by one [`Group::update`].
#[derive(Debug, Default)]
pub struct Change {
    pub added: Vec<Arc<Peer>>,
    pub removed: Vec<Arc<Peer>>,
}

impl Change {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty()
    }
}

/// The servers of one `[upstreams.NAME]` and how requests are spread over them.
#[derive(Debug)]
pub struct Group {
    config: Upstream,
    snapshot: ArcSwap<Snapshot>,
    /// Numbers of discovered addresses, and the next one to give; also serialises updates.
    numbers: Mutex<Numbers>,
}

/// The peers and their tiers at one moment.
#[derive(Debug)]
struct Snapshot {
    /// Every peer: configured servers in configuration order, then discovered ones.
    peers: Arc<[Arc<Peer>]>,
    /// Balancers by level, lowest (primary) first.
    tiers: Vec<Box<dyn Balance>>,
    /// The last sets [`Group::update`] was given, by the `dns+` server's position.
    resolved: HashMap<usize, Vec<Resolved>>,
}

#[derive(Debug)]
struct Numbers {
    by_address: HashMap<SocketAddr, usize>,
    next: usize,
}

/// A peer-to-be: its settings, host and level.
struct Wanted {
    index: Option<usize>,
    server: UpstreamServer,
    host: Option<Arc<str>>,
    level: u32,
}

impl Group {
    pub fn new(config: &Upstream) -> Self {
        let group = Self {
            config: config.clone(),
            snapshot: ArcSwap::from_pointee(Snapshot {
                peers: Arc::new([]),
                tiers: Vec::new(),
                resolved: HashMap::new(),
            }),
            numbers: Mutex::new(Numbers {
                by_address: HashMap::new(),
                next: config.servers.len(),
            }),
        };
        group.update(HashMap::new());
        group
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    pub fn config(&self) -> &Upstream {
        &self.config
    }

    /// Every peer (primaries and backups) now: configured ones in configuration order, then
    /// those discovered by DNS.
    pub fn peers(&self) -> Arc<[Arc<Peer>]> {
        self.snapshot.load().peers.clone()
    }

    /// The sets the group's `dns+` servers last resolved to, by server position (what
    /// [`Group::update`] was last given).
    pub fn resolved(&self) -> HashMap<usize, Vec<Resolved>> {
        self.snapshot.load().resolved.clone()
    }

    /// Replace the peers of the group's `dns+` servers with what they resolve to now:
    /// `resolved` maps a `dns+` server's position in `servers` to its addresses (a server not
    /// in it has none). Peers whose address stays are kept (see the module docs). Returns the
    /// peers added and removed.
    pub fn update(&self, resolved: HashMap<usize, Vec<Resolved>>) -> Change {
        let mut numbers = self.numbers.lock().unwrap_or_else(|e| e.into_inner());
        let old = self.snapshot.load_full();
        let mut wanted: Vec<Wanted> = Vec::new();
        let mut seen: Vec<SocketAddr> = Vec::new();
        for (position, server) in self.config.servers.iter().enumerate() {
            let backup = u32::from(server.backup);
            if !matches!(server.address, UpstreamAddress::Dns(_)) {
                wanted.push(Wanted {
                    index: Some(position),
                    server: server.clone(),
                    host: None,
                    level: backup,
                });
                continue;
            }
            for found in resolved.get(&position).into_iter().flatten() {
                // The same address under two names is one peer (the first one's settings).
                if seen.contains(&found.address) {
                    continue;
                }
                seen.push(found.address);
                let level = found.level + backup;
                wanted.push(Wanted {
                    index: None,
                    server: UpstreamServer {
                        address: UpstreamAddress::Tcp(found.address.to_string()),
                        weight: found.weight.unwrap_or(server.weight).max(1),
                        backup: level > 0,
                        ..server.clone()
                    },
                    host: Some(found.host.as_str().into()),
                    level,
                });
            }
        }
        numbers
            .by_address
            .retain(|address, _| seen.contains(address));
        // nginx's `single`: one primary and no backup (see the module docs).
        let single = wanted.len() == 1 && wanted.iter().all(|w| w.level == 0);
        let old_by_index: HashMap<usize, &Arc<Peer>> =
            old.peers.iter().map(|p| (p.index(), p)).collect();
        let mut change = Change::default();
        let mut peers = Vec::with_capacity(wanted.len());
        let mut levels = Vec::with_capacity(wanted.len());
        for want in wanted {
            let index = match want.index {
                Some(index) => index,
                None => {
                    let address = match &want.server.address {
                        UpstreamAddress::Tcp(a) => a.parse::<SocketAddr>().ok(),
                        _ => None,
                    };
                    let Some(address) = address else { continue };
                    let Numbers { by_address, next } = &mut *numbers;
                    *by_address.entry(address).or_insert_with(|| {
                        *next += 1;
                        *next - 1
                    })
                }
            };
            let keep = old_by_index.get(&index).filter(|p| {
                p.config() == &want.server
                    && p.host() == want.host.as_deref()
                    && p.passive_health_on() == (!single && want.server.max_fails > 0)
            });
            let peer = match keep {
                Some(peer) => Arc::clone(peer),
                None => {
                    let limit = crate::limit::ConnLimit::new(&self.config.max_conns);
                    let mut peer = Peer::new(index, want.server).with_limit(limit);
                    if let Some(host) = want.host {
                        peer = peer.with_host(host);
                    }
                    if single {
                        peer = peer.without_passive_health();
                    }
                    let peer = Arc::new(peer);
                    if let Some(old) = old_by_index.get(&index) {
                        change.removed.push(Arc::clone(old));
                    }
                    change.added.push(Arc::clone(&peer));
                    peer
                }
            };
            levels.push(want.level);
            peers.push(peer);
        }
        for old in old.peers.iter() {
            if !peers.iter().any(|p| p.index() == old.index()) {
                change.removed.push(Arc::clone(old));
            }
        }
        let mut distinct = levels.clone();
        distinct.sort_unstable();
        distinct.dedup();
        let tiers = distinct
            .iter()
            .map(|&level| {
                let tier = peers
                    .iter()
                    .zip(&levels)
                    .filter(|(_, l)| **l == level)
                    .map(|(p, _)| Arc::clone(p))
                    .collect();
                balance::build(&self.config.policy, tier)
            })
            .collect();
        self.snapshot.store(Arc::new(Snapshot {
            peers: peers.into(),
            tiers,
            resolved,
        }));
        change
    }

    /// Pick a peer for a request, skipping unavailable peers and those whose index is in `tried`.
    /// Primaries first; backups only when no primary can be picked; then panic routing (see the
    /// module docs). `None` when nothing can be picked.
    pub fn pick(&self, ctx: &PickContext<'_>, tried: &[usize]) -> Option<Picked> {
        self.pick_at(ctx, tried, Instant::now())
    }

    /// [`Group::pick`] at a given time (passive health compares it with failure times); lets tests
    /// and callers that already read the clock pass it in.
    pub fn pick_at(&self, ctx: &PickContext<'_>, tried: &[usize], now: Instant) -> Option<Picked> {
        let filter = Filter { now, tried };
        let snapshot = self.snapshot.load();
        let picked = snapshot
            .tiers
            .iter()
            .find_map(|tier| tier.pick(ctx, &filter));
        match picked {
            Some(peer) => Some(Picked {
                peer: Arc::clone(peer),
                panic: false,
            }),
            None => panic_pick(&snapshot.peers, tried, now).map(|peer| Picked {
                peer: Arc::clone(peer),
                panic: true,
            }),
        }
    }
}

/// Panic routing: of the servers out only on passive health and not yet tried by this
/// request, the one out the longest (primaries first on a tie, then configuration order).
/// Only reached when no tier could pick, so the scan over every peer is off the usual path.
fn panic_pick<'a>(peers: &'a [Arc<Peer>], tried: &[usize], now: Instant) -> Option<&'a Arc<Peer>> {
    peers
        .iter()
        .enumerate()
        .filter(|(_, p)| !p.config().down && p.is_healthy() && !tried.contains(&p.index()))
        .filter_map(|(position, p)| {
            let since = p.passively_out_since(now)?;
            Some(((since, p.config().backup, position), p))
        })
        .min_by_key(|(rank, _)| *rank)
        .map(|(_, p)| p)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use sluice_config::{BalancePolicy, UpstreamServer};

    use super::*;
    use crate::balance::test_support::{count, ctx, server};

    fn group(servers: Vec<UpstreamServer>, policy: BalancePolicy) -> Group {
        let mut config = Upstream::new("app", servers);
        config.policy = policy;
        Group::new(&config)
    }

    fn backup(name: &str) -> UpstreamServer {
        UpstreamServer {
            backup: true,
            ..server(name, 1)
        }
    }

    fn picks(g: &Group, n: usize, tried: &[usize], now: Instant) -> Vec<usize> {
        (0..n)
            .filter_map(|_| g.pick_at(&ctx(), tried, now).map(|p| p.peer.index()))
            .collect()
    }

    #[test]
    fn weighted_split_and_accessors() {
        let g = group(
            vec![server("a", 3), server("b", 1)],
            BalancePolicy::RoundRobin,
        );
        assert_eq!(g.name(), "app");
        assert_eq!(g.config().servers.len(), 2);
        assert!(g.peers().iter().enumerate().all(|(i, p)| p.index() == i));
        let counts = count(picks(&g, 4000, &[], Instant::now()));
        assert_eq!((counts[&0], counts[&1]), (3000, 1000));
    }

    #[test]
    fn passive_failures_take_a_peer_out_until_fail_timeout() {
        let flaky = UpstreamServer {
            max_fails: 2,
            fail_timeout: Duration::from_secs(10),
            ..server("a", 1)
        };
        let g = group(vec![flaky, server("b", 1)], BalancePolicy::RoundRobin);
        let t0 = Instant::now();
        let a = &g.peers()[0];
        assert!(!a.report_failure(t0));
        assert!(
            a.report_failure(t0 + Duration::from_secs(3)),
            "second failure within 10s"
        );
        assert_eq!(
            count(picks(&g, 10, &[], t0 + Duration::from_secs(5)))[&1],
            10
        );
        let later = t0 + Duration::from_secs(14);
        assert_eq!(
            picks(&g, 4, &[], later),
            [0, 1, 0, 1],
            "back after fail_timeout"
        );
    }

    #[test]
    fn zero_max_fails_never_takes_a_peer_out() {
        let tough = UpstreamServer {
            max_fails: 0,
            ..server("a", 1)
        };
        let g = group(vec![tough, server("b", 1)], BalancePolicy::RoundRobin);
        let now = Instant::now();
        assert!((0..100).all(|_| !g.peers()[0].report_failure(now)));
        assert_eq!(count(picks(&g, 10, &[], now))[&0], 5);
    }

    #[test]
    fn backups_only_while_no_primary_can_be_picked() {
        let g = group(
            vec![server("a", 1), backup("x"), server("b", 1)],
            BalancePolicy::RoundRobin,
        );
        let now = Instant::now();
        assert!(
            !picks(&g, 100, &[], now).contains(&1),
            "backup idle while primaries are up"
        );
        assert_eq!(
            picks(&g, 3, &[0, 2], now),
            [1, 1, 1],
            "a retry past every primary uses it"
        );

        g.peers()[0].set_healthy(false);
        assert!(g.peers()[2].report_failure(now));
        assert_eq!(picks(&g, 5, &[], now), [1; 5]);

        g.peers()[0].set_healthy(true);
        assert!(
            !picks(&g, 100, &[], now).contains(&1),
            "a primary is back: backup idle again"
        );
    }

    #[test]
    fn nothing_available_gives_none() {
        let down = UpstreamServer {
            down: true,
            ..server("a", 1)
        };
        let g = group(vec![down, backup("x")], BalancePolicy::LeastConnections);
        let now = Instant::now();
        assert_eq!(picks(&g, 3, &[], now), [1, 1, 1], "`down` is never picked");
        g.peers()[1].set_healthy(false);
        assert!(g.pick_at(&ctx(), &[], now).is_none());
        assert!(
            group(Vec::new(), BalancePolicy::RoundRobin)
                .pick(&ctx(), &[])
                .is_none()
        );
    }

    #[test]
    fn a_single_server_is_never_taken_out() {
        let g = group(vec![server("a", 1)], BalancePolicy::RoundRobin);
        let now = Instant::now();
        let a = &g.peers()[0];
        assert!(
            (0..10).all(|_| !a.report_failure(now)),
            "max_fails = 1 by default, ignored for the only server"
        );
        let picked = g
            .pick_at(&ctx(), &[], now + Duration::from_secs(1))
            .unwrap();
        assert_eq!((picked.peer.index(), picked.panic), (0, false));

        // With a backup there is somewhere else to go: passive health applies again.
        let g = group(vec![server("a", 1), backup("x")], BalancePolicy::RoundRobin);
        assert!(g.peers()[0].report_failure(now));
        assert_eq!(picks(&g, 3, &[], now), [1, 1, 1]);
    }

    /// `(index, panic)` of one pick.
    fn pick_one(g: &Group, tried: &[usize], now: Instant) -> Option<(usize, bool)> {
        g.pick_at(&ctx(), tried, now)
            .map(|p| (p.peer.index(), p.panic))
    }

    #[test]
    fn every_server_out_panics_to_the_one_out_the_longest() {
        for policy in [
            BalancePolicy::RoundRobin,
            BalancePolicy::LeastConnections,
            BalancePolicy::PowerOfTwoChoices,
            BalancePolicy::Hash(sluice_config::HashKey::ClientIp),
        ] {
            let g = group(
                vec![server("a", 1), server("b", 1), server("c", 1)],
                policy.clone(),
            );
            let t0 = Instant::now();
            let second = Duration::from_secs(1);
            assert!(g.peers()[1].report_failure(t0));
            assert!(g.peers()[0].report_failure(t0 + second));
            assert!(g.peers()[2].report_failure(t0 + 2 * second));
            let now = t0 + 3 * second;
            assert_eq!(pick_one(&g, &[], now), Some((1, true)), "{policy:?}");
            assert_eq!(
                pick_one(&g, &[1], now),
                Some((0, true)),
                "a retry: the next"
            );
            assert_eq!(pick_one(&g, &[0, 1, 2], now), None, "all tried");

            // `down` and active-unhealthy servers are never picked in panic.
            g.peers()[1].set_healthy(false);
            assert_eq!(pick_one(&g, &[], now), Some((0, true)), "{policy:?}");
            g.peers()[1].set_healthy(true); // (also ends its passive ejection)
            assert_eq!(pick_one(&g, &[], now), Some((1, false)), "{policy:?}");
        }
        let down = UpstreamServer {
            down: true,
            ..server("a", 1)
        };
        let g = group(vec![down, server("b", 1)], BalancePolicy::RoundRobin);
        let now = Instant::now();
        assert!(g.peers()[1].report_failure(now));
        assert_eq!(pick_one(&g, &[], now), Some((1, true)));
        assert_eq!(pick_one(&g, &[1], now), None, "never the `down` one");
    }

    #[test]
    fn backups_first_then_panic_over_every_tier() {
        let g = group(
            vec![server("a", 1), backup("x"), server("b", 1)],
            BalancePolicy::RoundRobin,
        );
        let t0 = Instant::now();
        let second = Duration::from_secs(1);
        assert!(g.peers()[0].report_failure(t0 + second));
        assert!(g.peers()[2].report_failure(t0 + 2 * second));
        assert_eq!(
            pick_one(&g, &[], t0 + 3 * second),
            Some((1, false)),
            "the backup while it is up"
        );
        assert!(g.peers()[1].report_failure(t0));
        assert_eq!(
            pick_one(&g, &[], t0 + 3 * second),
            Some((1, true)),
            "the backup has been out the longest"
        );
        // Same time out: primaries first.
        let g = group(vec![backup("x"), server("a", 1)], BalancePolicy::RoundRobin);
        let t1 = Instant::now(); // (after the peers were made: earlier times count as their start)
        for p in g.peers().iter() {
            assert!(p.report_failure(t1));
        }
        assert_eq!(pick_one(&g, &[], t1 + second), Some((1, true)));
    }

    #[test]
    fn a_panic_pick_that_succeeds_brings_the_server_back() {
        let g = group(
            vec![server("a", 1), server("b", 1)],
            BalancePolicy::RoundRobin,
        );
        let t0 = Instant::now();
        assert!(g.peers()[0].report_failure(t0));
        assert!(g.peers()[1].report_failure(t0 + Duration::from_secs(1)));
        let sent = t0 + Duration::from_secs(2);
        let picked = g.pick_at(&ctx(), &[], sent).unwrap();
        assert!(picked.panic);
        assert!(picked.peer.report_success(sent), "ended the ejection");
        let after = t0 + Duration::from_secs(3);
        assert_eq!(picks(&g, 4, &[], after), [0, 0, 0, 0], "b is still out");
        assert!(
            g.pick_at(&ctx(), &[], after).is_some_and(|p| !p.panic),
            "no panic any more"
        );
    }

    #[test]
    fn every_policy_is_built_and_skips_tried() {
        let key = sluice_config::HashKey::ClientIp;
        for policy in [
            BalancePolicy::RoundRobin,
            BalancePolicy::LeastConnections,
            BalancePolicy::PowerOfTwoChoices,
            BalancePolicy::Hash(key),
        ] {
            let g = group(
                vec![server("a", 1), server("b", 2), server("c", 1)],
                policy.clone(),
            );
            let seen = picks(&g, 50, &[0, 2], Instant::now());
            assert_eq!(seen, [1; 50], "{policy:?}");
        }
    }

    #[test]
    fn least_conn_group_prefers_the_idle_peer() {
        let g = group(
            vec![server("a", 1), server("b", 1)],
            BalancePolicy::LeastConnections,
        );
        let _held = g.peers()[0].start();
        assert!(picks(&g, 20, &[], Instant::now()).iter().all(|&i| i == 1));
    }

    #[test]
    fn concurrent_picks_keep_the_weighted_split() {
        let g = Arc::new(group(
            vec![server("a", 3), server("b", 1)],
            BalancePolicy::RoundRobin,
        ));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let g = Arc::clone(&g);
                std::thread::spawn(move || {
                    (0..10_000)
                        .map(|_| g.pick(&ctx(), &[]).map_or(usize::MAX, |p| p.peer.index()))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let all: Vec<usize> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        let counts = count(all);
        assert_eq!(counts[&0] + counts[&1], 40_000, "every pick found a peer");
        assert!(
            counts[&0].abs_diff(30_000) <= 1_500,
            "3:1 within ±5%: {counts:?}"
        );
    }
}
