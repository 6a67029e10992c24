//! Tests of the registry, the handles and the rendered exposition.

use std::time::Duration;

use http::StatusCode;

use super::*;

/// The value of the sample called `name` with exactly the labels `labels`, in any order.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines().find_map(|line| {
        let (series, value) = line.rsplit_once(' ')?;
        let (line_name, line_labels) = match series.split_once('{') {
            Some((n, rest)) => (n, rest.strip_suffix('}')?),
            None => (series, ""),
        };
        let wanted = labels
            .iter()
            .all(|(k, v)| line_labels.contains(&format!(r#"{k}="{v}""#)));
        let same_count = line_labels.matches("=\"").count() == labels.len();
        (line_name == name && wanted && same_count).then(|| value.parse().ok())?
    })
}

fn exercised() -> Arc<Metrics> {
    let m = Metrics::new();
    let route = m.route("api");
    for _ in 0..3 {
        route.observe(StatusCode::OK, Duration::from_millis(2), 10, 100);
    }
    route.observe(
        StatusCode::SERVICE_UNAVAILABLE,
        Duration::from_millis(20),
        0,
        5,
    );
    let server = m.upstream_server("app", "127.0.0.1:8080");
    server.connect_time(Duration::from_micros(300));
    server.response_time(Duration::from_millis(4));
    server.request(UpstreamOutcome::Ok);
    server.request(UpstreamOutcome::ConnectError);
    server.set_in_flight(1);
    // The pool-size gauge is only ever read from a watched server.
    m.watch_upstream_server("app", "127.0.0.1:8081", || ServerState {
        healthy: true,
        in_flight: 0,
        connections: 1,
    });
    let upstream = m.upstream("app");
    upstream.retry();
    upstream.no_peer_available();
    upstream.panic_pick();
    let compress = m.compress("api");
    compress.decided(sluice_http::compress_policy::Decision::Compress(
        sluice_core::ContentCoding::Br,
    ));
    compress.decided(sluice_http::compress_policy::Decision::Skip(
        sluice_http::compress_policy::SkipReason::TooSmall,
    ));
    compress.bytes(sluice_core::Compression::BR).add(
        1000,
        100,
        std::time::Duration::from_millis(250),
    );
    compress.variant_made(sluice_core::Compression::GZIP);
    compress.variant_hit(sluice_core::Compression::GZIP);
    compress.variant_hit(sluice_core::Compression::GZIP);
    let decompress = m.decompress("api");
    decompress.outcome(super::DecompressOutcome::Decoded);
    decompress.bytes(100, 1000);
    m.rate_limited("api").inc();
    m.access("api").denied[0].inc();
    m.rate_limit_fallbacks("api").inc();
    let tunnels = m.tunnels("api");
    let _open = tunnels.opened();
    tunnels.opened().end(super::TunnelEnd::IdleTimeout);
    let listener = m.listener("main");
    listener.connection_opened();
    listener.tls_handshake_failed();
    listener.request(http::Version::HTTP_3);
    listener.quic_retry();
    listener.proxy_protocol_failed();
    listener.listener_limit_reached();
    m.request_limits("main")
        .exceeded(super::limits::RequestLimit::BodySize);
    m.upstream_queue("api", "127.0.0.1:9001").full.inc();
    m.access_log_dropped().inc();
    m.compress_level("api", sluice_core::Compression::GZIP)
        .set(1);
    let dictionary = m.dictionary("api");
    dictionary.offered.inc();
    dictionary.stored.inc();
    dictionary.evicted.inc();
    dictionary.delta_made(sluice_core::DictionaryCoding::Dcz);
    dictionary.hit(sluice_core::DictionaryCoding::Dcb);
    dictionary.saved.inc_by(1000);
    let acme = m.acme("a.test");
    acme.issued.inc();
    acme.expiry.set(1_800_000_000);
    let dns = m.upstream_dns("app", "dns+a:app.internal:8080");
    dns.refreshed("ok", Some(std::time::Duration::from_secs(3)));
    dns.changed(1, 0);
    m
}

#[test]
fn render_contains_every_metric_name() {
    let text = exercised().render();
    for name in ALL_NAMES {
        assert!(
            text.lines().any(|l| l.starts_with(name)),
            "{name} missing from:\n{text}"
        );
    }
    assert!(text.ends_with("# EOF\n"));
}

#[test]
fn rate_limited_requests_are_counted_by_route() {
    let text = exercised().render();
    let api = [("route", "api")];
    assert_eq!(sample(&text, RATE_LIMITED_TOTAL, &api), Some(1.0));
}

#[test]
fn tunnels_are_counted_open_and_by_end() {
    let m = Metrics::new();
    let tunnels = m.tunnels("ws");
    let first = tunnels.opened();
    let mut second = tunnels.opened();
    second.end(super::TunnelEnd::IdleTimeout);
    let text = m.render();
    let ws = [("route", "ws")];
    assert_eq!(sample(&text, TUNNELS_OPEN, &ws), Some(2.0));
    drop(second);
    drop(first);
    let text = m.render();
    assert_eq!(sample(&text, TUNNELS_OPEN, &ws), Some(0.0));
    let ended = |end| sample(&text, TUNNELS_TOTAL, &[("route", "ws"), ("end", end)]);
    assert_eq!(ended("idle_timeout"), Some(1.0));
    assert_eq!(
        ended("error"),
        Some(1.0),
        "dropped without an end: an error"
    );
    assert_eq!(ended("closed"), Some(0.0));
    assert_eq!(ended("shutdown"), Some(0.0));
}

#[test]
fn requests_are_counted_by_status_class() {
    let text = exercised().render();
    let count = |code| sample(&text, REQUESTS_TOTAL, &[("route", "api"), ("code", code)]);
    assert_eq!(count("2xx"), Some(3.0));
    assert_eq!(count("5xx"), Some(1.0));
    // The other classes exist from the start, at zero.
    assert_eq!(count("4xx"), Some(0.0));
    assert_eq!(count("1xx"), Some(0.0));
    let api = [("route", "api")];
    assert_eq!(sample(&text, REQUEST_BYTES_TOTAL, &api), Some(30.0));
    assert_eq!(sample(&text, RESPONSE_BYTES_TOTAL, &api), Some(305.0));
}

#[test]
fn histograms_count_and_bucket_observations() {
    let text = exercised().render();
    let name = |suffix| format!("{REQUEST_DURATION_SECONDS}_{suffix}");
    let bucket = |le| sample(&text, &name("bucket"), &[("route", "api"), ("le", le)]);
    assert_eq!(
        sample(&text, &name("count"), &[("route", "api")]),
        Some(4.0)
    );
    assert_eq!(bucket("0.001"), Some(0.0));
    assert_eq!(bucket("0.0025"), Some(3.0));
    assert_eq!(bucket("+Inf"), Some(4.0));
    let sum = sample(&text, &name("sum"), &[("route", "api")]).unwrap_or_default();
    assert!((sum - 0.026).abs() < 1e-9, "sum {sum}");
    // OpenMetrics metadata: family names without `_total`, units declared.
    assert!(text.contains(&format!("# UNIT {REQUEST_DURATION_SECONDS} seconds")));
    assert!(text.contains("# TYPE sluice_requests counter"));
    assert!(text.contains("# UNIT sluice_response_bytes bytes"));
}

#[test]
fn upstream_and_listener_series_have_their_labels() {
    let text = exercised().render();
    let server = [("upstream", "app"), ("server", "127.0.0.1:8080")];
    let outcome = |o| {
        let labels = [server[0], server[1], ("outcome", o)];
        sample(&text, UPSTREAM_REQUESTS_TOTAL, &labels)
    };
    assert_eq!(outcome("ok"), Some(1.0));
    assert_eq!(outcome("connect_error"), Some(1.0));
    assert_eq!(outcome("timeout"), Some(0.0));
    assert_eq!(sample(&text, UPSTREAM_SERVER_HEALTHY, &server), Some(1.0));
    assert_eq!(sample(&text, UPSTREAM_IN_FLIGHT, &server), Some(1.0));
    let connects = format!("{UPSTREAM_CONNECT_DURATION_SECONDS}_count");
    assert_eq!(sample(&text, &connects, &server), Some(1.0));
    let responses = format!("{UPSTREAM_RESPONSE_DURATION_SECONDS}_count");
    assert_eq!(sample(&text, &responses, &server), Some(1.0));
    let app = [("upstream", "app")];
    assert_eq!(sample(&text, UPSTREAM_RETRIES_TOTAL, &app), Some(1.0));
    assert_eq!(sample(&text, UPSTREAM_NO_PEER_TOTAL, &app), Some(1.0));
    assert_eq!(sample(&text, UPSTREAM_PANIC_PICKS_TOTAL, &app), Some(1.0));
    let main = [("listener", "main")];
    assert_eq!(sample(&text, CONNECTIONS_OPEN, &main), Some(1.0));
    assert_eq!(sample(&text, CONNECTIONS_TOTAL, &main), Some(1.0));
    assert_eq!(
        sample(&text, TLS_HANDSHAKE_FAILURES_TOTAL, &main),
        Some(1.0)
    );
    let version = [("version", env!("CARGO_PKG_VERSION"))];
    assert_eq!(sample(&text, BUILD_INFO, &version), Some(1.0));
}

#[test]
fn handles_for_the_same_labels_share_counts() {
    let m = Metrics::new();
    let a = m.route("r");
    let b = m.route("r");
    a.observe(StatusCode::NOT_FOUND, Duration::ZERO, 0, 0);
    b.clone()
        .observe(StatusCode::NOT_FOUND, Duration::ZERO, 0, 0);
    let text = m.render();
    let labels = [("route", "r"), ("code", "4xx")];
    assert_eq!(sample(&text, REQUESTS_TOTAL, &labels), Some(2.0));
    let count = format!("{REQUEST_DURATION_SECONDS}_count");
    assert_eq!(sample(&text, &count, &[("route", "r")]), Some(2.0));
}

#[test]
fn odd_statuses_fall_into_the_nearest_class() {
    let m = Metrics::new();
    let r = m.route("r");
    let odd = StatusCode::from_u16(999).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.observe(odd, Duration::ZERO, 0, 0);
    r.observe(StatusCode::SWITCHING_PROTOCOLS, Duration::ZERO, 0, 0);
    let text = m.render();
    let count = |code| sample(&text, REQUESTS_TOTAL, &[("route", "r"), ("code", code)]);
    assert_eq!(count("5xx"), Some(1.0));
    assert_eq!(count("1xx"), Some(1.0));
}

#[test]
fn guards_undo_their_gauges() {
    let m = Metrics::new();
    let server = m.upstream_server("u", "s:1");
    let listener = m.listener("l");
    let s1 = [("upstream", "u"), ("server", "s:1")];
    {
        let _a = server.in_flight();
        let _b = server.in_flight();
        let _c = listener.connection();
        assert_eq!(sample(&m.render(), UPSTREAM_IN_FLIGHT, &s1), Some(2.0));
    }
    let text = m.render();
    assert_eq!(sample(&text, UPSTREAM_IN_FLIGHT, &s1), Some(0.0));
    assert_eq!(
        sample(&text, CONNECTIONS_OPEN, &[("listener", "l")]),
        Some(0.0)
    );
    assert_eq!(
        sample(&text, CONNECTIONS_TOTAL, &[("listener", "l")]),
        Some(1.0)
    );
}

#[test]
fn health_survives_asking_for_the_server_again() {
    let m = Metrics::new();
    m.upstream_server("u", "s:1").set_healthy(false);
    // A reload asks for the same server's handles again; the last check's verdict stays.
    let again = m.upstream_server("u", "s:1");
    let s1 = [("upstream", "u"), ("server", "s:1")];
    assert_eq!(sample(&m.render(), UPSTREAM_SERVER_HEALTHY, &s1), Some(0.0));
    again.set_healthy(true);
    assert_eq!(sample(&m.render(), UPSTREAM_SERVER_HEALTHY, &s1), Some(1.0));
}

#[test]
fn label_values_are_escaped() {
    let m = Metrics::new();
    m.route("a \"quoted\" route")
        .observe(StatusCode::OK, Duration::ZERO, 0, 0);
    let text = m.render();
    assert!(text.contains(r#"route="a \"quoted\" route""#), "{text}");
}

#[test]
fn outcome_for_status() {
    assert_eq!(
        UpstreamOutcome::for_status(StatusCode::BAD_GATEWAY),
        UpstreamOutcome::HttpError
    );
    assert_eq!(
        UpstreamOutcome::for_status(StatusCode::NOT_FOUND),
        UpstreamOutcome::Ok
    );
    for (i, outcome) in UpstreamOutcome::ALL.into_iter().enumerate() {
        assert_eq!(outcome as usize, i, "ALL must follow declaration order");
    }
}

#[test]
fn watched_servers_are_read_at_scrape_time() {
    use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

    let m = Metrics::new();
    let up = Arc::new(AtomicBool::new(true));
    let busy = Arc::new(AtomicI64::new(3));
    let (u, b) = (up.clone(), busy.clone());
    m.watch_upstream_server("u", "s:1", move || ServerState {
        healthy: u.load(Ordering::Relaxed),
        in_flight: b.load(Ordering::Relaxed),
        connections: 2,
    });
    let s1 = [("upstream", "u"), ("server", "s:1")];
    let text = m.render();
    assert_eq!(sample(&text, UPSTREAM_SERVER_HEALTHY, &s1), Some(1.0));
    assert_eq!(sample(&text, UPSTREAM_IN_FLIGHT, &s1), Some(3.0));
    assert_eq!(sample(&text, UPSTREAM_CONNECTIONS, &s1), Some(2.0));

    // No event in between: the next scrape sees the state as it is then.
    up.store(false, Ordering::Relaxed);
    busy.store(0, Ordering::Relaxed);
    let text = m.render();
    assert_eq!(sample(&text, UPSTREAM_SERVER_HEALTHY, &s1), Some(0.0));
    assert_eq!(sample(&text, UPSTREAM_IN_FLIGHT, &s1), Some(0.0));

    // A reload registers the server again: the new reader replaces the old one.
    m.watch_upstream_server("u", "s:1", || ServerState {
        healthy: true,
        in_flight: 7,
        connections: 0,
    });
    let text = m.render();
    assert_eq!(sample(&text, UPSTREAM_SERVER_HEALTHY, &s1), Some(1.0));
    assert_eq!(sample(&text, UPSTREAM_IN_FLIGHT, &s1), Some(7.0));
}

#[test]
fn compression_is_counted_by_decision_and_algorithm() {
    let text = exercised().render();
    let decision = |d| {
        sample(
            &text,
            COMPRESS_RESPONSES_TOTAL,
            &[("route", "api"), ("decision", d)],
        )
    };
    assert_eq!(decision("compressed"), Some(1.0));
    assert_eq!(decision("too_small"), Some(1.0));
    assert_eq!(decision("not_accepted"), Some(0.0), "every decision exists");
    let br = [("algorithm", "br")];
    assert_eq!(sample(&text, COMPRESS_BYTES_IN_TOTAL, &br), Some(1000.0));
    assert_eq!(sample(&text, COMPRESS_BYTES_OUT_TOTAL, &br), Some(100.0));
    assert_eq!(sample(&text, COMPRESS_CPU_SECONDS_TOTAL, &br), Some(0.25));
    let gzip = [("algorithm", "gzip")];
    assert_eq!(sample(&text, COMPRESS_BYTES_OUT_TOTAL, &gzip), Some(0.0));
    let variants =
        |name, algorithm| sample(&text, name, &[("route", "api"), ("algorithm", algorithm)]);
    assert_eq!(variants(COMPRESS_VARIANTS_MADE_TOTAL, "gzip"), Some(1.0));
    assert_eq!(variants(COMPRESS_VARIANT_HITS_TOTAL, "gzip"), Some(2.0));
    assert_eq!(
        variants(COMPRESS_VARIANT_HITS_TOTAL, "zstd"),
        Some(0.0),
        "every algorithm exists"
    );
}
