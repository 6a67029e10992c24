//! HTTP/3 (RFC 9114) end to end: one TLS listener with `protocols = ["http/1.1", "h2", "h3"]`,
//! driven over QUIC by the Rust client of `sluice_testkit::http3` (quinn + h3) here, by the
//! independent clients in [`independent`] (ngtcp2's `gtlsclient`, aioquic's `http3_client`),
//! and compared with the same requests over HTTP/2.

mod browser;
mod hostile;
mod independent;
mod lifecycle;
mod load;
mod serving;

use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::BodyExt as _;
use sha2::Digest as _;
use sluice_testkit::TestServer;

/// The size of the large static file: big enough for many flow-control windows.
pub const LARGE: usize = 10 * 1024 * 1024;

/// Deterministic, incompressible-looking bytes (a byte-exact comparison catches any reordering).
pub fn large_file() -> Vec<u8> {
    let mut state: u32 = 0x1234_5678;
    (0..LARGE)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state as u8
        })
        .collect()
}

/// An upstream (HTTP/1.1 and h2c) for the proxy routes: `/hash` answers the SHA-256 of the
/// request body (read as it streams) and its length; `/trailers` a body then trailers
/// (`grpc-status: 0`, as gRPC ends); anything else a short text naming the path.
pub async fn upstream() -> SocketAddr {
    let (addr, _) =
        crate::proxy::serve_fn(|req: hyper::Request<hyper::body::Incoming>| async move {
            let path = req.uri().path().to_owned();
            match path.as_str() {
                "/hash" => {
                    let mut body = req.into_body();
                    let mut hash = sha2::Sha256::new();
                    let mut length = 0usize;
                    while let Some(frame) = body.frame().await {
                        let Ok(frame) = frame else { break };
                        if let Ok(data) = frame.into_data() {
                            length += data.len();
                            hash.update(&data);
                        }
                    }
                    let text = format!("{} {length}", hex::encode(hash.finalize()));
                    hyper::Response::new(sluice_core::Body::from(text))
                }
                "/trailers" => {
                    let mut trailers = http::HeaderMap::new();
                    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
                    let frames = vec![
                        Ok::<_, std::io::Error>(hyper::body::Frame::data(Bytes::from_static(
                            b"before the trailers",
                        ))),
                        Ok(hyper::body::Frame::trailers(trailers)),
                    ];
                    let body = http_body_util::StreamBody::new(futures_util::stream::iter(frames));
                    hyper::Response::new(sluice_core::Body::stream(body))
                }
                _ => {
                    let text = format!("upstream saw {path}\n");
                    hyper::Response::builder()
                        .header("content-type", "text/plain")
                        .header("cache-control", "max-age=60")
                        .body(sluice_core::Body::from(text))
                        .unwrap()
                }
            }
        })
        .await;
    addr
}

/// sluice with one TLS listener `site` serving HTTP/1.1, h2 and h3, and an admin listener:
/// static files under `/static/` (`public/large.bin` is [`large_file`]), a compressed JSON-ish
/// page under `/text/`, a cached proxy route under `/cached/`, a proxy under `/up/` (to
/// [`upstream`], over h2c so trailers pass), a rate-limited route, and `extra` listener lines.
pub async fn h3_server(extra: &str) -> TestServer {
    let upstream = upstream().await;
    let dir = tempfile::tempdir().unwrap().keep();
    crate::write_files(
        &dir,
        &[
            ("public/large.bin", &large_file()),
            ("public/page.html", PAGE.as_bytes()),
        ],
    );
    let toml = format!(
        r#"
        [log]
        access = "access.log"
        [admin]
        address = "127.0.0.1:0"
        [[listeners]]
        name = "site"
        address = "127.0.0.1:0"
        tls = "self-signed"
        protocols = ["http/1.1", "h2", "h3"]
        {extra}
        [caches.main]
        memory = "64MiB"
        [[routes]]
        name = "static"
        path_prefix = "/static/"
        static = {{ root = "public", strip_prefix = true }}
        compress = {{}}
        [[routes]]
        name = "limited"
        path = "/limited"
        respond = {{ body = "ok" }}
        rate_limit = {{ requests = 1, per = "1h", burst = 2 }}
        [[routes]]
        name = "cached"
        path_prefix = "/cached/"
        proxy = {{ upstream = "backend" }}
        compress = {{}}
        cache = {{ zone = "main" }}
        [[routes]]
        name = "up"
        path_prefix = "/up/"
        proxy = {{ upstream = "backend", strip_prefix = "/up" }}
        [upstreams.backend]
        servers = ["{upstream}"]
        http2 = true
        "#
    );
    sluice_testkit::start_toml_in(&dir, &toml).await
}

/// About 60 KB of HTML that compresses well.
pub static PAGE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    (0..800)
        .map(|i| format!("<p class=\"row-{i}\">Paragraph {i}: sluice speaks HTTP/3.</p>\n"))
        .collect()
});

/// The SHA-256 of `bytes`, in hex.
pub fn sha256(bytes: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(bytes))
}
