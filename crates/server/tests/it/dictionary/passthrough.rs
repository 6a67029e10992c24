//! Passthrough: an origin that does RFC 9842 itself keeps working through a caching,
//! compressing route; its `dcz` is stored keyed by `Available-Dictionary` (its `Vary`) and is
//! never sent to a client without the dictionary or without `dcz` in `Accept-Encoding`.

use std::sync::atomic::Ordering;

use super::*;
use crate::proxy::serve_fn;

/// The origin's own "delta": fixed bytes that only a client holding `DICT` could use.
const DCZ_BODY: &[u8] = b"\x5e\x2a\x4d\x18\x20\x00\x00\x00origin-made delta bytes";
const PLAIN: &str = "plain body of the resource, long enough to be compressed by sluice: ";

#[tokio::test]
async fn an_origins_own_dcz_passes_and_reaches_only_clients_with_the_dictionary() {
    let dict_hash = available(b"the origin's dictionary");
    let expected = dict_hash.clone();
    let (origin, _) = serve_fn(move |req| {
        let expected = expected.clone();
        async move {
            let lists_dcz = req
                .headers()
                .get("accept-encoding")
                .is_some_and(|v| v.to_str().unwrap().split(',').any(|t| t.trim() == "dcz"));
            let has_dict = req
                .headers()
                .get("available-dictionary")
                .is_some_and(|v| v.to_str().unwrap() == expected);
            let mut resp = hyper::Response::builder()
                .header("content-type", "application/javascript")
                .header("cache-control", "max-age=60")
                .header("vary", "accept-encoding, available-dictionary");
            let body = if lists_dcz && has_dict {
                resp = resp.header("content-encoding", "dcz");
                sluice_core::Body::full(bytes::Bytes::from_static(DCZ_BODY))
            } else {
                sluice_core::Body::full(bytes::Bytes::from(PLAIN.repeat(50)))
            };
            resp.body(body).unwrap()
        }
    })
    .await;
    let temp = tempfile::tempdir().unwrap();
    let server = start_toml_in(
        temp.path(),
        &format!(
            r#"
            [caches.c]
            memory = "16MiB"
            [[listeners]]
            address = "127.0.0.1:0"
            [[routes]]
            proxy = {{ to = "{origin}" }}
            cache = {{ zone = "c" }}
            compress = {{}}
            "#
        ),
    )
    .await;
    let url = server.url("/app.js");
    let with_dict = [
        ("accept-encoding", CHROME_ACCEPT),
        ("available-dictionary", dict_hash.as_str()),
    ];
    for round in ["MISS", "HIT"] {
        let (_, h, body) = get(&url, &with_dict).await;
        assert_eq!(h["content-encoding"], "dcz", "{round}");
        assert_eq!(h["x-cache-status"], round);
        assert_eq!(body, DCZ_BODY, "{round}: passed unchanged");
    }
    // Without the dictionary, with another one, or without `dcz` listed: never the delta,
    // however often asked (some of these are stored by now, and served from storage).
    let other = available(b"another dictionary");
    let cases: [&[(&str, &str)]; 4] = [
        &[("accept-encoding", CHROME_ACCEPT)],
        &[
            ("accept-encoding", CHROME_ACCEPT),
            ("available-dictionary", other.as_str()),
        ],
        &[
            ("accept-encoding", "gzip, br, zstd"),
            ("available-dictionary", dict_hash.as_str()),
        ],
        &[("available-dictionary", dict_hash.as_str())],
    ];
    for headers in cases {
        for _ in 0..3 {
            let (status, h, body) = get(&url, headers).await;
            assert_eq!(status, StatusCode::OK);
            let coding = h
                .get("content-encoding")
                .map(|v| v.to_str().unwrap().to_owned());
            assert_ne!(coding.as_deref(), Some("dcz"), "{headers:?}: {h:?}");
            assert!(body != DCZ_BODY, "{headers:?}");
        }
    }
    let _ = Ordering::SeqCst;
}
