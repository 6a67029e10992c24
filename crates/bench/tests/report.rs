//! The report: report.md against a golden file, results.json round trip, charts written and
//! linked. The report is built by hand so every cell kind (ok, failures, not supported, check
//! failed, error, no nginx row, two drivers, an unknown group) is covered, the best peer of a
//! row (HAProxy, Varnish or nginx, whichever used the least CPU per request, never the
//! baseline), and the many-connections table with its latency spread.
//!
//! `UPDATE_GOLDEN=1 cargo test -p sluice-bench --test report` rewrites tests/golden/report.md;
//! review the diff before committing it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use sluice_bench::model::{
    Machine, Measurement, Outcome, Report, RunSettings, ScenarioResult, SyscallCounts,
};
use sluice_bench::report::{self, charts, markdown};

/// A run of `rps` req/s over 1000 responses of `body` bytes each.
fn run(rps: f64, body: u64, cpu_us: f64) -> Measurement {
    Measurement {
        requests: 1000,
        failures: 0,
        statuses: BTreeMap::from([(200, 1000)]),
        elapsed_secs: 1000.0 / rps,
        requests_per_sec: rps,
        latency_p50_us: 1_000_000.0 / rps * 4.0,
        latency_p99_us: 1_000_000.0 / rps * 9.5,
        latency_max_us: 1_000_000.0 / rps * 20.0,
        latency_sd_us: 1_000_000.0 / rps * 2.5,
        body_bytes: body * 1000,
        header_bytes: 150_000,
        body_mb_per_sec: rps * body as f64 / 1e6,
        server_cpu_percent: rps * cpu_us / 10_000.0,
        server_cpu_us_per_request: cpu_us,
        // The kernel's share, as on the proxy rows measured here (system calls and loopback).
        server_kernel_us_per_request: cpu_us * 0.6,
        server_peak_rss_bytes: 12 << 20,
        compression_ratio: None,
        syscalls: None,
        first_error: None,
    }
}

fn behind_go(mut r: ScenarioResult) -> ScenarioResult {
    r.origin = "go".into();
    r
}

fn with_syscalls(mut m: Measurement) -> Measurement {
    m.syscalls = Some(SyscallCounts {
        requests: 200,
        calls: BTreeMap::from([
            ("writev".to_string(), 400),
            ("recvfrom".to_string(), 1000),
            ("epoll_wait".to_string(), 150),
            ("sendto".to_string(), 20),
            ("futex".to_string(), 2),
        ]),
    });
    m
}

fn result(
    group: &str,
    labels: &[(&str, &str)],
    target: &str,
    outcome: Outcome,
    runs: Vec<Measurement>,
) -> ScenarioResult {
    ScenarioResult {
        scenario: format!(
            "{group}-{}",
            labels.iter().map(|(_, v)| *v).collect::<Vec<_>>().join("-")
        ),
        group: group.into(),
        labels: labels
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
        target: target.into(),
        driver: "builtin".into(),
        origin: "sluice".into(),
        outcome,
        runs,
    }
}

fn gzip(rps: f64, bytes: u64, cpu: f64) -> Measurement {
    Measurement {
        compression_ratio: Some(74_418.0 / bytes as f64),
        ..run(rps, bytes, cpu)
    }
}

fn sample_report() -> Report {
    let ok = || Outcome::Ok;
    let level = |l| [("encoding", "gzip"), ("level", l)];
    let mut results = vec![
        // Seed 003 first: the report orders groups as the scenario table does, not by appearance.
        result(
            "seed-003",
            &[
                ("setup", "origin"),
                ("path", "/what-date-is-it"),
                ("caching", ""),
                ("concurrency", "6"),
            ],
            "baseline",
            ok(),
            vec![run(6243.0, 340_001, 0.0)],
        ),
        result(
            "seed-003",
            &[
                ("setup", "proxy"),
                ("path", "/what-date-is-it"),
                ("caching", "no"),
                ("concurrency", "6"),
            ],
            "nginx",
            ok(),
            vec![
                run(2542.0, 340_001, 352.0),
                run(2500.0, 340_001, 360.0),
                run(2601.0, 340_001, 340.0),
            ],
        ),
        result(
            "seed-003",
            &[
                ("setup", "proxy"),
                ("path", "/what-date-is-it"),
                ("caching", "no"),
                ("concurrency", "6"),
            ],
            "sluice",
            ok(),
            vec![
                run(3300.5, 340_001, 250.0),
                run(3100.0, 340_001, 270.0),
                run(3350.0, 340_001, 245.0),
            ],
        ),
        result(
            "seed-003",
            &[
                ("setup", "proxy-cached"),
                ("path", "/what-date-is-it"),
                ("caching", "yes"),
                ("concurrency", "6"),
            ],
            "sluice",
            Outcome::CheckFailed(
                "expected X-Cache-Status: HIT on the second request, got MISS".into(),
            ),
            vec![],
        ),
        result(
            "seed-003",
            &[
                ("setup", "proxy-cached"),
                ("path", "/what-date-is-it"),
                ("caching", "yes"),
                ("concurrency", "6"),
            ],
            "nginx",
            ok(),
            vec![run(6219.0, 340_001, 145.0)],
        ),
        result(
            "seed-003",
            &[
                ("setup", "proxy-cached"),
                ("path", "/what-date-is-it"),
                ("caching", "yes"),
                ("concurrency", "6"),
            ],
            "varnish",
            ok(),
            vec![run(9050.0, 340_001, 73.0)],
        ),
        result(
            "seed-003",
            &[
                ("setup", "proxy"),
                ("path", "/what-date-is-it"),
                ("caching", "no"),
                ("concurrency", "6"),
            ],
            "varnish",
            ok(),
            vec![run(3000.0, 340_001, 210.0)],
        ),
        // HAProxy cheaper than sluice on the proxied row: it is the best peer there.
        result(
            "seed-003",
            &[
                ("setup", "proxy"),
                ("path", "/what-date-is-it"),
                ("caching", "no"),
                ("concurrency", "6"),
            ],
            "haproxy",
            ok(),
            vec![run(3400.0, 340_001, 200.0)],
        ),
        // The same row behind the Go origin: sluice and HAProxy compared with each other there,
        // never with the rows behind sluice's own origin; sluice's with a syscall side run.
        behind_go(result(
            "seed-003",
            &[
                ("setup", "proxy"),
                ("path", "/what-date-is-it"),
                ("caching", "no"),
                ("concurrency", "6"),
            ],
            "sluice",
            ok(),
            vec![
                with_syscalls(run(3000.0, 340_001, 120.0)),
                run(3100.0, 340_001, 110.0),
                run(2900.0, 340_001, 130.0),
            ],
        )),
        behind_go(result(
            "seed-003",
            &[
                ("setup", "proxy"),
                ("path", "/what-date-is-it"),
                ("caching", "no"),
                ("concurrency", "6"),
            ],
            "haproxy",
            ok(),
            vec![run(3200.0, 340_001, 100.0)],
        )),
        result(
            "seed-003",
            &[
                ("setup", "proxy-cached"),
                ("path", "/what-date-is-it"),
                ("caching", "yes"),
                ("concurrency", "6"),
            ],
            "caddy",
            Outcome::NotSupported("stock Caddy has no response cache (it needs a plugin)".into()),
            vec![],
        ),
        // 1,000 connections: nginx even, sluice with a wide spread.
        result(
            "many-conns",
            &[("file", "74 KB, no compression"), ("connections", "1000")],
            "sluice",
            ok(),
            vec![Measurement {
                latency_sd_us: 43_000.0,
                latency_max_us: 195_000.0,
                ..run(21_000.0, 74_418, 40.0)
            }],
        ),
        result(
            "many-conns",
            &[("file", "74 KB, no compression"), ("connections", "1000")],
            "nginx",
            ok(),
            vec![Measurement {
                latency_sd_us: 4_500.0,
                latency_max_us: 91_000.0,
                ..run(25_400.0, 74_418, 35.0)
            }],
        ),
        result(
            "many-conns",
            &[("file", "74 KB, no compression"), ("connections", "1000")],
            "haproxy",
            Outcome::NotSupported("HAProxy serves no files".into()),
            vec![],
        ),
        // Compressed once and stored (sluice, Varnish) against gzip per hit (nginx).
        result(
            "cache-compress",
            &[("compression", "gzip"), ("level", "6"), ("caching", "yes")],
            "varnish",
            ok(),
            vec![gzip(21_000.0, 1_064, 29.0)],
        ),
        result(
            "cache-compress",
            &[("compression", "gzip"), ("level", "6"), ("caching", "yes")],
            "nginx",
            ok(),
            vec![gzip(980.0, 1_082, 1_010.0)],
        ),
        result(
            "cache-compress",
            &[("compression", "gzip"), ("level", "6"), ("caching", "yes")],
            "sluice",
            ok(),
            vec![gzip(25_200.0, 1_060, 22.5)],
        ),
        result(
            "seed-001",
            &level("1"),
            "sluice",
            ok(),
            vec![gzip(4100.0, 18_020, 230.0)],
        ),
        result(
            "seed-001",
            &level("1"),
            "nginx",
            ok(),
            vec![gzip(2392.0, 18_660, 418.0)],
        ),
        result(
            "seed-001",
            &level("6"),
            "nginx",
            ok(),
            vec![gzip(675.0, 15_490, 1482.0)],
        ),
        result(
            "seed-001",
            &level("6"),
            "sluice",
            ok(),
            vec![gzip(980.0, 15_600, 1010.0)],
        ),
        result(
            "seed-001",
            &[("encoding", "identity"), ("level", "")],
            "sluice",
            ok(),
            vec![run(41_000.0, 74_418, 21.5)],
        ),
        result(
            "seed-001",
            &[("encoding", "precompressed"), ("level", "")],
            "sluice",
            Outcome::NotSupported("precompressed sidecars | not built yet".into()),
            vec![],
        ),
        result(
            "seed-002",
            &[("protocol", "h1"), ("tls", "yes")],
            "sluice",
            ok(),
            vec![run(13_900.0, 120, 60.0)],
        ),
        result(
            "seed-002",
            &[("protocol", "h2"), ("tls", "yes")],
            "sluice",
            ok(),
            vec![Measurement {
                header_bytes: 26_000,
                ..run(12_300.0, 120, 66.0)
            }],
        ),
        result(
            "seed-004",
            &[("compression", "raw")],
            "sluice",
            ok(),
            vec![Measurement {
                requests: 4,
                body_bytes: 4 * 131_000_000,
                body_mb_per_sec: 910.0,
                requests_per_sec: 6.95,
                ..run(6.95, 0, 0.0)
            }],
        ),
        result(
            "seed-004",
            &[("compression", "gzip-1")],
            "nginx",
            Outcome::Error(
                "nginx exited: [emerg] unknown directive \"gzip_flush\"\nin /tmp/nginx.conf:12"
                    .into(),
            ),
            vec![],
        ),
        result(
            "seed-004",
            &[("compression", "gzip-1")],
            "sluice",
            ok(),
            vec![Measurement {
                requests: 4,
                body_bytes: 4 * 37_800_000,
                body_mb_per_sec: 190.25,
                requests_per_sec: 5.03,
                compression_ratio: Some(3.46),
                ..run(5.03, 0, 0.0)
            }],
        ),
        result(
            "seed-000",
            &[("case", "GZ1"), ("N", "100,000"), ("C", "5")],
            "sluice",
            ok(),
            vec![run(9800.0, 260, 55.0)],
        ),
        result(
            "seed-000",
            &[("case", "GZ1"), ("N", "100,000"), ("C", "5")],
            "nginx",
            Outcome::NotSupported(
                "nginx cannot decompress request bodies (needs a third-party module)".into(),
            ),
            vec![],
        ),
        result(
            "seed-000",
            &[("case", "GZ1"), ("N", "100,000"), ("C", "5")],
            "varnish",
            Outcome::NotSupported("Varnish cannot decompress request bodies".into()),
            vec![],
        ),
        result(
            "seed-000",
            &[("case", "GZ0"), ("N", "100,000"), ("C", "5")],
            "sluice",
            ok(),
            vec![Measurement {
                failures: 3,
                ..run(10_519.0, 260, 48.0)
            }],
        ),
        result(
            "seed-000",
            &[("case", "GZ0"), ("N", "100,000"), ("C", "5")],
            "nginx",
            ok(),
            vec![run(10_100.0, 260, 50.0)],
        ),
    ];
    // An unknown group measured by both drivers.
    let mut by_h2load = result(
        "zz-extra",
        &[("path", "/hello")],
        "sluice",
        Outcome::Ok,
        vec![run(30_100.0, 120, 12.25)],
    );
    by_h2load.driver = "h2load".into();
    results.push(result(
        "zz-extra",
        &[("path", "/hello")],
        "sluice",
        Outcome::Ok,
        vec![run(29_000.0, 120, 12.5)],
    ));
    results.push(by_h2load);
    Report {
        machine: Machine {
            cpu_model: "AMD EPYC 7B13 64-Core Processor".into(),
            cores: 2,
            kernel: "6.1.0-27-cloud-amd64".into(),
            memory_bytes: 8_327_098_368,
        },
        commit: Some("a656db0-dirty".into()),
        tools: BTreeMap::from([
            ("h2load".to_string(), "h2load nghttp2/1.52.0".to_string()),
            ("nginx".to_string(), "nginx/1.22.1".to_string()),
            (
                "haproxy".to_string(),
                "HAProxy version 2.6.12-1+deb12u4 2026/10/17".to_string(),
            ),
            ("caddy".to_string(), "caddy 2.6.2".to_string()),
            (
                "varnish".to_string(),
                "varnishd (varnish-7.1.1 revision 7cee1c581bead20e88d101ab3d72afb29f14d87a)"
                    .to_string(),
            ),
        ]),
        started_at: "2026-11-23T10:00:00Z".into(),
        settings: RunSettings {
            quick: false,
            runs: 3,
            server_cpus: "0".into(),
            load_cpus: "1".into(),
            server_workers: 1,
        },
        results,
    }
}

fn golden_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/report.md")
}

#[test]
fn report_markdown_matches_the_golden_file() {
    let report = sample_report();
    let rendered = markdown::render(&report, &charts::render(&report).unwrap());
    let path = golden_path();
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &rendered).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; run with UPDATE_GOLDEN=1", path.display()));
    if rendered != expected {
        panic!(
            "report.md differs from {} (UPDATE_GOLDEN=1 to regenerate, then review):\n{rendered}",
            path.display()
        );
    }
}

#[test]
fn the_best_peer_is_the_measured_peer_with_the_least_cpu_per_request() {
    let report = sample_report();
    let md = markdown::render(&report, &[]);
    // Proxied at c=6: HAProxy 200 µs beats Varnish 210 and nginx 352; sluice's 250 is 1.25x.
    assert!(md.contains("| haproxy 200 | 1.25x |"), "{md}");
    // Cached: Varnish (73) over nginx (145); Caddy refused and sluice's check failed.
    assert!(md.contains("| sluice | check failed"), "{md}");
    // Many connections: nginx is the only peer measured, with the latency spread shown.
    assert!(md.contains("| 43.00 ms | 195.00 ms |"), "{md}");
    assert!(md.contains("| nginx 35.0 | 1.14x |"), "{md}");
    // The summary names each scenario once, sluice's CPU against the best peer's and nginx's,
    // each with its kernel part.
    assert!(
        md.contains(
            "| seed-003-proxy-/what-date-is-it-no-6 | 250 | 100 | 150 | haproxy 200 | 80.0 | 120 \
             | 352 | 1.25x |"
        ),
        "{md}"
    );
    assert!(
        md.contains("| seed-000-GZ1-100,000-5 | 55.0 | 22.0 | 33.0 | – |  |  | cannot | – |"),
        "{md}"
    );
    // Behind the Go origin the row is its own: sluice's median 120 against HAProxy's 100 there.
    assert!(
        md.contains(
            "| seed-003-proxy-/what-date-is-it-no-6 (go origin) | 120 | 48.0 | 72.0 | haproxy 100 \
             | 40.0 | 60.0 | – | 1.20x |"
        ),
        "{md}"
    );
    // The CPU cell is the median with the range of the runs.
    assert!(md.contains("| 120 (110–130) |"), "{md}");
    // The syscall side run: 1,572 calls over 200 requests, recvfrom first.
    assert!(
        md.contains(
            "| seed-003-proxy-/what-date-is-it-no-6 (go origin) | sluice | 7.9 | recvfrom 5.00, \
             writev 2.00, epoll_wait 0.75, sendto 0.10 |"
        ),
        "{md}"
    );
}

#[test]
fn results_from_before_the_latency_spread_still_read() {
    let dir = tempfile::tempdir().unwrap();
    let report = sample_report();
    report::write(dir.path(), &report).unwrap();
    let path = dir.path().join("results.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let old: String = text
        .lines()
        .filter(|l| !l.contains("latency_sd_us") && !l.contains("server_kernel_us_per_request"))
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&path, old).unwrap();
    let back = report::read(dir.path()).unwrap();
    assert_eq!(back.results[0].runs[0].latency_sd_us, 0.0);
    assert_eq!(back.results[0].runs[0].server_kernel_us_per_request, 0.0);
}

#[test]
fn write_then_read_round_trips_and_writes_charts() {
    let dir = tempfile::tempdir().unwrap();
    let report = sample_report();
    report::write(dir.path(), &report).unwrap();

    let back = report::read(dir.path()).unwrap();
    assert_eq!(
        serde_json::to_value(&back).unwrap(),
        serde_json::to_value(&report).unwrap()
    );

    // Re-rendering from results.json alone gives the same report.md.
    let again = tempfile::tempdir().unwrap();
    report::write(again.path(), &back).unwrap();
    let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert_eq!(
        md,
        std::fs::read_to_string(again.path().join("report.md")).unwrap()
    );

    for (file, must_show) in [
        (
            "seed-001-gzip-levels.svg",
            &["sluice", "nginx", "gzip level"][..],
        ),
        (
            "seed-003-req-per-sec.svg",
            &["sluice", "nginx", "varnish", "baseline", "proxy-cached"][..],
        ),
        ("seed-004-mb-per-sec.svg", &["sluice", "MB/s", "gzip-1"][..]),
    ] {
        let svg = std::fs::read_to_string(dir.path().join(file)).unwrap();
        assert!(svg.starts_with("<svg"), "{file}");
        for text in must_show {
            assert!(svg.contains(text), "{file} lacks {text}");
        }
        assert_eq!(
            svg,
            std::fs::read_to_string(again.path().join(file)).unwrap(),
            "{file}"
        );
        assert!(
            md.contains(&format!("]({file})")),
            "report.md does not link {file}"
        );
    }
}

#[test]
fn charts_only_for_groups_with_measurements() {
    let mut report = sample_report();
    report.results.retain(|r| r.group == "seed-002");
    assert!(charts::render(&report).unwrap().is_empty());
    // seed 003 with nothing measured: no chart either.
    report.results.push(result(
        "seed-003",
        &[("setup", "proxy")],
        "sluice",
        Outcome::Error("did not start".into()),
        vec![],
    ));
    assert!(charts::render(&report).unwrap().is_empty());
}

#[test]
fn non_finite_numbers_are_written_as_unmeasured() {
    let dir = tempfile::tempdir().unwrap();
    let mut report = sample_report();
    report.results[0].runs[0].server_cpu_us_per_request = f64::NAN;
    report.results[0].runs[0].compression_ratio = Some(f64::INFINITY);
    report::write(dir.path(), &report).unwrap();
    let back = report::read(dir.path()).unwrap();
    assert_eq!(back.results[0].runs[0].server_cpu_us_per_request, 0.0);
    assert_eq!(back.results[0].runs[0].compression_ratio, None);
}

#[test]
fn a_broken_results_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("results.json"), "{\"machine\": 1}").unwrap();
    let error = report::read(dir.path()).unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidData);
    assert!(error.to_string().contains("results.json"), "{error}");
}

#[test]
#[ignore = "writes the sample report to SLUICE_BENCH_SAMPLE_DIR for a look"]
fn dump_sample_report() {
    let dir = std::env::var_os("SLUICE_BENCH_SAMPLE_DIR").unwrap();
    report::write(std::path::Path::new(&dir), &sample_report()).unwrap();
}
