//! What the cache sends upstream and the route's cache options: HEAD, miss requests stripped of
//! the client's conditionals, bypass, no_store, min_uses, key parts, the status header, metrics.

use super::{Edge, Origin, Reply, STATUS, Setup, names, requests_series, zone_series};

/// A fresh stored GET answers HEAD: the same fields, Content-Length included, no body. A HEAD
/// for a cold key is fetched as a GET, which is stored for the GETs that follow.
#[tokio::test]
async fn head_answered_from_stored_get() {
    let origin = Origin::start().await;
    let body = "x".repeat(5000);
    for path in ["/stored", "/cold"] {
        origin.set(
            path,
            Reply::ok(body.clone())
                .cache_control("max-age=60")
                .header("x-kind", "page"),
        );
    }
    let edge = Edge::start(&origin, Setup::default()).await;
    assert_eq!(edge.get("/stored").await.cache(), "MISS");
    let head = edge.send("HEAD", "/stored", &[]).await;
    assert_eq!((head.status, head.cache()), (200, "HIT"));
    assert_eq!(head.header("content-length"), Some("5000"));
    assert_eq!(head.header("x-kind"), Some("page"));
    assert!(head.body.is_empty());
    assert_eq!(
        (
            origin.requests("/stored"),
            origin.requests_by("HEAD", "/stored")
        ),
        (1, 0)
    );

    let head = edge.send("HEAD", "/cold", &[]).await;
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    assert_eq!(
        origin.last("/cold").method,
        http::Method::GET,
        "a miss asks for the whole response"
    );
    let get = edge.get("/cold").await;
    assert_eq!((get.cache(), get.body.len()), ("HIT", 5000));
    assert_eq!(origin.requests("/cold"), 1);
}

/// On a miss the origin is asked for the whole response, whatever the client's own conditionals
/// and range: what is stored must serve every client.
#[tokio::test]
async fn miss_sends_upstream_a_plain_get() {
    let origin = Origin::start().await;
    let reply = Reply::ok("0123456789")
        .cache_control("max-age=60")
        .header("etag", "\"v1\"");
    origin.set(
        "/m",
        reply.header("last-modified", "Tue, 15 Nov 1994 12:45:26 GMT"),
    );
    let edge = Edge::start(&origin, Setup::default()).await;
    let client_only = [
        ("if-none-match", "\"elsewhere\""),
        ("if-modified-since", "Mon, 14 Nov 1994 12:45:26 GMT"),
        ("range", "bytes=0-3"),
        ("if-range", "\"v1\""),
    ];
    let first = edge.get_with("/m", &client_only).await;
    assert!([200, 206].contains(&first.status), "{first:?}");
    let asked = origin.last("/m");
    assert_eq!(asked.method, http::Method::GET);
    for (name, _) in client_only {
        assert_eq!(
            asked.header(name),
            None,
            "{name} was sent upstream on a miss"
        );
    }
    let whole = edge.get("/m").await;
    assert_eq!(
        (whole.status, whole.cache(), whole.text()),
        (200, "HIT", "0123456789")
    );
    assert_eq!(origin.requests("/m"), 1);
    // If-Match and If-Unmodified-Since are the origin's to evaluate (RFC 9111 §4.3.2): sent
    // upstream as they came, never answered from the cache.
    let guarded = edge.get_with("/m", &[("if-match", "\"v1\"")]).await;
    assert_eq!(guarded.status, 200);
    assert_eq!(origin.requests("/m"), 2);
    assert_eq!(origin.last("/m").header("if-match"), Some("\"v1\""));
}

#[tokio::test]
async fn bypass_header_goes_upstream() {
    let origin = Origin::start().await;
    origin.set("/b", Reply::ok("v1").cache_control("max-age=60"));
    let setup = Setup {
        cache: r#"bypass = ["header:X-No-Cache", "cookie:nocache"]"#,
        ..Setup::default()
    };
    let edge = Edge::start(&origin, setup).await;
    edge.get("/b").await;
    assert_eq!(edge.get("/b").await.cache(), "HIT");
    origin.set("/b", Reply::ok("v2").cache_control("max-age=60"));
    let by_header = edge.get_with("/b", &[("x-no-cache", "1")]).await;
    assert_eq!((by_header.cache(), by_header.text()), ("BYPASS", "v2"));
    let by_cookie = edge
        .get_with("/b", &[("cookie", "theme=dark; nocache=1")])
        .await;
    assert_eq!((by_cookie.cache(), by_cookie.text()), ("BYPASS", "v2"));
    assert_eq!(origin.requests("/b"), 3);
    let other_cookie = edge.get_with("/b", &[("cookie", "theme=dark")]).await;
    assert_eq!(other_cookie.cache(), "HIT");
    assert_eq!(origin.requests("/b"), 3);
    assert_eq!(edge.metric(&requests_series("bypass")).await, 2.0);
}

/// The route's `no_store`: a matching request's response is not stored.
#[tokio::test]
async fn no_store_header_response_not_stored() {
    let origin = Origin::start().await;
    origin.set("/n", Reply::ok("n").cache_control("max-age=60"));
    let setup = Setup {
        cache: r#"no_store = ["header:X-Private"]"#,
        ..Setup::default()
    };
    let edge = Edge::start(&origin, setup).await;
    assert_eq!(edge.get_with("/n", &[("x-private", "1")]).await.text(), "n");
    assert_ne!(edge.get("/n").await.cache(), "HIT");
    assert_eq!(edge.get("/n").await.cache(), "HIT");
    assert_eq!(origin.requests("/n"), 2);
}

#[tokio::test]
async fn min_uses_2_stores_on_second_request() {
    let origin = Origin::start().await;
    origin.set("/u", Reply::ok("u").cache_control("max-age=60"));
    let edge = Edge::start(
        &origin,
        Setup {
            cache: "min_uses = 2",
            ..Setup::default()
        },
    )
    .await;
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(edge.get("/u").await.cache().to_string());
    }
    assert_eq!(statuses, ["MISS", "MISS", "HIT"]);
    assert_eq!(origin.requests("/u"), 2);
}

/// The key's parts: by default the query tells entries apart; without it in `key` it does not.
#[tokio::test]
async fn key_parts_configurable() {
    let origin = Origin::start().await;
    origin.set("/k", Reply::ok("k").cache_control("max-age=60"));
    let edge = Edge::start(&origin, Setup::default()).await;
    edge.get("/k?page=1").await;
    assert_ne!(edge.get("/k?page=2").await.cache(), "HIT");
    assert_eq!(origin.requests("/k"), 2);

    let origin = Origin::start().await;
    origin.set("/k", Reply::ok("k").cache_control("max-age=60"));
    let setup = Setup {
        cache: r#"key = ["scheme", "host", "path"]"#,
        ..Setup::default()
    };
    let edge = Edge::start(&origin, setup).await;
    edge.get("/k?page=1").await;
    assert_eq!(edge.get("/k?page=2").await.cache(), "HIT");
    assert_eq!(origin.requests("/k"), 1);
    assert_eq!(
        origin.last("/k").query.as_deref(),
        Some("page=1"),
        "the query still goes upstream"
    );
}

#[tokio::test]
async fn status_header_off() {
    let origin = Origin::start().await;
    origin.set("/s", Reply::ok("s").cache_control("max-age=60"));
    let edge = Edge::start(
        &origin,
        Setup {
            cache: "status_header = false",
            ..Setup::default()
        },
    )
    .await;
    for _ in 0..2 {
        let resp = edge.get("/s").await;
        assert_eq!((resp.status, resp.header(STATUS)), (200, None));
    }
    assert_eq!(
        origin.requests("/s"),
        1,
        "no status header, but still a cache"
    );
    assert_eq!(edge.metric(&requests_series("hit")).await, 1.0);
}

#[tokio::test]
async fn status_header_renamed() {
    let origin = Origin::start().await;
    origin.set("/s", Reply::ok("s").cache_control("max-age=60"));
    let setup = Setup {
        cache: r#"status_header = "X-Edge-Cache""#,
        ..Setup::default()
    };
    let edge = Edge::start(&origin, setup).await;
    let statuses: Vec<_> = [edge.get("/s").await, edge.get("/s").await]
        .iter()
        .map(|r| {
            (
                r.header("x-edge-cache").map(String::from),
                r.header(STATUS).is_some(),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        [(Some("MISS".into()), false), (Some("HIT".into()), false)]
    );
}

#[tokio::test]
async fn metrics_count_hits_misses_and_stored_objects() {
    let origin = Origin::start().await;
    let body = "m".repeat(10_000);
    origin.set("/m", Reply::ok(body.clone()).cache_control("max-age=60"));
    let edge = Edge::start(&origin, Setup::default()).await;
    for _ in 0..4 {
        assert_eq!(edge.get("/m").await.body.len(), body.len());
    }
    let objects = zone_series(names::OBJECTS, &[("tier", "memory")]);
    edge.wait_metric(&objects, 1.0).await;
    let text = edge.metrics().await;
    let value = |series: &str| crate::metric(&text, series);
    assert_eq!(value(&requests_series("miss")), 1.0);
    assert_eq!(value(&requests_series("hit")), 3.0);
    assert_eq!(value(&zone_series(names::STORED, &[])), 1.0);
    assert_eq!(value(&zone_series(names::STORE_ERRORS, &[])), 0.0);
    assert_eq!(value(&objects), 1.0);
    let served = value(&zone_series(names::SERVED_BYTES, &[]));
    assert!(
        served >= 3.0 * body.len() as f64,
        "{served} bytes served from storage"
    );
}

/// RFC 9110 §14 from a stored 200: one range → 206 with Content-Range, a range past the end →
/// 416, `If-Range` with another validator → the whole response; the origin is asked once.
#[tokio::test]
async fn range_requests_answered_from_the_stored_response() {
    let origin = Origin::start().await;
    let body: String = (0..1000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    origin.set(
        "/r",
        Reply::ok(body.clone())
            .cache_control("max-age=60")
            .header("etag", "\"r1\""),
    );
    let edge = Edge::start(&origin, Setup::default()).await;
    assert_eq!(edge.get("/r").await.cache(), "MISS");
    let part = edge.get_with("/r", &[("range", "bytes=10-19")]).await;
    assert_eq!((part.status, part.cache()), (206, "HIT"));
    assert_eq!(part.header("content-range"), Some("bytes 10-19/1000"));
    assert_eq!(part.text(), &body[10..20]);
    let suffix = edge.get_with("/r", &[("range", "bytes=-5")]).await;
    assert_eq!((suffix.status, suffix.text()), (206, &body[995..]));
    let past = edge.get_with("/r", &[("range", "bytes=5000-")]).await;
    assert_eq!(past.status, 416);
    assert_eq!(past.header("content-range"), Some("bytes */1000"));
    let other = edge
        .get_with("/r", &[("range", "bytes=0-9"), ("if-range", "\"old\"")])
        .await;
    assert_eq!((other.status, other.body.len()), (200, 1000));
    let same = edge
        .get_with("/r", &[("range", "bytes=0-9"), ("if-range", "\"r1\"")])
        .await;
    assert_eq!((same.status, same.text()), (206, &body[..10]));
    assert_eq!(origin.requests("/r"), 1);
}
