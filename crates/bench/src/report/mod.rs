//! The report of a run: `results.json` (every raw number, re-readable), `report.md` (one table
//! per seed experiment, shaped like the seed's own table, sluice and its peers side by side,
//! with the best peer of every row) and SVG charts.
//!
//! - [`json`]: `results.json` write and read (`sluice bench report DIR` re-renders from it).
//! - [`markdown`]: `report.md`; deterministic (fixed ordering and number formats) so a golden
//!   test can hold it.
//! - [`peers`]: the best peer of each row, and the summary of sluice against it.
//! - [`charts`]: the gzip level sweep, seed 003's bars and the streaming MB/s, with plotters.
//!
//! What a group's table shows beyond the common columns depends on the seed it reproduces; that
//! knowledge is in [`group_info`], the one place that maps a group id to its title and columns.

pub mod charts;
pub mod json;
pub mod markdown;
pub mod peers;

use std::fs;
use std::io;
use std::path::Path;

use crate::model::Report;

/// Writes `results.json`, the SVG charts and `report.md` into `dir` (created if missing).
pub fn write(dir: &Path, report: &Report) -> io::Result<()> {
    fs::create_dir_all(dir)?;
    json::write(&dir.join(json::FILE_NAME), report)?;
    let charts = charts::render(report)?;
    for chart in &charts {
        fs::write(dir.join(&chart.file_name), &chart.svg)?;
    }
    fs::write(
        dir.join(markdown::FILE_NAME),
        markdown::render(report, &charts),
    )
}

/// Reads `DIR/results.json` back, to re-render a report.
pub fn read(dir: &Path) -> io::Result<Report> {
    json::read(&dir.join(json::FILE_NAME))
}

/// What a report group is and which extra columns its table needs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GroupInfo {
    pub title: &'static str,
    /// The seed and the question it asked; None for a group this table does not know.
    pub reproduces: Option<&'static str>,
    /// The seed's table has a CPU load column (seed 000).
    pub cpu_percent: bool,
    /// Header and total bytes per response (seed 002: HPACK's saving).
    pub header_bytes: bool,
    /// Throughput in MB/s is the headline number, not req/s (seed 004).
    pub mb_per_sec: bool,
    /// The latency's standard deviation and maximum beside p50/p99 (many connections: how
    /// evenly they are served).
    pub latency_spread: bool,
}

/// The title, question and columns of a group id (`seed-000` ... `seed-004`, `api-compress`,
/// `cache-compress`). Unknown groups get the common columns and their id as title, so a new
/// scenario group still renders.
pub fn group_info(group: &str) -> GroupInfo {
    let plain = |title| GroupInfo {
        title,
        reproduces: None,
        cpu_percent: false,
        header_bytes: false,
        mb_per_sec: false,
        latency_spread: false,
    };
    match group {
        "seed-000" => GroupInfo {
            reproduces: Some(
                "seed 000 (nginx `gunzip_request_body`): what does decompressing a 10 KB gzipped \
                 JSON POST cost the proxy, against forwarding it as is (GZ0), 40 KB of raw JSON \
                 (RAW) and a plain GET?",
            ),
            cpu_percent: true,
            ..plain("Gzipped request bodies: forwarded as is vs decompressed by the proxy")
        },
        "seed-001" => GroupInfo {
            reproduces: Some(
                "seed 001 (nginx `gzip_comp_level` 1–9 vs `gzip_static`, `ab -c 100`): how much \
                 throughput does each gzip level cost on a static page, what do the bytes buy, and \
                 how much does serving precompressed files save?",
            ),
            ..plain("Static HTML: compression levels and precompressed files")
        },
        "seed-002" => GroupInfo {
            reproduces: Some(
                "seed 002 (`h2load -n 10000 -c 100 -m 1` over TLS to a unix-socket app): does \
                 HTTP/2 change req/s against HTTP/1.1, and how many header bytes does HPACK save?",
            ),
            header_bytes: true,
            ..plain("TLS: HTTP/1.1 vs HTTP/2 vs HTTP/3 in front of a unix-socket origin")
        },
        "seed-003" => GroupInfo {
            reproduces: Some(
                "seed 003 (highload-nginx): what does the proxy cost against the origin alone at 1 \
                 and 6 concurrent requests, and what do balancing (even and 3:1) and caching give?",
            ),
            ..plain("Proxying a JSON API: direct, proxied, balanced, cached")
        },
        "api-compress" => GroupInfo {
            reproduces: Some(
                "DESIGN.md §5 (\"proxied JSON gzipped at level 1\"): what does compressing a \
                 dynamic API response on the fly at a fast level cost the proxy, per request?",
            ),
            ..plain("Proxied JSON API compressed on the fly")
        },
        "cache-compress" => GroupInfo {
            reproduces: Some(
                "DESIGN.md §5 (\"cached + gzip level 6\", capability 9): what does a cached JSON \
                 API cost per request when clients ask for gzip? A cache that stores the gzipped \
                 variant (sluice, Varnish) sends the same bytes on every hit; nginx stores \
                 identity and gzips every hit again.",
            ),
            ..plain("Cached JSON API served gzipped: compressed once or per hit")
        },
        "seed-004" => GroupInfo {
            reproduces: Some(
                "seed 004 (chunked JSON gzipped as one stream): does compressing a large chunked \
                 response on the fly keep the MB/s of sending it raw?",
            ),
            mb_per_sec: true,
            ..plain("Streaming a large chunked response: raw vs gzip")
        },
        "http3" => GroupInfo {
            reproduces: Some(
                "issue 24 (HTTP/3): what do larger responses cost over QUIC against HTTP/2 on the \
                 same server, the 340 KB JSON proxied and a 10 MiB file? Only sluice and Caddy \
                 serve HTTP/3 among the peers (nginx 1.22 and HAProxy 2.6 in Debian have no QUIC).",
            ),
            ..plain("HTTP/3: large responses over QUIC beside HTTP/2")
        },
        "many-conns" => GroupInfo {
            reproduces: Some(
                "issue 13's fairness row (`h2load --h1 -c 1000` on the static page): with 1,000 \
                 concurrent keep-alive clients, does every connection get its turn? A wide \
                 latency spread (standard deviation, p99, max) at the same req/s means some \
                 connections wait while others are served.",
            ),
            latency_spread: true,
            ..plain("Many connections: 1,000 keep-alive clients on the static page")
        },
        _ => plain(""),
    }
}

/// Where a target's rows and lines go in tables and charts: sluice, its peers (nginx, HAProxy,
/// Caddy, Varnish), the baseline, then any other (by name, as the callers break ties).
fn target_rank(target: &str) -> usize {
    match target {
        "sluice" => 0,
        "nginx" => 1,
        "haproxy" => 2,
        "caddy" => 3,
        "varnish" => 4,
        "baseline" => 5,
        _ => 6,
    }
}

/// Whether `target` is a peer sluice is compared with: not sluice itself, not the baseline (an
/// upper bound that does none of a server's work) and not the origin of a direct scenario.
pub fn is_peer(target: &str) -> bool {
    !matches!(target, "sluice" | "baseline" | "origin")
}
