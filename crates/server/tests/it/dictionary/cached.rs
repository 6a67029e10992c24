//! Managed and automatic dictionaries on a cached proxy route: the cache offers stored
//! responses as dictionaries and serves deltas of them, made once per (version, coding,
//! dictionary) whatever the number of clients, and a MISS that is small enough is offered too
//! (it is stored before it is served in another coding).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::proxy::serve_fn;

#[tokio::test]
async fn a_cached_proxy_route_offers_dictionaries_and_serves_stored_deltas() {
    let (v1, v2) = (bundle(21, 1), bundle(21, 2));
    let origin_requests = Arc::new(AtomicUsize::new(0));
    let counted = origin_requests.clone();
    let (bodies1, bodies2) = (v1.clone(), v2.clone());
    let (origin, _) = serve_fn(move |req| {
        counted.fetch_add(1, Ordering::SeqCst);
        let body = match req.uri().path() {
            "/js/app-1.0.0.js" => bodies1.clone(),
            "/js/app-1.0.1.js" => bodies2.clone(),
            _ => b"not found".to_vec(),
        };
        async move {
            hyper::Response::builder()
                .header("content-type", "text/javascript")
                .header("cache-control", "max-age=600")
                .body(sluice_core::Body::full(bytes::Bytes::from(body)))
                .unwrap()
        }
    })
    .await;
    let temp = tempfile::tempdir().unwrap();
    let server = start_toml_in(
        temp.path(),
        &format!(
            r#"
            [log]
            access = "access.log"
            format = "json"
            [admin]
            address = "127.0.0.1:0"
            [caches.c]
            memory = "16MiB"
            [[listeners]]
            address = "127.0.0.1:0"
            [[routes]]
            name = "assets"
            proxy = {{ to = "{origin}" }}
            cache = {{ zone = "c" }}
            compress = {{}}
            dictionary = "auto"
            "#
        ),
    )
    .await;
    let chrome = [("accept-encoding", CHROME_ACCEPT)];
    let (_, h1, _) = get(&server.url("/js/app-1.0.0.js"), &chrome).await;
    assert_eq!(h1["x-cache-status"], "MISS");
    assert_eq!(h1["use-as-dictionary"], r#"match="/js/app-*.js""#, "{h1:?}");
    assert!(varies_on(&h1, "available-dictionary"));
    let (_, again, _) = get(&server.url("/js/app-1.0.0.js"), &chrome).await;
    assert_eq!(again["x-cache-status"], "HIT");
    assert_eq!(again["use-as-dictionary"], r#"match="/js/app-*.js""#);

    let hash = available(&v1);
    let with_dict = [
        ("accept-encoding", CHROME_ACCEPT),
        ("available-dictionary", hash.as_str()),
    ];
    let url = server.url("/js/app-1.0.1.js");
    let mut replies = Vec::new();
    for _ in 0..5 {
        let burst = (0..40).map(|_| get(&url, &with_dict));
        replies.extend(futures_util::future::join_all(burst).await);
    }
    for (i, (status, h, body)) in replies.iter().enumerate() {
        assert_eq!(*status, StatusCode::OK, "#{i}");
        assert_eq!(h["content-encoding"], "dcz", "#{i}: {h:?}");
        assert_eq!(h["content-length"], body.len().to_string().as_str(), "#{i}");
        assert!(varies_on(h, "available-dictionary") && varies_on(h, "accept-encoding"));
        assert!(decode_dcz(body, &v1) == v2, "#{i}");
    }
    if let Some(decoded) = zstd_cli(&replies[0].2, &v1) {
        assert!(decoded.unwrap() == v2);
    }
    // Two origin requests (one per release), one delta for 200 clients.
    assert_eq!(origin_requests.load(Ordering::SeqCst), 2);
    assert_eq!(
        counter(
            &server,
            "sluice_dictionary_deltas_made_total",
            ",coding=\"dcz\""
        )
        .await,
        1.0
    );
    assert_eq!(
        counter(&server, "sluice_dictionary_hits_total", ",coding=\"dcz\"").await,
        200.0
    );
    // The access log names the delta's coding, as for static files.
    let log = crate::lifecycle::wait_for_lines(&temp.path().join("access.log"), 202).await;
    assert!(
        log.lines()
            .filter(|l| l.contains("app-1.0.1.js"))
            .all(|l| l.contains("\"encoding\":\"dcz\"")),
        "{log}"
    );
    // A client without the dictionary gets the stored br variant, never the delta.
    let (_, plain, body) = get(&url, &[("accept-encoding", "gzip, br")]).await;
    assert_eq!(plain["content-encoding"], "br");
    assert!(sluice_testkit::independent::decode("br", &body) == v2);
}
