//! Serving stale responses where it is allowed (RFC 9111 §4.2.4): `stale-if-error` and
//! `stale-while-revalidate` (RFC 5861) from the origin, `use_stale` from the operator. Responses
//! are stored with `max-age=0`, stale at once, so no test waits for time to pass.

use std::time::{Duration, Instant};

use super::{Edge, FAILURE_BOUND, Fail, Origin, Reply, Setup, names, zone_series};

/// Store `path`, then make the origin fail with `fail`: the next request must be the stored
/// body, STALE.
async fn stale_when_failing(origin: &Origin, edge: &Edge, path: &str, fail: Fail) {
    let stored = edge.get(path).await;
    assert_eq!((stored.status, stored.cache()), (200, "MISS"));
    origin.fail(Some(fail));
    let stale = edge.get(path).await;
    assert_eq!((stale.status, stale.cache()), (200, "STALE"), "{stale:?}");
    assert_eq!(stale.body, stored.body);
    assert!(
        origin.requests(path) >= 2,
        "served stale without asking the origin"
    );
}

async fn stale_on_error_count(edge: &Edge) -> f64 {
    edge.metric(&zone_series(names::STALE_ON_ERROR, &[])).await
}

#[tokio::test]
async fn stale_if_error_serves_stale_when_origin_down() {
    let origin = Origin::start().await;
    origin.set(
        "/s",
        Reply::ok("still good").cache_control("max-age=0, stale-if-error=60"),
    );
    let edge = Edge::start(&origin, Setup::default()).await;
    stale_when_failing(&origin, &edge, "/s", Fail::Close).await;
    assert_eq!(stale_on_error_count(&edge).await, 1.0);
}

#[tokio::test]
async fn use_stale_error_serves_stale() {
    let origin = Origin::start().await;
    origin.set("/u", Reply::ok("still good").cache_control("max-age=0"));
    let setup = Setup {
        zone: r#"use_stale = ["error"]"#,
        ..Setup::default()
    };
    let edge = Edge::start(&origin, setup).await;
    stale_when_failing(&origin, &edge, "/u", Fail::Close).await;
    assert_eq!(stale_on_error_count(&edge).await, 1.0);
}

#[tokio::test]
async fn use_stale_http_503_serves_stale() {
    let origin = Origin::start().await;
    origin.set("/u", Reply::ok("still good").cache_control("max-age=0"));
    let setup = Setup {
        zone: r#"use_stale = ["http_503"]"#,
        ..Setup::default()
    };
    let edge = Edge::start(&origin, setup).await;
    stale_when_failing(&origin, &edge, "/u", Fail::Status(503)).await;
}

/// The refresh is held at the origin's gate: every stale response that comes back meanwhile was
/// served without waiting for it. However many requests arrive, the origin sees one refresh,
/// and once it lands the new body is a HIT.
#[tokio::test]
async fn stale_while_revalidate_serves_at_once_and_refreshes_once() {
    let origin = Origin::start().await;
    let path = "/swr";
    origin.set(
        path,
        Reply::ok("v1").cache_control("max-age=0, stale-while-revalidate=60"),
    );
    let edge = Edge::start(&origin, Setup::default()).await;
    assert_eq!(edge.get(path).await.cache(), "MISS");
    origin.set(path, Reply::ok("v2").cache_control("max-age=60"));
    origin.close_gate(path);

    let stale_now = || async {
        // Well under the client's own timeout, so a wait shows as this failure.
        let resp = tokio::time::timeout(Duration::from_secs(10), edge.get(path))
            .await
            .expect("a stale response waited for the refresh");
        assert_eq!(resp.text(), "v1");
        assert!(["STALE", "UPDATING"].contains(&resp.cache()), "{resp:?}");
    };
    for _ in 0..5 {
        stale_now().await;
    }
    origin.wait_requests(path, 2).await; // the refresh, held at the gate
    for _ in 0..5 {
        stale_now().await;
    }
    assert_eq!(origin.requests(path), 2, "more than one refresh");

    origin.open_gate(path);
    let deadline = Instant::now() + FAILURE_BOUND;
    loop {
        let resp = edge.get(path).await;
        assert_eq!(resp.status, 200);
        if resp.cache() == "HIT" {
            assert_eq!(resp.text(), "v2");
            break;
        }
        assert_eq!(resp.text(), "v1", "{resp:?}");
        assert!(Instant::now() < deadline, "the refresh never landed");
        tokio::time::sleep(Duration::from_millis(10)).await; // poll interval
    }
    assert_eq!(origin.requests(path), 2, "more than one refresh");
    assert_eq!(edge.metric(&zone_series(names::REFRESHES, &[])).await, 1.0);
}
