//! The `h2load` adapter: builds its command line, runs it pinned to the load CPUs, and parses
//! its summary (nghttp2 1.52's format, the one Debian ships; saved real outputs in
//! `tests/data/h2load-*.txt`).
//!
//! h2load prints min/max/mean/sd of request times but no percentiles, so every run also writes
//! `--log-file` (one line per request: start µs, status, duration µs) and p50/p99, the maximum,
//! the standard deviation and exact status codes come from that log. Without the log, [`parse`]
//! leaves p50/p99 at 0 (the report shows "–"), takes the summary's max and sd, and counts
//! status classes under 200/300/400/500.
//!
//! h2load counts a request as succeeded only for 2xx and 3xx; 4xx/5xx and connection errors are
//! "failed" ("errored" and "timeout" are subsets), which is what [`Measurement::failures`] means.

use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::model::Measurement;

/// h2load closes a connection idle this long, so a server that stops answering ends the run
/// with errored requests instead of hanging it.
const INACTIVITY_TIMEOUT_SECS: u64 = 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// `--h1`: HTTP/1.1 keep-alive, one request at a time per connection.
    Http1,
    /// HTTP/2: h2 by ALPN over TLS, h2c with prior knowledge otherwise.
    Http2,
}

/// One h2load load: what to send and how hard.
#[derive(Debug, Clone, PartialEq)]
pub struct H2loadArgs {
    pub protocol: Protocol,
    /// Must agree with the base URL's scheme (h2load chooses TLS by the scheme).
    pub tls: bool,
    /// `GET`, or `POST` with a body file: the only two h2load can send.
    pub method: String,
    /// Starts with `/`; appended to the base URL.
    pub path: String,
    pub headers: Vec<(String, String)>,
    /// Request body (`-d FILE`), for POST.
    pub body_file: Option<PathBuf>,
    pub clients: usize,
    /// Concurrent streams per HTTP/2 connection (`-m`); 1 for HTTP/1.1.
    pub streams_per_client: usize,
    /// Total requests (`-n`); ignored when a duration is given.
    pub requests: u64,
    /// Run for this long instead of a request count (`-D`).
    pub duration: Option<Duration>,
}

/// Whether `h2load` is on PATH and runs.
pub fn available() -> bool {
    version().is_some()
}

/// `h2load --version`'s line, e.g. `h2load nghttp2/1.52.0`, for the report's tool list.
pub fn version() -> Option<String> {
    let out = Command::new("h2load").arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    out.status
        .success()
        .then(|| text.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// Runs one load and returns what h2load measured (the server fields are left to the runner).
pub fn run(load: &H2loadArgs, base_url: &str, load_cpus: &str) -> Result<Measurement, String> {
    let log_path = log_file_path();
    let argv = command_line(load, base_url, load_cpus, Some(&log_path))?;
    let (program, args) = argv.split_first().ok_or("empty h2load command line")?;
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run `{program}`: {e} (apt-get install nghttp2-client)"));
    let log = fs::read_to_string(&log_path);
    let _ = fs::remove_file(&log_path);
    let output = output?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(format!(
            "h2load failed ({}): {}",
            output.status,
            tail(&format!("{stdout}{stderr}"))
        ));
    }
    let mut measurement = parse(&stdout)?;
    if let Ok(log) = log {
        apply_request_log(&mut measurement, &log);
    }
    Ok(measurement)
}

/// The full command line, `taskset -c CPUS h2load ...` (no taskset when `load_cpus` is empty).
pub fn command_line(
    load: &H2loadArgs,
    base_url: &str,
    load_cpus: &str,
    log_file: Option<&std::path::Path>,
) -> Result<Vec<String>, String> {
    let https = base_url.starts_with("https://");
    if load.tls != https {
        return Err(format!("tls = {} but the URL is {base_url}", load.tls));
    }
    match (load.method.as_str(), &load.body_file) {
        ("GET", None) | ("POST", Some(_)) => {}
        (method, _) => {
            return Err(format!(
                "h2load sends GET, or POST with a body file; not {method} here"
            ));
        }
    }
    if load.clients == 0 || load.streams_per_client == 0 {
        return Err("h2load needs at least one client and one stream per client".into());
    }
    if load.duration.is_none() && load.requests < load.clients as u64 {
        return Err(format!(
            "{} requests for {} clients: h2load needs at least one each",
            load.requests, load.clients
        ));
    }
    let mut argv = Vec::new();
    if !load_cpus.is_empty() {
        argv.extend(["taskset".to_string(), "-c".into(), load_cpus.into()]);
    }
    argv.push("h2load".into());
    if load.protocol == Protocol::Http1 {
        argv.push("--h1".into());
    }
    // One h2load thread per load CPU, never more threads than clients.
    let threads = cpu_count(load_cpus).clamp(1, load.clients);
    argv.extend([
        "-t".into(),
        threads.to_string(),
        "-c".into(),
        load.clients.to_string(),
    ]);
    argv.extend(["-m".into(), load.streams_per_client.to_string()]);
    match load.duration {
        Some(duration) => argv.extend(["-D".into(), format!("{}", duration.as_secs_f64())]),
        None => argv.extend(["-n".into(), load.requests.to_string()]),
    }
    argv.extend(["-N".into(), INACTIVITY_TIMEOUT_SECS.to_string()]);
    for (name, value) in &load.headers {
        argv.extend(["-H".into(), format!("{name}: {value}")]);
    }
    if let Some(body) = &load.body_file {
        argv.extend(["-d".into(), body.display().to_string()]);
    }
    if let Some(log) = log_file {
        argv.push(format!("--log-file={}", log.display()));
    }
    argv.push(format!("{}{}", base_url.trim_end_matches('/'), load.path));
    Ok(argv)
}

/// Everything h2load's summary says, before it is reduced to a [`Measurement`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Summary {
    /// `Application protocol:` (`http/1.1`, `h2`, `h2c`), absent when no connection was made.
    pub application_protocol: Option<String>,
    pub elapsed_secs: f64,
    pub requests_per_sec: f64,
    pub requests_total: u64,
    pub requests_started: u64,
    pub requests_done: u64,
    pub requests_succeeded: u64,
    /// Includes the errored and timed out ones.
    pub requests_failed: u64,
    pub requests_errored: u64,
    pub requests_timeout: u64,
    /// 2xx, 3xx, 4xx, 5xx.
    pub status_classes: [u64; 4],
    pub traffic_total_bytes: u64,
    pub traffic_header_bytes: u64,
    /// HPACK's saving over the uncompressed header size (0 for HTTP/1.1).
    pub header_space_savings_percent: f64,
    pub traffic_data_bytes: u64,
    /// "time for request" min, max, mean, sd in microseconds.
    pub request_time_us: TimeStats,
}

#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct TimeStats {
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    pub sd: f64,
}

/// Parses h2load's stdout into a [`Measurement`] (see [`parse_summary`] for all of it).
pub fn parse(output: &str) -> Result<Measurement, String> {
    parse_summary(output).map(|summary| summary.measurement())
}

/// Parses every figure of h2load's summary. Missing lines are an error quoting the output's end
/// (where h2load prints why it stopped).
pub fn parse_summary(output: &str) -> Result<Summary, String> {
    let mut summary = Summary::default();
    let mut seen = [false; 5];
    for line in output.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("Application protocol:") {
            summary.application_protocol = Some(rest.trim().to_string());
        } else if let Some(rest) = line.strip_prefix("finished in ") {
            // finished in 57.39ms, 34849.28 req/s, 7.91MB/s
            let mut parts = rest.split(',').map(str::trim);
            summary.elapsed_secs =
                duration_us(parts.next().unwrap_or_default()).ok_or_else(|| bad(line))? / 1e6;
            summary.requests_per_sec = parts
                .next()
                .and_then(|p| p.strip_suffix(" req/s")?.parse().ok())
                .ok_or_else(|| bad(line))?;
            seen[0] = true;
        } else if let Some(rest) = line.strip_prefix("requests:") {
            let counts = counted(rest);
            let get = |name: &str| counts.get(name).copied().ok_or_else(|| bad(line));
            summary.requests_total = get("total")?;
            summary.requests_started = get("started")?;
            summary.requests_done = get("done")?;
            summary.requests_succeeded = get("succeeded")?;
            summary.requests_failed = get("failed")?;
            summary.requests_errored = get("errored")?;
            summary.requests_timeout = get("timeout")?;
            seen[1] = true;
        } else if let Some(rest) = line.strip_prefix("status codes:") {
            let counts = counted(rest);
            for (slot, class) in summary
                .status_classes
                .iter_mut()
                .zip(["2xx", "3xx", "4xx", "5xx"])
            {
                *slot = counts.get(class).copied().ok_or_else(|| bad(line))?;
            }
            seen[2] = true;
        } else if let Some(rest) = line.strip_prefix("traffic:") {
            parse_traffic(rest, &mut summary).ok_or_else(|| bad(line))?;
            seen[3] = true;
        } else if let Some(rest) = line.strip_prefix("time for request:") {
            let values: Vec<f64> = rest
                .split_whitespace()
                .take(4)
                .filter_map(duration_us)
                .collect();
            let [min, max, mean, sd] = values[..] else {
                return Err(bad(line));
            };
            summary.request_time_us = TimeStats { min, max, mean, sd };
            seen[4] = true;
        }
    }
    if seen.iter().all(|s| *s) {
        Ok(summary)
    } else {
        Err(format!(
            "h2load printed no complete summary: {}",
            tail(output)
        ))
    }
}

impl Summary {
    pub fn measurement(&self) -> Measurement {
        let statuses = [200, 300, 400, 500]
            .into_iter()
            .zip(self.status_classes)
            .filter(|(_, count)| *count > 0)
            .collect();
        Measurement {
            requests: self.requests_done,
            failures: self.requests_failed,
            statuses,
            elapsed_secs: self.elapsed_secs,
            requests_per_sec: self.requests_per_sec,
            latency_max_us: self.request_time_us.max,
            latency_sd_us: self.request_time_us.sd,
            body_bytes: self.traffic_data_bytes,
            header_bytes: self.traffic_header_bytes,
            body_mb_per_sec: if self.elapsed_secs > 0.0 {
                self.traffic_data_bytes as f64 / self.elapsed_secs / 1e6
            } else {
                0.0
            },
            ..Measurement::default()
        }
    }
}

/// Exact status codes, p50, p99 and maximum from h2load's `--log-file` (tab-separated: start
/// time µs, status, duration µs). Lines that do not parse are skipped.
pub fn apply_request_log(measurement: &mut Measurement, log: &str) {
    let mut statuses = BTreeMap::new();
    let mut durations = Vec::new();
    for line in log.lines() {
        let mut fields = line.split('\t');
        let (Some(_start), Some(status), Some(duration)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let (Ok(status), Ok(duration)) =
            (status.trim().parse::<i64>(), duration.trim().parse::<u64>())
        else {
            continue;
        };
        // h2load logs -1 for a request that got no response; `failures` already counts it.
        if let Ok(status) = u16::try_from(status) {
            *statuses.entry(status).or_insert(0) += 1;
        }
        durations.push(duration);
    }
    if durations.is_empty() {
        return;
    }
    durations.sort_unstable();
    measurement.statuses = statuses;
    measurement.latency_p50_us = nearest_rank(&durations, 0.50) as f64;
    measurement.latency_p99_us = nearest_rank(&durations, 0.99) as f64;
    measurement.latency_max_us = durations.last().copied().unwrap_or_default() as f64;
    measurement.latency_sd_us = standard_deviation(&durations);
}

/// The population standard deviation (h2load's own `sd` is of the same values, rounded in
/// its summary).
fn standard_deviation(values: &[u64]) -> f64 {
    let n = values.len() as f64;
    if n == 0.0 {
        return 0.0;
    }
    let mean = values.iter().map(|v| *v as f64).sum::<f64>() / n;
    let variance = values
        .iter()
        .map(|v| (*v as f64 - mean).powi(2))
        .sum::<f64>()
        / n;
    variance.sqrt()
}

/// The nearest-rank percentile of sorted values: the smallest value with at least `p` of all
/// values at or below it.
fn nearest_rank(sorted: &[u64], p: f64) -> u64 {
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted
        .get(rank.saturating_sub(1))
        .copied()
        .unwrap_or_default()
}

/// "2000 total, 2000 started, 0 failed" -> {"total": 2000, ...}.
fn counted(list: &str) -> BTreeMap<&str, u64> {
    list.split(',')
        .filter_map(|item| {
            let (count, name) = item.trim().split_once(' ')?;
            Some((name.trim(), count.parse().ok()?))
        })
        .collect()
}

/// " 464.84KB (476000) total, 169.92KB (174000) headers (space savings 0.00%), 234.38KB (240000) data"
fn parse_traffic(rest: &str, summary: &mut Summary) -> Option<()> {
    let exact = |item: &str| -> Option<u64> {
        let open = item.find('(')?;
        let close = open + item[open..].find(')')?;
        item[open + 1..close].parse().ok()
    };
    let (total, rest) = rest.split_once(" total,")?;
    let (headers, data) = rest.split_once(" headers")?;
    summary.traffic_total_bytes = exact(total)?;
    summary.traffic_header_bytes = exact(headers)?;
    let savings = data.split_once("space savings ")?.1;
    summary.header_space_savings_percent = savings.split_once('%')?.0.parse().ok()?;
    let data = data.split_once("),")?.1;
    summary.traffic_data_bytes = exact(data.strip_suffix(" data")?)?;
    Some(())
}

/// h2load's durations: `22us`, `1.04ms`, `1.12s`; in microseconds.
fn duration_us(text: &str) -> Option<f64> {
    let text = text.trim();
    let (number, scale) = if let Some(n) = text.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix("ms") {
        (n, 1e3)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1e6)
    } else {
        return None;
    };
    number.parse::<f64>().ok().map(|n| n * scale)
}

/// Number of CPUs in a taskset list like `1`, `2-3` or `0,2-3`.
fn cpu_count(list: &str) -> usize {
    list.split(',')
        .filter_map(|part| match part.split_once('-') {
            Some((from, to)) => Some(
                to.trim()
                    .parse::<usize>()
                    .ok()?
                    .saturating_sub(from.trim().parse().ok()?)
                    + 1,
            ),
            None => part.trim().parse::<usize>().ok().map(|_| 1),
        })
        .sum()
}

fn bad(line: &str) -> String {
    format!("cannot read h2load's line `{line}`")
}

/// The last lines of an output, where h2load says why it stopped.
fn tail(output: &str) -> String {
    let lines: Vec<&str> = output.lines().filter(|l| !l.trim().is_empty()).collect();
    let from = lines.len().saturating_sub(3);
    let text = lines[from..].join(" / ");
    if text.is_empty() {
        "no output".into()
    } else {
        text
    }
}

/// A fresh per-run file in the temp dir (pid + counter: several runs in one process, several
/// bench processes on one machine).
fn log_file_path() -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!(
        "sluice-bench-h2load-{}-{n}.log",
        std::process::id()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(path: &str) -> H2loadArgs {
        H2loadArgs {
            protocol: Protocol::Http2,
            tls: false,
            method: "GET".into(),
            path: path.into(),
            headers: vec![("accept-encoding".into(), "gzip".into())],
            body_file: None,
            clients: 100,
            streams_per_client: 1,
            requests: 10_000,
            duration: None,
        }
    }

    #[test]
    fn command_line_pins_and_passes_every_option() {
        let argv = command_line(&get("/index.html"), "http://127.0.0.1:8080/", "1", None);
        assert_eq!(
            argv.map(|a| a.join(" ")),
            Ok(
                "taskset -c 1 h2load -t 1 -c 100 -m 1 -n 10000 -N 10 -H accept-encoding: gzip \
                http://127.0.0.1:8080/index.html"
                    .to_string()
            )
        );
        let post = H2loadArgs {
            protocol: Protocol::Http1,
            tls: true,
            method: "POST".into(),
            body_file: Some("/tmp/body.json.gz".into()),
            clients: 5,
            duration: Some(Duration::from_millis(2500)),
            headers: vec![],
            ..get("/reqinfo")
        };
        let log = PathBuf::from("/tmp/x.log");
        let argv = command_line(&post, "https://127.0.0.1:8443", "2-3", Some(&log));
        assert_eq!(
            argv.map(|a| a.join(" ")),
            Ok(
                "taskset -c 2-3 h2load --h1 -t 2 -c 5 -m 1 -D 2.5 -N 10 -d /tmp/body.json.gz \
                --log-file=/tmp/x.log https://127.0.0.1:8443/reqinfo"
                    .to_string()
            )
        );
        assert_eq!(
            command_line(&get("/"), "http://h", "", None).map(|a| a[0].clone()),
            Ok("h2load".into())
        );
    }

    #[test]
    fn command_line_refuses_what_h2load_cannot_do() {
        let https = command_line(&get("/"), "https://127.0.0.1:1", "1", None);
        assert!(https.is_err_and(|e| e.contains("tls")));
        let put = H2loadArgs {
            method: "PUT".into(),
            ..get("/")
        };
        assert!(command_line(&put, "http://h", "1", None).is_err_and(|e| e.contains("PUT")));
        let few = H2loadArgs {
            requests: 10,
            ..get("/")
        };
        assert!(
            command_line(&few, "http://h", "1", None).is_err_and(|e| e.contains("10 requests"))
        );
    }

    #[test]
    fn durations_and_cpu_lists() {
        assert_eq!(duration_us("22us"), Some(22.0));
        assert_eq!(duration_us("1.04ms"), Some(1040.0));
        assert_eq!(duration_us("1.5s"), Some(1_500_000.0));
        assert_eq!(duration_us("fast"), None);
        assert_eq!(cpu_count("1"), 1);
        assert_eq!(cpu_count("0,2-3"), 3);
        assert_eq!(cpu_count(""), 0);
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let values: Vec<u64> = (1..=100).collect();
        assert_eq!(nearest_rank(&values, 0.5), 50);
        assert_eq!(nearest_rank(&values, 0.99), 99);
        assert_eq!(nearest_rank(&[7], 0.99), 7);
    }
}
