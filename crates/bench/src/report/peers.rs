//! The best peer of a row: of nginx, HAProxy, Caddy and Varnish, the one that used the least
//! CPU per request on the same scenario and driver (issue 13 holds sluice to "ahead of the best
//! peer on every row"), its cells in the group tables and the summary that opens the report.

use std::fmt::Write as _;

use super::markdown::{cell, cpu_us, outcome_text, truncate};
use super::{is_peer, target_rank};
use crate::model::{Measurement, Outcome, Report, ScenarioResult};
use crate::scenario;

/// The peer with the least CPU per request among `rows` with `row`'s labels and driver, and its
/// median run: measured (outcome Ok) and with a CPU figure. Ties go to report order.
pub fn best_peer<'a>(
    row: &ScenarioResult,
    rows: &[&'a ScenarioResult],
) -> Option<(&'a ScenarioResult, &'a Measurement)> {
    let mut peers: Vec<(&ScenarioResult, &Measurement)> = rows
        .iter()
        .copied()
        .filter(|r| {
            is_peer(&r.target)
                && r.driver == row.driver
                && r.labels == row.labels
                && r.outcome == Outcome::Ok
        })
        .filter_map(|r| Some((r, r.median()?)))
        .filter(|(_, m)| m.server_cpu_us_per_request > 0.0)
        .collect();
    peers.sort_by(|(a, am), (b, bm)| {
        am.server_cpu_us_per_request
            .total_cmp(&bm.server_cpu_us_per_request)
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
        Some((peer, m)) => format!(
            "{} {}",
            cell(&peer.target),
            cpu_us(m.server_cpu_us_per_request)
        ),
        None => "–".into(),
    }
}

/// sluice's CPU µs per request ÷ the best peer's, on sluice's row.
pub(super) fn versus_best_peer(row: &ScenarioResult, rows: &[&ScenarioResult]) -> String {
    if row.target != "sluice" {
        return String::new();
    }
    let sluice = (row.outcome == Outcome::Ok)
        .then(|| row.median())
        .flatten()
        .filter(|m| m.server_cpu_us_per_request > 0.0);
    match (sluice, best_peer(row, rows)) {
        (Some(sluice), Some((_, peer))) => format!(
            "{:.2}x",
            sluice.server_cpu_us_per_request / peer.server_cpu_us_per_request
        ),
        _ => "–".into(),
    }
}

/// Before the groups: one line per scenario with sluice's CPU per request, the best peer's and
/// nginx's, and the ratio (issue 13's table: "ahead of the best peer on every row"). Scenarios
/// without a sluice row (direct ones) are left out; the driver is named where a scenario was
/// run with several.
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
         better) on each scenario: sluice's, the best peer's (the least of nginx, HAProxy, Caddy \
         and Varnish where they ran) and nginx's, and sluice ÷ best peer (below 1: sluice is \
         cheaper). **kernel** is the system time in sluice's and in the best peer's figure \
         (system calls, the network stack): the part no user-space work removes, so where it \
         alone comes near the best peer's total, the gap left is the kernel's.\n\n",
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
        "| scenario | sluice | kernel | best peer | kernel | nginx | sluice ÷ best peer |\n",
    );
    out.push_str("|---|---:|---:|---:|---:|---:|---:|\n");
    for (_, _, row) in order {
        let mut name = cell(&row.scenario);
        // The driver, where sluice ran the scenario with more than one.
        if sluice_rows
            .iter()
            .any(|r| r.scenario == row.scenario && r.driver != row.driver)
        {
            let _ = write!(name, " ({})", cell(&row.driver));
        }
        let (sluice, sluice_kernel) = match (&row.outcome, row.median()) {
            (Outcome::Ok, Some(m)) => (
                cpu_us(m.server_cpu_us_per_request),
                cpu_us(m.server_kernel_us_per_request),
            ),
            (outcome, _) => (cell(&truncate(&outcome_text(outcome))), String::new()),
        };
        let nginx = all
            .iter()
            .find(|r| {
                r.target == "nginx"
                    && r.driver == row.driver
                    && r.labels == row.labels
                    && r.scenario == row.scenario
            })
            .map_or("–".into(), |r| match (&r.outcome, r.median()) {
                (Outcome::Ok, Some(m)) => cpu_us(m.server_cpu_us_per_request),
                (Outcome::NotSupported(_), _) => "cannot".into(),
                _ => "–".into(),
            });
        let same: Vec<&ScenarioResult> = all
            .iter()
            .copied()
            .filter(|r| r.scenario == row.scenario)
            .collect();
        let best = best_peer_cell(row, &same);
        let best_kernel = best_peer(row, &same).map_or(String::new(), |(_, m)| {
            cpu_us(m.server_kernel_us_per_request)
        });
        let _ = writeln!(
            out,
            "| {name} | {sluice} | {sluice_kernel} | {best} | {best_kernel} | {nginx} | {} |",
            versus_best_peer(row, &same)
        );
    }
}
