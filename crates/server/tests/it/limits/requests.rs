//! Request limits at their boundaries: target length (414), header count and size (431),
//! stacked content codings (415), body size by Content-Length and while streaming (413), and
//! the whole body's time (408).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use sluice_testkit::{Offer, client, raw_exchange, start_toml};

use super::metric;
use crate::proxy::serve_fn;

const RESPOND: &str = r#"
[log]
access = "off"
[admin]
address = "127.0.0.1:0"
[[listeners]]
name = "main"
address = "127.0.0.1:0"
max_uri_length = 1024
max_headers = 10
max_header_size = "16KiB"
[[routes]]
respond = { body = "ok" }
"#;

async fn status_of(addr: std::net::SocketAddr, request: &str) -> String {
    let reply = raw_exchange(addr, request.as_bytes(), 1 << 16).await;
    String::from_utf8_lossy(&reply)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn the_target_may_be_max_uri_length_bytes_long_and_no_longer() {
    let server = start_toml(RESPOND).await;
    let http = client(Offer::Http1);
    // Path and query together: 1024 bytes pass, 1025 get 414 (RFC 9110 §15.5.15).
    let at_limit = format!("/{}?q={}", "a".repeat(1000), "b".repeat(20));
    assert_eq!(at_limit.len(), 1024);
    let resp = http.get(server.url(&at_limit)).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let over = format!("{at_limit}c");
    let resp = http.get(server.url(&over)).send().await.unwrap();
    assert_eq!(resp.status(), 414);
    let admin = server.running().admin_address().unwrap();
    let page = http
        .get(format!("http://{admin}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let labels = [("listener", "main"), ("limit", "uri_length")];
    assert_eq!(
        metric(&page, "sluice_request_limit_exceeded_total", &labels),
        Some(1.0)
    );
}

#[tokio::test]
async fn max_headers_headers_pass_and_one_more_gets_431() {
    let server = start_toml(RESPOND).await;
    let request = |headers: usize| {
        // Host is one of them.
        let mut text = "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n".to_owned();
        for i in 2..headers {
            text.push_str(&format!("X-H{i}: v\r\n"));
        }
        text + "\r\n"
    };
    let addr = server.first_addr();
    assert_eq!(status_of(addr, &request(10)).await, "HTTP/1.1 200 OK");
    assert!(
        status_of(addr, &request(11))
            .await
            .starts_with("HTTP/1.1 431"),
        "11 headers over max_headers = 10"
    );
}

#[tokio::test]
async fn a_header_block_of_max_header_size_passes_and_a_larger_one_gets_431() {
    let server = start_toml(RESPOND).await;
    let request = |size: usize| {
        let start = "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Big: ";
        let fill = size - start.len() - 4;
        format!("{start}{}\r\n\r\n", "a".repeat(fill))
    };
    let addr = server.first_addr();
    // The whole head, request line included, against max_header_size = 16 KiB.
    assert_eq!(request(16 * 1024).len(), 16 * 1024);
    assert_eq!(
        status_of(addr, &request(16 * 1024 - 1)).await,
        "HTTP/1.1 200 OK"
    );
    assert!(
        status_of(addr, &request(16 * 1024 + 1))
            .await
            .starts_with("HTTP/1.1 431")
    );
}

#[tokio::test]
async fn two_stacked_codings_pass_and_three_get_415() {
    let server = start_toml(RESPOND).await;
    let http = client(Offer::Http1);
    let post = |coding: &'static str| {
        http.post(server.url("/"))
            .header("content-encoding", coding)
            .body("x")
            .send()
    };
    assert_eq!(post("gzip, gzip").await.unwrap().status(), 200);
    // RFC 9110 §15.5.16: the content's coding is refused.
    assert_eq!(post("gzip, gzip, gzip").await.unwrap().status(), 415);
    assert_eq!(post("gzip, br, zstd, gzip").await.unwrap().status(), 415);
}

/// A proxy route with `max_body_size = 1000` in front of an upstream that counts the requests
/// it gets and answers with the body length it read.
async fn body_limited(option: &str) -> (sluice_testkit::TestServer, Arc<AtomicUsize>) {
    let requests = Arc::new(AtomicUsize::new(0));
    let seen = requests.clone();
    let (addr, _) = serve_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let seen = seen.clone();
        async move {
            use http_body_util::BodyExt;
            seen.fetch_add(1, Ordering::SeqCst);
            let body = req.into_body().collect().await.map(|b| b.to_bytes().len());
            hyper::Response::new(sluice_core::Body::from(format!("{body:?}")))
        }
    })
    .await;
    let server = start_toml(&format!(
        "[log]\naccess = \"off\"\n[[listeners]]\naddress = \"127.0.0.1:0\"\n[[routes]]\nmax_body_size = 1000\n{option}\nproxy = {{ to = \"{addr}\" }}\n"
    ))
    .await;
    (server, requests)
}

#[tokio::test]
async fn a_content_length_over_max_body_size_gets_413_before_the_upstream_is_asked() {
    let (server, requests) = body_limited("").await;
    // Declared 1001 bytes, none sent: the answer comes from the head alone, and closes.
    let reply = raw_exchange(
        server.first_addr(),
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1001\r\n\r\n",
        1 << 16,
    )
    .await;
    let reply = String::from_utf8_lossy(&reply).to_lowercase();
    assert!(reply.starts_with("http/1.1 413"), "{reply}");
    assert!(reply.contains("connection: close"), "{reply}");
    assert_eq!(requests.load(Ordering::SeqCst), 0, "the upstream was asked");

    let http = client(Offer::Http1);
    let resp = http
        .post(server.url("/"))
        .body(vec![b'x'; 1000])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().await.unwrap(), "Ok(1000)");
}

#[tokio::test]
async fn a_chunked_body_is_counted_while_it_streams() {
    let (server, _) = body_limited("").await;
    let http = client(Offer::Http1);
    let chunked = |n: usize| {
        // A stream body has no length: reqwest sends it chunked.
        let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
            (0..n).map(|_| Ok(vec![b'x'; 1])).collect();
        reqwest::Body::wrap_stream(futures_util::stream::iter(chunks))
    };
    let resp = http
        .post(server.url("/"))
        .body(chunked(1000))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().await.unwrap(), "Ok(1000)");
    let resp = http
        .post(server.url("/"))
        .body(chunked(1001))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 413);
}

#[tokio::test]
async fn a_body_slower_than_body_timeout_gets_408() {
    let (server, _) = body_limited("body_timeout = \"300ms\"").await;
    // Promise 100 bytes, send 10, then nothing; the upstream's idle timeout (60s) is far off.
    let started = Instant::now();
    let reply = sluice_testkit::raw_exchange_open(
        server.first_addr(),
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789",
        1 << 16,
    )
    .await;
    let reply = String::from_utf8_lossy(&reply).into_owned();
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    // A body that arrives in time passes.
    let resp = client(Offer::Http1)
        .post(server.url("/"))
        .body(vec![b'x'; 100])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
}
