//! Removing stored responses: RFC 9111 §4.4 (a successful unsafe request invalidates its target
//! and same-origin Location / Content-Location) and the admin listener's purge.

use super::{Edge, HOST, Origin, Reply, Setup, requests_series};

/// Store each of `paths` (on `host`) and check the next request is a HIT.
async fn warm(edge: &Edge, host: &str, paths: &[&str]) {
    for path in paths {
        edge.get_with(path, &[("host", host)]).await;
        let hit = edge.get_with(path, &[("host", host)]).await;
        assert_eq!(hit.cache(), "HIT", "{host}{path} was not stored");
    }
}

/// A 201 to a POST invalidates the target, its Location (relative) and its Content-Location
/// (absolute, same host), nothing else; a 204 to a PUT invalidates the target but not a Location
/// on another host, which RFC 9111 §4.4 forbids (it would let one origin purge another's).
#[tokio::test]
async fn s4_4_unsafe_method_invalidates_uri_and_location() {
    let origin = Origin::start().await;
    for path in ["/a", "/b", "/c", "/d", "/e"] {
        origin.set(path, Reply::ok(path).cache_control("max-age=60"));
    }
    let created = Reply::ok("created").status(201);
    let created = created
        .header("location", "/b")
        .header("content-location", "http://site.test/c");
    origin.set_for("POST", "/a", created);
    origin.set_for(
        "PUT",
        "/d",
        Reply::ok("")
            .status(204)
            .header("location", "http://other.test/e"),
    );
    let edge = Edge::start(&origin, Setup::default()).await;
    warm(&edge, HOST, &["/a", "/b", "/c", "/d"]).await;
    warm(&edge, "other.test", &["/e"]).await;

    let post = edge.send("POST", "/a", &[]).await;
    assert_eq!(post.status, 201);
    assert_eq!(
        post.header(super::STATUS),
        None,
        "the status header is for GET and HEAD"
    );
    for path in ["/a", "/b", "/c"] {
        let resp = edge.get(path).await;
        assert_ne!(
            resp.cache(),
            "HIT",
            "{path} survived a successful POST to /a"
        );
        assert_eq!(origin.requests_by("GET", path), 2, "{path}");
    }
    assert_eq!(
        edge.get("/d").await.cache(),
        "HIT",
        "a POST to /a invalidated /d"
    );

    // A PUT invalidates its target; its Location on another host is not this origin's to touch.
    assert_eq!(edge.send("PUT", "/d", &[]).await.status, 204);
    assert_ne!(edge.get("/d").await.cache(), "HIT");
    let other = edge.get_with("/e", &[("host", "other.test")]).await;
    assert_eq!(
        other.cache(),
        "HIT",
        "a Location on another host was invalidated"
    );
}

/// Purge is the admin listener's: by key (PURGE or DELETE, 404 when nothing was stored) and by
/// prefix. On the public listener a PURGE is proxied like any method; the origin refuses it here,
/// so RFC 9111 §4.4 does not apply either, and the stored response stays.
#[tokio::test]
async fn purge_on_admin_only() {
    let origin = Origin::start().await;
    for path in ["/page", "/api/a", "/api/b"] {
        origin.set(path, Reply::ok(path).cache_control("max-age=60"));
    }
    origin.set_for("PURGE", "/page", Reply::ok("not here").status(405));
    let edge = Edge::start(&origin, Setup::default()).await;
    warm(&edge, HOST, &["/page", "/api/a", "/api/b"]).await;

    let public = edge.send("PURGE", "/page", &[]).await;
    assert_eq!(public.status, 405);
    assert_eq!(
        origin.requests_by("PURGE", "/page"),
        1,
        "the public PURGE was not proxied"
    );
    assert_eq!(
        edge.get("/page").await.cache(),
        "HIT",
        "the public listener purged"
    );

    let purged = edge
        .admin("PURGE", "/cache/main?key=http://site.test/page")
        .await;
    assert_eq!(purged.status, 200, "{purged:?}");
    let after = edge.get("/page").await;
    assert_eq!((after.cache(), after.text()), ("MISS", "/page"));
    assert_eq!(origin.requests_by("GET", "/page"), 2);
    let deleted = edge
        .admin("DELETE", "/cache/main?key=http://site.test/page")
        .await;
    assert_eq!(deleted.status, 200, "{deleted:?}");
    assert_eq!(edge.get("/page").await.cache(), "MISS");
    let nothing = edge
        .admin("DELETE", "/cache/main?key=http://site.test/never")
        .await;
    assert_eq!(nothing.status, 404, "{nothing:?}");

    let by_prefix = edge
        .admin("DELETE", "/cache/main?prefix=http://site.test/api/")
        .await;
    assert_eq!(by_prefix.status, 200, "{by_prefix:?}");
    for path in ["/api/a", "/api/b"] {
        assert_eq!(edge.get(path).await.cache(), "MISS", "{path}");
        assert_eq!(origin.requests_by("GET", path), 2, "{path}");
    }
    assert_eq!(
        edge.get("/page").await.cache(),
        "HIT",
        "the prefix reached outside /api/"
    );
    let misses = edge.metric(&requests_series("miss")).await;
    assert_eq!(
        misses,
        3.0 + 2.0 + 2.0,
        "three warm-ups, two purged by key, two by prefix"
    );
}
