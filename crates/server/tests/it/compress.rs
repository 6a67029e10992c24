//! Response compression end to end: negotiation from mixed q-values, bodies decoded by decoders
//! that are not sluice's encoders ([`sluice_testkit::independent`]: the reference C brotli, ruzstd,
//! miniz_oxide), every reason to leave a response alone, HEAD, 304 and ETags,
//! streaming (one stream, flushed while the upstream is still sending), server-sent events,
//! metrics and the access log. [`variants`]: static files compressed once per coding; [`cpu`]:
//! CPU-adaptive compression (`max_cpu`).

use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Response, StatusCode};
use sha2::Digest;
use sluice_core::Body;
use sluice_testkit::independent;
use sluice_testkit::{Offer, TestServer, client, start_toml, start_toml_in};
use tokio::sync::oneshot;

use crate::proxy::serve_fn;
use crate::write_files;

mod cpu;
mod variants;

/// Upper bound for anything that should take milliseconds; only reached when a test fails.
const FAILURE_BOUND: Duration = Duration::from_secs(60);

/// About 60 KB of HTML that compresses like a real page.
fn page() -> Vec<u8> {
    let mut html = b"<!doctype html><html><body>\n".to_vec();
    for i in 0..600 {
        writeln!(
            html,
            "<p class=\"row-{}\">Paragraph {i}: sluice compresses responses once per stream.</p>",
            i % 7
        )
        .unwrap();
    }
    html.extend_from_slice(b"</body></html>\n");
    html
}

fn public_files() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("public/page.html", page()),
        ("public/small.txt", b"too small to bother".to_vec()),
        ("public/logo.png", page()),
    ]
}

/// A static route over `public/` with `compress` set to `option`, JSON access log in
/// `access.log`, an admin listener.
async fn static_server(dir: &std::path::Path, option: &str) -> TestServer {
    for (name, data) in public_files() {
        write_files(dir, &[(name, &data)]);
    }
    start_toml_in(
        dir,
        &format!(
            r#"
            [log]
            access = "access.log"
            format = "json"
            [admin]
            address = "127.0.0.1:0"
            [[listeners]]
            address = "127.0.0.1:0"
            [[routes]]
            name = "files"
            # "0s": an edited file is served by the next request (compress/variants.rs).
            static = {{ root = "public", memory_cache_recheck = "0s" }}
            compress = {option}
            "#
        ),
    )
    .await
}

async fn proxy_server(upstream: SocketAddr, option: &str) -> TestServer {
    start_toml(&format!(
        r#"
        [log]
        access = "off"
        [[listeners]]
        address = "127.0.0.1:0"
        [[routes]]
        name = "api"
        proxy = {{ to = "{upstream}" }}
        compress = {option}
        "#
    ))
    .await
}

/// 20 KB of plain text.
fn text() -> Bytes {
    Bytes::from("plain text that an upstream sends uncompressed; ".repeat(400))
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

/// An upstream for the proxy cases: `/text` (with Content-Length), `/no-transform`,
/// `/encoded` (gzip already), `/image`.
async fn fixture_upstream() -> SocketAddr {
    let (addr, _) = serve_fn(|req: hyper::Request<hyper::body::Incoming>| async move {
        let (content_type, extra, body) = match req.uri().path() {
            "/no-transform" => (
                "text/plain",
                Some(("cache-control", "public, no-transform")),
                text().to_vec(),
            ),
            "/encoded" => (
                "text/plain",
                Some(("content-encoding", "gzip")),
                gzip(&text()),
            ),
            "/image" => ("image/png", None, text().to_vec()),
            _ => ("text/plain", None, text().to_vec()),
        };
        let mut builder = Response::builder()
            .header("content-type", content_type)
            .header("content-length", body.len());
        if let Some((name, value)) = extra {
            builder = builder.header(name, value);
        }
        builder.body(Body::from(body)).unwrap()
    })
    .await;
    addr
}

async fn get(url: &str, headers: &[(&str, &str)]) -> (StatusCode, HeaderMap, Vec<u8>) {
    let mut req = client(Offer::Http1).get(url);
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let resp = req.send().await.unwrap();
    let (status, headers) = (resp.status(), resp.headers().clone());
    (status, headers, resp.bytes().await.unwrap().to_vec())
}

fn has_vary(headers: &HeaderMap) -> bool {
    headers
        .get_all("vary")
        .iter()
        .any(|v| v.to_str().unwrap().eq_ignore_ascii_case("accept-encoding"))
}

/// The three codings, each picked from mixed q-values.
const CODINGS: [(&str, &str); 3] = [
    ("gzip;q=0.9, br;q=0.5, zstd;q=0.1", "gzip"),
    ("gzip;q=0.5, br;q=0.9, zstd;q=0.1", "br"),
    ("gzip;q=0.5, br;q=0.5, zstd;q=1", "zstd"),
];

/// Each coding from mixed q-values, decoded independently. `stored`: the response is a static
/// file's variant, whose length is known (else it is streamed, chunked).
async fn check_codings(url: &str, original: &[u8], stored: bool) {
    for (accept, coding) in CODINGS {
        let (status, headers, body) = get(url, &[("accept-encoding", accept)]).await;
        assert_eq!(status, 200);
        assert_eq!(headers["content-encoding"], coding, "{accept}");
        assert!(has_vary(&headers), "{headers:?}");
        let length = headers.get("content-length").map(|v| v.to_str().unwrap());
        let expected = body.len().to_string();
        assert_eq!(length, stored.then_some(expected.as_str()), "{headers:?}");
        assert!(!headers.contains_key("accept-ranges"), "{headers:?}");
        assert!(
            body.len() < original.len() / 3,
            "{coding}: {} bytes",
            body.len()
        );
        let decoded = independent::decode(coding, &body);
        assert!(decoded == original, "{coding}: decoded body differs");
    }
}

#[tokio::test]
async fn each_coding_is_negotiated_and_decodes_independently_from_static_files() {
    let temp = tempfile::tempdir().unwrap();
    let server = static_server(temp.path(), "{}").await;
    check_codings(&server.url("/page.html"), &page(), true).await;
}

#[tokio::test]
async fn each_coding_is_negotiated_and_decodes_independently_through_the_proxy() {
    let upstream = fixture_upstream().await;
    let server = proxy_server(upstream, "{}").await;
    check_codings(&server.url("/text"), &text(), false).await;
}

#[tokio::test]
async fn responses_that_must_not_be_compressed_are_left_alone() {
    let temp = tempfile::tempdir().unwrap();
    let files = static_server(temp.path(), "{}").await;
    let upstream = fixture_upstream().await;
    let proxy = proxy_server(upstream, "{}").await;
    let page = page();
    let gz = [("accept-encoding", "gzip")];

    // Identity refused and nothing else named: identity anyway (as nginx), with Vary.
    for accept in [None, Some("identity;q=0")] {
        let headers: Vec<(&str, &str)> =
            accept.map(|a| ("accept-encoding", a)).into_iter().collect();
        let (status, h, body) = get(&files.url("/page.html"), &headers).await;
        assert_eq!(
            (status, body.len()),
            (StatusCode::OK, page.len()),
            "{accept:?}"
        );
        assert!(
            !h.contains_key("content-encoding") && has_vary(&h),
            "{accept:?}: {h:?}"
        );
        assert_eq!(h["content-length"], page.len().to_string().as_str());
    }
    // `*` with identity refused: the server's first choice.
    let (_, h, _) = get(
        &files.url("/page.html"),
        &[("accept-encoding", "*;q=0.5, identity;q=0")],
    )
    .await;
    assert_eq!(h["content-encoding"], "zstd");

    let (_, h, body) = get(&files.url("/small.txt"), &gz).await;
    assert_eq!(body, b"too small to bother");
    assert!(!h.contains_key("content-encoding") && has_vary(&h), "{h:?}");

    let (_, h, body) = get(&files.url("/logo.png"), &gz).await;
    assert!(body == page, "the image was changed");
    assert!(
        !h.contains_key("content-encoding") && !has_vary(&h),
        "{h:?}"
    );

    let (_, h, body) = get(&proxy.url("/image"), &gz).await;
    assert!(body == text(), "the image was changed");
    assert!(!h.contains_key("content-encoding"), "{h:?}");

    let (_, h, body) = get(&proxy.url("/no-transform"), &gz).await;
    assert!(body == text(), "no-transform was transformed");
    assert!(!h.contains_key("content-encoding"), "{h:?}");

    // Encoded upstream: passed on byte for byte, not compressed twice.
    let (_, h, body) = get(&proxy.url("/encoded"), &[("accept-encoding", "gzip, br")]).await;
    assert_eq!(h["content-encoding"], "gzip");
    assert!(body == gzip(&text()), "the encoded body was changed");

    // A range of the identity bytes, untouched.
    let (status, h, body) = get(
        &files.url("/page.html"),
        &[("accept-encoding", "gzip"), ("range", "bytes=0-99")],
    )
    .await;
    assert_eq!(status, StatusCode::PARTIAL_CONTENT);
    assert!(!h.contains_key("content-encoding"), "{h:?}");
    assert!(body == page[..100], "wrong range");
}

#[tokio::test]
async fn head_has_the_headers_of_get_and_no_body() {
    let temp = tempfile::tempdir().unwrap();
    let server = static_server(temp.path(), "{}").await;
    let br = [("accept-encoding", "br")];
    let (_, get_headers, _) = get(&server.url("/page.html"), &br).await;
    let resp = client(Offer::Http1)
        .head(server.url("/page.html"))
        .header("accept-encoding", "br")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let head_headers = resp.headers().clone();
    assert!(resp.bytes().await.unwrap().is_empty());
    // The GET made the file's br variant, so its length is known: the HEAD says it too.
    assert!(
        get_headers.contains_key("content-length"),
        "{get_headers:?}"
    );
    for name in [
        "content-encoding",
        "content-length",
        "vary",
        "etag",
        "content-type",
        "last-modified",
    ] {
        assert_eq!(head_headers.get(name), get_headers.get(name), "{name}");
    }

    // Raw bytes, in a coding no GET has asked for yet: the length is unknown without
    // compressing, which a HEAD does not do, so it is left out (RFC 9110 §9.3.2), and the
    // response must not claim an empty body with `content-length: 0` either.
    let raw = sluice_testkit::raw_exchange(
        server.first_addr(),
        b"HEAD /page.html HTTP/1.1\r\nhost: x\r\naccept-encoding: gzip\r\nconnection: close\r\n\r\n",
        64 * 1024,
    )
    .await;
    let raw = String::from_utf8_lossy(&raw).to_ascii_lowercase();
    assert!(raw.contains("content-encoding: gzip"), "{raw}");
    assert!(!raw.contains("content-length"), "{raw}");
    assert!(raw.ends_with("\r\n\r\n"), "no body after a HEAD: {raw}");
}

#[tokio::test]
async fn the_weakened_etag_revalidates_to_a_304_with_vary() {
    let temp = tempfile::tempdir().unwrap();
    let server = static_server(temp.path(), "{}").await;
    let url = server.url("/page.html");
    let (_, identity, _) = get(&url, &[]).await;
    let strong = identity["etag"].to_str().unwrap().to_owned();
    assert!(strong.starts_with('"'), "{strong}");
    let (_, gz, _) = get(&url, &[("accept-encoding", "gzip")]).await;
    let weak = gz["etag"].to_str().unwrap().to_owned();
    assert_eq!(weak, format!("W/{strong}"));

    for tag in [&weak, &strong] {
        let (status, h, body) = get(
            &url,
            &[("accept-encoding", "gzip"), ("if-none-match", tag.as_str())],
        )
        .await;
        assert_eq!(status, StatusCode::NOT_MODIFIED, "{tag}");
        assert!(has_vary(&h), "{tag}: {h:?}");
        assert!(body.is_empty());
    }
}

/// Writes into a running sha256, counting bytes.
#[derive(Default)]
struct HashWriter {
    hasher: sha2::Sha256,
    len: u64,
}

impl Write for HashWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.hasher.update(buf);
        self.len += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

const CHUNKS: usize = 2000;
const CHUNK_SIZE: usize = 64 * 1024;

/// Chunk `i` of the streamed body: a JSON-ish template with the index in front.
fn chunk(template: &[u8], i: usize) -> Bytes {
    let mut chunk = template.to_vec();
    chunk[..10].copy_from_slice(format!("{i:>10}").as_bytes());
    Bytes::from(chunk)
}

fn template() -> Vec<u8> {
    let mut t = Vec::with_capacity(CHUNK_SIZE);
    let mut i = 0u64;
    while t.len() < CHUNK_SIZE {
        write!(
            t,
            "{{\"id\":{i},\"name\":\"user {}\",\"ok\":{}}},",
            i * 7919 % 10007,
            i.is_multiple_of(3)
        )
        .unwrap();
        i += 1;
    }
    t.truncate(CHUNK_SIZE);
    t
}

#[tokio::test]
async fn a_long_chunked_stream_is_one_gzip_stream_decoded_before_the_upstream_finishes() {
    // The upstream sends chunk 0, then waits until the client has decoded something: if sluice
    // held the response back, the test would hit its failure bound instead of finishing.
    let (go_tx, go_rx) = oneshot::channel::<()>();
    let gate = Arc::new(Mutex::new(Some(go_rx)));
    let (addr, _) = serve_fn(move |_req| {
        let gate = gate.lock().unwrap().take();
        async move {
            let template = template();
            let stream = futures_util::stream::unfold((0usize, gate), move |(i, mut gate)| {
                let template = template.clone();
                async move {
                    if i == CHUNKS {
                        return None;
                    }
                    if i == 1 {
                        gate.take()?.await.ok()?;
                    }
                    let frame = hyper::body::Frame::data(chunk(&template, i));
                    Some((Ok::<_, std::io::Error>(frame), (i + 1, gate)))
                }
            });
            Response::builder()
                .header("content-type", "application/json")
                .body(Body::stream(http_body_util::StreamBody::new(stream)))
                .unwrap()
        }
    })
    .await;
    let server = proxy_server(addr, "{ algorithms = [\"gzip\"], levels = { gzip = 1 } }").await;

    let exchange = async {
        let mut resp = client(Offer::Http1)
            .get(server.url("/stream"))
            .header("accept-encoding", "gzip")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.headers()["content-encoding"], "gzip");
        let mut decoder = flate2::write::GzDecoder::new(HashWriter::default());
        let mut go = Some(go_tx);
        while let Some(data) = resp.chunk().await.unwrap() {
            decoder.write_all(&data).unwrap();
            decoder.flush().unwrap();
            if decoder.get_ref().len > 0
                && let Some(go) = go.take()
            {
                go.send(()).unwrap();
            }
        }
        assert!(go.is_none(), "nothing was decoded before the end");
        decoder.finish().unwrap()
    };
    let decoded = tokio::time::timeout(FAILURE_BOUND, exchange)
        .await
        .expect("the stream stalled: was the first chunk held back?");

    let template = template();
    let mut expected = sha2::Sha256::new();
    for i in 0..CHUNKS {
        expected.update(chunk(&template, i));
    }
    assert_eq!(decoded.len, (CHUNKS * CHUNK_SIZE) as u64);
    assert_eq!(decoded.hasher.finalize(), expected.finalize());
}

#[tokio::test]
async fn each_server_sent_event_is_decodable_before_the_next_is_sent() {
    let (tx, addr) = crate::proxy::paced_upstream("text/event-stream", None).await;
    // A long flush delay: only the per-event flush of event streams can pass this test.
    let server = proxy_server(addr, "{ algorithms = [\"gzip\"], flush_delay = \"1h\" }").await;
    let mut resp = client(Offer::Http1)
        .get(server.url("/events"))
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-encoding"], "gzip");
    let mut decoder = flate2::write::GzDecoder::new(Vec::new());
    for i in 0..5 {
        let event = format!("id: {i}\ndata: {}\n\n", "tick ".repeat(100));
        tx.send(Bytes::from(event.clone())).await.unwrap();
        let wait = async {
            while !decoder.get_ref().ends_with(event.as_bytes()) {
                let data = resp.chunk().await.unwrap().expect("the stream ended early");
                decoder.write_all(&data).unwrap();
                decoder.flush().unwrap();
            }
        };
        tokio::time::timeout(FAILURE_BOUND, wait)
            .await
            .unwrap_or_else(|_| panic!("event {i} was held back"));
    }
    drop(tx);
    while let Some(data) = resp.chunk().await.unwrap() {
        decoder.write_all(&data).unwrap();
    }
    let all = decoder.finish().unwrap();
    assert_eq!(all.len(), 5 * "id: 0\ndata: \n\n".len() + 5 * 500);
}

#[tokio::test]
async fn metrics_and_the_access_log_say_what_was_decided() {
    let temp = tempfile::tempdir().unwrap();
    let server = static_server(temp.path(), "{ algorithms = [\"br\", \"gzip\"] }").await;
    let (_, _, br_body) = get(&server.url("/page.html"), &[("accept-encoding", "br")]).await;
    let _ = get(&server.url("/small.txt"), &[("accept-encoding", "br")]).await;

    let text = crate::scrape_metrics(&server).await;
    let value = |series: &str| crate::metric(&text, series);
    let decision = |d: &str| {
        value(&format!(
            "sluice_compress_responses_total{{route=\"files\",decision=\"{d}\"}}"
        ))
    };
    assert_eq!(decision("compressed"), 1.0);
    assert_eq!(decision("too_small"), 1.0);
    assert_eq!(decision("not_accepted"), 0.0);
    assert_eq!(
        value("sluice_compress_bytes_in_total{algorithm=\"br\"}"),
        page().len() as f64
    );
    assert_eq!(
        value("sluice_compress_bytes_out_total{algorithm=\"br\"}"),
        br_body.len() as f64
    );
    assert_eq!(
        value("sluice_compress_bytes_in_total{algorithm=\"gzip\"}"),
        0.0
    );
    // The encoder's time: some for br, which compressed the page, none for gzip.
    let br_cpu = value("sluice_compress_cpu_seconds_total{algorithm=\"br\"}");
    assert!(br_cpu > 0.0 && br_cpu < 5.0, "br encoder time {br_cpu}");
    assert_eq!(
        value("sluice_compress_cpu_seconds_total{algorithm=\"gzip\"}"),
        0.0
    );

    let lines = crate::lifecycle::wait_for_lines(&temp.path().join("access.log"), 2).await;
    let entries: Vec<serde_json::Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let page = entries.iter().find(|e| e["uri"] == "/page.html").unwrap();
    assert_eq!(
        (&page["encoding"], &page["compress"]),
        (&"br".into(), &"compressed".into())
    );
    assert_eq!(page["bytes_sent"], br_body.len());
    let small = entries.iter().find(|e| e["uri"] == "/small.txt").unwrap();
    assert_eq!(small["encoding"], serde_json::Value::Null);
    assert_eq!(small["compress"], "too_small");
}

#[tokio::test]
async fn routes_without_compress_are_untouched() {
    let temp = tempfile::tempdir().unwrap();
    write_files(temp.path(), &[("public/page.html", &page())]);
    let server = crate::static_server(temp.path()).await;
    let (_, h, body) = get(&server.url("/page.html"), &[("accept-encoding", "gzip")]).await;
    assert!(
        !h.contains_key("content-encoding") && !has_vary(&h),
        "{h:?}"
    );
    assert!(body == page(), "the page was changed");
}

/// The head of a raw HTTP/1.1 exchange, lower-cased, without the body.
async fn raw_head(addr: SocketAddr, method: &str, path: &str) -> String {
    let request = format!(
        "{method} {path} HTTP/1.1\r\nhost: x\r\naccept-encoding: gzip\r\nconnection: close\r\n\r\n"
    );
    let raw = sluice_testkit::raw_exchange(addr, request.as_bytes(), 64 * 1024).await;
    let raw = String::from_utf8_lossy(&raw).to_ascii_lowercase();
    let head = raw.split("\r\n\r\n").next().unwrap_or_default();
    // The status line and the fields that depend on compression, in order.
    head.lines()
        .filter(|line| {
            line.starts_with("http/")
                || line.starts_with("content-encoding")
                || line.starts_with("content-length")
                || line.starts_with("vary")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn head_of_a_small_response_held_in_memory_is_not_compressed_either() {
    // A fixed response and an error page are the same in-memory body for GET and HEAD: a tiny
    // one is too small for GET, so HEAD must not announce a coding the GET does not get.
    let large = "large enough to compress ".repeat(40);
    let server = start_toml(&format!(
        r#"
        [log]
        access = "off"
        [[listeners]]
        address = "127.0.0.1:0"
        [[routes]]
        path = "/hello"
        respond = {{ body = "hello", headers = {{ "content-type" = "text/plain" }} }}
        compress = {{}}
        [[routes]]
        path = "/large"
        respond = {{ body = "{large}", headers = {{ "content-type" = "text/plain" }} }}
        compress = {{}}
        [[routes]]
        path_prefix = "/files/"
        static = {{ root = "." }}
        compress = {{}}
        "#
    ))
    .await;
    for path in ["/hello", "/files/missing.txt"] {
        let get = raw_head(server.first_addr(), "GET", path).await;
        let head = raw_head(server.first_addr(), "HEAD", path).await;
        assert!(!get.contains("content-encoding"), "{path}: {get}");
        assert_eq!(head, get, "{path}: HEAD differs from GET");
    }
    // Compressed: the GET is chunked, so the HEAD must not announce the identity length.
    let get = raw_head(server.first_addr(), "GET", "/large").await;
    let head = raw_head(server.first_addr(), "HEAD", "/large").await;
    assert!(get.contains("content-encoding: gzip"), "{get}");
    assert_eq!(head, get, "/large: HEAD differs from GET");
}

#[tokio::test]
async fn a_304_repeats_the_etag_and_vary_its_200_had() {
    // RFC 9110 §15.4.5: a 304 carries the ETag and Vary a 200 to the same request would have,
    // or a cache holding the compressed 200 (weak tag) cannot match the 304 to it.
    let temp = tempfile::tempdir().unwrap();
    let server = static_server(temp.path(), "{}").await;
    for (path, accept) in [
        ("/page.html", "gzip"),
        ("/page.html", "identity"),
        ("/small.txt", "gzip"),
        ("/logo.png", "gzip"),
    ] {
        let url = server.url(path);
        let (status, ok, _) = get(&url, &[("accept-encoding", accept)]).await;
        assert_eq!(status, StatusCode::OK);
        let etag = ok["etag"].to_str().unwrap();
        let (status, not_modified, _) = get(
            &url,
            &[("accept-encoding", accept), ("if-none-match", etag)],
        )
        .await;
        assert_eq!(status, StatusCode::NOT_MODIFIED, "{path} {accept}");
        assert_eq!(not_modified.get("etag"), ok.get("etag"), "{path} {accept}");
        assert_eq!(
            has_vary(&not_modified),
            has_vary(&ok),
            "{path} {accept}: {not_modified:?}"
        );
    }
}
