//! The scenarios: the seeds' experiments as data. Each says what the server must do ([`Setup`]),
//! the load to send ([`LoadSpec`]) and what to verify before the load ([`Check`]).
//!
//! The table is code, not a file, so a scenario cannot name a setup no target knows. Request
//! counts are the full run's; `--quick` divides them (see [`all`]) so the whole suite fits in a
//! few minutes on two cores.
//!
//! This file has the vocabulary (setups, loads, checks) and the order; `table.rs` has the
//! experiments themselves, one function per report group.

use bytes::Bytes;
use http::Method;

mod table;

/// A compression algorithm with the level the server must use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compression {
    pub algorithm: Algorithm,
    pub level: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    Gzip,
    Br,
    Zstd,
}

impl Algorithm {
    /// The `Content-Encoding` token.
    pub fn token(self) -> &'static str {
        match self {
            Algorithm::Gzip => "gzip",
            Algorithm::Br => "br",
            Algorithm::Zstd => "zstd",
        }
    }
}

/// What the server under test must be configured to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Setup {
    /// Serve the generated HTML page from a directory, compressing on the fly when asked.
    Static { compress: Option<Compression> },
    /// Serve the page's gzip sidecar written ahead of time (nginx `gzip_static`).
    Precompressed,
    /// No server in between: the load goes straight to the (first) origin.
    Direct,
    /// Forward to the origins.
    Proxy(ProxySetup),
}

#[derive(Debug, Clone, PartialEq)]
pub struct ProxySetup {
    /// One weight per origin (one origin: `[1]`).
    pub weights: Vec<u32>,
    /// The origins listen on unix sockets instead of TCP.
    pub unix_origins: bool,
    pub compress: Option<Compression>,
    pub cache: bool,
    /// Decode gzipped request bodies before forwarding (seed 000's GZ1).
    pub decompress_requests: bool,
}

impl ProxySetup {
    pub fn to_one() -> Self {
        Self {
            weights: vec![1],
            unix_origins: false,
            compress: None,
            cache: false,
            decompress_requests: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    H1,
    H2,
    /// HTTP/3 over QUIC (TLS only; the built-in driver: h2load has none).
    H3,
}

impl Protocol {
    /// The ALPN name.
    pub fn alpn(self) -> &'static str {
        match self {
            Protocol::H1 => "http/1.1",
            Protocol::H2 => "h2",
            Protocol::H3 => "h3",
        }
    }
}

/// The load: what every request looks like and how many to send how concurrently. Shaped like
/// h2load's options (`-c clients -m streams -n requests`).
#[derive(Debug, Clone)]
pub struct LoadSpec {
    pub protocol: Protocol,
    /// HTTPS (ALPN offers only `protocol`); cleartext HTTP/2 is prior knowledge.
    pub tls: bool,
    pub method: Method,
    /// Path and query.
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<Bytes>,
    /// Connections.
    pub clients: usize,
    /// Concurrent streams per HTTP/2 connection (1 for HTTP/1.1).
    pub streams: usize,
    /// Requests in one load run, over all connections.
    pub requests: u64,
    /// A run stops here even if requests are left (`--run-secs`; the built-in driver). None:
    /// the whole count.
    pub max_secs: Option<f64>,
}

impl LoadSpec {
    fn get(path: &str, clients: usize, requests: u64) -> Self {
        Self {
            protocol: Protocol::H1,
            tls: false,
            method: Method::GET,
            path: path.into(),
            headers: Vec::new(),
            body: None,
            clients,
            streams: 1,
            requests,
            max_secs: None,
        }
    }

    fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Requests in flight at once.
    pub fn concurrency(&self) -> usize {
        self.clients * self.streams.max(1)
    }
}

/// What to verify before the load, so the numbers are of the work the scenario means.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Check {
    /// The response must carry this `Content-Encoding` (none: must be identity).
    pub encoding: Option<Algorithm>,
    /// `/reqinfo`: the SHA-256 (hex) of the body the origin must have received. Otherwise the
    /// decoded response body must equal the expected bytes.
    pub origin_saw_sha256: Option<String>,
    /// With several origins: the share of requests each must get, by `X-Origin`.
    pub balance: bool,
    /// A repeated request must be a cache hit (`X-Cache-Status: HIT`).
    pub cache_hit: bool,
}

/// One experiment.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: String,
    /// The seed experiment, i.e. the report table it is a row of.
    pub group: &'static str,
    pub labels: Vec<(String, String)>,
    pub setup: Setup,
    pub load: LoadSpec,
    pub check: Check,
    /// Report body MB/s rather than req/s (streaming).
    pub throughput: bool,
}

impl Scenario {
    fn new(name: &str, group: &'static str, setup: Setup, load: LoadSpec) -> Self {
        Self {
            name: name.into(),
            group,
            labels: Vec::new(),
            setup,
            load,
            check: Check::default(),
            throughput: false,
        }
    }

    fn label(mut self, column: &str, value: impl Into<String>) -> Self {
        self.labels.push((column.into(), value.into()));
        self
    }

    /// Whether `selector` (a name or a group) picks this scenario.
    pub fn matches(&self, selector: &str) -> bool {
        self.name == selector || self.group == selector
    }

    /// The origins this scenario needs (none for static files).
    pub fn origins(&self) -> usize {
        match &self.setup {
            Setup::Static { .. } | Setup::Precompressed => 0,
            Setup::Direct => 1,
            Setup::Proxy(p) => p.weights.len(),
        }
    }

    pub fn unix_origins(&self) -> bool {
        matches!(&self.setup, Setup::Proxy(p) if p.unix_origins)
    }
}

/// The groups, in run and report order (the seeds' order), with what each reproduces.
pub const GROUPS: &[(&str, &str)] = &[
    (
        "seed-000",
        "POST 10 KB gzipped JSON forwarded (GZ0) / decompressed (GZ1), 40 KB raw (RAW), GET (c=5)",
    ),
    (
        "seed-001",
        "static ~70 KB HTML page: no compression, gzip level sweep, br, zstd, precompressed (c=100)",
    ),
    (
        "seed-002",
        "TLS HTTP/1.1 vs HTTP/2 vs HTTP/3 to a unix-socket origin, 120 B body (c=100)",
    ),
    (
        "seed-003",
        "GET /what-date-is-it (340 KB JSON): direct vs proxied at c=1 and c=6, balanced, cached",
    ),
    (
        "api-compress",
        "proxied JSON API compressed on the fly at a fast level (c=6)",
    ),
    (
        "cache-compress",
        "cached JSON API served gzipped at level 6: compressed once and stored, or per hit (c=6)",
    ),
    (
        "seed-004",
        "~34 MB chunked stream through the proxy, raw vs gzip level 1, MB/s",
    ),
    (
        "http3",
        "HTTP/2 vs HTTP/3 over TLS: the 340 KB JSON proxied (c=6), a 10 MiB file (c=4)",
    ),
    (
        "many-conns",
        "1,000 concurrent keep-alive HTTP/1.1 clients on the static page: req/s and latency spread",
    ),
];

/// Every scenario, in report order. `quick` divides request counts by 10, keeping at least two
/// requests per connection.
pub fn all(quick: bool) -> Vec<Scenario> {
    let mut list = Vec::new();
    table::seed_000(&mut list);
    table::seed_001(&mut list);
    table::seed_002(&mut list);
    table::seed_003(&mut list);
    table::api_compress(&mut list);
    table::cache_compress(&mut list);
    table::seed_004(&mut list);
    table::http3(&mut list);
    table::many_conns(&mut list);
    if quick {
        for s in &mut list {
            // Still a couple of requests per connection, or a run measures connection set-up.
            let floor = (2 * s.load.concurrency() as u64).min(s.load.requests);
            s.load.requests = (s.load.requests / 10).max(floor).max(1);
        }
    }
    list
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_groups_known() {
        let list = all(false);
        let mut names: Vec<&str> = list.iter().map(|s| s.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), list.len());
        for s in &list {
            assert!(GROUPS.iter().any(|(g, _)| *g == s.group), "{}", s.name);
        }
    }

    #[test]
    fn rows_of_a_group_share_their_columns() {
        let list = all(false);
        for (group, _) in GROUPS {
            let columns: Vec<Vec<&str>> = list
                .iter()
                .filter(|s| s.group == *group)
                .map(|s| s.labels.iter().map(|(c, _)| c.as_str()).collect())
                .collect();
            assert!(!columns.is_empty(), "{group}");
            assert!(columns.windows(2).all(|w| w[0] == w[1]), "{group}");
        }
    }

    #[test]
    fn cached_scenarios_check_a_hit_and_the_compressed_one_its_encoding() {
        let list = all(false);
        let cached: Vec<&str> = list
            .iter()
            .filter(|s| matches!(&s.setup, Setup::Proxy(p) if p.cache))
            .map(|s| s.name.as_str())
            .collect();
        assert_eq!(
            cached,
            ["date-cached-c1", "date-cached-c6", "date-cached-gzip-6"]
        );
        for s in &list {
            assert_eq!(
                s.check.cache_hit,
                cached.contains(&s.name.as_str()),
                "{}",
                s.name
            );
        }
        let gzip = list.iter().find(|s| s.name == "date-cached-gzip-6");
        assert!(gzip.is_some_and(|s| {
            s.check.encoding == Some(Algorithm::Gzip)
                && s.load
                    .headers
                    .contains(&("accept-encoding".into(), "gzip".into()))
                && matches!(&s.setup, Setup::Proxy(p) if p.compress == Some(Compression {
                    algorithm: Algorithm::Gzip,
                    level: 6,
                }))
        }));
    }

    #[test]
    fn quick_shrinks_every_count_but_keeps_one() {
        let full = all(false);
        let quick = all(true);
        for (f, q) in full.iter().zip(&quick) {
            assert!(q.load.requests >= 1 && q.load.requests <= f.load.requests);
        }
    }
}
