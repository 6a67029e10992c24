//! The h2load adapter's parser on saved real outputs (see tests/data/README.md for how each was
//! made), and one live run against the demo origin when h2load is installed.

// Helper functions of this test crate are outside #[test] functions, where clippy.toml's
// allow-*-in-tests does not reach.
#![allow(clippy::panic)]

mod common;

use std::path::PathBuf;

use sluice_bench::driver::h2load::{self, Summary, TimeStats};

fn data(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn summary(name: &str) -> Summary {
    h2load::parse_summary(&data(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn http1_summary() {
    let s = summary("h2load-h1.txt");
    assert_eq!(s.application_protocol.as_deref(), Some("http/1.1"));
    assert!(
        (s.elapsed_secs - 0.05739).abs() < 1e-9,
        "{}",
        s.elapsed_secs
    );
    assert_eq!(s.requests_per_sec, 34849.28);
    assert_eq!(
        (
            s.requests_total,
            s.requests_started,
            s.requests_done,
            s.requests_succeeded
        ),
        (2000, 2000, 2000, 2000)
    );
    assert_eq!(
        (s.requests_failed, s.requests_errored, s.requests_timeout),
        (0, 0, 0)
    );
    assert_eq!(s.status_classes, [2000, 0, 0, 0]);
    assert_eq!(
        (
            s.traffic_total_bytes,
            s.traffic_header_bytes,
            s.traffic_data_bytes
        ),
        (476000, 174000, 240000)
    );
    assert_eq!(s.header_space_savings_percent, 0.0);
    assert_eq!(
        s.request_time_us,
        TimeStats {
            min: 22.0,
            max: 791.0,
            mean: 276.0,
            sd: 150.0
        }
    );

    let m = s.measurement();
    assert_eq!((m.requests, m.failures), (2000, 0));
    assert_eq!(
        m.statuses.into_iter().collect::<Vec<_>>(),
        vec![(200, 2000)]
    );
    assert_eq!((m.body_bytes, m.header_bytes), (240000, 174000));
    assert_eq!(m.latency_max_us, 791.0);
    assert_eq!(m.latency_sd_us, 150.0);
    // No percentiles in h2load's summary: left unknown (0) unless the request log is read.
    assert_eq!((m.latency_p50_us, m.latency_p99_us), (0.0, 0.0));
    assert!((m.body_mb_per_sec - 240000.0 / 0.05739 / 1e6).abs() < 1e-9);
}

#[test]
fn h2c_summary_has_hpack_savings() {
    let s = summary("h2load-h2c.txt");
    assert_eq!(s.application_protocol.as_deref(), Some("h2c"));
    assert_eq!(s.header_space_savings_percent, 91.54);
    assert_eq!(
        (
            s.traffic_total_bytes,
            s.traffic_header_bytes,
            s.traffic_data_bytes
        ),
        (292970, 16420, 240000)
    );
    assert_eq!(
        s.request_time_us,
        TimeStats {
            min: 79.0,
            max: 2880.0,
            mean: 1090.0,
            sd: 502.0
        }
    );
}

#[test]
fn tls_summaries_for_both_protocols() {
    let h1 = summary("h2load-tls-h1.txt");
    let h2 = summary("h2load-tls-h2.txt");
    assert_eq!(h1.application_protocol.as_deref(), Some("http/1.1"));
    assert_eq!(h2.application_protocol.as_deref(), Some("h2"));
    // Seed 002's figure: header bytes per response, HTTP/2 well under HTTP/1.1.
    assert_eq!(h1.traffic_header_bytes / h1.requests_done, 176);
    assert!(h2.traffic_header_bytes / h2.requests_done < 30);
    assert_eq!(h1.request_time_us.max, 10_790.0);
    assert_eq!(h2.elapsed_secs, 0.28833);
    assert_eq!(h2.status_classes, [2000, 0, 0, 0]);
}

#[test]
fn error_statuses_count_as_failures() {
    let m = h2load::parse(&data("h2load-h1-404.txt")).unwrap_or_default();
    assert_eq!((m.requests, m.failures), (1000, 1000));
    assert_eq!(
        m.statuses.into_iter().collect::<Vec<_>>(),
        vec![(400, 1000)]
    );
}

#[test]
fn refused_connections_are_errored_requests() {
    let s = summary("h2load-refused.txt");
    assert_eq!(s.application_protocol, None);
    assert_eq!(
        (s.requests_done, s.requests_failed, s.requests_errored),
        (0, 1000, 1000)
    );
    assert_eq!(s.elapsed_secs, 0.000773);
    let m = s.measurement();
    assert_eq!((m.requests, m.failures, m.requests_per_sec), (0, 1000, 0.0));
    assert!(m.statuses.is_empty());
}

#[test]
fn timed_post_run_and_its_request_log() {
    let s = summary("h2load-h1-post-duration.txt");
    assert_eq!(
        (s.requests_total, s.requests_started, s.requests_done),
        (17058, 17063, 17058)
    );
    assert_eq!(s.elapsed_secs, 1.0);
    assert_eq!(s.request_time_us.max, 10_860.0);

    let mut m = s.measurement();
    let log = data("h2load-h1-post-duration.log");
    h2load::apply_request_log(&mut m, &log);
    // The saved log is the first 200 requests: percentiles computed the long way must agree.
    let mut durations: Vec<u64> = log
        .lines()
        .filter_map(|l| l.split('\t').nth(2)?.parse().ok())
        .collect();
    durations.sort_unstable();
    assert_eq!(durations.len(), 200);
    assert_eq!(m.latency_p50_us, durations[99] as f64);
    assert_eq!(m.latency_p99_us, durations[197] as f64);
    assert_eq!(m.latency_max_us, durations[199] as f64);
    let mean = durations.iter().sum::<u64>() as f64 / 200.0;
    let variance = durations
        .iter()
        .map(|d| (*d as f64 - mean) * (*d as f64 - mean))
        .sum::<f64>()
        / 200.0;
    assert!((m.latency_sd_us - variance.sqrt()).abs() < 1e-6, "{m:?}");
    assert!(m.latency_sd_us > 0.0);
    assert_eq!(m.statuses.into_iter().collect::<Vec<_>>(), vec![(200, 200)]);
}

#[test]
fn large_stream_in_gigabytes_per_second() {
    let m = h2load::parse(&data("h2load-h2c-stream.txt")).unwrap_or_default();
    assert_eq!(
        (m.requests, m.body_bytes, m.header_bytes),
        (4, 262_148_004, 47)
    );
    assert_eq!(m.latency_max_us, 65_050.0);
    assert!(
        (m.body_mb_per_sec - 262.148004 / 0.22995).abs() < 1e-6,
        "{}",
        m.body_mb_per_sec
    );
}

#[test]
fn output_without_a_summary_is_an_error_that_quotes_it() {
    let error = h2load::parse("starting benchmark...\nNo protocol negotiated. Aborted.\n");
    assert!(error.is_err_and(|e| e.contains("No protocol negotiated")));
    let mut truncated = data("h2load-h1.txt");
    truncated.truncate(truncated.find("traffic:").unwrap_or(0));
    assert!(h2load::parse(&truncated).is_err());
}

/// The whole adapter against the demo origin: command line, run, summary and request log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_runs_against_the_demo_origin() {
    if !h2load::available() {
        common::skip(
            module_path!(),
            "h2load is not installed (apt-get install nghttp2-client)",
        );
        return;
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let origin = sluice_origin::Origin::new(sluice_origin::OriginOptions::default());
    let served = tokio::spawn(origin.serve_tcp(listener, async move {
        let _ = stopped.await;
    }));
    let base_url = format!("http://{addr}");
    let body = std::env::temp_dir().join(format!("sluice-bench-live-{}.json", std::process::id()));
    let _ = std::fs::write(&body, br#"{"name":"sluice"}"#);
    let get = h2load::H2loadArgs {
        protocol: h2load::Protocol::Http2,
        tls: false,
        method: "GET".into(),
        path: "/hello".into(),
        headers: vec![],
        body_file: None,
        clients: 4,
        streams_per_client: 2,
        requests: 200,
        duration: None,
    };
    let post = h2load::H2loadArgs {
        protocol: h2load::Protocol::Http1,
        method: "POST".into(),
        path: "/reqinfo".into(),
        headers: vec![("content-type".into(), "application/json".into())],
        body_file: Some(body.clone()),
        streams_per_client: 1,
        ..get.clone()
    };
    let runs = tokio::task::spawn_blocking(move || {
        [
            h2load::run(&get, &base_url, ""),
            h2load::run(&post, &base_url, ""),
        ]
    })
    .await;
    let _ = std::fs::remove_file(&body);
    let _ = stop.send(());
    let _ = served.await;
    for measured in runs.unwrap() {
        let m = measured.unwrap();
        assert_eq!((m.requests, m.failures), (200, 0), "{m:?}");
        assert_eq!(
            m.statuses.iter().map(|(s, n)| (*s, *n)).collect::<Vec<_>>(),
            vec![(200, 200)]
        );
        assert!(m.body_bytes > 0 && m.requests_per_sec > 0.0, "{m:?}");
        // From the request log: exact percentiles, in order.
        assert!(m.latency_p50_us > 0.0, "{m:?}");
        assert!(
            m.latency_p50_us <= m.latency_p99_us && m.latency_p99_us <= m.latency_max_us,
            "{m:?}"
        );
    }
}
