//! CPU-adaptive compression (`max_cpu`) end to end. The CPU readings come from the server's test
//! hook ([`sluice_server::RunningServer::sample_cpu_for_tests`]), one sample per call, so the test
//! needs no load and no waiting: above the limit the proxied response goes to gzip's fastest
//! level, then to identity (with `Vary` still there), while a static file's stored variant
//! goes on being served; when the load falls it climbs back, and `/metrics` follows each step.

use super::*;

fn level(text: &str, route: &str) -> f64 {
    crate::metric(
        text,
        &format!("sluice_compress_level{{route=\"{route}\",algorithm=\"gzip\"}}"),
    )
}

fn cpu_decisions(text: &str) -> f64 {
    crate::metric(
        text,
        "sluice_compress_responses_total{route=\"api\",decision=\"cpu\"}",
    )
}

/// The proxied `/text` in gzip: its `Content-Encoding` (if any) after checking the body decodes
/// to the upstream's text and `Vary` names `Accept-Encoding` either way.
async fn text_encoding(server: &TestServer) -> Option<String> {
    let (status, headers, body) =
        get(&server.url("/api/text"), &[("accept-encoding", "gzip")]).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        has_vary(&headers),
        "Vary: Accept-Encoding at every step: {headers:?}"
    );
    let encoding = headers
        .get("content-encoding")
        .map(|v| v.to_str().unwrap().to_owned());
    let decoded = match encoding.as_deref() {
        Some("gzip") => independent::decode("gzip", &body),
        None => body,
        Some(other) => panic!("unexpected coding {other}"),
    };
    assert!(decoded == text(), "the body decodes to the upstream's");
    encoding
}

#[tokio::test]
async fn compression_steps_down_to_identity_above_max_cpu_and_back_when_calm() {
    let upstream = fixture_upstream().await;
    let temp = tempfile::tempdir().unwrap();
    write_files(temp.path(), &[("public/page.html", &page())]);
    let server = start_toml_in(
        temp.path(),
        &format!(
            r#"
            [log]
            access = "off"
            [admin]
            address = "127.0.0.1:0"
            [[listeners]]
            address = "127.0.0.1:0"
            [[routes]]
            name = "api"
            path_prefix = "/api/"
            proxy = {{ to = "{upstream}" }}
            compress = {{ algorithms = ["gzip"], levels = {{ gzip = 9 }}, max_cpu = "50%" }}
            [[routes]]
            name = "files"
            static = {{ root = "public" }}
            compress = {{ algorithms = ["gzip"], max_cpu = "50%" }}
            "#
        ),
    )
    .await;
    let running = server.running();
    let gzip = Some("gzip".to_owned());

    // Calm: the configured level, and the page's gzip variant is made.
    running.sample_cpu_for_tests(10);
    assert_eq!(text_encoding(&server).await, gzip);
    let (_, headers, _) = get(&server.url("/page.html"), &[("accept-encoding", "gzip")]).await;
    assert_eq!(headers["content-encoding"], "gzip");
    let metrics = crate::scrape_metrics(&server).await;
    assert_eq!(level(&metrics, "api"), 9.0);
    assert_eq!(level(&metrics, "files"), 2.0, "gzip's default level");
    assert_eq!(crate::metric(&metrics, "sluice_process_cpu_percent"), 10.0);

    // One sample at the limit: still gzip, at the fastest level.
    running.sample_cpu_for_tests(50);
    assert_eq!(text_encoding(&server).await, gzip);
    let metrics = crate::scrape_metrics(&server).await;
    assert_eq!(level(&metrics, "api"), 1.0);
    assert_eq!(cpu_decisions(&metrics), 0.0);

    // Still above at the next sample: identity, counted as `cpu`.
    running.sample_cpu_for_tests(95);
    assert_eq!(text_encoding(&server).await, None);
    let metrics = crate::scrape_metrics(&server).await;
    assert_eq!(level(&metrics, "api"), -1.0);
    assert_eq!(cpu_decisions(&metrics), 1.0);
    // The stored variant costs nothing to serve: still gzip, with its length.
    let (_, headers, body) = get(&server.url("/page.html"), &[("accept-encoding", "gzip")]).await;
    assert_eq!(headers["content-encoding"], "gzip");
    assert_eq!(headers["content-length"], body.len().to_string().as_str());
    assert!(independent::decode("gzip", &body) == page());

    // Below the limit but above the lower mark (40%): holds.
    running.sample_cpu_for_tests(45);
    assert_eq!(text_encoding(&server).await, None);

    // Calm samples in a row: one step back up per stretch.
    for _ in 0..sluice_server::features::compress::CALM_SAMPLES {
        running.sample_cpu_for_tests(5);
    }
    assert_eq!(text_encoding(&server).await, gzip);
    assert_eq!(level(&crate::scrape_metrics(&server).await, "api"), 1.0);
    for _ in 0..sluice_server::features::compress::CALM_SAMPLES {
        running.sample_cpu_for_tests(5);
    }
    assert_eq!(text_encoding(&server).await, gzip);
    let metrics = crate::scrape_metrics(&server).await;
    assert_eq!(level(&metrics, "api"), 9.0);
    assert_eq!(cpu_decisions(&metrics), 2.0, "the two identity responses");
}
