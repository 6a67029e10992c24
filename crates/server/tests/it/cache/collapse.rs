//! Request collapsing: concurrent misses for one key make one origin request; the others wait
//! for it and read its body as it arrives.

use super::{Edge, Origin, Reply, Setup, names, sha256, zone_series};

/// 64 KiB in which no short run repeats (a body mixed up between readers would show).
fn body() -> Vec<u8> {
    (0u32..16_384)
        .flat_map(|i| i.wrapping_mul(2_654_435_761).to_le_bytes())
        .collect()
}

/// 1,000 requests for a cold key: the origin holds the first at its gate until the other 999
/// have joined it (the collapsed counter says so), then answers once; everyone gets the body.
#[tokio::test]
async fn collapsing_1000_concurrent_requests_one_origin_request() {
    const CLIENTS: usize = 1000;
    let origin = Origin::start().await;
    let body = body();
    origin.set("/cold", Reply::ok(body.clone()).cache_control("max-age=60"));
    origin.close_gate("/cold");
    let setup = Setup {
        cache: r#"lock_timeout = "60s""#,
        ..Setup::default()
    };
    let edge = std::sync::Arc::new(Edge::start(&origin, setup).await);

    let requests: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let edge = edge.clone();
            tokio::spawn(async move { edge.get("/cold").await })
        })
        .collect();
    origin.wait_requests("/cold", 1).await;
    let collapsed = zone_series(names::COLLAPSED, &[]);
    edge.wait_metric(&collapsed, (CLIENTS - 1) as f64).await;
    assert_eq!(origin.requests("/cold"), 1);
    origin.open_gate("/cold");

    let expected = sha256(&body);
    let mut statuses = std::collections::BTreeMap::<String, usize>::new();
    for request in requests {
        let resp = request.await.unwrap();
        assert_eq!(resp.status, 200);
        assert_eq!(sha256(&resp.body), expected, "{} bytes", resp.body.len());
        *statuses.entry(resp.cache().to_string()).or_default() += 1;
    }
    assert_eq!(origin.requests("/cold"), 1);
    let expected_statuses = [("HIT".to_string(), CLIENTS - 1), ("MISS".to_string(), 1)];
    assert_eq!(statuses, expected_statuses.into_iter().collect());
    assert_eq!(edge.metric(&collapsed).await, (CLIENTS - 1) as f64);
}

/// RFC 9111 §4.3: a stale entry is revalidated once however many requests want it at the same
/// time; the others wait for the answer (held at the origin's gate until all have joined),
/// then find the entry fresh again.
#[tokio::test]
async fn s4_3_concurrent_revalidations_of_one_entry_make_one_origin_request() {
    const CLIENTS: usize = 20;
    let origin = Origin::start().await;
    let body = body();
    let reply = |cache_control: &str| {
        Reply::ok(body.clone())
            .cache_control(cache_control)
            .header("etag", "\"s1\"")
            .conditional()
    };
    // Stored stale at once (max-age=0, a validator to revalidate with).
    origin.set("/stale", reply("max-age=0"));
    let setup = Setup {
        cache: r#"lock_timeout = "60s""#,
        ..Setup::default()
    };
    let edge = std::sync::Arc::new(Edge::start(&origin, setup).await);
    assert_eq!(edge.get("/stale").await.cache(), "MISS");
    edge.wait_metric(&zone_series(names::STORED, &[]), 1.0)
        .await;
    // The 304 will make it fresh for a minute.
    origin.set("/stale", reply("max-age=60"));
    origin.close_gate("/stale");
    let requests: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let edge = edge.clone();
            tokio::spawn(async move { edge.get("/stale").await })
        })
        .collect();
    origin.wait_requests("/stale", 2).await;
    let collapsed = zone_series(names::COLLAPSED, &[]);
    edge.wait_metric(&collapsed, (CLIENTS - 1) as f64).await;
    assert_eq!(origin.requests("/stale"), 2);
    origin.open_gate("/stale");

    let expected = sha256(&body);
    let mut statuses = std::collections::BTreeMap::<String, usize>::new();
    for request in requests {
        let resp = request.await.unwrap();
        assert_eq!(resp.status, 200);
        assert_eq!(sha256(&resp.body), expected);
        *statuses.entry(resp.cache().to_string()).or_default() += 1;
    }
    assert_eq!(origin.requests("/stale"), 2, "one revalidation");
    assert!(origin.last("/stale").header("if-none-match").is_some());
    let expected_statuses = [
        ("HIT".to_string(), CLIENTS - 1),
        ("REVALIDATED".to_string(), 1),
    ];
    assert_eq!(statuses, expected_statuses.into_iter().collect());
}
