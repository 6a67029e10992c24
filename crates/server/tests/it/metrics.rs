//! Prometheus metrics on the admin listener reflect real traffic.

use sluice_testkit::{Offer, client, start_origin, start_toml};

#[tokio::test]
async fn metrics_count_requests_and_upstream_outcomes() {
    let origin = start_origin(None).await;
    let server = start_toml(&format!(
        r#"
        [log]
        access = "off"
        [admin]
        address = "127.0.0.1:0"
        [[listeners]]
        address = "127.0.0.1:0"
        [[routes]]
        name = "api"
        proxy = {{ upstream = "backend" }}
        [upstreams.backend]
        servers = ["{}"]
        "#,
        origin.addr
    ))
    .await;
    let http = client(Offer::Http1);
    for path in ["/hello", "/hello", "/nope"] {
        let resp = http.get(server.url(path)).send().await.unwrap();
        let _ = resp.bytes().await.unwrap();
    }
    let resp = http
        .post(server.url("/reqinfo"))
        .body(vec![0u8; 1000])
        .send()
        .await
        .unwrap();
    let _ = resp.bytes().await.unwrap();

    let text = crate::scrape_metrics(&server).await;
    let value = |series: &str| crate::metric(&text, series);
    assert_eq!(
        value("sluice_requests_total{route=\"api\",code=\"2xx\"}"),
        3.0
    );
    assert_eq!(
        value("sluice_requests_total{route=\"api\",code=\"4xx\"}"),
        1.0
    );
    assert_eq!(value("sluice_request_bytes_total{route=\"api\"}"), 1000.0);
    assert!(value("sluice_response_bytes_total{route=\"api\"}") >= 240.0);
    let server_label = format!("upstream=\"backend\",server=\"{}\"", origin.addr);
    assert!(
        text.contains(&format!(
            "sluice_upstream_server_healthy{{{server_label}}} 1"
        )),
        "{text}"
    );
    assert!(
        text.contains("sluice_upstream_connect_duration_seconds"),
        "{text}"
    );
}

/// Request decompression is visible: one counter per outcome (decoded, 413, 400, 415) and the
/// bytes read and written by the decoders.
#[tokio::test]
async fn metrics_count_request_decompression_outcomes_and_bytes() {
    use std::io::Write;
    let origin = start_origin(None).await;
    let server = start_toml(&format!(
        r#"
        [log]
        access = "off"
        [admin]
        address = "127.0.0.1:0"
        [[listeners]]
        address = "127.0.0.1:0"
        [[routes]]
        name = "gunzip"
        [routes.proxy]
        to = "{}"
        decompress_requests = {{ max_size = "1MiB", max_ratio = 1000000 }}
        "#,
        origin.addr
    ))
    .await;
    let gzip = |data: &[u8]| {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(data).unwrap();
        enc.finish().unwrap()
    };
    let original = b"{\"hello\":\"world\"}".repeat(1000);
    let good = gzip(&original);
    let bomb = gzip(&vec![0u8; 4 << 20]);
    let mut corrupt = gzip(&vec![b'a'; 100_000]);
    let middle = corrupt.len() / 2;
    corrupt[middle..middle + 16].fill(0xff);

    let http = client(Offer::Http1);
    let mut statuses = Vec::new();
    for (coding, body) in [
        ("gzip", good.clone()),
        ("gzip", bomb),
        ("gzip", corrupt),
        ("foo", b"x".to_vec()),
    ] {
        let resp = http
            .post(server.url("/reqinfo"))
            .header("content-encoding", coding)
            .body(body)
            .send()
            .await
            .unwrap();
        statuses.push(resp.status().as_u16());
        let _ = resp.bytes().await.unwrap();
    }
    assert_eq!(statuses, [200, 413, 400, 415]);

    let text = crate::scrape_metrics(&server).await;
    let value = |series: &str| crate::metric(&text, series);
    for outcome in ["decoded", "too_large", "corrupt", "unsupported"] {
        assert_eq!(
            value(&format!(
                "sluice_decompress_requests_total{{route=\"gunzip\",outcome=\"{outcome}\"}}"
            )),
            1.0,
            "{outcome}"
        );
    }
    // At least the good body, decoded whole (the refused ones add what they decoded when the
    // proxy drops them, which may come after their error response).
    let decoded = value("sluice_decompress_bytes_out_total{route=\"gunzip\"}");
    assert!(decoded >= original.len() as f64, "{decoded}");
    let encoded = value("sluice_decompress_bytes_in_total{route=\"gunzip\"}");
    assert!(encoded >= good.len() as f64, "{encoded}");
}
