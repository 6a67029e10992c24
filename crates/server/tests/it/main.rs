//! sluice's integration tests: real sockets on 127.0.0.1 port 0, real TLS, real clients
//! (reqwest, curl, raw TCP for what no well-behaved client sends).

// Helper functions of this test crate are outside #[test] functions, where clippy.toml's
// allow-*-in-tests does not reach.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod access;
mod acme;
mod cache;
mod compress;
mod decompress;
mod dictionary;
mod dns_discovery;
mod docs_paths;
mod fleet;
mod h2spec;
mod hostile;
mod http2;
mod http3;
mod layers;
mod lifecycle;
mod limits;
mod listeners;
mod matchers;
mod metrics;
mod parking;
mod paths;
mod proxy;
mod proxy_protocol;
mod proxy_protocol_listener;
mod proxy_rewrite;
mod rate_limit;
mod reload;
mod robustness;
mod routes;
mod static_files;
mod status;
mod tls;
mod upstream_faults;
mod upstream_outage;
mod upstream_tls;
mod websocket;

use std::path::Path;

/// Write `files` (relative path, contents) under `dir`.
pub fn write_files(dir: &Path, files: &[(&str, &[u8])]) {
    for (name, contents) in files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, contents).unwrap();
    }
}

/// A static-file server over `dir/public` with one plain listener.
pub async fn static_server(dir: &Path) -> sluice_testkit::TestServer {
    std::fs::create_dir_all(dir.join("public")).unwrap();
    sluice_testkit::start_toml_in(
        dir,
        r#"
        [log]
        access = "off"
        [[listeners]]
        address = "127.0.0.1:0"
        [[routes]]
        static = { root = "public" }
        "#,
    )
    .await
}

/// The server's Prometheus text from its admin listener.
pub async fn scrape_metrics(server: &sluice_testkit::TestServer) -> String {
    let admin = server.running().admin_address().unwrap();
    sluice_testkit::client(sluice_testkit::Offer::Http1)
        .get(format!("http://{admin}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// The value of the first sample line of `text` that starts with `series` (name and labels).
pub fn metric(text: &str, series: &str) -> f64 {
    let line = text
        .lines()
        .find(|l| l.starts_with(series))
        .unwrap_or_else(|| panic!("no {series} in\n{text}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

/// Run curl with `args`, returning stdout. curl is a test requirement (.ci/run installs it).
/// Runs on the blocking pool so the in-process server on the test's runtime keeps serving.
pub async fn curl(args: &[&str]) -> String {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || curl_blocking(&args))
        .await
        .unwrap()
}

fn curl_blocking(args: &[String]) -> String {
    let out = std::process::Command::new("curl")
        .args(["--silent", "--show-error", "--max-time", "20"])
        .args(args)
        .output()
        .expect("curl is required by the tests: apt-get install curl");
    assert!(
        out.status.success(),
        "curl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
