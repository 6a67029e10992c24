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

#[tokio::test]
async fn a_gzipped_body_reaches_the_origin_decoded() {
    let origin = start_origin(None).await;
    let server = server(origin.addr, "decompress_requests = {}").await;
    let json: Vec<u8> = (0..2000)
        .flat_map(|i| format!("{{\"id\":{i},\"name\":\"item {i}\"}},").into_bytes())
        .collect();
    let (status, _, body) = post(&server, "gzip", gzip(&json)).await;
    assert_eq!(status, 200);
    let info: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(info["body_length"], json.len());
    assert_eq!(
        info["body_sha256"],
        hex::encode(sha2::Sha256::digest(&json))
    );
    let names: Vec<&str> = info["headers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[0].as_str().unwrap())
        .collect();
    assert!(!names.contains(&"content-encoding"), "{names:?}");
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
