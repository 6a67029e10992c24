//! RFC 9111 §4.1: a stored response is used only for requests whose fields named in its `Vary`
//! match the request it answered, after normalisation that keeps their meaning.

use super::{Edge, Origin, Reply, Setup};

/// Each value of the varying field gets its own stored response; a request without the field
/// matches only one stored without it; `Vary: *` never matches.
#[tokio::test]
async fn s4_1_vary_separates_and_vary_star_never_matches() {
    let origin = Origin::start().await;
    let speaking = |lang: &'static str| {
        Reply::ok(lang)
            .cache_control("max-age=60")
            .header("vary", "X-Lang")
    };
    origin.set("/v", speaking("en"));
    let edge = Edge::start(&origin, Setup::default()).await;
    let en = [("x-lang", "en")];
    let fr = [("x-lang", "fr")];
    assert_eq!(edge.get_with("/v", &en).await.text(), "en");
    origin.set("/v", speaking("fr"));
    let first_fr = edge.get_with("/v", &fr).await;
    assert_ne!(first_fr.cache(), "HIT", "fr was served en's response");
    assert_eq!(first_fr.text(), "fr");
    assert_eq!(origin.requests("/v"), 2);
    for (headers, lang) in [(en, "en"), (fr, "fr"), (en, "en")] {
        let resp = edge.get_with("/v", &headers).await;
        assert_eq!((resp.cache(), resp.text()), ("HIT", lang));
    }
    origin.set("/v", speaking("none"));
    let bare = edge.get("/v").await;
    assert_ne!(
        bare.cache(),
        "HIT",
        "a request without X-Lang matched a stored one with it"
    );
    assert_eq!(bare.text(), "none");
    assert_eq!(origin.requests("/v"), 3);

    origin.set(
        "/star",
        Reply::ok("one")
            .cache_control("max-age=60")
            .header("vary", "*"),
    );
    assert_eq!(edge.get("/star").await.text(), "one");
    origin.set(
        "/star",
        Reply::ok("two")
            .cache_control("max-age=60")
            .header("vary", "*"),
    );
    let again = edge.get("/star").await;
    assert_ne!(again.cache(), "HIT");
    assert_eq!(again.text(), "two");
    assert_eq!(origin.requests("/star"), 2);
}

/// Two Accept-Encoding values with the same meaning (order and `q=1` are not meaning) share
/// one stored response, on a route without `compress`.
#[tokio::test]
async fn s4_1_accept_encoding_normalised() {
    let origin = Origin::start().await;
    let reply = Reply::ok("text ".repeat(200)).header("content-type", "text/plain");
    origin.set(
        "/ae",
        reply
            .cache_control("max-age=60")
            .header("vary", "Accept-Encoding"),
    );
    let edge = Edge::start(&origin, Setup::default()).await;
    let first = edge
        .get_with("/ae", &[("accept-encoding", "gzip, deflate, br")])
        .await;
    assert_eq!(first.cache(), "MISS");
    let second = edge
        .get_with("/ae", &[("accept-encoding", "br,gzip;q=1, deflate")])
        .await;
    assert_eq!(second.cache(), "HIT");
    assert_eq!(second.body, first.body);
    assert_eq!(second.header("content-encoding"), None);
    assert!(
        second
            .header("vary")
            .is_some_and(|v| v.to_ascii_lowercase().contains("accept-encoding"))
    );
    assert_eq!(origin.requests("/ae"), 1);
}
