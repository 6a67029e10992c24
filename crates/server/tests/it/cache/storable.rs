//! RFC 9111 §3: what a shared cache may store. A response that must not be stored is fetched
//! again for the next request: the origin's count is the proof, the status header a second one.

use super::{Edge, Origin, Reply, Setup};

/// Two requests for `path`; returns how many reached the origin and the second's cache status.
async fn fetch_twice(edge: &Edge, origin: &Origin, path: &str) -> (usize, String) {
    let first = edge.get(path).await;
    assert_eq!(first.status, 200);
    let second = edge.get(path).await;
    assert_eq!(second.status, 200);
    assert_eq!(second.body, first.body);
    (origin.requests(path), second.cache().to_string())
}

#[tokio::test]
async fn s3_no_store_response_is_not_stored() {
    let origin = Origin::start().await;
    origin.set(
        "/ns",
        Reply::ok("secret").cache_control("no-store, max-age=60"),
    );
    origin.set("/control", Reply::ok("public").cache_control("max-age=60"));
    let edge = Edge::start(&origin, Setup::default()).await;
    let (count, status) = fetch_twice(&edge, &origin, "/ns").await;
    assert_eq!(count, 2, "a no-store response was reused");
    assert_eq!(status, "MISS");
    // The same route stores what it may: the test above is not passing for another reason.
    assert_eq!(
        fetch_twice(&edge, &origin, "/control").await,
        (1, "HIT".into())
    );
}

#[tokio::test]
async fn s3_private_response_is_not_stored() {
    let origin = Origin::start().await;
    origin.set("/p", Reply::ok("mine").cache_control("private, max-age=60"));
    let edge = Edge::start(&origin, Setup::default()).await;
    let (count, status) = fetch_twice(&edge, &origin, "/p").await;
    assert_eq!(count, 2, "a shared cache stored a private response");
    assert_eq!(status, "MISS");
}

/// §3.5: the response to a request with Authorization is stored only when it says it may be
/// shared: `public`, `s-maxage` or `must-revalidate`.
#[tokio::test]
async fn s3_5_authorization_request_not_served_from_cache_unless_public() {
    let origin = Origin::start().await;
    let auth = [("authorization", "Bearer alice")];
    origin.set("/own", Reply::ok("alice's").cache_control("max-age=60"));
    let edge = Edge::start(&origin, Setup::default()).await;
    assert_eq!(edge.get_with("/own", &auth).await.text(), "alice's");
    let again = edge.get_with("/own", &auth).await;
    assert_ne!(again.cache(), "HIT");
    let other = edge.get("/own").await;
    assert_ne!(
        other.cache(),
        "HIT",
        "alice's response was served to someone else"
    );
    assert_eq!(origin.requests("/own"), 3);

    for (path, directives) in [
        ("/public", "public, max-age=60"),
        ("/shared", "s-maxage=60"),
        ("/revalidated", "must-revalidate, max-age=60"),
    ] {
        origin.set(path, Reply::ok(path).cache_control(directives));
        assert_eq!(edge.get_with(path, &auth).await.text(), path);
        let other = edge.get(path).await;
        assert_eq!((other.cache(), other.text()), ("HIT", path), "{directives}");
        assert_eq!(origin.requests(path), 1, "{directives}");
    }
}

/// A cookie set for one client must never reach another from storage. By default a response
/// with Set-Cookie is not served from storage with its Set-Cookie; `store_set_cookie = true` stores
/// it whole (the operator says the cookie is not personal).
#[tokio::test]
async fn s3_set_cookie_not_stored_by_default() {
    let origin = Origin::start().await;
    let reply = Reply::ok("hello").cache_control("max-age=60");
    origin.set("/c", reply.header("set-cookie", "session=alice; Path=/"));
    let edge = Edge::start(&origin, Setup::default()).await;
    let first = edge.get("/c").await;
    assert_eq!(first.header("set-cookie"), Some("session=alice; Path=/"));
    let second = edge.get("/c").await;
    if second.cache() == "HIT" {
        assert_eq!(origin.requests("/c"), 1);
        assert_eq!(
            second.header("set-cookie"),
            None,
            "a stored Set-Cookie was replayed"
        );
    } else {
        assert_eq!(origin.requests("/c"), 2, "{second:?}");
    }

    let origin = Origin::start().await;
    let reply = Reply::ok("hello").cache_control("max-age=60");
    origin.set("/c", reply.header("set-cookie", "lang=en; Path=/"));
    let setup = Setup {
        zone: "store_set_cookie = true",
        ..Setup::default()
    };
    let edge = Edge::start(&origin, setup).await;
    assert_eq!(edge.get("/c").await.cache(), "MISS");
    let second = edge.get("/c").await;
    assert_eq!(second.cache(), "HIT");
    assert_eq!(second.header("set-cookie"), Some("lang=en; Path=/"));
    assert_eq!(origin.requests("/c"), 1);
}

/// §3.1: the Connection header and the fields it lists are not stored (RFC 9110 §7.6.1), nor
/// the other connection-specific fields; end-to-end fields are.
#[tokio::test]
async fn s3_1_hop_by_hop_fields_not_stored() {
    let origin = Origin::start().await;
    let reply = Reply::ok("body")
        .cache_control("max-age=60")
        .header("connection", "x-hop")
        .header("x-hop", "this connection only")
        .header("keep-alive", "timeout=99")
        .header("proxy-connection", "keep-alive")
        .header("x-end", "kept");
    origin.set("/hop", reply);
    let edge = Edge::start(&origin, Setup::default()).await;
    assert_eq!(edge.get("/hop").await.cache(), "MISS");
    let hit = edge.get("/hop").await;
    assert_eq!(hit.cache(), "HIT");
    assert_eq!(hit.header("x-end"), Some("kept"));
    assert_eq!(hit.header("x-hop"), None);
    assert_eq!(hit.header("proxy-connection"), None);
    assert_ne!(hit.header("keep-alive"), Some("timeout=99"));
    assert!(!hit.header("connection").unwrap_or("").contains("x-hop"));
}
