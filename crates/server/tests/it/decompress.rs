//! Request-body decompression in the proxy (seed 000): decoded while streaming, limits → 413,
//! corrupt → 400, unknown coding → 415, off → forwarded as is.

use std::io::Write;

use sha2::Digest;
use sluice_testkit::recording::{raw_post, recording_upstream, upstream_totals};
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
