//! `report.md`: a header (machine, commit, tools, settings), a summary of sluice against the best
//! peer of every scenario, then one table per group, shaped like the seed's own table: the
//! group's label columns, one row per target, the headline number (req/s, or MB/s for streams)
//! as the median run with the range of all runs, latency (with its spread where the group asks),
//! server CPU per request, the bytes the seed cared about, sluice ÷ nginx, and on sluice's row
//! the best peer (the peer with the least CPU per request) and sluice's CPU ÷ the best peer's.
//!
//! Everything is ordered (groups as in `sluice bench list`, unknown groups after them by id,
//! rows by first appearance in the results, targets sluice, nginx, haproxy, caddy, varnish,
//! baseline, then by name) and every number has a fixed format, so the same results always give
//! the same bytes.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::charts::Chart;
use super::peers::{best_peer_cell, best_peer_summary, syscall_summary, versus_best_peer};
use super::{GroupInfo, group_info, target_rank};
use crate::model::{Measurement, Outcome, Report, ScenarioResult};
use crate::scenario;

pub const FILE_NAME: &str = "report.md";

/// Error texts longer than this are cut: a cell is no place for a backtrace.
const MAX_MESSAGE_CHARS: usize = 120;

pub fn render(report: &Report, charts: &[Chart]) -> String {
    let mut out = String::new();
    header(&mut out, report);
    best_peer_summary(&mut out, report);
    syscall_summary(&mut out, report);
    // Keyed by (position in the scenario table, id): the report reads in the order of `sluice
    // bench list`, and a group from another version of the table still renders, last.
    let mut groups: BTreeMap<(usize, &str), Vec<&ScenarioResult>> = BTreeMap::new();
    for result in &report.results {
        let group = result.group.as_str();
        let position = scenario::GROUPS
            .iter()
            .position(|(id, _)| *id == group)
            .unwrap_or(usize::MAX);
        groups.entry((position, group)).or_default().push(result);
    }
    for ((_, group), results) in groups {
        out.push('\n');
        group_section(&mut out, group, &results);
        for chart in charts.iter().filter(|chart| chart.group == group) {
            let _ = writeln!(out, "\n![{}]({})", chart.title, chart.file_name);
        }
    }
    out
}

fn header(out: &mut String, report: &Report) {
    let machine = &report.machine;
    let settings = &report.settings;
    out.push_str("# sluice bench report\n\n| | |\n|---|---|\n");
    let _ = writeln!(
        out,
        "| machine | {}, {} cores, Linux {}, {} RAM |",
        cell(&machine.cpu_model),
        machine.cores,
        cell(&machine.kernel),
        gib(machine.memory_bytes)
    );
    let _ = writeln!(
        out,
        "| commit | {} |",
        report.commit.as_deref().map_or("unknown".into(), cell)
    );
    let _ = writeln!(out, "| started | {} |", cell(&report.started_at));
    let _ = writeln!(
        out,
        "| run | {}: {} load run{} per measurement{} |",
        if settings.quick { "quick" } else { "full" },
        settings.runs,
        if settings.runs == 1 { "" } else { "s" },
        if settings.runs > 1 {
            ", the median shown with the range of all runs in brackets"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "| pinning | server on CPU {} with {} worker{}, load on CPU {} |",
        cell(&settings.server_cpus),
        settings.server_workers,
        if settings.server_workers == 1 {
            ""
        } else {
            "s"
        },
        cell(&settings.load_cpus)
    );
    for (tool, version) in &report.tools {
        let _ = writeln!(out, "| {} | {} |", cell(tool), cell(version));
    }
    out.push_str(
        "\nHow to read: one table per seed experiment, one row per target. **req/s** (MB/s for \
         streams) is the median run; latency is that run's. **CPU µs/req** is the \
         server's whole process tree's CPU time per request (lower is better; the figure to \
         compare where the load generator, not the server, is the limit), the median of the \
         runs with their range; **user** and **kernel** split it (the medians of each): user \
         time is the server's own code, kernel time its system calls and the network stack, \
         which a server's own code can shrink only by making fewer or cheaper calls. **origin** \
         (where a table has several) is the program behind the proxy. **sluice ÷ nginx** \
         divides sluice's headline number by nginx's on the same row: above 1 sluice is faster. \
         **best peer** is, on sluice's row, the peer (nginx, HAProxy, Caddy, Varnish) that used \
         the least CPU per request on that row, with its CPU µs/req, and **sluice ÷ best peer** \
         divides sluice's CPU µs/req by it: below 1 sluice does the work for less CPU. \
         Compare numbers within one report only: runs on a shared machine vary by ±25%.\n",
    );
}

/// One column of a group's table.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Column {
    Label(usize),
    Target,
    Origin,
    Driver,
    Headline,
    P50,
    P99,
    LatencySd,
    LatencyMax,
    CpuPerRequest,
    UserPerRequest,
    KernelPerRequest,
    CpuPercent,
    BodyBytes,
    CompressionRatio,
    HeaderBytes,
    TotalBytes,
    VersusNginx,
    BestPeer,
    VersusBestPeer,
}

fn group_section(out: &mut String, group: &str, results: &[&ScenarioResult]) {
    let info = group_info(group);
    let title = if info.title.is_empty() {
        group
    } else {
        info.title
    };
    let _ = writeln!(out, "## {title} (`{group}`)\n");
    if let Some(question) = info.reproduces {
        let _ = writeln!(out, "*What this reproduces:* {question}\n");
    }

    let label_names = label_names(results);
    let rows = ordered_rows(results, &label_names);
    let columns = columns(&info, results, label_names.len());

    let headers: Vec<String> = columns
        .iter()
        .map(|c| header_name(*c, &info, &label_names))
        .collect();
    let _ = writeln!(out, "| {} |", headers.join(" | "));
    let aligns: Vec<&str> = columns
        .iter()
        .map(|c| match c {
            Column::Label(i)
                if rows
                    .iter()
                    .all(|r| is_number(&label_value(r, &label_names[*i]))) =>
            {
                "---:"
            }
            Column::Label(_) | Column::Target | Column::Origin | Column::Driver => "---",
            _ => "---:",
        })
        .collect();
    let _ = writeln!(out, "|{}|", aligns.join("|"));
    for row in &rows {
        let cells: Vec<String> = columns
            .iter()
            .map(|c| cell_text(*c, row, &info, &label_names, &rows))
            .collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
}

/// Label names in order of first appearance (rows of one group normally share them all).
fn label_names(results: &[&ScenarioResult]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for (name, _) in results.iter().flat_map(|r| &r.labels) {
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    names
}

fn label_value(result: &ScenarioResult, name: &str) -> String {
    result
        .labels
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.clone())
        .unwrap_or_default()
}

/// Rows by first appearance of their labels, then target (sluice, nginx, varnish, baseline,
/// others by name), then driver.
fn ordered_rows<'a>(
    results: &[&'a ScenarioResult],
    label_names: &[String],
) -> Vec<&'a ScenarioResult> {
    let key = |r: &ScenarioResult| -> Vec<String> {
        label_names.iter().map(|n| label_value(r, n)).collect()
    };
    let mut first_seen: Vec<Vec<String>> = Vec::new();
    for result in results {
        let k = key(result);
        if !first_seen.contains(&k) {
            first_seen.push(k);
        }
    }
    let mut rows = results.to_vec();
    rows.sort_by_cached_key(|r| {
        let k = key(r);
        let position = first_seen
            .iter()
            .position(|seen| *seen == k)
            .unwrap_or(usize::MAX);
        (
            position,
            origin_rank(&r.origin),
            r.origin.clone(),
            target_rank(&r.target),
            r.target.clone(),
            r.driver.clone(),
        )
    });
    rows
}

fn columns(info: &GroupInfo, results: &[&ScenarioResult], labels: usize) -> Vec<Column> {
    let mut columns: Vec<Column> = (0..labels).map(Column::Label).collect();
    let first_origin = results.first().map(|r| r.origin.as_str());
    if results
        .iter()
        .any(|r| Some(r.origin.as_str()) != first_origin)
    {
        columns.push(Column::Origin);
    }
    columns.push(Column::Target);
    let first_driver = results.first().map(|r| r.driver.as_str());
    if results
        .iter()
        .any(|r| Some(r.driver.as_str()) != first_driver)
    {
        columns.push(Column::Driver);
    }
    columns.extend([Column::Headline, Column::P50, Column::P99]);
    if info.latency_spread {
        columns.extend([Column::LatencySd, Column::LatencyMax]);
    }
    columns.extend([
        Column::CpuPerRequest,
        Column::UserPerRequest,
        Column::KernelPerRequest,
    ]);
    if info.cpu_percent {
        columns.push(Column::CpuPercent);
    }
    let compressed = results
        .iter()
        .flat_map(|r| &r.runs)
        .any(|m| m.compression_ratio.is_some());
    if compressed || info.mb_per_sec {
        columns.push(Column::BodyBytes);
    }
    if compressed {
        columns.push(Column::CompressionRatio);
    }
    if info.header_bytes {
        columns.extend([Column::HeaderBytes, Column::TotalBytes]);
    }
    columns.extend([
        Column::VersusNginx,
        Column::BestPeer,
        Column::VersusBestPeer,
    ]);
    columns
}

fn header_name(column: Column, info: &GroupInfo, label_names: &[String]) -> String {
    match column {
        Column::Label(i) => cell(&label_names[i]),
        Column::Target => "target".into(),
        Column::Origin => "origin".into(),
        Column::Driver => "driver".into(),
        Column::Headline if info.mb_per_sec => "MB/s".into(),
        Column::Headline => "req/s".into(),
        Column::P50 => "p50".into(),
        Column::P99 => "p99".into(),
        Column::LatencySd => "latency SD".into(),
        Column::LatencyMax => "max".into(),
        Column::CpuPerRequest => "CPU µs/req".into(),
        Column::UserPerRequest => "user".into(),
        Column::KernelPerRequest => "kernel".into(),
        Column::CpuPercent => "CPU % of a core".into(),
        Column::BodyBytes => "bytes/resp".into(),
        Column::CompressionRatio => "ratio".into(),
        Column::HeaderBytes => "header B/resp".into(),
        Column::TotalBytes => "total B/resp".into(),
        Column::VersusNginx => "sluice ÷ nginx".into(),
        Column::BestPeer => "best peer (CPU µs/req)".into(),
        Column::VersusBestPeer => "sluice ÷ best peer (CPU)".into(),
    }
}

fn cell_text(
    column: Column,
    row: &ScenarioResult,
    info: &GroupInfo,
    label_names: &[String],
    rows: &[&ScenarioResult],
) -> String {
    match column {
        Column::Label(i) => return cell(&label_value(row, &label_names[i])),
        Column::Target => return cell(&row.target),
        Column::Origin => return cell(&row.origin),
        Column::Driver => return cell(&row.driver),
        _ => {}
    }
    let median = match (&row.outcome, row.median()) {
        (Outcome::Ok, Some(median)) => median,
        // The headline cell says why there is no number; the others stay empty.
        (outcome, _) if column == Column::Headline => {
            return cell(&truncate(&outcome_text(outcome)));
        }
        _ => return String::new(),
    };
    let per_response = |bytes: u64| {
        if median.requests == 0 {
            "–".into()
        } else {
            count(bytes as f64 / median.requests as f64)
        }
    };
    match column {
        Column::Headline => headline_cell(row, info, median),
        Column::P50 => latency(median.latency_p50_us),
        Column::P99 => latency(median.latency_p99_us),
        Column::LatencySd => latency(median.latency_sd_us),
        Column::LatencyMax => latency(median.latency_max_us),
        Column::CpuPerRequest => cpu_cell(row),
        Column::UserPerRequest => cpu_us(row.median_of(user_us)),
        Column::KernelPerRequest => cpu_us(row.median_of(|m| m.server_kernel_us_per_request)),
        Column::CpuPercent => percent(median.server_cpu_percent),
        Column::BodyBytes => per_response(median.body_bytes),
        Column::CompressionRatio => median
            .compression_ratio
            .map_or("–".into(), |r| format!("{r:.2}x")),
        Column::HeaderBytes => per_response(median.header_bytes),
        Column::TotalBytes => per_response(median.header_bytes + median.body_bytes),
        Column::VersusNginx => versus(row, "nginx", info, rows),
        Column::BestPeer => best_peer_cell(row, rows),
        Column::VersusBestPeer => versus_best_peer(row, rows),
        Column::Label(_) | Column::Target | Column::Origin | Column::Driver => String::new(),
    }
}

/// User time per request: the CPU figure less its kernel part.
pub(super) fn user_us(m: &Measurement) -> f64 {
    (m.server_cpu_us_per_request - m.server_kernel_us_per_request).max(0.0)
}

/// `85.0 (80.0–90.0)`: the median CPU µs per request of the runs, with their range when
/// there are several (the spread of the figure the verdicts rest on).
fn cpu_cell(row: &ScenarioResult) -> String {
    let mut text = cpu_us(row.median_of(|m| m.server_cpu_us_per_request));
    if row.runs.len() > 1 {
        let values = row.runs.iter().map(|m| m.server_cpu_us_per_request);
        let min = values.clone().fold(f64::INFINITY, f64::min);
        let max = values.fold(f64::NEG_INFINITY, f64::max);
        let _ = write!(text, " ({}–{})", cpu_us(min), cpu_us(max));
    }
    text
}

/// Sluice's and its demo origin's rows first, then the zoo's in `--origin` order.
fn origin_rank(origin: &str) -> usize {
    match origin {
        "-" | "sluice" => 0,
        "go" => 1,
        "node" => 2,
        "python" => 3,
        _ => 4,
    }
}

pub(super) fn outcome_text(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Ok => "error: no load run recorded".into(),
        Outcome::NotSupported(why) => format!("not supported: {why}"),
        Outcome::CheckFailed(why) => format!("check failed: {why}"),
        Outcome::Error(why) => format!("error: {why}"),
    }
}

fn headline(info: &GroupInfo, m: &Measurement) -> f64 {
    if info.mb_per_sec {
        m.body_mb_per_sec
    } else {
        m.requests_per_sec
    }
}

/// `12,345 (11.9k–12.6k)`: the median, then the range of all runs when there are several, and
/// the failed requests when there were any (a number with failures is not a clean number).
fn headline_cell(row: &ScenarioResult, info: &GroupInfo, median: &Measurement) -> String {
    let mut text = rate(headline(info, median));
    if row.runs.len() > 1 {
        let values = row.runs.iter().map(|m| headline(info, m));
        let min = values.clone().fold(f64::INFINITY, f64::min);
        let max = values.fold(f64::NEG_INFINITY, f64::max);
        let _ = write!(text, " ({}–{})", compact(min), compact(max));
    }
    let failures: u64 = row.runs.iter().map(|m| m.failures).sum();
    if failures > 0 {
        let _ = write!(text, " ⚠ {} failed", count(failures as f64));
    }
    text
}

/// sluice's headline ÷ `peer`'s, on sluice's row, for the same labels and driver.
fn versus(row: &ScenarioResult, peer: &str, info: &GroupInfo, rows: &[&ScenarioResult]) -> String {
    if row.target != "sluice" {
        return String::new();
    }
    let theirs = rows
        .iter()
        .find(|r| {
            r.target == peer
                && r.driver == row.driver
                && r.origin == row.origin
                && r.labels == row.labels
        })
        .filter(|r| r.outcome == Outcome::Ok)
        .and_then(|r| r.median());
    match (row.median(), theirs) {
        (Some(sluice), Some(theirs)) if headline(info, theirs) > 0.0 => {
            format!("{:.2}x", headline(info, sluice) / headline(info, theirs))
        }
        _ => "–".into(),
    }
}

/// Integer with thousands separators: `74,418`.
fn count(value: f64) -> String {
    let rounded = value.round();
    if !rounded.is_finite() {
        return "–".into();
    }
    let digits = format!("{}", rounded.abs() as u64);
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    if rounded < 0.0 {
        format!("-{out}")
    } else {
        out
    }
}

/// Rates: integers from 100 up, more digits below (streams make a few large requests per second).
fn rate(value: f64) -> String {
    if value >= 100.0 {
        count(value)
    } else if value >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    }
}

/// A range end: `11.9k` from 10,000 up, else as [`rate`].
fn compact(value: f64) -> String {
    if value >= 10_000.0 {
        format!("{:.1}k", value / 1000.0)
    } else {
        rate(value)
    }
}

fn latency(us: f64) -> String {
    if us <= 0.0 {
        "–".into()
    } else if us < 1_000.0 {
        format!("{us:.0} µs")
    } else if us < 1_000_000.0 {
        format!("{:.2} ms", us / 1_000.0)
    } else {
        format!("{:.2} s", us / 1_000_000.0)
    }
}

pub(super) fn cpu_us(us: f64) -> String {
    if us <= 0.0 {
        "–".into()
    } else if us < 10.0 {
        format!("{us:.2}")
    } else if us < 100.0 {
        format!("{us:.1}")
    } else {
        count(us)
    }
}

fn percent(value: f64) -> String {
    if value <= 0.0 {
        "–".into()
    } else {
        format!("{value:.0}%")
    }
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

fn is_number(text: &str) -> bool {
    !text.is_empty() && text.replace(',', "").parse::<f64>().is_ok()
}

pub(super) fn truncate(text: &str) -> String {
    if text.chars().count() <= MAX_MESSAGE_CHARS {
        return text.to_string();
    }
    let cut: String = text.chars().take(MAX_MESSAGE_CHARS - 1).collect();
    format!("{cut}…")
}

/// Text safe inside a Markdown table cell: no pipes, no line breaks.
pub(super) fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\r', '\n'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_have_fixed_formats() {
        assert_eq!(count(74418.4), "74,418");
        assert_eq!(count(999.5), "1,000");
        assert_eq!(count(12.0), "12");
        assert_eq!(rate(38100.2), "38,100");
        assert_eq!(rate(17.404), "17.4");
        assert_eq!(rate(2.345), "2.35");
        assert_eq!(compact(12_650.0), "12.7k");
        assert_eq!(compact(675.0), "675");
        assert_eq!(latency(0.0), "–");
        assert_eq!(latency(850.0), "850 µs");
        assert_eq!(latency(1_250.0), "1.25 ms");
        assert_eq!(latency(2_500_000.0), "2.50 s");
        assert_eq!(cpu_us(24.0), "24.0");
        assert_eq!(cpu_us(1482.0), "1,482");
        assert_eq!(cell("a|b\nc"), "a\\|b c");
        assert!(is_number("6") && is_number("1,000") && !is_number("gzip") && !is_number(""));
    }
}
