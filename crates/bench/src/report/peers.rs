//! The best peer of a row: of nginx, HAProxy, Caddy and Varnish, the one that used the least
//! CPU per request on the same scenario, driver and origin (issue 13 holds sluice to "ahead of the best
//! peer on every row"), its cells in the group tables and the summary that opens the report.

use std::fmt::Write as _;

use super::markdown::{cell, cpu_us, outcome_text, truncate, user_us};
use super::{is_peer, target_rank};
use crate::model::{Outcome, Report, ScenarioResult, SyscallCounts};
use crate::scenario;

/// A row's CPU figures: medians over its runs of the CPU, user and kernel µs per request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cpu {
    pub total: f64,
    pub user: f64,
    pub kernel: f64,
}

impl Cpu {
    /// The medians of a measured row (outcome Ok, with a CPU figure).
    pub fn of(row: &ScenarioResult) -> Option<Self> {
        let total = row.median_of(|m| m.server_cpu_us_per_request);
        (row.outcome == Outcome::Ok && !row.runs.is_empty() && total > 0.0).then(|| Cpu {
            total,
            user: row.median_of(user_us),
            kernel: row.median_of(|m| m.server_kernel_us_per_request),
        })
    }
}

/// The peer with the least CPU per request (the median of its runs) among `rows` with `row`'s
/// labels, driver and origin: measured (outcome Ok) and with a CPU figure. Ties go to report
/// order.
pub fn best_peer<'a>(
    row: &ScenarioResult,
    rows: &[&'a ScenarioResult],
) -> Option<(&'a ScenarioResult, Cpu)> {
    let mut peers: Vec<(&ScenarioResult, Cpu)> = rows
        .iter()
        .copied()
        .filter(|r| {
            is_peer(&r.target)
                && r.driver == row.driver
                && r.origin == row.origin
                && r.labels == row.labels
        })
        .filter_map(|r| Some((r, Cpu::of(r)?)))
        .collect();
    peers.sort_by(|(a, am), (b, bm)| {
        am.total
            .total_cmp(&bm.total)
            .then_with(|| target_rank(&a.target).cmp(&target_rank(&b.target)))
            .then_with(|| a.target.cmp(&b.target))
    });
    peers.into_iter().next()
}

/// `haproxy 173` on sluice's row: the best peer and its CPU µs per request.
pub(super) fn best_peer_cell(row: &ScenarioResult, rows: &[&ScenarioResult]) -> String {
    if row.target != "sluice" {
        return String::new();
    }
    match best_peer(row, rows) {
        Some((peer, cpu)) => format!("{} {}", cell(&peer.target), cpu_us(cpu.total)),
        None => "–".into(),
    }
}

/// sluice's CPU µs per request ÷ the best peer's, on sluice's row.
pub(super) fn versus_best_peer(row: &ScenarioResult, rows: &[&ScenarioResult]) -> String {
    if row.target != "sluice" {
        return String::new();
    }
    match (Cpu::of(row), best_peer(row, rows)) {
        (Some(sluice), Some((_, peer))) => format!("{:.2}x", sluice.total / peer.total),
        _ => "–".into(),
    }
}

/// The row's name in the summaries: the scenario, with the origin when it is not sluice's own
/// and the driver when the scenario ran with several.
fn row_name(row: &ScenarioResult, sluice_rows: &[&ScenarioResult]) -> String {
    let mut name = cell(&row.scenario);
    if !row.default_origin() {
        let _ = write!(name, " ({} origin)", cell(&row.origin));
    }
    if sluice_rows
        .iter()
        .any(|r| r.scenario == row.scenario && r.driver != row.driver)
    {
        let _ = write!(name, " ({})", cell(&row.driver));
    }
    name
}

/// Before the groups: one line per scenario (and origin, and driver) with sluice's CPU per
/// request split into user and kernel time, the best peer's alike, nginx's, and the ratio
/// (issue 13's table: "ahead of the best peer on every row"). Scenarios without a sluice row
/// (direct ones) are left out.
pub(super) fn best_peer_summary(out: &mut String, report: &Report) {
    let sluice_rows: Vec<&ScenarioResult> = report
        .results
        .iter()
        .filter(|r| r.target == "sluice")
        .collect();
    if sluice_rows.is_empty() {
        return;
    }
    let all: Vec<&ScenarioResult> = report.results.iter().collect();
    out.push_str(
        "\n## sluice against the best peer\n\nCPU µs per request of the server (lower is \
         better; the median of the runs) on each scenario: sluice's, the best peer's (the least \
         of nginx, HAProxy, Caddy and Varnish where they ran) and nginx's, and sluice ÷ best \
         peer (below 1: sluice is cheaper). **user** and **kernel** split sluice's and the best \
         peer's figure: user time is the server's own code (what the performance issue bounds), \
         kernel time its system calls and the network stack, which no user-space work removes. \
         A row behind another origin than sluice's demo one names it.\n\n",
    );
    let mut order: Vec<(usize, usize, &ScenarioResult)> = sluice_rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let position = scenario::GROUPS
                .iter()
                .position(|(id, _)| *id == r.group)
                .unwrap_or(usize::MAX);
            (position, i, *r)
        })
        .collect();
    order.sort_by_key(|(position, i, _)| (*position, *i));
    out.push_str(
        "| scenario | sluice | user | kernel | best peer | user | kernel | nginx | sluice ÷ best \
         peer |\n",
    );
    out.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (_, _, row) in order {
        let name = row_name(row, &sluice_rows);
        let (sluice, sluice_user, sluice_kernel) = match Cpu::of(row) {
            Some(cpu) => (cpu_us(cpu.total), cpu_us(cpu.user), cpu_us(cpu.kernel)),
            None => (
                cell(&truncate(&outcome_text(&row.outcome))),
                String::new(),
                String::new(),
            ),
        };
        let nginx = all
            .iter()
            .find(|r| {
                r.target == "nginx"
                    && r.driver == row.driver
                    && r.origin == row.origin
                    && r.labels == row.labels
                    && r.scenario == row.scenario
            })
            .map_or("–".into(), |r| match (&r.outcome, Cpu::of(r)) {
                (_, Some(cpu)) => cpu_us(cpu.total),
                (Outcome::NotSupported(_), _) => "cannot".into(),
                _ => "–".into(),
            });
        let same: Vec<&ScenarioResult> = all
            .iter()
            .copied()
            .filter(|r| r.scenario == row.scenario && r.origin == row.origin)
            .collect();
        let best = best_peer_cell(row, &same);
        let (best_user, best_kernel) = best_peer(row, &same)
            .map_or((String::new(), String::new()), |(_, cpu)| {
                (cpu_us(cpu.user), cpu_us(cpu.kernel))
            });
        let _ = writeln!(
            out,
            "| {name} | {sluice} | {sluice_user} | {sluice_kernel} | {best} | {best_user} | \
             {best_kernel} | {nginx} | {} |",
            versus_best_peer(row, &same)
        );
    }
}

/// After the summary, when the run had `--syscalls`: system calls per request of each target
/// on each proxied row, with the most frequent ones.
pub(super) fn syscall_summary(out: &mut String, report: &Report) {
    let rows: Vec<(&ScenarioResult, &SyscallCounts)> = report
        .results
        .iter()
        .filter_map(|r| Some((r, r.runs.first()?.syscalls.as_ref()?)))
        .collect();
    if rows.is_empty() {
        return;
    }
    out.push_str(
        "\n## System calls per request\n\nFrom a side run after the measured ones, with \
         `strace -c -f` attached to every process of the server (its speed under strace is not \
         kept): all calls per request, then the four most frequent.\n\n| scenario | target | \
         calls/req | most frequent (per request) |\n|---|---|---:|---|\n",
    );
    let sluice_rows: Vec<&ScenarioResult> = report
        .results
        .iter()
        .filter(|r| r.target == "sluice")
        .collect();
    for (row, counts) in rows {
        let top: Vec<String> = counts
            .top(4)
            .into_iter()
            .map(|(name, n)| format!("{} {n:.2}", cell(name)))
            .collect();
        let _ = writeln!(
            out,
            "| {} | {} | {:.1} | {} |",
            row_name(row, &sluice_rows),
            cell(&row.target),
            counts.per_request(),
            top.join(", ")
        );
    }
}
