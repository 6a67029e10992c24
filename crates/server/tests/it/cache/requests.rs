//! RFC 9111 §5.2.1 and §5.4: what a request's own directives demand of the cache. Each test
//! first shows the same request without the directive is a HIT, so the directive is what made
//! the difference.

use super::{Edge, Origin, Reply, Setup};

/// A server whose origin answers `path` with a fresh (max-age=60), conditional response tagged
/// "v1", already requested once (a MISS) and once more (a HIT).
async fn stored(path: &str, reply: Reply) -> (Origin, Edge) {
    let origin = Origin::start().await;
    origin.set(
        path,
        reply
            .cache_control("max-age=60")
            .header("etag", "\"v1\"")
            .conditional(),
    );
    let edge = Edge::start(&origin, Setup::default()).await;
    assert_eq!(edge.get(path).await.cache(), "MISS");
    assert_eq!(edge.get(path).await.cache(), "HIT");
    assert_eq!(origin.requests(path), 1);
    (origin, edge)
}

/// §5.2.1.4: `no-cache` in a request: no stored response without the origin's word, whether it
/// is "not modified" (the stored body) or a new response (the new body).
#[tokio::test]
async fn s5_2_1_request_no_cache_revalidates() {
    let (origin, edge) = stored("/d", Reply::ok("one")).await;
    let no_cache = [("cache-control", "no-cache")];
    let resp = edge.get_with("/d", &no_cache).await;
    assert_eq!((resp.status, resp.text()), (200, "one"));
    assert_eq!(origin.requests("/d"), 2);

    let changed = Reply::ok("two")
        .cache_control("max-age=60")
        .header("etag", "\"v2\"");
    origin.set("/d", changed.conditional());
    let resp = edge.get_with("/d", &no_cache).await;
    assert_eq!((resp.status, resp.text()), (200, "two"));
    assert_eq!(origin.requests("/d"), 3);
}

/// §5.2.1.1: `max-age=0` in a request refuses any response older than 0 s. The origin says the
/// response is already 5 s old (Age), so the stored one cannot be used without validation.
#[tokio::test]
async fn s5_2_1_max_age_0_request_revalidates() {
    let (origin, edge) = stored("/m", Reply::ok("five seconds old").header("age", "5")).await;
    let resp = edge.get_with("/m", &[("cache-control", "max-age=0")]).await;
    assert_eq!((resp.status, resp.text()), (200, "five seconds old"));
    assert_eq!(origin.requests("/m"), 2);
}

/// §5.2.1.7: `only-if-cached` never reaches the origin: 504 when nothing is stored, the stored
/// response when there is one.
#[tokio::test]
async fn s5_2_1_7_only_if_cached_gets_504_when_not_stored() {
    let origin = Origin::start().await;
    origin.set("/o", Reply::ok("cached").cache_control("max-age=60"));
    let edge = Edge::start(&origin, Setup::default()).await;
    let only = [("cache-control", "only-if-cached")];
    assert_eq!(edge.get_with("/o", &only).await.status, 504);
    assert_eq!(origin.requests("/o"), 0);
    assert_eq!(edge.get("/o").await.cache(), "MISS");
    let resp = edge.get_with("/o", &only).await;
    assert_eq!(
        (resp.status, resp.cache(), resp.text()),
        (200, "HIT", "cached")
    );
    assert_eq!(origin.requests("/o"), 1);
}

/// §5.2.1.5: nothing of a `no-store` request's response is stored; the next request is fetched
/// (and that one is stored).
#[tokio::test]
async fn s5_2_1_5_request_no_store_not_stored() {
    let origin = Origin::start().await;
    origin.set("/ns", Reply::ok("body").cache_control("max-age=60"));
    let edge = Edge::start(&origin, Setup::default()).await;
    let resp = edge.get_with("/ns", &[("cache-control", "no-store")]).await;
    assert_eq!((resp.status, resp.text()), (200, "body"));
    let next = edge.get("/ns").await;
    assert_ne!(
        next.cache(),
        "HIT",
        "the no-store request's response was stored"
    );
    assert_eq!(origin.requests("/ns"), 2);
    assert_eq!(edge.get("/ns").await.cache(), "HIT");
}

/// §5.4: `Pragma: no-cache` without Cache-Control means `Cache-Control: no-cache`.
#[tokio::test]
async fn s5_4_pragma_no_cache_without_cache_control() {
    let (origin, edge) = stored("/p", Reply::ok("pragmatic")).await;
    let resp = edge.get_with("/p", &[("pragma", "no-cache")]).await;
    assert_eq!((resp.status, resp.text()), (200, "pragmatic"));
    assert_eq!(origin.requests("/p"), 2);
}
