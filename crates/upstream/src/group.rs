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
//! A group is built once from the typed config (at start and on every reload, when the old group
//! is dropped with its last request), so balancers can precompute; picking takes no lock.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use http::{HeaderMap, Uri};
use sluice_config::Upstream;

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

/// The servers of one `[upstreams.NAME]` and how requests are spread over them.
#[derive(Debug)]
pub struct Group {
    config: Upstream,
    /// Every peer, in configuration order: `peers[i].index() == i`.
    peers: Vec<Arc<Peer>>,
    primary: Box<dyn Balance>,
    /// `None` when the group has no backup servers.
    backup: Option<Box<dyn Balance>>,
}

impl Group {
    pub fn new(config: &Upstream) -> Self {
        // nginx's `single`: one primary and no backup (see the module docs).
        let single = config.servers.len() == 1 && config.servers.iter().all(|s| !s.backup);
        let peers: Vec<Arc<Peer>> = config
            .servers
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let limit = crate::limit::ConnLimit::new(&config.max_conns);
                let peer = Peer::new(i, s.clone()).with_limit(limit);
                Arc::new(if single {
                    peer.without_passive_health()
                } else {
                    peer
                })
            })
            .collect();
        let tier = |backup: bool| -> Vec<Arc<Peer>> {
            peers
                .iter()
                .filter(|p| p.config().backup == backup)
                .cloned()
                .collect()
        };
        let primary = balance::build(&config.policy, tier(false));
        let backups = tier(true);
        let backup = (!backups.is_empty()).then(|| balance::build(&config.policy, backups));
        Self {
            config: config.clone(),
            peers,
            primary,
            backup,
        }
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    pub fn config(&self) -> &Upstream {
        &self.config
    }

    /// Every peer (primaries and backups), in configuration order.
    pub fn peers(&self) -> &[Arc<Peer>] {
        &self.peers
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
        let picked = self.primary.pick(ctx, &filter).or_else(|| {
            self.backup
                .as_ref()
                .and_then(|backup| backup.pick(ctx, &filter))
        });
        match picked {
            Some(peer) => Some(Picked {
                peer: Arc::clone(peer),
                panic: false,
            }),
            None => self.panic_pick(tried, now).map(|peer| Picked {
                peer: Arc::clone(peer),
                panic: true,
            }),
        }
    }

    /// Panic routing: of the servers out only on passive health and not yet tried by this
    /// request, the one out the longest (primaries first on a tie, then configuration order).
    /// Only reached when no tier could pick, so the scan over every peer is off the usual path.
    fn panic_pick(&self, tried: &[usize], now: Instant) -> Option<&Arc<Peer>> {
        self.peers
            .iter()
            .filter(|p| !p.config().down && p.is_healthy() && !tried.contains(&p.index()))
            .filter_map(|p| {
                let since = p.passively_out_since(now)?;
                Some(((since, p.config().backup, p.index()), p))
            })
            .min_by_key(|(rank, _)| *rank)
            .map(|(_, p)| p)
    }
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
        for p in g.peers() {
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
