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

    let admin = server.running().admin_address().unwrap();
    let text = http
        .get(format!("http://{admin}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let value = |needle: &str| -> f64 {
        let line = text
            .lines()
            .find(|l| l.starts_with(needle))
            .unwrap_or_else(|| panic!("no {needle} in\n{text}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
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
