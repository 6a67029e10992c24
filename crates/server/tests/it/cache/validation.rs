//! RFC 9111 §4.3: validation. Clients' conditionals answered from storage, stored responses
//! revalidated with the origin (304 updates them, 200 replaces them), and §5.2.2.4's no-cache
//! response, stored but never reused without validation.

use super::{Edge, Origin, Reply, Setup};

/// §4.3.2: a fresh stored response answers If-None-Match itself (weak comparison, lists, and a
/// non-matching tag gets the full response), with the fields a 200 would carry (RFC 9110 §15.4.5).
#[tokio::test]
async fn s4_3_2_client_if_none_match_gets_304_from_cache() {
    let origin = Origin::start().await;
    let reply = Reply::ok("the body")
        .cache_control("max-age=60")
        .header("etag", "\"v1\"");
    origin.set("/e", reply);
    let edge = Edge::start(&origin, Setup::default()).await;
    assert_eq!(edge.get("/e").await.cache(), "MISS");
    for tags in ["\"v1\"", "W/\"v1\"", "\"other\", \"v1\"", "*"] {
        let resp = edge.get_with("/e", &[("if-none-match", tags)]).await;
        assert_eq!(resp.status, 304, "{tags}");
        assert_eq!(resp.cache(), "HIT", "{tags}");
        assert_eq!(resp.header("etag"), Some("\"v1\""), "{tags}");
        assert_eq!(resp.header("cache-control"), Some("max-age=60"), "{tags}");
        assert!(resp.body.is_empty());
    }
    let resp = edge.get_with("/e", &[("if-none-match", "\"other\"")]).await;
    assert_eq!(
        (resp.status, resp.cache(), resp.text()),
        (200, "HIT", "the body")
    );
    assert_eq!(origin.requests("/e"), 1);
}

/// §4.3.1, §4.3.3 and §4.3.4: a stale response with an ETag is revalidated with If-None-Match;
/// the origin's 304 makes it fresh again and its fields replace the stored ones.
#[tokio::test]
async fn s4_3_4_304_from_origin_revalidates_and_updates_headers() {
    let origin = Origin::start().await;
    let version = |v: &str, cc: &str| {
        let reply = Reply::ok("same body")
            .header("etag", "\"v1\"")
            .header("x-version", v);
        reply.cache_control(cc).conditional()
    };
    origin.set("/r", version("1", "max-age=0"));
    let edge = Edge::start(&origin, Setup::default()).await;
    assert_eq!(edge.get("/r").await.header("x-version"), Some("1"));
    origin.set("/r", version("2", "max-age=60"));

    let revalidated = edge.get("/r").await;
    assert_eq!(origin.requests("/r"), 2);
    let asked = origin.last("/r");
    assert!(
        asked
            .header("if-none-match")
            .is_some_and(|t| t.contains("\"v1\"")),
        "{asked:?}"
    );
    assert_eq!(revalidated.status, 200);
    assert_eq!(revalidated.cache(), "REVALIDATED");
    assert_eq!(revalidated.text(), "same body");
    assert_eq!(revalidated.header("x-version"), Some("2"));

    let hit = edge.get("/r").await;
    assert_eq!((hit.cache(), hit.text()), ("HIT", "same body"));
    assert_eq!(
        hit.header("x-version"),
        Some("2"),
        "the 304's fields were not stored"
    );
    assert_eq!(
        origin.requests("/r"),
        2,
        "the 304's max-age=60 was not applied"
    );
}

/// §4.3.1: with only a Last-Modified, revalidation sends it back as If-Modified-Since.
#[tokio::test]
async fn s4_3_1_revalidation_sends_if_modified_since_from_last_modified() {
    let origin = Origin::start().await;
    let modified = "Tue, 15 Nov 1994 12:45:26 GMT";
    let reply = Reply::ok("dated")
        .header("last-modified", modified)
        .cache_control("max-age=0");
    origin.set("/lm", reply.conditional());
    let edge = Edge::start(&origin, Setup::default()).await;
    assert_eq!(edge.get("/lm").await.text(), "dated");
    let revalidated = edge.get("/lm").await;
    let asked = origin.last("/lm");
    let since = asked
        .header("if-modified-since")
        .unwrap_or_else(|| panic!("{asked:?}"));
    assert_eq!(
        httpdate::parse_http_date(since).unwrap(),
        httpdate::parse_http_date(modified).unwrap()
    );
    assert_eq!(asked.header("if-none-match"), None, "no ETag was stored");
    assert_eq!((revalidated.status, revalidated.text()), (200, "dated"));
    assert_eq!(revalidated.cache(), "REVALIDATED");
}

/// §4.3.3: a 200 to the revalidation (the ETag changed) is used, and replaces the stored response.
#[tokio::test]
async fn s4_3_3_etag_change_on_200_replaces_entry() {
    let origin = Origin::start().await;
    let tagged = |body: &'static str, tag: &str, cc: &str| {
        Reply::ok(body)
            .header("etag", tag)
            .cache_control(cc)
            .conditional()
    };
    origin.set("/x", tagged("old", "\"v1\"", "max-age=0"));
    let edge = Edge::start(&origin, Setup::default()).await;
    assert_eq!(edge.get("/x").await.text(), "old");
    origin.set("/x", tagged("new", "\"v2\"", "max-age=60"));

    let replaced = edge.get("/x").await;
    let asked = origin.last("/x");
    assert!(
        asked
            .header("if-none-match")
            .is_some_and(|t| t.contains("\"v1\"")),
        "{asked:?}"
    );
    assert_eq!(
        (replaced.status, replaced.cache(), replaced.text()),
        (200, "EXPIRED", "new")
    );
    assert_eq!(replaced.header("etag"), Some("\"v2\""));

    let hit = edge.get("/x").await;
    assert_eq!((hit.cache(), hit.text()), ("HIT", "new"));
    assert_eq!(hit.header("etag"), Some("\"v2\""));
    let conditional = edge.get_with("/x", &[("if-none-match", "\"v2\"")]).await;
    assert_eq!(conditional.status, 304);
    assert_eq!(origin.requests("/x"), 2);
}

/// §5.2.2.4: a `no-cache` response may be stored but never reused without validation: each
/// request goes to the origin, conditionally (it was stored), and a 304 serves the stored body.
#[tokio::test]
async fn s5_2_2_no_cache_response_stored_but_always_revalidated() {
    let origin = Origin::start().await;
    let reply = Reply::ok("checked").header("etag", "\"v1\"");
    origin.set(
        "/nc",
        reply.cache_control("no-cache, max-age=60").conditional(),
    );
    let edge = Edge::start(&origin, Setup::default()).await;
    assert_eq!(edge.get("/nc").await.text(), "checked");
    for n in 2..=3 {
        let resp = edge.get("/nc").await;
        assert_eq!(origin.requests("/nc"), n);
        let asked = origin.last("/nc");
        assert!(
            asked
                .header("if-none-match")
                .is_some_and(|t| t.contains("\"v1\"")),
            "{asked:?}"
        );
        assert_eq!(
            (resp.status, resp.cache(), resp.text()),
            (200, "REVALIDATED", "checked")
        );
    }
}
