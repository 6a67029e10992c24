//! A proxy's `strip_prefix` / `replace_prefix`, end to end: the target the upstream receives.
//! Requests are written on a raw socket so that no client library normalises the target: what
//! is asserted is byte for byte what the upstream saw.

use std::net::SocketAddr;

use sluice_testkit::{Offer, TestServer, client, start_toml};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::proxy::serve_fn;

/// An upstream that answers with the request target it received in `x-target`, and its `Host`
/// and `X-Forwarded-Host` in `x-host` and `x-forwarded-host` (headers rather than a body, so
/// that reading them does not depend on the response's framing).
async fn target_upstream() -> SocketAddr {
    let (addr, _) = serve_fn(|req: hyper::Request<hyper::body::Incoming>| async move {
        let mut resp = hyper::Response::builder().header("x-target", req.uri().to_string());
        for name in ["host", "x-forwarded-host"] {
            if let Some(value) = req.headers().get(name) {
                resp = resp.header(format!("x-{}", name.trim_start_matches("x-")), value);
            }
        }
        resp.body(sluice_core::Body::Empty).unwrap()
    })
    .await;
    addr
}

async fn rewriting_proxy() -> TestServer {
    let upstream = target_upstream().await;
    start_toml(&format!(
        r#"
        [log]
        access = "off"
        [[listeners]]
        address = "127.0.0.1:0"
        [upstreams.backend]
        servers = ["{upstream}"]
        # `/api` also matches `/apiary`, which strip_prefix must leave alone.
        [[routes]]
        path_prefix = "/api"
        proxy = {{ upstream = "backend", strip_prefix = "/api" }}
        [[routes]]
        path_prefix = "/v1/"
        proxy = {{ upstream = "backend", strip_prefix = "/v1", replace_prefix = "/v2" }}
        [[routes]]
        path_prefix = "/site/"
        proxy = {{ upstream = "backend", replace_prefix = "/app" }}
        "#
    ))
    .await
}

/// Send `GET target` over a fresh HTTP/1.1 connection; the response head's headers, lowercase.
async fn raw_get(server: &TestServer, target: &str) -> Vec<(String, String)> {
    let mut stream = tokio::net::TcpStream::connect(server.first_addr())
        .await
        .unwrap();
    let request =
        format!("GET {target} HTTP/1.1\r\nHost: site.test:8080\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    let text = String::from_utf8_lossy(&response);
    let (head, _) = text.split_once("\r\n\r\n").unwrap();
    let mut lines = head.lines();
    let status = lines.next().unwrap();
    assert!(status.starts_with("HTTP/1.1 200"), "{target}: {status}");
    lines
        .filter_map(|line| line.split_once(": "))
        .map(|(name, value)| (name.to_ascii_lowercase(), value.to_owned()))
        .collect()
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> &'a str {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
        .unwrap_or_else(|| panic!("no {name}"))
}

async fn forwarded(server: &TestServer, target: &str) -> String {
    header(&raw_get(server, target).await, "x-target").to_owned()
}

#[tokio::test]
async fn the_upstream_sees_the_rewritten_path_and_the_query_as_sent() {
    let server = rewriting_proxy().await;
    let cases = [
        // strip_prefix alone, at segment boundaries only
        ("/api/users?x=1", "/users?x=1"),
        ("/api", "/"),
        ("/api/", "/"),
        ("/api?x=1", "/?x=1"),
        ("/apiary/bees", "/apiary/bees"),
        // the query byte for byte, the path's encoding as received
        ("/api/q?a=1&b=%20x", "/q?a=1&b=%20x"),
        ("/api/a%2Fb/c%20d?", "/a%2Fb/c%20d?"),
        // strip_prefix and replace_prefix
        ("/v1/users?page=2", "/v2/users?page=2"),
        ("/v1/", "/v2/"),
        // replace_prefix alone
        ("/site/index.html", "/app/site/index.html"),
    ];
    for (sent, expected) in cases {
        assert_eq!(forwarded(&server, sent).await, expected, "for {sent}");
    }
}

#[tokio::test]
async fn host_and_forwarding_headers_are_left_alone() {
    let server = rewriting_proxy().await;
    let headers = raw_get(&server, "/api/users").await;
    assert_eq!(header(&headers, "x-target"), "/users");
    assert_eq!(header(&headers, "x-host"), "site.test:8080");
    assert_eq!(header(&headers, "x-forwarded-host"), "site.test:8080");
}

#[tokio::test]
async fn an_http2_request_is_rewritten_too() {
    // HTTP/2 carries the target with an authority (`:authority`); only its path changes.
    let server = rewriting_proxy().await;
    let resp = client(Offer::Http2)
        .get(server.url("/v1/items?id=7"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-target"], "/v2/items?id=7");
    let host = format!("{}", server.first_addr());
    assert_eq!(resp.headers()["x-host"], host.as_str());
}
