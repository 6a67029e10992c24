//! Targeted cache-control fields (RFC 9213): a cache that recognises one uses it instead of
//! Cache-Control, both to allow and to forbid. `Sluice-Cache-Control` is sluice's own (never sent
//! downstream); `CDN-Cache-Control` applies when there is no Sluice-Cache-Control and is
//! forwarded for the caches further down.

use super::{Edge, Origin, Reply, Setup};

fn reply(path: &str, fields: &[(&str, &str)]) -> Reply {
    let mut reply = Reply::ok(path.to_string());
    for (name, value) in fields {
        reply = reply.header(name, *value);
    }
    reply
}

#[tokio::test]
async fn rfc9213_sluice_cache_control_overrides_and_is_not_forwarded() {
    let origin = Origin::start().await;
    let allowed = [
        ("cache-control", "no-store"),
        ("sluice-cache-control", "max-age=60"),
    ];
    let forbidden = [
        ("cache-control", "max-age=60"),
        ("sluice-cache-control", "no-store"),
    ];
    let over_cdn = [
        ("cache-control", "no-store"),
        ("cdn-cache-control", "no-store"),
        ("sluice-cache-control", "max-age=60"),
    ];
    origin.set("/allowed", reply("/allowed", &allowed));
    origin.set("/forbidden", reply("/forbidden", &forbidden));
    origin.set("/over-cdn", reply("/over-cdn", &over_cdn));
    let edge = Edge::start(&origin, Setup::default()).await;

    for path in ["/allowed", "/over-cdn"] {
        let miss = edge.get(path).await;
        let hit = edge.get(path).await;
        assert_eq!((hit.cache(), hit.text()), ("HIT", path));
        assert_eq!(origin.requests(path), 1, "{path}");
        for resp in [&miss, &hit] {
            assert_eq!(
                resp.header("sluice-cache-control"),
                None,
                "{path}: forwarded"
            );
            assert_eq!(resp.header("cache-control"), Some("no-store"), "{path}");
        }
    }
    edge.get("/forbidden").await;
    let again = edge.get("/forbidden").await;
    assert_ne!(again.cache(), "HIT");
    assert_eq!(origin.requests("/forbidden"), 2);
    assert_eq!(again.header("cache-control"), Some("max-age=60"));
    assert_eq!(again.header("sluice-cache-control"), None);
}

#[tokio::test]
async fn rfc9213_cdn_cache_control_overrides_and_is_forwarded() {
    let origin = Origin::start().await;
    let allowed = [
        ("cache-control", "no-store"),
        ("cdn-cache-control", "max-age=60"),
    ];
    let forbidden = [
        ("cache-control", "max-age=60"),
        ("cdn-cache-control", "no-store"),
    ];
    origin.set("/allowed", reply("/allowed", &allowed));
    origin.set("/forbidden", reply("/forbidden", &forbidden));
    let edge = Edge::start(&origin, Setup::default()).await;

    let miss = edge.get("/allowed").await;
    let hit = edge.get("/allowed").await;
    assert_eq!((hit.cache(), hit.text()), ("HIT", "/allowed"));
    assert_eq!(origin.requests("/allowed"), 1);
    for resp in [&miss, &hit] {
        assert_eq!(resp.header("cdn-cache-control"), Some("max-age=60"));
        assert_eq!(resp.header("cache-control"), Some("no-store"));
    }
    edge.get("/forbidden").await;
    let again = edge.get("/forbidden").await;
    assert_ne!(again.cache(), "HIT");
    assert_eq!(origin.requests("/forbidden"), 2);
    assert_eq!(again.header("cdn-cache-control"), Some("no-store"));
}
