//! State that outlives a config: unchanged upstream groups keep their pool, health and checks;
//! removed groups stop checking and are no longer reported; cache entries, rate-limit buckets
//! and metrics survive.

use std::time::Duration;

use sluice_testkit::{Offer, TestServer, client, start_toml};

use crate::cache::{Origin, Reply};
use crate::{metric, scrape_metrics};

/// sluice with an admin listener, a route `api` to upstream `backend` on `origin`, and `extra`
/// lines appended (more routes, upstreams, zones).
fn config(origin: &Origin, body: &str, extra: &str) -> String {
    format!(
        r#"
        [log]
        access = "off"
        [admin]
        address = "127.0.0.1:0"
        [[listeners]]
        address = "127.0.0.1:0"
        [[routes]]
        name = "fixed"
        path = "/fixed"
        respond = {{ body = "{body}" }}
        [[routes]]
        name = "api"
        proxy = {{ upstream = "backend" }}
        [upstreams.backend]
        servers = ["{}"]
        {extra}
        "#,
        origin.addr
    )
}

async fn get(server: &TestServer, path: &str) -> reqwest::Response {
    let resp = client(Offer::Http1)
        .get(server.url(path))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "GET {path}");
    resp
}

#[tokio::test]
async fn an_unchanged_upstream_keeps_its_pool_and_metrics_keep_counting() {
    let origin = Origin::start().await;
    origin.set("/a", Reply::ok("a"));
    let server = start_toml(&config(&origin, "one", "")).await;
    let http = client(Offer::Http1);
    for _ in 0..3 {
        let resp = http.get(server.url("/a")).send().await.unwrap();
        assert_eq!(resp.text().await.unwrap(), "a");
    }
    let pooled = format!(
        r#"sluice_upstream_connections{{upstream="backend",server="{}"}}"#,
        origin.addr
    );
    let requests = r#"sluice_requests_total{route="api",code="2xx"}"#;
    let before = scrape_metrics(&server).await;
    assert_eq!(metric(&before, &pooled), 1.0, "one pooled connection");
    assert_eq!(metric(&before, requests), 3.0);

    let summary = server
        .reload_toml(&config(&origin, "two", ""))
        .await
        .unwrap();
    assert_eq!(summary.upstreams.kept, ["backend"]);
    assert_eq!(summary.routes.changed, ["fixed"]);
    assert_eq!(summary.routes.kept, ["api"]);

    // The same pool: its idle connection is still there, and the next request reuses it.
    let after = scrape_metrics(&server).await;
    assert_eq!(metric(&after, &pooled), 1.0, "the pool survived the reload");
    let resp = http.get(server.url("/a")).send().await.unwrap();
    assert_eq!(resp.text().await.unwrap(), "a");
    let after = scrape_metrics(&server).await;
    assert_eq!(
        metric(&after, &pooled),
        1.0,
        "no second connection was opened"
    );
    assert_eq!(
        metric(&after, requests),
        4.0,
        "counters go on from where they were"
    );
    assert_eq!(get(&server, "/fixed").await.text().await.unwrap(), "two");
}

#[tokio::test]
async fn a_changed_upstream_gets_a_new_group_and_the_old_servers_are_no_longer_reported() {
    let a = Origin::start().await;
    let b = Origin::start().await;
    a.set("/who", Reply::ok("a"));
    b.set("/who", Reply::ok("b"));
    let server = start_toml(&config(&a, "x", "")).await;
    assert_eq!(get(&server, "/who").await.text().await.unwrap(), "a");

    let summary = server.reload_toml(&config(&b, "x", "")).await.unwrap();
    assert_eq!(summary.upstreams.changed, ["backend"]);
    assert_eq!(get(&server, "/who").await.text().await.unwrap(), "b");
    let metrics = scrape_metrics(&server).await;
    let gauge =
        |addr| format!(r#"sluice_upstream_server_healthy{{upstream="backend",server="{addr}"}}"#);
    assert_eq!(metric(&metrics, &gauge(b.addr)), 1.0);
    assert!(!metrics.contains(&gauge(a.addr)), "{metrics}");
    // Its counters stay: they are history, not state.
    assert!(metrics.contains(&format!(
        r#"sluice_upstream_requests_total{{upstream="backend",server="{}""#,
        a.addr
    )));
}

#[tokio::test]
async fn a_removed_groups_health_checks_stop_and_a_kept_groups_go_on() {
    let kept = Origin::start().await;
    let removed = Origin::start().await;
    for origin in [&kept, &removed] {
        origin.set("/health", Reply::ok("ok"));
    }
    let checked = |name: &str, origin: &Origin| {
        format!(
            "[upstreams.{name}]\nservers = [\"{}\"]\nhealth_check = {{ path = \"/health\", interval = \"50ms\", timeout = \"40ms\" }}\n",
            origin.addr
        )
    };
    let with_both = format!("{}{}", checked("kept", &kept), checked("gone", &removed));
    let server = start_toml(&config(&kept, "x", &with_both)).await;
    removed.wait_requests("/health", 2).await;
    kept.wait_requests("/health", 2).await;

    let summary = server
        .reload_toml(&config(&kept, "x", &checked("kept", &kept)))
        .await
        .unwrap();
    assert_eq!(summary.upstreams.removed, ["gone"]);
    assert_eq!(summary.upstreams.kept, ["backend", "kept"]);
    // A probe already under way may still land; after that, none. The kept group's checks
    // go on meanwhile (10 more probes is 500 ms at least: the window the removed one is
    // watched in).
    let stopped_at = removed.requests("/health") + 1;
    let kept_so_far = kept.requests("/health");
    kept.wait_requests("/health", kept_so_far + 10).await;
    assert!(
        removed.requests("/health") <= stopped_at,
        "the removed group is still checked: {} probes",
        removed.requests("/health")
    );
    let metrics = scrape_metrics(&server).await;
    assert!(!metrics.contains(r#"sluice_upstream_server_healthy{upstream="gone""#));
    assert!(metrics.contains(r#"sluice_upstream_server_healthy{upstream="kept""#));
}

#[tokio::test]
async fn cache_entries_survive_a_reload_and_a_resized_zone_starts_empty() {
    let origin = Origin::start().await;
    origin.set("/c", Reply::ok("cached").cache_control("max-age=600"));
    let zone = |memory: &str| {
        format!(
            "[caches.main]\nmemory = \"{memory}\"\n[[routes]]\nname = \"cached\"\npath = \"/c\"\nproxy = {{ upstream = \"backend\" }}\ncache = {{ zone = \"main\" }}\n"
        )
    };
    // The cached route must come before `api` (which takes `/`): routes are in file order.
    let toml = |memory: &str, body: &str| {
        config(&origin, body, "").replace(
            "[[routes]]\n        name = \"api\"",
            &format!("{}\n[[routes]]\n        name = \"api\"", zone(memory)),
        )
    };
    let server = start_toml(&toml("1MiB", "one")).await;
    let status = |resp: &reqwest::Response| {
        resp.headers()["x-cache-status"]
            .to_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(status(&get(&server, "/c").await), "MISS");
    assert_eq!(status(&get(&server, "/c").await), "HIT");

    let summary = server.reload_toml(&toml("1MiB", "two")).await.unwrap();
    assert_eq!(summary.cache_zones.kept, ["main"]);
    assert_eq!(status(&get(&server, "/c").await), "HIT");
    assert_eq!(origin.requests("/c"), 1);

    // A new size is a new storage (docs/operations.md says why).
    let summary = server.reload_toml(&toml("2MiB", "two")).await.unwrap();
    assert_eq!(summary.cache_zones.changed, ["main"]);
    assert_eq!(status(&get(&server, "/c").await), "MISS");
    assert_eq!(origin.requests("/c"), 2);
}

#[tokio::test]
async fn an_unchanged_rate_limit_keeps_its_buckets() {
    let origin = Origin::start().await;
    let limited = |body: &str| {
        config(&origin, body, "").replace(
            "respond = {",
            "rate_limit = { requests = 1, per = \"1h\", burst = 2 }\n        respond = {",
        )
    };
    let server = start_toml(&limited("one")).await;
    let http = client(Offer::Http1);
    let status = || async {
        http.get(server.url("/fixed"))
            .send()
            .await
            .unwrap()
            .status()
    };
    assert_eq!(status().await, 200);
    assert_eq!(status().await, 200);
    assert_eq!(status().await, 429);
    // Another route changed; this one's limit did not: the client's bucket stays empty.
    server
        .reload_toml(&limited("one").replace(
            "[[routes]]\n        name = \"api\"",
            "[[routes]]\n        name = \"api\"\n        compress = {}",
        ))
        .await
        .unwrap();
    assert_eq!(status().await, 429);
    // A changed limit starts with full buckets.
    let looser = limited("one").replace("burst = 2", "burst = 3");
    server.reload_toml(&looser).await.unwrap();
    assert_eq!(status().await, 200);
    tokio::time::timeout(
        Duration::from_secs(5),
        server.shutdown(Duration::from_secs(5)),
    )
    .await
    .unwrap();
}

/// An origin that answers one request on one connection, keeps it open, and reports when the
/// proxy closes it (its pool was dropped).
async fn origin_watching_its_connection(
    body: &'static str,
) -> (std::net::SocketAddr, tokio::sync::oneshot::Receiver<()>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (closed, closed_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut buf = vec![0u8; 8192];
        let mut seen = Vec::new();
        while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = stream.read(&mut buf).await.unwrap();
            assert!(n > 0, "the proxy closed before sending a request");
            seen.extend_from_slice(&buf[..n]);
        }
        let response = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(response.as_bytes()).await.unwrap();
        // Nothing more is asked of this connection; it ends when the proxy's pool goes.
        while stream.read(&mut buf).await.is_ok_and(|n| n > 0) {}
        let _ = closed.send(());
    });
    (addr, closed_rx)
}

#[tokio::test]
async fn a_replaced_group_is_freed_while_connections_accepted_before_stay_open() {
    let (old, old_closed) = origin_watching_its_connection("old").await;
    let (new, _new_closed) = origin_watching_its_connection("new").await;
    let toml = |origin: std::net::SocketAddr| {
        format!(
            "[log]\naccess = \"off\"\n[[listeners]]\naddress = \"127.0.0.1:0\"\n[[routes]]\nproxy = {{ upstream = \"backend\" }}\n[upstreams.backend]\nservers = [\"{origin}\"]\n"
        )
    };
    let server = start_toml(&toml(old)).await;
    let mut conn = super::KeepAlive::connect(server.first_addr()).await;
    assert_eq!(conn.get("/").await, (200, "old".into()));

    server.reload_toml(&toml(new)).await.unwrap();
    // The client's connection, accepted under the old config, is still open; the old group's
    // pool (and its connection to the old origin) must not live on with it.
    tokio::time::timeout(Duration::from_secs(10), old_closed)
        .await
        .expect("the replaced group's pool was not freed")
        .unwrap();
    assert_eq!(conn.get("/").await, (200, "new".into()));
}
