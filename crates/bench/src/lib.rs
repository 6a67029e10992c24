//! `sluice bench`: the lab that reproduces the seeds' tables (DESIGN.md capability 18).
//!
//! A run is: for each selected [`scenario`], for each target (sluice, nginx, baseline), start the
//! target pinned to the server CPUs with a config generated for the scenario, run the scenario's
//! correctness check, then its load (built-in driver or h2load) N times while sampling the
//! server's CPU and memory from /proc, and record a [`model::ScenarioResult`]. The report renders
//! every result as tables shaped like the seeds' own, SVG charts and `results.json`.
//!
//! - [`model`]: the data every part shares (scenario descriptions, measurements, the report).
//! - [`driver`]: load generators ([`driver::h2load`]).
//! - [`sampler`]: CPU and memory of the server's process tree from /proc.
//! - [`machine`]: CPU model, cores, kernel and memory for the report header.
//! - [`report`]: `results.json`, `report.md` and SVG charts.

pub mod driver;
pub mod machine;
pub mod model;
pub mod report;
pub mod sampler;
