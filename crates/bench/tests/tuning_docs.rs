//! docs/benchmarks.md lists every peer's tuning line with its reason and source: the table
//! and `target::tuning::TUNING` must not drift apart.
#![allow(clippy::unwrap_used, clippy::panic)]

use sluice_bench::target::tuning::TUNING;

#[test]
fn every_tuning_line_is_documented() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/benchmarks.md");
    let docs = std::fs::read_to_string(&path).unwrap();
    let section = docs
        .split("### How each peer is tuned")
        .nth(1)
        .unwrap_or_else(|| panic!("{}: no \"How each peer is tuned\" section", path.display()));
    for tuning in TUNING {
        let quoted = format!("`{}`", tuning.line.trim());
        let row = section
            .lines()
            .find(|l| l.starts_with('|') && l.contains(&quoted))
            .unwrap_or_else(|| panic!("{quoted} is not in the tuning table of docs/benchmarks.md"));
        assert!(
            row.contains(tuning.source),
            "{quoted}: the row does not cite {}",
            tuning.source
        );
    }
}
