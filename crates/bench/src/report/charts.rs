//! SVG charts with plotters (svg backend only, no font files: text is laid out by estimate and
//! drawn by the viewer), one per seed that drew one:
//!
//! - `seed-001-gzip-levels.svg`: req/s and bytes per response by gzip level, one line per target
//!   (the seed's first two charts);
//! - `seed-003-req-per-sec.svg`: req/s per setup, one bar per target;
//! - `seed-004-mb-per-sec.svg`: streaming MB/s, raw vs gzip, one bar per target.
//!
//! A chart is only drawn when its group has at least one measured result. The SVG text depends
//! on the results alone, so the same results give the same files.

use std::io;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::target_rank;
use crate::model::{Outcome, Report, ScenarioResult};

/// One chart, ready to be written next to `report.md` and linked from its group's section.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    pub group: String,
    pub file_name: String,
    pub title: String,
    pub svg: String,
}

pub fn render(report: &Report) -> io::Result<Vec<Chart>> {
    let mut charts = Vec::new();
    if let Some(levels) = gzip_levels(report) {
        let title = "seed 001: gzip level, req/s and bytes per response".to_string();
        charts.push(Chart {
            group: "seed-001".into(),
            file_name: "seed-001-gzip-levels.svg".into(),
            svg: levels_chart(&levels)?,
            title,
        });
    }
    let bar_charts = [
        (
            "seed-003",
            "seed-003-req-per-sec.svg",
            "seed 003: req/s per setup",
            "req/s",
        ),
        (
            "seed-004",
            "seed-004-mb-per-sec.svg",
            "seed 004: streaming MB/s",
            "MB/s",
        ),
    ];
    for (group, file_name, title, unit) in bar_charts {
        let bars = Bars::of(report, group, |m| {
            if unit == "MB/s" {
                m.body_mb_per_sec
            } else {
                m.requests_per_sec
            }
        });
        if bars.has_values() {
            charts.push(Chart {
                group: group.into(),
                file_name: file_name.into(),
                title: title.into(),
                svg: bar_chart(title, unit, &bars)?,
            });
        }
    }
    Ok(charts)
}

/// Targets in report order: sluice, nginx, haproxy, caddy, varnish, baseline, then the others
/// by name.
fn ordered_targets<'a>(results: impl Iterator<Item = &'a ScenarioResult>) -> Vec<String> {
    let mut targets: Vec<String> = Vec::new();
    for result in results {
        if !targets.contains(&result.target) {
            targets.push(result.target.clone());
        }
    }
    targets.sort_by_key(|t| (target_rank(t), t.clone()));
    targets
}

fn target_color(index: usize, target: &str) -> RGBColor {
    match target {
        "sluice" => RGBColor(0x1f, 0x77, 0xb4),
        "nginx" => RGBColor(0x2c, 0xa0, 0x2c),
        "haproxy" => RGBColor(0x94, 0x67, 0xbd),
        "caddy" => RGBColor(0x17, 0xbe, 0xcf),
        "varnish" => RGBColor(0xd6, 0x27, 0x28),
        "baseline" => RGBColor(0x7f, 0x7f, 0x7f),
        _ => [
            RGBColor(0xff, 0x7f, 0x0e),
            RGBColor(0xbc, 0xbd, 0x22),
            RGBColor(0x8c, 0x56, 0x4b),
        ][index % 3],
    }
}

fn measured(result: &ScenarioResult) -> Option<&crate::model::Measurement> {
    if result.outcome == Outcome::Ok {
        result.median()
    } else {
        None
    }
}

fn label<'a>(result: &'a ScenarioResult, name: &str) -> Option<&'a str> {
    result
        .labels
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// Per target, its points by level.
struct Levels {
    series: Vec<(String, Vec<LevelPoint>)>,
}

/// Which figure of a point a panel plots.
type LevelValue = fn(&LevelPoint) -> f64;

struct LevelPoint {
    level: u32,
    requests_per_sec: f64,
    bytes_per_response: f64,
}

/// The seed-001 rows that are on-the-fly gzip at a numeric level (a row without an encoding
/// label counts as gzip: the sweep is the seed's gzip_comp_level).
fn gzip_levels(report: &Report) -> Option<Levels> {
    let rows: Vec<&ScenarioResult> = report
        .results
        .iter()
        .filter(|r| r.group == "seed-001")
        .filter(|r| {
            let encoding = label(r, "encoding").or_else(|| label(r, "compression"));
            encoding.is_none_or(|e| e.to_ascii_lowercase().contains("gzip"))
        })
        .filter(|r| label(r, "level").is_some_and(|l| l.trim().parse::<u32>().is_ok()))
        .collect();
    let series: Vec<(String, Vec<LevelPoint>)> = ordered_targets(rows.iter().copied())
        .into_iter()
        .map(|target| {
            let mut points: Vec<LevelPoint> = rows
                .iter()
                .filter(|r| r.target == target)
                .filter_map(|r| {
                    let level = label(r, "level")?.trim().parse().ok()?;
                    let m = measured(r)?;
                    let bytes = if m.requests > 0 {
                        m.body_bytes as f64 / m.requests as f64
                    } else {
                        0.0
                    };
                    Some(LevelPoint {
                        level,
                        requests_per_sec: m.requests_per_sec,
                        bytes_per_response: bytes,
                    })
                })
                .collect();
            points.sort_by_key(|p| p.level);
            (target, points)
        })
        .filter(|(_, points)| !points.is_empty())
        .collect();
    (!series.is_empty()).then_some(Levels { series })
}

fn levels_chart(levels: &Levels) -> io::Result<String> {
    let all = || levels.series.iter().flat_map(|(_, points)| points.iter());
    let min_level = all().map(|p| p.level).min().unwrap_or(1);
    let max_level = all().map(|p| p.level).max().unwrap_or(9);
    let levels_shown = (max_level - min_level + 2) as usize;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1000, 420)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_error)?;
        let panels = root.split_evenly((1, 2));
        let pick: [(&str, LevelValue); 2] = [
            ("req/s", |p| p.requests_per_sec),
            ("bytes per response", |p| p.bytes_per_response),
        ];
        for (area, (what, value)) in panels.iter().zip(pick) {
            let max = all().map(value).fold(0.0, f64::max).max(1.0) * 1.15;
            let x_range = f64::from(min_level) - 0.5..f64::from(max_level) + 0.5;
            let mut chart = ChartBuilder::on(area)
                .caption(format!("{what} by gzip level"), ("sans-serif", 18))
                .margin(12)
                .x_label_area_size(36)
                .y_label_area_size(70)
                .build_cartesian_2d(x_range, 0.0..max)
                .map_err(draw_error)?;
            chart
                .configure_mesh()
                .light_line_style(WHITE)
                .x_desc("gzip level")
                .y_desc(what)
                .x_labels(levels_shown)
                // Only whole levels exist; other ticks stay unlabelled.
                .x_label_formatter(&|x| {
                    if (x - x.round()).abs() < 1e-9 {
                        format!("{x:.0}")
                    } else {
                        String::new()
                    }
                })
                .y_label_formatter(&|y| format!("{y:.0}"))
                .draw()
                .map_err(draw_error)?;
            for (index, (target, points)) in levels.series.iter().enumerate() {
                let color = target_color(index, target);
                let line = points.iter().map(|p| (f64::from(p.level), value(p)));
                chart
                    .draw_series(LineSeries::new(line.clone(), color.stroke_width(2)))
                    .map_err(draw_error)?
                    .label(target.as_str())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                    });
                chart
                    .draw_series(line.map(|p| Circle::new(p, 3, color.filled())))
                    .map_err(draw_error)?;
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(draw_error)?;
        }
        root.present().map_err(draw_error)?;
    }
    Ok(svg)
}

/// Rows of a group (labels joined, in order of first appearance) by target.
struct Bars {
    categories: Vec<String>,
    targets: Vec<String>,
    /// values[category][target]
    values: Vec<Vec<Option<f64>>>,
}

impl Bars {
    fn of(report: &Report, group: &str, value: impl Fn(&crate::model::Measurement) -> f64) -> Bars {
        let rows: Vec<&ScenarioResult> = report
            .results
            .iter()
            .filter(|r| r.group == group && r.default_origin())
            .collect();
        let targets = ordered_targets(rows.iter().copied());
        let category = |r: &ScenarioResult| {
            let parts: Vec<String> = r
                .labels
                .iter()
                .filter(|(_, v)| !v.is_empty())
                // Numbers and yes/no say nothing without their column name.
                .map(|(n, v)| {
                    let bare = v.parse::<f64>().is_ok()
                        || ["yes", "no", "true", "false"]
                            .contains(&v.to_ascii_lowercase().as_str());
                    if bare { format!("{n} {v}") } else { v.clone() }
                })
                .collect();
            parts.join(" · ")
        };
        let mut categories: Vec<String> = Vec::new();
        for row in &rows {
            let c = category(row);
            if !categories.contains(&c) {
                categories.push(c);
            }
        }
        let values = categories
            .iter()
            .map(|c| {
                targets
                    .iter()
                    .map(|t| {
                        rows.iter()
                            .find(|r| &r.target == t && &category(r) == c)
                            .and_then(|r| measured(r))
                            .map(&value)
                    })
                    .collect()
            })
            .collect();
        Bars {
            categories,
            targets,
            values,
        }
    }

    fn has_values(&self) -> bool {
        self.values.iter().flatten().any(Option::is_some)
    }
}

/// Horizontal grouped bars: one band per category (top to bottom in report order), one bar per
/// target inside it, the value written at the end of each bar.
fn bar_chart(title: &str, unit: &str, bars: &Bars) -> io::Result<String> {
    let bands = bars.categories.len();
    let per_band = bars.targets.len().max(1);
    let height = 90 + (bands * (per_band * 16 + 12)) as u32;
    let longest = bars
        .categories
        .iter()
        .map(|c| c.chars().count())
        .max()
        .unwrap_or(0);
    let label_width = (longest as u32 * 7 + 20).clamp(80, 420);
    let max = bars
        .values
        .iter()
        .flatten()
        .flatten()
        .fold(0.0, |a: f64, b| a.max(*b))
        .max(1.0)
        // Room on the right for the value labels and the legend.
        * 1.45;
    let bar_height = 0.8 / per_band as f64;
    let mut svg = String::new();
    {
        let root =
            SVGBackend::with_string(&mut svg, (label_width + 620, height)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_error)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(label_width)
            .build_cartesian_2d(0.0..max, 0.0..bands as f64)
            .map_err(draw_error)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .light_line_style(WHITE)
            .y_labels(0)
            .x_desc(unit)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .draw()
            .map_err(draw_error)?;
        // Category names by hand, right-aligned left of each band: plotters' own labels sit at
        // "nice" numbers, not at band centres. y = 0 is the bottom; the first category goes on
        // top, like the table.
        let label_style = ("sans-serif", 12)
            .into_font()
            .into_text_style(&root)
            .pos(Pos::new(HPos::Right, VPos::Center));
        for (c, category) in bars.categories.iter().enumerate() {
            let (x, y) = chart.backend_coord(&(0.0, (bands - 1 - c) as f64 + 0.5));
            root.draw(&Text::new(category.clone(), (x - 6, y), &label_style))
                .map_err(draw_error)?;
        }
        for (t, target) in bars.targets.iter().enumerate() {
            let color = target_color(t, target);
            let placed: Vec<(f64, f64)> = bars
                .values
                .iter()
                .enumerate()
                .filter_map(|(c, values)| {
                    let value = (*values.get(t)?)?;
                    let bottom = (bands - 1 - c) as f64 + 0.9 - (t + 1) as f64 * bar_height;
                    Some((value, bottom))
                })
                .collect();
            chart
                .draw_series(
                    placed.iter().map(|&(v, y)| {
                        Rectangle::new([(0.0, y), (v, y + bar_height)], color.filled())
                    }),
                )
                .map_err(draw_error)?
                .label(target.as_str())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled())
                });
            chart
                .draw_series(placed.iter().map(|&(v, y)| {
                    Text::new(
                        format_value(v),
                        (v, y + bar_height * 0.85),
                        ("sans-serif", 11),
                    )
                }))
                .map_err(draw_error)?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(draw_error)?;
        root.present().map_err(draw_error)?;
    }
    Ok(svg)
}

fn format_value(value: f64) -> String {
    if value >= 100.0 {
        format!(" {value:.0}")
    } else {
        format!(" {value:.1}")
    }
}

fn draw_error<E: std::error::Error + Send + Sync>(error: DrawingAreaErrorKind<E>) -> io::Error {
    io::Error::other(format!("drawing a chart: {error}"))
}
