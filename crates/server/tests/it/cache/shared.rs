//! The fleet's shared cache tier (docs/fleet.md): two sluice instances, each with its own zone
//! `main`, sharing one real `redis-server` started and stopped here (Debian's; scripts/test
//! installs it). A response stored by one instance is served by the other without the origin,
//! with the codings made once fleet-wide; a stopped, killed and restarted Redis never fails a
//! request nor delays it past the lookup deadline.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::{Edge, FAILURE_BOUND, Origin, Reply, Setup, names, zone_series};
use crate::fleet::Redis;

const LOOKUPS: &str = "sluice_cache_shared_lookups_total";
const WRITES: &str = "sluice_cache_shared_writes_total";
const CONNECTED: &str = "sluice_cache_shared_connected";
const BREAKER_OPEN: &str = "sluice_cache_shared_breaker_open";

/// The lookup deadline of the tests that check what is served (a HIT on B, a purge seen): long
/// enough that a lookup is never cut short on a machine whose two cores also run the rest of the
/// suite, so their answers cannot change between runs. The tests of a stopped or killed Redis,
/// which check that no request waits past the deadline, use the default's 20 ms.
const CORRECTNESS_DEADLINE: &str = "1s";
const OUTAGE_DEADLINE: &str = "20ms";

/// An instance of the fleet: zone `main` with the shared tier at `redis`, compression on.
async fn instance(origin: &Origin, redis: &Redis) -> Edge {
    instance_with(origin, redis, CORRECTNESS_DEADLINE).await
}

/// An instance whose shared-tier lookups give up after `deadline`.
async fn instance_with(origin: &Origin, redis: &Redis, deadline: &str) -> Edge {
    let zone = format!(
        "[caches.main.shared]\nredis = \"{}\"\ndeadline = \"{deadline}\"",
        redis.url()
    );
    let edge = Edge::start(
        origin,
        Setup {
            zone: &zone,
            route: "compress = {}",
            ..Setup::default()
        },
    )
    .await;
    edge.wait_metric(&zone_series(CONNECTED, &[]), 1.0).await;
    edge
}

fn json() -> Vec<u8> {
    let items: Vec<String> = (0..2000)
        .map(|i| format!(r#"{{"id":{i},"name":"item {i}","n":{}}}"#, i * 7 % 13))
        .collect();
    format!(r#"{{"items":[{}]}}"#, items.join(",")).into_bytes()
}

fn decode(coding: &str, data: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    match coding {
        "br" => drop(
            brotli::Decompressor::new(data, 4096)
                .read_to_end(&mut out)
                .unwrap(),
        ),
        "zstd" => out = zstd::decode_all(data).unwrap(),
        _ => out = data.to_vec(),
    }
    out
}

#[tokio::test]
async fn a_miss_on_one_instance_is_a_hit_on_the_other_with_its_codings_made_once() {
    let _serial = crate::fleet::serial().await;
    let Some(redis) = Redis::start() else { return };
    let origin = Origin::start().await;
    let json = json();
    assert!(
        json.len() > 64 * 1024,
        "more than one chunk: {}",
        json.len()
    );
    let reply = Reply::ok(json.clone()).header("content-type", "application/json");
    origin.set("/data.json", reply.cache_control("max-age=60"));
    let a = instance(&origin, &redis).await;
    let b = instance(&origin, &redis).await;

    let first = a.get("/data.json").await;
    assert_eq!((first.status, first.cache()), (200, "MISS"));
    for coding in ["br", "zstd"] {
        let resp = a
            .get_with("/data.json", &[("accept-encoding", coding)])
            .await;
        assert_eq!(resp.cache(), "HIT", "{coding} on A");
        assert_eq!(decode(coding, &resp.body), json, "{coding} on A");
    }
    // The source and both variants are written after their responses, in the background.
    a.wait_metric(&zone_series(WRITES, &[("result", "written")]), 3.0)
        .await;

    let hit = b.get("/data.json").await;
    assert_eq!((hit.status, hit.cache()), (200, "HIT"), "{:?}", hit.headers);
    assert_eq!(hit.body, json);
    assert_eq!(
        origin.requests("/data.json"),
        1,
        "the origin was asked once"
    );
    for coding in ["br", "zstd"] {
        let resp = b
            .get_with("/data.json", &[("accept-encoding", coding)])
            .await;
        assert_eq!(resp.cache(), "HIT", "{coding} on B");
        assert_eq!(resp.header("content-encoding"), Some(coding));
        assert_eq!(decode(coding, &resp.body), json, "{coding} on B");
    }
    assert_eq!(origin.requests("/data.json"), 1);
    // Fleet-wide, each coding was made once: on A. B served A's.
    for coding in ["br", "zstd"] {
        let made = zone_series(names::VARIANTS_MADE, &[("coding", coding)]);
        let total = a.metric(&made).await + b.metric(&made).await;
        assert_eq!(total, 1.0, "{coding} made {total} times in the fleet");
    }
    assert_eq!(
        b.metric(&zone_series(LOOKUPS, &[("result", "hit")])).await,
        1.0
    );
}

#[tokio::test]
async fn an_unsafe_method_or_purge_on_one_instance_removes_the_response_from_the_shared_tier() {
    let _serial = crate::fleet::serial().await;
    let Some(redis) = Redis::start() else { return };
    let origin = Origin::start().await;
    origin.set("/p", Reply::ok("v1").cache_control("max-age=60"));
    let a = instance(&origin, &redis).await;
    assert_eq!(a.get("/p").await.cache(), "MISS");
    a.wait_metric(&zone_series(WRITES, &[("result", "written")]), 1.0)
        .await;
    let purged = a.admin("PURGE", "/cache/main?key=http://site.test/p").await;
    assert_eq!(purged.status, 200, "{}", purged.text());
    // A third instance started after the purge finds nothing shared: the origin again.
    let c = instance(&origin, &redis).await;
    assert_eq!(c.get("/p").await.cache(), "MISS");
    assert_eq!(origin.requests("/p"), 2);
    assert_eq!(
        c.metric(&zone_series(LOOKUPS, &[("result", "miss")])).await,
        1.0
    );
}

/// Redis stopped (SIGSTOP), then killed, then restarted, while two instances serve: every
/// request succeeds and none waits for Redis longer than the lookup deadline; the breaker opens
/// and closes again; shared hits return after the restart.
#[tokio::test]
async fn redis_stopped_killed_and_restarted_under_load_fails_and_delays_nothing() {
    let _serial = crate::fleet::serial().await;
    let Some(mut redis) = Redis::start() else {
        return;
    };
    let origin = Origin::start().await;
    for n in 0..50 {
        origin.set(
            &format!("/k{n}"),
            Reply::ok(format!("body {n}")).cache_control("max-age=60"),
        );
    }
    origin.set("/after", Reply::ok("after").cache_control("max-age=60"));
    let a = Arc::new(instance_with(&origin, &redis, OUTAGE_DEADLINE).await);
    let b = Arc::new(instance_with(&origin, &redis, OUTAGE_DEADLINE).await);

    let stop = Arc::new(AtomicBool::new(false));
    let load: Vec<_> = [a.clone(), b.clone()]
        .into_iter()
        .enumerate()
        .flat_map(|(i, edge)| {
            let stop = stop.clone();
            (0..2).map(move |j| {
                let (edge, stop) = (edge.clone(), stop.clone());
                tokio::spawn(async move {
                    let mut worst = Duration::ZERO;
                    let mut done = 0usize;
                    let mut n = i * 7 + j;
                    while !stop.load(Ordering::SeqCst) {
                        // no-cache: every request is a lookup that misses locally
                        // (revalidation is unconditional here: no validators), so each one
                        // asks the shared tier while Redis is up, and none can be slowed by it
                        // while it is down.
                        let path = format!("/k{}", n % 50);
                        let started = Instant::now();
                        let resp = edge.get_with(&path, &[("cache-control", "no-store")]).await;
                        worst = worst.max(started.elapsed());
                        assert_eq!(resp.status, 200, "{path}: {:?}", resp.headers);
                        done += 1;
                        n += 1;
                    }
                    (worst, done)
                })
            })
        })
        .collect();

    let open = zone_series(BREAKER_OPEN, &[]);
    let lookups_ok = zone_series(LOOKUPS, &[("result", "miss")]);
    a.wait_metric(&lookups_ok, 20.0).await;
    redis.signal(nix::sys::signal::Signal::SIGSTOP);
    a.wait_metric(&open, 1.0).await;
    b.wait_metric(&open, 1.0).await;
    redis.kill();
    let errors_before = a
        .metric(&zone_series(LOOKUPS, &[("result", "skipped")]))
        .await;
    a.wait_metric(
        &zone_series(LOOKUPS, &[("result", "skipped")]),
        errors_before + 20.0,
    )
    .await;
    redis.restart();
    // Closed again on both, once a probe succeeded.
    for edge in [&a, &b] {
        let deadline = Instant::now() + FAILURE_BOUND;
        while edge.metric(&open).await != 0.0 {
            assert!(Instant::now() < deadline, "the breaker never closed");
            tokio::time::sleep(Duration::from_millis(10)).await; // poll interval
        }
    }
    stop.store(true, Ordering::SeqCst);
    let mut worst = Duration::ZERO;
    let mut total = 0;
    for task in load {
        let (w, n) = task.await.unwrap();
        worst = worst.max(w);
        total += n;
    }
    // Hits return: stored on A after the restart, served by B from the shared tier.
    assert_eq!(a.get("/after").await.cache(), "MISS");
    a.wait_metric(&zone_series(WRITES, &[("result", "written")]), 1.0)
        .await;
    let hits = zone_series(LOOKUPS, &[("result", "hit")]);
    let before = b.metric(&hits).await;
    assert_eq!(b.get("/after").await.cache(), "HIT");
    assert_eq!(b.metric(&hits).await, before + 1.0);
    assert_eq!(origin.requests("/after"), 1);
    eprintln!("fleet outage: {total} requests, slowest {worst:?}");
    // The lookup deadline is 20 ms and the origin answers at once; the rest is this machine's
    // scheduling (2 cores shared with builds), bounded loosely.
    assert!(
        worst < Duration::from_millis(20 + 480),
        "a request took {worst:?} while Redis was down"
    );
}

const PURGES: &str = "sluice_cache_shared_purges_total";

/// The shared-tier lookup and breaker series of `edge`, for failure messages.
pub async fn lookups(edge: &Edge) -> String {
    let text = edge.metrics().await;
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| {
            l.starts_with("sluice_cache_shared_lookups_total") || l.starts_with(BREAKER_OPEN)
        })
        .collect();
    lines.join("\n")
}

/// A and B share `/t` (stored by A, served by B from the shared tier, so both hold it).
async fn shared_by_two(origin: &Origin, redis: &Redis, path: &str) -> (Edge, Edge) {
    let a = instance(origin, redis).await;
    let b = instance(origin, redis).await;
    assert_eq!(a.get(path).await.cache(), "MISS");
    a.wait_metric(&zone_series(WRITES, &[("result", "written")]), 1.0)
        .await;
    let hit = b.get(path).await;
    assert_eq!(hit.cache(), "HIT", "{}", lookups(&b).await);
    (a, b)
}

#[tokio::test]
async fn a_purge_by_tag_on_one_instance_is_a_miss_on_the_other_within_100_ms() {
    let _serial = crate::fleet::serial().await;
    let Some(redis) = Redis::start() else { return };
    let origin = Origin::start().await;
    let reply = Reply::ok("tagged")
        .cache_control("max-age=60")
        .header("surrogate-key", "product-1 catalog")
        .header("cache-tag", "cf-1")
        .header("xkey", "vk-1");
    origin.set("/t", reply);
    let (a, b) = shared_by_two(&origin, &redis, "/t").await;
    // The surrogate-key fields are for caches: never sent on to clients by default.
    let hit = b.get("/t").await;
    for name in ["surrogate-key", "cache-tag", "xkey"] {
        assert_eq!(hit.header(name), None, "{name} reached the client");
    }
    let purged = a.admin("PURGE", "/cache/main?tag=catalog").await;
    assert_eq!(purged.status, 200, "{}", purged.text());
    let sent = Instant::now();
    loop {
        let resp = b.get("/t").await;
        if resp.cache() == "MISS" {
            break;
        }
        assert_eq!(resp.cache(), "HIT");
        assert!(
            sent.elapsed() < FAILURE_BOUND,
            "B kept serving the purged response"
        );
    }
    let took = sent.elapsed();
    eprintln!("tag purge on A seen by B after {took:?}");
    assert!(
        took < Duration::from_millis(100),
        "B missed only after {took:?}"
    );
    assert_eq!(origin.requests("/t"), 2);
    assert_eq!(
        b.metric(&zone_series(PURGES, &[("result", "received")]))
            .await,
        1.0
    );
}

#[tokio::test]
async fn a_soft_purge_by_tag_serves_stale_on_the_other_instance_while_one_refresh_runs() {
    let _serial = crate::fleet::serial().await;
    let Some(redis) = Redis::start() else { return };
    let origin = Origin::start().await;
    let reply = Reply::ok("v1")
        .cache_control("max-age=600, stale-while-revalidate=60")
        .header("cache-tag", "news");
    origin.set("/s", reply);
    let (a, b) = shared_by_two(&origin, &redis, "/s").await;
    origin.close_gate("/s");
    let purged = a.admin("PURGE", "/cache/main?tag=news&soft=1").await;
    assert_eq!(purged.status, 200, "{}", purged.text());
    // Soft: B keeps serving it, now as stale, while one request refreshes it (held at the
    // origin's gate until every stale answer below has been counted).
    let received = zone_series(PURGES, &[("result", "received")]);
    b.wait_metric(&received, 1.0).await;
    let first = b.get("/s").await;
    assert_eq!((first.cache(), first.text()), ("STALE", "v1"));
    for _ in 0..5 {
        let resp = b.get("/s").await;
        assert_eq!((resp.cache(), resp.text()), ("UPDATING", "v1"));
    }
    origin.wait_requests("/s", 2).await;
    origin.set(
        "/s",
        Reply::ok("v2")
            .cache_control("max-age=600")
            .header("cache-tag", "news"),
    );
    origin.open_gate("/s");
    let deadline = Instant::now() + FAILURE_BOUND;
    loop {
        let resp = b.get("/s").await;
        if resp.cache() == "HIT" {
            assert_eq!(resp.text(), "v2");
            break;
        }
        assert!(Instant::now() < deadline, "the refresh never landed");
        tokio::time::sleep(Duration::from_millis(5)).await; // poll interval
    }
    assert_eq!(
        origin.requests("/s"),
        2,
        "one refresh for the whole soft purge"
    );
}

/// A purge sent while Redis was stopped reaches the fleet once Redis is back: the instance
/// that could not send it sends it again, and the one that was cut off flushes what it may
/// have missed, so neither serves the purged response afterwards.
#[tokio::test]
async fn no_instance_serves_a_response_purged_while_redis_was_stopped() {
    let _serial = crate::fleet::serial().await;
    let Some(redis) = Redis::start() else { return };
    let origin = Origin::start().await;
    origin.set("/cut", Reply::ok("old").cache_control("max-age=600"));
    for n in 0..10 {
        origin.set(&format!("/probe{n}"), Reply::ok("p"));
    }
    let (a, b) = shared_by_two(&origin, &redis, "/cut").await;
    redis.signal(nix::sys::signal::Signal::SIGSTOP);
    let purged = a
        .admin("PURGE", "/cache/main?key=http://site.test/cut")
        .await;
    assert_eq!(purged.status, 200);
    // Cut off, B cannot know: it serves what it holds (its lookups of other keys fail and
    // open its breaker).
    for n in 0..3 {
        assert_eq!(b.get(&format!("/probe{n}")).await.status, 200);
    }
    b.wait_metric(&zone_series(BREAKER_OPEN, &[]), 1.0).await;
    redis.signal(nix::sys::signal::Signal::SIGCONT);
    // A's next lookups reach Redis again: the kept purge is sent.
    let sent = zone_series(PURGES, &[("result", "sent")]);
    let deadline = Instant::now() + FAILURE_BOUND;
    let mut n = 3;
    while a.metric(&sent).await < 1.0 {
        assert!(Instant::now() < deadline, "A never sent the kept purge");
        assert_eq!(a.get(&format!("/probe{}", n % 10)).await.status, 200);
        n += 1;
        tokio::time::sleep(Duration::from_millis(10)).await; // poll interval
    }
    // B flushes once its breaker closes (or its subscription comes back).
    let flushed = zone_series(PURGES, &[("result", "gap_flush")]);
    let deadline = Instant::now() + FAILURE_BOUND;
    while b.metric(&flushed).await < 1.0 {
        assert!(Instant::now() < deadline, "B never flushed after the gap");
        assert_eq!(b.get(&format!("/probe{}", n % 10)).await.status, 200);
        n += 1;
        tokio::time::sleep(Duration::from_millis(10)).await; // poll interval
    }
    origin.set("/cut", Reply::ok("new").cache_control("max-age=600"));
    for edge in [&a, &b] {
        let resp = edge.get("/cut").await;
        assert_eq!(resp.text(), "new", "{}", resp.cache());
    }
}
