//! The shared cache tier on a real 3-master Redis Cluster (`redis+cluster://` seed nodes;
//! the fixture is `fleet::cluster`): what one instance stores another serves, purges by tag and
//! prefix reach every master (SCAN on each) and every instance (pub/sub through any node), and
//! a stopped master leaves the keys of the other masters' slots served from the shared tier
//! while its own keys are misses within the lookup deadline, and no request fails.

use std::time::{Duration, Instant};

use sluice_cache::storage::shared::Keys;

use super::{Edge, Origin, Reply, Setup, zone_series};
use crate::fleet::cluster::RedisCluster;

const LOOKUPS: &str = "sluice_cache_shared_lookups_total";
const WRITES: &str = "sluice_cache_shared_writes_total";
const CONNECTED: &str = "sluice_cache_shared_connected";
const BREAKER_OPEN: &str = "sluice_cache_shared_breaker_open";
const MASTERS: &str = "sluice_cache_shared_cluster_masters";
const PURGES: &str = "sluice_cache_shared_purges_total";

/// Paths served by the origin in these tests.
const PATHS: usize = 30;

/// The lookup deadline of the tests that check what is served (a HIT on B, a purge seen): long
/// enough that a lookup is never cut short on a machine whose two cores also run the rest of the
/// suite, so their answers cannot change between runs. The tests of a stopped or killed Redis,
/// which check that no request waits past the deadline, use the default's 20 ms.
const CORRECTNESS_DEADLINE: &str = "1s";
const OUTAGE_DEADLINE: &str = "20ms";

async fn instance(origin: &Origin, cluster: &RedisCluster) -> Edge {
    instance_with(origin, cluster, CORRECTNESS_DEADLINE).await
}

/// An instance whose shared-tier lookups give up after `deadline`.
async fn instance_with(origin: &Origin, cluster: &RedisCluster, deadline: &str) -> Edge {
    let zone = format!(
        "[caches.main.shared]\nredis = \"{}\"\ndeadline = \"{deadline}\"",
        cluster.url()
    );
    let edge = Edge::start(
        origin,
        Setup {
            zone: &zone,
            ..Setup::default()
        },
    )
    .await;
    edge.wait_metric(&zone_series(CONNECTED, &[]), 1.0).await;
    edge
}

fn path(n: usize) -> String {
    format!("/c{n}")
}

/// The master holding path `n`'s keys (they share one hash tag).
fn master(n: usize) -> usize {
    let primary = format!("http://{}{}", super::HOST, path(n));
    RedisCluster::master_of(&Keys::of("main", &primary).index())
}

async fn origin_with_paths(tag: bool) -> Origin {
    let origin = Origin::start().await;
    for n in 0..PATHS {
        let mut reply = Reply::ok(format!("body {n}")).cache_control("max-age=600");
        if tag && n % 2 == 0 {
            reply = reply.header("surrogate-key", "even");
        }
        origin.set(&path(n), reply);
    }
    origin
}

/// A stores every path (a MISS each); the writes land on all three masters.
async fn stored_by(a: &Edge, origin: &Origin) {
    for n in 0..PATHS {
        let resp = a.get(&path(n)).await;
        assert_eq!((resp.status, resp.cache()), (200, "MISS"), "{}", path(n));
    }
    a.wait_metric(&zone_series(WRITES, &[("result", "written")]), PATHS as f64)
        .await;
    for n in 0..PATHS {
        assert_eq!(origin.requests(&path(n)), 1);
    }
    for m in 0..3 {
        let held = (0..PATHS).filter(|n| master(*n) == m).count();
        assert!(held >= 3, "master {m} holds {held} of the paths");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_a_miss_on_one_instance_is_a_hit_on_another_and_purges_reach_every_master() {
    let _serial = crate::fleet::serial().await;
    let Some(cluster) = RedisCluster::start() else {
        return;
    };
    let origin = origin_with_paths(true).await;
    let a = instance(&origin, &cluster).await;
    let b = instance(&origin, &cluster).await;
    stored_by(&a, &origin).await;
    for n in 0..PATHS {
        let resp = b.get(&path(n)).await;
        assert_eq!(
            (resp.status, resp.cache()),
            (200, "HIT"),
            "{} on B",
            path(n)
        );
        assert_eq!(resp.text(), format!("body {n}"));
        assert_eq!(
            origin.requests(&path(n)),
            1,
            "{}: the origin asked once",
            path(n)
        );
    }
    assert_eq!(
        b.metric(&zone_series(LOOKUPS, &[("result", "hit")])).await,
        PATHS as f64
    );

    // A tag purge on A: B (subscribed through some node) misses the tagged paths.
    let purged = a.admin("PURGE", "/cache/main?tag=even").await;
    assert_eq!(purged.status, 200, "{}", purged.text());
    b.wait_metric(&zone_series(PURGES, &[("result", "received")]), 1.0)
        .await;
    for n in (0..PATHS).step_by(2) {
        assert_eq!(b.get(&path(n)).await.cache(), "MISS", "{} on B", path(n));
        assert_eq!(origin.requests(&path(n)), 2);
    }
    for n in (1..PATHS).step_by(2) {
        assert_eq!(b.get(&path(n)).await.cache(), "HIT", "{} on B", path(n));
    }

    // A prefix purge must SCAN every master: a third instance, which holds nothing locally,
    // then finds none of the paths in the shared tier.
    let purged = a
        .admin("PURGE", "/cache/main?prefix=http://site.test/c")
        .await;
    assert_eq!(purged.status, 200, "{}", purged.text());
    let c = instance(&origin, &cluster).await;
    let before: Vec<usize> = (0..PATHS).map(|n| origin.requests(&path(n))).collect();
    for (n, before) in before.into_iter().enumerate() {
        assert_eq!(c.get(&path(n)).await.cache(), "MISS", "{} on C", path(n));
        assert_eq!(origin.requests(&path(n)), before + 1);
    }
    assert_eq!(
        c.metric(&zone_series(LOOKUPS, &[("result", "hit")])).await,
        0.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_a_stopped_master_leaves_the_other_slots_served_and_fails_nothing() {
    let _serial = crate::fleet::serial().await;
    let Some(mut cluster) = RedisCluster::start() else {
        return;
    };
    let origin = origin_with_paths(false).await;
    let a = instance_with(&origin, &cluster, OUTAGE_DEADLINE).await;
    stored_by(&a, &origin).await;
    // C holds nothing locally: every answer below comes from the shared tier or the origin.
    // It learned the cluster's masters when it connected.
    let c = instance_with(&origin, &cluster, OUTAGE_DEADLINE).await;
    assert_eq!(c.metric(&zone_series(MASTERS, &[])).await, 3.0);
    const STOPPED: usize = 0;
    let (gone, kept): (Vec<usize>, Vec<usize>) = (0..PATHS).partition(|n| master(*n) == STOPPED);
    let (kept_before, kept_after) = kept.split_at(kept.len() / 2);
    cluster.signal(STOPPED, nix::sys::signal::Signal::SIGSTOP);

    for n in kept_before {
        let resp = c.get(&path(*n)).await;
        assert_eq!(
            (resp.status, resp.cache()),
            (200, "HIT"),
            "{} on C",
            path(*n)
        );
        assert_eq!(origin.requests(&path(*n)), 1, "{}", path(*n));
    }
    let mut slowest = Duration::ZERO;
    for n in &gone {
        let started = Instant::now();
        let resp = c.get(&path(*n)).await;
        slowest = slowest.max(started.elapsed());
        assert_eq!(
            (resp.status, resp.cache()),
            (200, "MISS"),
            "{} on C",
            path(*n)
        );
        assert_eq!(resp.text(), format!("body {n}"));
        assert_eq!(origin.requests(&path(*n)), 2, "{}", path(*n));
    }
    // The stopped master's breaker opened; the others' did not: their keys are still served.
    c.wait_metric(&zone_series(BREAKER_OPEN, &[]), 1.0).await;
    for n in kept_after {
        let resp = c.get(&path(*n)).await;
        assert_eq!(
            (resp.status, resp.cache()),
            (200, "HIT"),
            "{} on C",
            path(*n)
        );
        assert_eq!(origin.requests(&path(*n)), 1, "{}", path(*n));
    }
    let failed = c
        .metric(&zone_series(LOOKUPS, &[("result", "timeout")]))
        .await
        + c.metric(&zone_series(LOOKUPS, &[("result", "error")]))
            .await
        + c.metric(&zone_series(LOOKUPS, &[("result", "skipped")]))
            .await;
    eprintln!(
        "stopped master: {} of its keys missed (slowest {slowest:?}), {} kept; {failed} lookups failed or skipped",
        gone.len(),
        kept.len()
    );
    assert_eq!(
        failed,
        gone.len() as f64,
        "only the stopped master's lookups failed"
    );
    // The lookup deadline is 20 ms and the origin answers at once; the rest is this machine's
    // scheduling (2 cores shared with builds), bounded loosely as in `shared.rs`.
    assert!(
        slowest < Duration::from_millis(20 + 480),
        "a request took {slowest:?} with a master stopped"
    );

    // Killed instead of stopped (connections refused, the client's reconnections and slot
    // refreshes): an instance started now, holding nothing, still gets the other masters'
    // keys from the tier, and the dead master's are misses within the deadline.
    cluster.kill(STOPPED);
    let d = instance_with(&origin, &cluster, OUTAGE_DEADLINE).await;
    let mut slowest = Duration::ZERO;
    for n in 0..PATHS {
        let started = Instant::now();
        let resp = d.get(&path(n)).await;
        slowest = slowest.max(started.elapsed());
        assert_eq!(resp.status, 200, "{} on D", path(n));
        if master(n) == STOPPED {
            assert_eq!(resp.cache(), "MISS", "{} on D", path(n));
            assert_eq!(origin.requests(&path(n)), 3, "{}", path(n));
        } else {
            assert_eq!(resp.cache(), "HIT", "{} on D", path(n));
            assert_eq!(origin.requests(&path(n)), 1, "{}", path(n));
        }
    }
    eprintln!("killed master: slowest request on a new instance {slowest:?}");
    assert!(
        slowest < Duration::from_millis(20 + 480),
        "a request took {slowest:?} with a master killed"
    );
}
