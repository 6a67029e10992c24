//! The quick commands' flags: `file-server --compress`, `reverse-proxy --compress
//! --decompress-requests`.

use std::io::Write;

use sluice_testkit::{Offer, client, independent};

use crate::cli::{spawn_listening, terminate};
use crate::write_files;

/// A page that compresses well.
fn page() -> Vec<u8> {
    let mut html = b"<!doctype html><html><body>\n".to_vec();
    for i in 0..600 {
        writeln!(
            html,
            "<p>Paragraph {i}: sluice compresses responses once per stream.</p>"
        )
        .unwrap();
    }
    html
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

async fn get(url: &str, headers: &[(&str, &str)]) -> (http::StatusCode, http::HeaderMap, Vec<u8>) {
    let mut req = client(Offer::Http1).get(url);
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let resp = req.send().await.unwrap();
    let (status, headers) = (resp.status(), resp.headers().clone());
    (status, headers, resp.bytes().await.unwrap().to_vec())
}

#[tokio::test]
async fn quick_commands_take_compress_and_decompress_requests_flags() {
    let temp = tempfile::tempdir().unwrap();
    write_files(temp.path(), &[("site/page.html", &page())]);
    let root = temp.path().join("site");
    let (files, files_addr) = spawn_listening(&[
        "file-server",
        "--root",
        root.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--compress",
    ]);
    let url = format!("http://{files_addr}/page.html");
    let (_, h, body) = get(&url, &[("accept-encoding", "br")]).await;
    assert_eq!(h["content-encoding"], "br");
    assert!(independent::decode("br", &body) == page());

    let origin = sluice_testkit::start_origin(None).await;
    let (proxy, proxy_addr) = spawn_listening(&[
        "reverse-proxy",
        "--listen",
        "127.0.0.1:0",
        "--to",
        &origin.addr.to_string(),
        "--compress",
        "--decompress-requests",
    ]);
    let json = br#"{"hello":"world"}"#.repeat(100);
    let resp = client(Offer::Http1)
        .post(format!("http://{proxy_addr}/reqinfo"))
        .header("content-encoding", "gzip")
        .header("accept-encoding", "gzip")
        .body(gzip(&json))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-encoding"], "gzip");
    let info = independent::decode("gzip", &resp.bytes().await.unwrap());
    let info: serde_json::Value = serde_json::from_slice(&info).unwrap();
    assert_eq!(info["body_length"], json.len(), "{info}");

    for child in [files, proxy] {
        assert!(
            tokio::task::spawn_blocking(move || terminate(child))
                .await
                .unwrap()
        );
    }
}
