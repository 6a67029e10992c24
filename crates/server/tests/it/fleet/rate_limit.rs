//! A rate limit shared by a fleet (`rate_limit = { ..., shared = "redis://..." }`): three
//! instances hammering one key together get one limit's budget, and with Redis down each
//! falls back as `on_error` says, measured.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_testkit::{Offer, TestServer, client, start_origin, start_toml};

use super::Redis;

const FALLBACKS: &str = "sluice_rate_limit_fallbacks_total{route=\"api\"}";

/// An instance proxying `/hello` to `origin` with 10 r/s, burst 5, by `x-key`, shared at `url`.
/// The deadline is generous (the default is 20 ms): three instances and the hammering clients
/// share this machine's two cores with the rest of the suite, and the budget is checked on what
/// Redis decided, so no call may be cut short. A down Redis (killed below) fails at once.
pub(super) async fn instance(
    origin: std::net::SocketAddr,
    url: &str,
    on_error: &str,
) -> TestServer {
    start_toml(&format!(
        r#"
        [log]
        access = "off"
        [admin]
        address = "127.0.0.1:0"
        [[listeners]]
        address = "127.0.0.1:0"
        [[routes]]
        name = "api"
        rate_limit = {{ requests = 10, per = "1s", burst = 5, key = "header:x-key", shared = "{url}", on_error = "{on_error}", fleet_size = 3, deadline = "2s" }}
        [routes.proxy]
        upstream = "app"
        [upstreams.app]
        servers = ["{origin}"]
        "#
    ))
    .await
}

pub(super) async fn fallbacks(server: &TestServer) -> f64 {
    crate::metric(&crate::scrape_metrics(server).await, FALLBACKS)
}

/// Until a request is decided by Redis (the connection is made in the background).
pub(super) async fn wait_connected(server: &TestServer) {
    let http = client(Offer::Http1);
    let deadline = Instant::now() + super::FAILURE_BOUND;
    for n in 0.. {
        let before = fallbacks(server).await;
        let resp = http
            .get(server.url("/hello"))
            .header("x-key", format!("warm-{n}"))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        if fallbacks(server).await == before {
            return;
        }
        assert!(Instant::now() < deadline, "never connected to Redis");
        tokio::time::sleep(Duration::from_millis(10)).await; // poll interval
    }
}

/// `clients` loops per server sending `x-key: key` for `for_`; (allowed, refused).
pub(super) async fn hammer(
    servers: &[Arc<TestServer>],
    clients: usize,
    for_: Duration,
) -> (u64, u64) {
    let until = Instant::now() + for_;
    let mut tasks = Vec::new();
    for server in servers {
        for _ in 0..clients {
            let (server, http) = (server.clone(), client(Offer::Http1));
            tasks.push(tokio::spawn(async move {
                let (mut allowed, mut refused) = (0u64, 0u64);
                while Instant::now() < until {
                    let resp = http
                        .get(server.url("/hello"))
                        .header("x-key", "k")
                        .send()
                        .await
                        .unwrap();
                    match resp.status().as_u16() {
                        200 => allowed += 1,
                        429 => refused += 1,
                        other => panic!("status {other}"),
                    }
                }
                (allowed, refused)
            }));
        }
    }
    let mut total = (0, 0);
    for task in tasks {
        let (a, r) = task.await.unwrap();
        total = (total.0 + a, total.1 + r);
    }
    total
}

#[tokio::test]
async fn three_instances_enforce_one_limit_and_fall_back_as_configured_without_redis() {
    let _serial = crate::fleet::serial().await;
    let Some(mut redis) = Redis::start() else {
        return;
    };
    let origin = start_origin(None).await;
    let url = redis.url();
    let mut fleet = Vec::new();
    for _ in 0..3 {
        let server = instance(origin.addr, &url, "local").await;
        wait_connected(&server).await;
        fleet.push(Arc::new(server));
    }
    let before: Vec<f64> = futures_util::future::join_all(fleet.iter().map(|s| fallbacks(s))).await;
    const SECS: u64 = 10;
    let started = Instant::now();
    let (allowed, refused) = hammer(&fleet, 2, Duration::from_secs(SECS)).await;
    let took = started.elapsed().as_secs_f64();
    // GCRA's budget over `took`: the burst, then 10 per second; at most one burst more.
    let budget = 5.0 + 10.0 * took;
    eprintln!(
        "shared limit: {allowed} allowed, {refused} refused in {took:.2}s (budget {budget:.0} + one burst of 5)"
    );
    assert!(
        (allowed as f64) <= budget + 5.0,
        "{allowed} allowed, budget {budget}"
    );
    assert!(
        (allowed as f64) >= 10.0 * took * 0.9,
        "only {allowed} allowed in {took}s"
    );
    assert!(
        refused > allowed,
        "the three instances did hammer: {refused} refused"
    );
    for (server, before) in fleet.iter().zip(before) {
        assert_eq!(
            fallbacks(server).await,
            before,
            "Redis decided every request"
        );
    }

    // Redis down: each instance falls back to its share, 10/3 r/s and a burst of 1.
    redis.kill();
    let started = Instant::now();
    let (allowed, _) = hammer(&fleet[..1], 2, Duration::from_secs(3)).await;
    let took = started.elapsed().as_secs_f64();
    let share = 1.0 + 10.0 / 3.0 * took;
    eprintln!("local fallback: {allowed} allowed in {took:.2}s (share {share:.1})");
    assert!(
        (allowed as f64) <= share + 1.0,
        "{allowed} allowed, share {share}"
    );
    assert!(
        (allowed as f64) >= share * 0.7,
        "{allowed} allowed, share {share}"
    );
    assert!(fallbacks(&fleet[0]).await > 0.0);

    // `allow` and `deny` against the same down Redis.
    for (on_error, want) in [("allow", 200), ("deny", 429)] {
        let server = instance(origin.addr, &url, on_error).await;
        let http = client(Offer::Http1);
        for n in 0..20 {
            let resp = http
                .get(server.url("/hello"))
                .header("x-key", "k")
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status().as_u16(), want, "{on_error}, request {n}");
        }
        assert_eq!(fallbacks(&server).await, 20.0, "{on_error}");
    }
}
