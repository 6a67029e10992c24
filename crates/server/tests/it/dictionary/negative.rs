//! Requests that must not get a dictionary delta get the route's normal coding, and still say
//! `Vary: Available-Dictionary` (RFC 9842 §6.2, §9.3).

use super::*;

/// A path, extra request headers, and why the request must get the normal coding.
type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str);

/// v1 and v2 of `app.*.js` plus `other.2.js` (not covered by the pattern) on a managed route
/// reached as `a.test` and `b.test`; v1 fetched from `a.test` so it is kept for that origin.
async fn setup(dir: &Path) -> (TestServer, Vec<u8>) {
    let (v1, v2) = (bundle(6, 1), bundle(6, 2));
    write_files(
        dir,
        &[
            ("public/app.1.js", &v1),
            ("public/app.2.js", &v2),
            ("public/other.2.js", &v2),
        ],
    );
    let server =
        dictionary_server(dir, r#"{ match = "/app.*.js", match_dest = ["script"] }"#).await;
    let (_, h, _) = get(
        &server.url("/app.1.js"),
        &[("accept-encoding", CHROME_ACCEPT), ("host", "a.test")],
    )
    .await;
    assert_eq!(
        h["use-as-dictionary"],
        r#"match="/app.*.js", match-dest=("script")"#
    );
    (server, v1)
}

/// GET `path` with v1 as the dictionary plus `extra`; asserts a normal coding came back.
async fn assert_normal(
    server: &TestServer,
    v1: &[u8],
    path: &str,
    extra: &[(&str, &str)],
    why: &str,
) {
    let hash = available(v1);
    let mut headers = vec![
        ("accept-encoding", CHROME_ACCEPT),
        ("available-dictionary", hash.as_str()),
        ("host", "a.test"),
    ];
    for (name, value) in extra {
        headers.retain(|(n, _)| n != name);
        headers.push((name, value));
    }
    let (status, h, _) = get(&server.url(path), &headers).await;
    assert_eq!(status, StatusCode::OK, "{why}");
    let coding = h
        .get("content-encoding")
        .map(|v| v.to_str().unwrap().to_owned());
    assert!(
        matches!(coding.as_deref(), Some("zstd" | "br" | "gzip") | None),
        "{why}: {coding:?}"
    );
    assert!(varies_on(&h, "available-dictionary"), "{why}: {h:?}");
}

#[tokio::test]
async fn requests_that_must_not_get_a_delta_get_the_normal_coding() {
    let temp = tempfile::tempdir().unwrap();
    let (server, v1) = setup(temp.path()).await;
    // The control: the same request as a script gets dcz.
    let hash = available(&v1);
    let (_, h, _) = get(
        &server.url("/app.2.js"),
        &[
            ("accept-encoding", CHROME_ACCEPT),
            ("available-dictionary", hash.as_str()),
            ("host", "a.test"),
            ("sec-fetch-dest", "script"),
            ("sec-fetch-mode", "no-cors"),
            ("sec-fetch-site", "same-origin"),
        ],
    )
    .await;
    assert_eq!(h["content-encoding"], "dcz", "control");

    let cases: [Case<'_>; 9] = [
        (
            "/app.2.js",
            &[
                ("sec-fetch-site", "cross-site"),
                ("sec-fetch-mode", "no-cors"),
            ],
            "cross-site no-cors (RFC 9842 §9.3.2)",
        ),
        (
            "/app.2.js",
            &[
                ("sec-fetch-site", "cross-site"),
                ("sec-fetch-mode", "cors"),
                ("origin", "https://evil.test"),
            ],
            "cross-site cors without Access-Control-Allow-Origin",
        ),
        (
            "/app.2.js",
            &[("host", "b.test")],
            "a dictionary from another origin",
        ),
        ("/other.2.js", &[], "a match that does not cover the URL"),
        (
            "/app.2.js",
            &[("sec-fetch-dest", "style")],
            "a destination the dictionary is not for",
        ),
        (
            "/app.2.js",
            &[("accept-encoding", "gzip, br, zstd")],
            "a client that does not list dcb/dcz",
        ),
        (
            "/app.2.js",
            &[("accept-encoding", "gzip, br, zstd, *")],
            "`*` is not a listing",
        ),
        (
            "/app.2.js",
            &[(
                "available-dictionary",
                ":AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=:",
            )],
            "a dictionary sluice does not hold",
        ),
        (
            "/app.2.js",
            &[("available-dictionary", "not-a-byte-sequence")],
            "a malformed field",
        ),
    ];
    for (path, extra, why) in cases {
        assert_normal(&server, &v1, path, extra, why).await;
    }
    assert_eq!(
        counter(&server, "sluice_dictionary_hits_total", ",coding=\"dcz\"").await,
        1.0,
        "only the control"
    );
}
