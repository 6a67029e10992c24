//! The data shared by scenarios, drivers, targets and the report. Everything here serialises to
//! `results.json`, and `sluice bench report DIR` re-renders from that file alone, so the report
//! needs nothing that is not in these types.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One whole `sluice bench run`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub machine: Machine,
    /// `git describe --always --dirty` of the sluice tree, when known.
    pub commit: Option<String>,
    /// Tool name -> version line (`nginx`, `h2load`, `sluice`, `rustc`...).
    pub tools: BTreeMap<String, String>,
    /// RFC 3339 UTC start time.
    pub started_at: String,
    /// `--quick`, runs per measurement, CPUs used.
    pub settings: RunSettings,
    pub results: Vec<ScenarioResult>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Machine {
    pub cpu_model: String,
    pub cores: usize,
    pub kernel: String,
    pub memory_bytes: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunSettings {
    pub quick: bool,
    /// Load runs per measurement; the report shows their median (and min/max).
    pub runs: usize,
    pub server_cpus: String,
    pub load_cpus: String,
    pub server_workers: usize,
}

/// One scenario on one target with one driver.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScenarioResult {
    /// Scenario name, e.g. `gzip-level-6`.
    pub scenario: String,
    /// The seed experiment (report table) it belongs to, e.g. `seed-001`.
    pub group: String,
    /// Column values that place this row in its group's table, in column order, e.g.
    /// `[("setup", "proxy"), ("path", "/what-date-is-it"), ("concurrency", "6")]`. Rows of one
    /// group share the same column names.
    pub labels: Vec<(String, String)>,
    /// `sluice`, `nginx` or `baseline`.
    pub target: String,
    /// `builtin` or `h2load`.
    pub driver: String,
    /// The program behind the proxy (`--origin`): `sluice` (the demo origin), `go`, `node`,
    /// `python`; `-` for rows with no origin (static files). `sluice` in results from before
    /// the origin zoo.
    #[serde(default = "default_origin")]
    pub origin: String,
    pub outcome: Outcome,
    /// One per load run (empty unless the outcome is `Ok`).
    pub runs: Vec<Measurement>,
}

/// How a scenario ended on a target.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", content = "detail", rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    /// The target cannot do what the scenario needs (nginx decompressing request bodies, a
    /// sluice feature not built yet); the reason is shown in the report.
    NotSupported(String),
    /// The correctness check before the load failed: the numbers would be meaningless.
    CheckFailed(String),
    /// The target did not start, the driver failed, or the load saw errors.
    Error(String),
}

/// One load run and what the server used meanwhile.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Measurement {
    pub requests: u64,
    /// Requests that got no response, a connection error, or an unexpected status.
    pub failures: u64,
    /// Status code -> count.
    pub statuses: BTreeMap<u16, u64>,
    pub elapsed_secs: f64,
    pub requests_per_sec: f64,
    pub latency_p50_us: f64,
    pub latency_p99_us: f64,
    pub latency_max_us: f64,
    /// Standard deviation of the request latencies (how evenly the connections were served:
    /// the many-connections scenario's fairness figure). 0 in results from before it existed.
    #[serde(default)]
    pub latency_sd_us: f64,
    /// Response body bytes received (as on the wire: compressed when compressed).
    pub body_bytes: u64,
    /// Response header bytes received (HTTP/1.1: the header block; HTTP/2: decoded header
    /// field sizes as h2load counts them, or its `headers` figure).
    pub header_bytes: u64,
    /// MB/s of response bodies: as received, except in streaming (throughput) scenarios,
    /// where it is the decoded data delivered per second (seed 004's figure).
    pub body_mb_per_sec: f64,
    /// Server process tree CPU during the run, in % of one core (100 = one core busy).
    pub server_cpu_percent: f64,
    /// Server CPU time per request, in microseconds.
    pub server_cpu_us_per_request: f64,
    /// The kernel's part of `server_cpu_us_per_request` (system time: system calls, the network
    /// stack). 0 in results from before it was recorded.
    #[serde(default)]
    pub server_kernel_us_per_request: f64,
    /// Peak resident memory of the server process tree during the run.
    pub server_peak_rss_bytes: u64,
    /// Identity bytes ÷ bytes on the wire, where the scenario compresses.
    pub compression_ratio: Option<f64>,
    /// System calls of the server's process tree in the `--syscalls` side run (strace -c -f),
    /// kept on the first run's record; None when there was no side run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syscalls: Option<SyscallCounts>,
    /// The first failure the driver met (connection error, unexpected status), to say why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
}

fn default_origin() -> String {
    "sluice".into()
}

/// What `strace -c -f` counted over one side run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SyscallCounts {
    /// Requests answered during the side run.
    pub requests: u64,
    /// System call name -> calls over the side run, all threads and processes of the server.
    pub calls: BTreeMap<String, u64>,
}

impl SyscallCounts {
    /// All calls per request.
    pub fn per_request(&self) -> f64 {
        self.calls.values().sum::<u64>() as f64 / self.requests.max(1) as f64
    }

    /// The `n` most frequent calls, with calls per request, most frequent first.
    pub fn top(&self, n: usize) -> Vec<(&str, f64)> {
        let mut calls: Vec<(&str, u64)> =
            self.calls.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        calls.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        calls
            .into_iter()
            .take(n)
            .map(|(k, v)| (k, v as f64 / self.requests.max(1) as f64))
            .collect()
    }
}

impl ScenarioResult {
    /// Whether the row is behind sluice's own demo origin, or has no origin at all: the rows
    /// the charts and the classic tables are made of.
    pub fn default_origin(&self) -> bool {
        matches!(self.origin.as_str(), "sluice" | "-")
    }

    /// The median of `value` over the runs (0 without runs): CPU figures are taken this way,
    /// each on its own, rather than from the run with the median req/s.
    pub fn median_of(&self, value: impl Fn(&Measurement) -> f64) -> f64 {
        let mut values: Vec<f64> = self.runs.iter().map(value).collect();
        values.sort_by(f64::total_cmp);
        values.get(values.len() / 2).copied().unwrap_or(0.0)
    }

    /// The run with the median requests per second (the report's number), if any.
    pub fn median(&self) -> Option<&Measurement> {
        let mut runs: Vec<&Measurement> = self.runs.iter().collect();
        runs.sort_by(|a, b| a.requests_per_sec.total_cmp(&b.requests_per_sec));
        runs.get(runs.len() / 2).copied()
    }
}
