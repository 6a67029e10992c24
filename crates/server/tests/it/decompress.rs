//! Request-body decompression in the proxy (seed 000): decoded while streaming, limits → 413,
//! corrupt → 400, unknown coding → 415, off → forwarded as is.

use std::io::Write;

use sha2::Digest;
use sluice_testkit::{Offer, client, start_origin, start_toml};

async fn server(origin: std::net::SocketAddr, option: &str) -> sluice_testkit::TestServer {
    start_toml(&format!(
        "[log]\naccess = \"off\"\n[[listeners]]\naddress = \"127.0.0.1:0\"\n[[routes]]\n[routes.proxy]\nto = \"{origin}\"\n{option}\n"
    ))
    .await
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

async fn post(
    server: &sluice_testkit::TestServer,
    coding: &str,
    body: Vec<u8>,
) -> (u16, http::HeaderMap, Vec<u8>) {
    let resp = client(Offer::Http1)
        .post(server.url("/reqinfo"))
        .header("content-encoding", coding)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    (status, headers, resp.bytes().await.unwrap().to_vec())
}

/// /reqinfo's answer says the origin got exactly `original`, with no `Content-Encoding`.
fn assert_origin_saw_decoded(reqinfo: &[u8], original: &[u8]) {
    let info: serde_json::Value = serde_json::from_slice(reqinfo).unwrap();
    assert_eq!(info["body_length"], original.len());
    assert_eq!(
        info["body_sha256"],
        hex::encode(sha2::Sha256::digest(original))
    );
    let names = header_names(&info);
    assert!(!names.contains(&"content-encoding"), "{names:?}");
}

/// The request header names the origin's /reqinfo saw.
fn header_names(info: &serde_json::Value) -> Vec<&str> {
    info["headers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[0].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn a_gzipped_body_reaches_the_origin_decoded() {
    let origin = start_origin(None).await;
    let server = server(origin.addr, "decompress_requests = {}").await;
    let json: Vec<u8> = (0..2000)
        .flat_map(|i| format!("{{\"id\":{i},\"name\":\"item {i}\"}},").into_bytes())
        .collect();
    let (status, _, body) = post(&server, "gzip", gzip(&json)).await;
    assert_eq!(status, 200);
    assert_origin_saw_decoded(&body, &json);
}

#[tokio::test]
async fn a_gzip_bomb_is_refused_with_413() {
    let origin = start_origin(None).await;
    let server = server(
        origin.addr,
        "decompress_requests = { max_size = \"1MiB\", max_ratio = 1000000 }",
    )
    .await;
    // 64 MiB of zeros, about 64 KB gzipped.
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..64 {
        enc.write_all(&zeros).unwrap();
    }
    let (status, _, _) = post(&server, "gzip", enc.finish().unwrap()).await;
    assert_eq!(status, 413);
}

#[tokio::test]
async fn corrupt_data_is_a_400_and_an_unknown_coding_a_415() {
    let origin = start_origin(None).await;
    let server = server(origin.addr, "decompress_requests = {}").await;
    let mut corrupt = gzip(&vec![b'a'; 100_000]);
    let middle = corrupt.len() / 2;
    corrupt[middle..middle + 16].fill(0xff);
    let (status, _, _) = post(&server, "gzip", corrupt).await;
    assert_eq!(status, 400);

    let (status, headers, _) = post(&server, "compress", b"whatever".to_vec()).await;
    assert_eq!(status, 415);
    assert_eq!(
        headers["accept-encoding"],
        sluice_http::decompress::ACCEPTED
    );
}

/// Clients send `Content-Encoding` on empty bodies too; the upstream still gets what the route
/// promises, a decoded (identity) body, so no `Content-Encoding` with nothing to decode.
#[tokio::test]
async fn an_empty_body_in_a_supported_coding_reaches_the_origin_without_it() {
    let origin = start_origin(None).await;
    let server = server(origin.addr, "decompress_requests = {}").await;
    let (status, _, body) = post(&server, "gzip", Vec::new()).await;
    assert_eq!(status, 200);
    let info: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(info["body_length"], 0);
    let names = header_names(&info);
    assert!(!names.contains(&"content-encoding"), "{names:?}");
}

#[tokio::test]
async fn without_the_option_the_body_is_forwarded_as_is() {
    let origin = start_origin(None).await;
    let server = server(origin.addr, "").await;
    let encoded = gzip(b"{\"a\":1}");
    let (status, _, body) = post(&server, "gzip", encoded.clone()).await;
    assert_eq!(status, 200);
    let info: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        info["body_sha256"],
        hex::encode(sha2::Sha256::digest(&encoded))
    );
}

// Acceptance (issue 4): bombs and bad bodies against the real binary, with its memory watched.
//
// The server runs as a child process (the test binary's `sluice`), not in the test process:
// tests run in parallel threads of one process, so the test's own VmRSS moves with whatever the
// other tests allocate, while the child's VmHWM (peak resident set) is sluice's alone.

/// What the upstream saw of the request bodies on one connection, sent when it closes.
#[derive(Debug, Default, Clone, Copy)]
struct Seen {
    requests: usize,
    complete: usize,
}

/// A hand-rolled upstream that reads every request body to its end and reports, per
/// connection once it closes, how many requests arrived and how many bodies ended cleanly.
async fn recording_upstream() -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
    tokio::sync::mpsc::UnboundedReceiver<Seen>,
) {
    use http_body_util::BodyExt;
    use std::sync::{Arc, Mutex};
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let (tx, seen) = (tx.clone(), Arc::new(Mutex::new(Seen::default())));
            tokio::spawn(async move {
                let record = seen.clone();
                let service = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let record = record.clone();
                        async move {
                            record.lock().unwrap().requests += 1;
                            let body = req.into_body().collect().await;
                            if body.is_ok() {
                                record.lock().unwrap().complete += 1;
                            }
                            Ok::<_, std::convert::Infallible>(hyper::Response::new(
                                sluice_core::Body::from("ok"),
                            ))
                        }
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
                let _ = tx.send(*seen.lock().unwrap());
            });
        }
    });
    (addr, accepted, rx)
}

/// Peak resident memory of process `pid`, in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

/// POST a chunked body from `chunks` on a raw connection and return the response's status.
/// The body is written by its own task and write errors are ignored: sluice answers 413/400
/// before the body ends and closes the connection, which a client library would report as a
/// broken pipe instead of the answer.
async fn raw_post(
    addr: std::net::SocketAddr,
    path: &str,
    coding: &str,
    chunks: impl Iterator<Item = bytes::Bytes> + Send + 'static,
) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut read, mut write) = stream.into_split();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: bomb.test\r\nContent-Encoding: {coding}\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    let writer = tokio::spawn(async move {
        write.write_all(head.as_bytes()).await?;
        for chunk in chunks {
            write
                .write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
                .await?;
            write.write_all(&chunk).await?;
            write.write_all(b"\r\n").await?;
        }
        write.write_all(b"0\r\n\r\n").await?;
        Ok::<_, std::io::Error>(write)
    });
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    let read_head = async {
        while !reply.windows(4).any(|w| w == b"\r\n\r\n") {
            match read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => reply.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(60), read_head)
        .await
        .expect("no answer to the bomb");
    writer.abort();
    let reply = String::from_utf8_lossy(&reply).into_owned();
    let status = reply
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not a response: {reply:?}"));
    (status, reply)
}

/// One gzip member of `len` zeros; a gzip body may be a series of members (RFC 1952 §2.2), so
/// repeating it makes a bomb of any size from a few kilobytes held in memory.
fn gzip_zeros_member(len: usize) -> bytes::Bytes {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..len >> 20 {
        enc.write_all(&zeros).unwrap();
    }
    enc.finish().unwrap().into()
}

/// One zstd frame of 1 MiB that compresses about 1000:1 (zeros with a few varying bytes per
/// 4 KiB), at level 3 whose window fits the 8 MiB limit; frames may follow each other.
fn zstd_sparse_frame() -> bytes::Bytes {
    let mut block = vec![0u8; 1 << 20];
    let mut x: u32 = 12345;
    for i in (0..block.len()).step_by(4096) {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        block[i..i + 4].copy_from_slice(&x.to_le_bytes());
    }
    zstd::encode_all(&block[..], 3).unwrap().into()
}

/// Wait until every upstream connection has closed and add up what they saw.
async fn upstream_totals(
    accepted: &std::sync::atomic::AtomicUsize,
    reports: &mut tokio::sync::mpsc::UnboundedReceiver<Seen>,
) -> Seen {
    let mut total = Seen::default();
    let mut closed = 0;
    while closed < accepted.load(std::sync::atomic::Ordering::SeqCst) {
        let seen = tokio::time::timeout(std::time::Duration::from_secs(20), reports.recv())
            .await
            .expect("an upstream connection stayed open")
            .unwrap();
        total.requests += seen.requests;
        total.complete += seen.complete;
        closed += 1;
    }
    total
}

#[tokio::test]
async fn bombs_get_413_in_bounded_memory_and_never_reach_the_upstream_whole() {
    let (upstream, accepted, mut reports) = recording_upstream().await;
    let temp = tempfile::tempdir().unwrap();
    let config = temp.path().join("sluice.toml");
    // `/size`: only the size limit applies, so 64 MiB of decoded zeros stream through sluice
    // before the 413 (a buffering proxy would hold them all). `/`: the default limits, where the
    // ratio stops a bomb early.
    std::fs::write(
        &config,
        format!(
            "[log]\naccess = \"off\"\n[[listeners]]\naddress = \"127.0.0.1:0\"\n\
             [[routes]]\npath_prefix = \"/size\"\n[routes.proxy]\nto = \"{upstream}\"\n\
             decompress_requests = {{ max_size = \"64MiB\", max_ratio = 1000000 }}\n\
             [[routes]]\n[routes.proxy]\nto = \"{upstream}\"\ndecompress_requests = {{}}\n"
        ),
    )
    .unwrap();
    let (child, addr) = crate::cli::spawn_listening(&["serve", "-c", config.to_str().unwrap()]);

    // Warm up (threads, pools, the codecs' first allocations) with a legitimate body per coding.
    let json = br#"{"warm":"up"}"#.repeat(4000);
    let legit_gzip = gzip(&json);
    let legit_zstd = zstd::encode_all(&json[..], 3).unwrap();
    for path in ["/size", "/"] {
        for (coding, body) in [("gzip", &legit_gzip), ("zstd", &legit_zstd)] {
            let body = bytes::Bytes::from(body.clone());
            let (status, reply) = raw_post(addr, path, coding, std::iter::once(body)).await;
            assert_eq!(status, 200, "{reply}");
        }
    }
    let before = peak_rss(child.id());

    // 10 GiB of zeros as gzip: 640 members of 16 MiB, about 10 MB on the wire.
    let member = gzip_zeros_member(16 << 20);
    let wire = member.len() * 640;
    assert!(wire < 20 << 20, "{wire} bytes on the wire");
    // 1:1000 zstd: 10,240 frames of 1 MiB.
    let frame = zstd_sparse_frame();
    let ratio = (1 << 20) / frame.len();
    assert!((300..=3000).contains(&ratio), "zstd ratio {ratio}");
    for path in ["/size", "/"] {
        let gzip_bomb = std::iter::repeat_n(member.clone(), 640);
        let (status, reply) = raw_post(addr, path, "gzip", gzip_bomb).await;
        assert_eq!(status, 413, "gzip bomb on {path}: {reply}");
        let zstd_bomb = std::iter::repeat_n(frame.clone(), 10_240);
        let (status, reply) = raw_post(addr, path, "zstd", zstd_bomb).await;
        assert_eq!(status, 413, "zstd bomb on {path}: {reply}");
    }
    // brotli streams cannot be chained, so this one is 128 MiB of zeros in one stream (about
    // 100 KB) with the largest window accepted (8 MiB), whose ring buffer the decoder fills.
    let br_bomb = {
        let mut out = Vec::new();
        let mut enc = brotli::CompressorWriter::new(&mut out, 1 << 16, 1, 23);
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..128 {
            enc.write_all(&zeros).unwrap();
        }
        drop(enc);
        bytes::Bytes::from(out)
    };
    assert_eq!(br_bomb[0] & 0b1111, 0b1101, "window of 2^23");
    for path in ["/size", "/"] {
        let (status, reply) = raw_post(addr, path, "br", std::iter::once(br_bomb.clone())).await;
        assert_eq!(status, 413, "brotli bomb on {path}: {reply}");
    }
    let grown = peak_rss(child.id()).saturating_sub(before);
    eprintln!(
        "peak RSS {} KiB before the bombs, +{} KiB after",
        before >> 10,
        grown >> 10
    );
    assert!(
        grown < 16 << 20,
        "sluice's peak RSS grew by {} KiB",
        grown >> 10
    );

    // Stopping sluice closes its pooled upstream connections, so every report comes in.
    assert!(crate::cli::terminate(child));
    let seen = upstream_totals(&accepted, &mut reports).await;
    assert_eq!(
        seen.complete, 4,
        "only the warm-up bodies may arrive whole: {seen:?}"
    );
    // The `/size` bombs did reach the upstream (their first 64 MiB streamed there).
    assert!(seen.requests >= 4 + 3, "{seen:?}");
}

#[tokio::test]
async fn corrupt_and_unknown_codings_never_reach_the_upstream_whole() {
    let (upstream, accepted, mut reports) = recording_upstream().await;
    // A high ratio limit: the repetitive bodies below must fail for what they are, not as bombs.
    let server = server(upstream, "decompress_requests = { max_ratio = 1000000 }").await;
    let addr = server.first_addr();

    let mut corrupt = gzip(&vec![b'a'; 100_000]);
    let middle = corrupt.len() / 2;
    corrupt[middle..middle + 16].fill(0xff);
    let (status, reply) = raw_post(addr, "/", "gzip", std::iter::once(corrupt.into())).await;
    assert_eq!(status, 400, "{reply}");

    // A gzip body cut off before its end is as bad as a corrupt one.
    let whole = gzip(&vec![b'b'; 100_000]);
    let cut = bytes::Bytes::copy_from_slice(&whole[..whole.len() - 10]);
    let (status, reply) = raw_post(addr, "/", "gzip", std::iter::once(cut)).await;
    assert_eq!(status, 400, "{reply}");

    let (status, reply) = raw_post(addr, "/", "foo", std::iter::once("x".into())).await;
    assert_eq!(status, 415, "{reply}");
    let accept = reply
        .lines()
        .find_map(|l| l.strip_prefix("accept-encoding: "))
        .unwrap_or_else(|| panic!("no Accept-Encoding on the 415: {reply}"));
    assert_eq!(accept, "gzip, deflate, br, zstd");

    assert!(server.shutdown(std::time::Duration::from_secs(10)).await);
    let seen = upstream_totals(&accepted, &mut reports).await;
    assert_eq!(seen.complete, 0, "{seen:?}");
}

#[tokio::test]
async fn a_gzipped_10_kb_json_post_reaches_reqinfo_as_the_original_40_kb() {
    let origin = start_origin(None).await;
    let server = server(origin.addr, "decompress_requests = {}").await;
    // JSON records like an API client's: about 40 KB that gzip to about 10 KB.
    let json: Vec<u8> = serde_json::to_vec(
        &(0..420u64)
            .map(|i| {
                serde_json::json!({
                    "id": i,
                    "name": format!("customer {}", i * 7919 % 1000),
                    "email": format!("user{}@example.test", i * 104_729 % 100_000),
                    "score": (i * 37 % 101) as f64 / 10.0,
                    "token": format!("{:016x}", i.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
                })
            })
            .collect::<Vec<_>>(),
    )
    .unwrap();
    let encoded = gzip(&json);
    assert!(
        (35_000..50_000).contains(&json.len()),
        "{} bytes",
        json.len()
    );
    assert!(
        (6_000..14_000).contains(&encoded.len()),
        "{} bytes",
        encoded.len()
    );
    let (status, _, body) = post(&server, "gzip", encoded).await;
    assert_eq!(status, 200);
    assert_origin_saw_decoded(&body, &json);
}

#[tokio::test]
async fn a_large_window_brotli_body_is_refused_like_a_large_window_zstd_one() {
    let (upstream, accepted, mut reports) = recording_upstream().await;
    let server = server(upstream, "decompress_requests = { max_size = \"64MiB\" }").await;
    let data: Vec<u8> = (0..9u32 << 20).map(|i| (i % 251) as u8).collect();
    let mut br = Vec::new();
    let params = brotli_params(24);
    brotli::BrotliCompress(&mut &data[..], &mut br, &params).unwrap();
    let (status, reply) =
        raw_post(server.first_addr(), "/", "br", std::iter::once(br.into())).await;
    assert_eq!(status, 400, "{reply}");

    let zstd_long = {
        let mut enc = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
        enc.window_log(24).unwrap();
        enc.write_all(&data).unwrap();
        enc.finish().unwrap()
    };
    let (status, reply) = raw_post(
        server.first_addr(),
        "/",
        "zstd",
        std::iter::once(zstd_long.into()),
    )
    .await;
    assert_eq!(status, 400, "{reply}");

    assert!(server.shutdown(std::time::Duration::from_secs(10)).await);
    let seen = upstream_totals(&accepted, &mut reports).await;
    assert_eq!(seen.complete, 0, "{seen:?}");
}

fn brotli_params(lgwin: i32) -> brotli::enc::BrotliEncoderParams {
    brotli::enc::BrotliEncoderParams {
        quality: 4,
        lgwin,
        ..Default::default()
    }
}
