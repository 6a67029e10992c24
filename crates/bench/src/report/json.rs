//! `results.json`: the whole [`Report`], pretty-printed so a diff between two runs is readable.
//!
//! JSON has no NaN or infinity (serde_json writes them as `null`, which then does not read back
//! as a number), so non-finite figures (a 0/0 somewhere upstream) are written as 0, which the
//! report shows as "–" like any figure that was not measured.

use std::fs;
use std::io;
use std::path::Path;

use crate::model::{Measurement, Report};

pub const FILE_NAME: &str = "results.json";

pub fn write(path: &Path, report: &Report) -> io::Result<()> {
    let mut report = report.clone();
    for result in &mut report.results {
        result.runs.iter_mut().for_each(make_finite);
    }
    let mut text = serde_json::to_string_pretty(&report).map_err(io::Error::other)?;
    text.push('\n');
    fs::write(path, text)
}

pub fn read(path: &Path) -> io::Result<Report> {
    let text = fs::read_to_string(path)?;
    serde_json::from_str(&text).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {e}", path.display()),
        )
    })
}

fn make_finite(m: &mut Measurement) {
    let fields = [
        &mut m.elapsed_secs,
        &mut m.requests_per_sec,
        &mut m.latency_p50_us,
        &mut m.latency_p99_us,
        &mut m.latency_max_us,
        &mut m.latency_sd_us,
        &mut m.body_mb_per_sec,
        &mut m.server_cpu_percent,
        &mut m.server_cpu_us_per_request,
        &mut m.server_kernel_us_per_request,
    ];
    for value in fields {
        if !value.is_finite() {
            *value = 0.0;
        }
    }
    if m.compression_ratio.is_some_and(|r| !r.is_finite()) {
        m.compression_ratio = None;
    }
}
