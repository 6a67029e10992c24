//! `response_headers` on any route and `max_age` on static routes: the cache headers browsers
//! need to keep a dictionary, and nginx's `add_header` / `expires` in sluice's words.

use super::*;

#[tokio::test]
async fn response_headers_and_max_age_reach_the_client_on_success_only() {
    let temp = tempfile::tempdir().unwrap();
    write_files(
        temp.path(),
        &[("public/a.css", b"body{}"), ("public/b.js", b"x")],
    );
    let server = start_toml_in(
        temp.path(),
        r#"
        [[listeners]]
        address = "127.0.0.1:0"
        [[routes]]
        path_prefix = "/static/"
        static = { root = "public", strip_prefix = true, max_age = "7d" }
        response_headers = { add = { link = "</static/a.css>; rel=preload" }, remove = ["x-unknown"] }
        [[routes]]
        path = "/hello"
        respond = { status = 200, body = "hi", headers = { "x-powered-by" = "sluice", "cache-control" = "no-cache" } }
        response_headers = { set = { "cache-control" = "max-age=60", "x-frame-options" = "DENY" }, remove = ["x-powered-by"] }
        [[routes]]
        path = "/gone"
        respond = { status = 410, body = "gone" }
        response_headers = { set = { "cache-control" = "max-age=5" }, always = true }
        [[routes]]
        path = "/missing"
        respond = { status = 404, body = "no" }
        response_headers = { set = { "cache-control" = "max-age=5" } }
        "#,
    )
    .await;
    let (status, h, _) = get(&server.url("/static/a.css"), &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(h["cache-control"], "max-age=604800");
    assert_eq!(h["link"], "</static/a.css>; rel=preload");
    // A 304 carries the lifetime too (RFC 9111 §4.3.4 updates the stored one from it).
    let etag = h["etag"].to_str().unwrap().to_owned();
    let (status, h304, _) = get(&server.url("/static/a.css"), &[("if-none-match", &etag)]).await;
    assert_eq!(status, StatusCode::NOT_MODIFIED);
    assert_eq!(h304["cache-control"], "max-age=604800");
    // A 404 of the static route gets neither (nginx's list of statuses).
    let (status, h404, _) = get(&server.url("/static/nope.css"), &[]).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        !h404.contains_key("cache-control") && !h404.contains_key("link"),
        "{h404:?}"
    );

    let (_, h, body) = get(&server.url("/hello"), &[]).await;
    assert_eq!(body, b"hi");
    assert_eq!(h["cache-control"], "max-age=60", "set replaces");
    assert_eq!(h["x-frame-options"], "DENY");
    assert!(!h.contains_key("x-powered-by"));
    let (status, h, _) = get(&server.url("/gone"), &[]).await;
    assert_eq!(
        (status, h["cache-control"].to_str().unwrap()),
        (StatusCode::GONE, "max-age=5")
    );
    let (status, h, _) = get(&server.url("/missing"), &[]).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        !h.contains_key("cache-control"),
        "without `always`, not on a 404"
    );
}
