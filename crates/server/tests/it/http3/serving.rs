//! Everything sluice does, over HTTP/3 with the Rust client: the same routes, bytes, codings,
//! cache statuses, rate limits, access log and metrics as over TCP.

use std::sync::Arc;

use bytes::Bytes;
use sluice_testkit::http3::H3Client;
use sluice_testkit::{Offer, tls_client};

use super::{LARGE, h3_server, large_file, sha256};

#[tokio::test]
async fn a_static_file_proxy_and_alt_svc_over_h3() {
    let server = h3_server("").await;
    let addr = server.addr("site");
    let h3 = H3Client::connect(addr).await;

    let resp = h3.get("/static/large.bin").await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.head.version(), http::Version::HTTP_3);
    assert_eq!(resp.body.len(), LARGE);
    assert!(resp.body == large_file(), "10 MB file differs over h3");
    assert!(resp.header("date").is_some(), "RFC 9110 §6.6.1: Date");

    let resp = h3.get("/up/hello").await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.body, b"upstream saw /hello\n");

    // RFC 7838 §3: the TCP side advertises the UDP port, which is the same.
    let url = format!("https://localhost:{}/up/x", addr.port());
    let over_h2 = tls_client(Offer::Both).get(&url).send().await.unwrap();
    assert_eq!(over_h2.version(), http::Version::HTTP_2);
    let alt_svc = over_h2.headers()["alt-svc"].to_str().unwrap().to_owned();
    assert_eq!(alt_svc, format!("h3=\":{}\"; ma=86400", addr.port()));
    // Not on the h3 side: the client is there already.
    let resp = h3.get("/up/x").await;
    assert!(resp.header("alt-svc").is_none());
}

#[tokio::test]
async fn a_post_streams_through_the_proxy_and_trailers_come_back() {
    let server = h3_server("").await;
    let h3 = H3Client::connect(server.addr("site")).await;
    let body: Vec<u8> = (0..1024 * 1024).map(|i| (i % 251) as u8).collect();
    let req = http::Request::post(h3.url("/up/hash"))
        .header("content-type", "application/octet-stream")
        .body(())
        .unwrap();
    let resp = h3
        .request(req, Some(Bytes::from(body.clone())), None)
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let text = String::from_utf8(resp.body).unwrap();
    assert_eq!(text, format!("{} {}", sha256(&body), body.len()));

    // Without a Content-Length: the upload streams (chunked to the upstream).
    let req = http::Request::post(h3.url("/up/hash")).body(()).unwrap();
    let resp = h3
        .request(req, Some(Bytes::from(body.clone())), None)
        .await
        .unwrap();
    assert_eq!(
        String::from_utf8(resp.body).unwrap(),
        format!("{} {}", sha256(&body), body.len())
    );

    let req = http::Request::post(h3.url("/up/trailers"))
        .header("te", "trailers")
        .body(())
        .unwrap();
    let resp = h3.request(req, None, None).await.unwrap();
    assert_eq!(resp.body, b"before the trailers");
    let trailers = resp.trailers.expect("trailers over h3");
    assert_eq!(trailers["grpc-status"], "0");
}

#[tokio::test]
async fn compression_cache_and_rate_limits_behave_as_over_h2() {
    let server = h3_server("").await;
    let addr = server.addr("site");
    let h3 = H3Client::connect(addr).await;
    let h2 = tls_client(Offer::Http2);
    let url = |path: &str| format!("https://localhost:{}{path}", addr.port());

    for coding in ["gzip", "br", "zstd"] {
        let req = http::Request::get(h3.url("/static/page.html"))
            .header("accept-encoding", coding)
            .body(())
            .unwrap();
        let resp = h3.request(req, None, None).await.unwrap();
        assert_eq!(resp.header("content-encoding"), Some(coding));
        let decoded = sluice_testkit::independent::decode(coding, &resp.body);
        assert_eq!(decoded, super::PAGE.as_bytes(), "{coding}");
        let over_h2 = h2
            .get(url("/static/page.html"))
            .header("accept-encoding", coding)
            .send()
            .await
            .unwrap();
        assert_eq!(over_h2.headers()["content-encoding"], coding);
    }

    // The cache: a MISS then HITs, with the same bytes as over h2.
    let first = h3.get("/cached/c").await;
    assert_eq!(first.header("x-cache-status"), Some("MISS"));
    let hit = h3.get("/cached/c").await;
    assert_eq!(hit.header("x-cache-status"), Some("HIT"));
    let over_h2 = h2.get(url("/cached/c")).send().await.unwrap();
    assert_eq!(over_h2.headers()["x-cache-status"], "HIT");
    assert_eq!(
        over_h2.bytes().await.unwrap(),
        Bytes::from(hit.body.clone())
    );
    assert_eq!(hit.body, first.body);

    // Burst 2, then 429 with Retry-After.
    let statuses: Vec<u16> = futures_util::future::join_all(
        (0..3).map(|_| async { h3.get("/limited").await.status().as_u16() }),
    )
    .await;
    let mut sorted = statuses.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, [200, 200, 429], "{statuses:?}");
}

#[tokio::test]
async fn a_hundred_concurrent_streams_on_one_connection_all_complete() {
    let server = h3_server("").await;
    let h3 = Arc::new(H3Client::connect(server.addr("site")).await);
    let authority = h3.url("");
    let tasks: Vec<_> = (0..100)
        .map(|i| {
            let mut sender = h3.sender();
            let authority = authority.clone();
            tokio::spawn(async move {
                let req = http::Request::get(format!("{authority}/up/s{i}"))
                    .body(())
                    .unwrap();
                sluice_testkit::http3::send(&mut sender, req, None, None)
                    .await
                    .unwrap()
            })
        })
        .collect();
    for (i, task) in tasks.into_iter().enumerate() {
        let resp = task.await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.body, format!("upstream saw /s{i}\n").as_bytes());
    }
}

#[tokio::test]
async fn the_access_log_says_http_3_and_metrics_count_requests_by_protocol() {
    let server = h3_server("").await;
    let addr = server.addr("site");
    let h3 = H3Client::connect(addr).await;
    assert_eq!(h3.get("/up/logged").await.status(), 200);
    let h2 = tls_client(Offer::Http2);
    let url = format!("https://localhost:{}/up/logged", addr.port());
    assert_eq!(h2.get(&url).send().await.unwrap().status(), 200);
    let text = crate::scrape_metrics(&server).await;
    let h3_count = crate::metric(
        &text,
        "sluice_protocol_requests_total{listener=\"site\",protocol=\"h3\"}",
    );
    let h2_count = crate::metric(
        &text,
        "sluice_protocol_requests_total{listener=\"site\",protocol=\"h2\"}",
    );
    assert_eq!((h3_count, h2_count), (1.0, 1.0), "{text}");
    // The access log is written off the request path: wait for both lines.
    let log = server.dir.join("access.log");
    let text = crate::lifecycle::wait_for_lines(&log, 2).await;
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("/up/logged HTTP/3.0\" 200")),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("/up/logged HTTP/2.0\" 200")),
        "{lines:?}"
    );
}
