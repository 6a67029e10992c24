//! `sluice bench run` as a user runs it: the real binary starts sluice, the demo origin and
//! the baseline as pinned processes, checks them, loads them and writes results.json.

use std::process::Command;

#[test]
fn a_quick_bench_run_measures_sluice_and_the_baseline() {
    let out = tempfile::tempdir().unwrap();
    let status = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["bench", "run", "--quick", "static-plain", "post-gz0"])
        .args(["--targets", "sluice,baseline", "--out"])
        .arg(out.path())
        .status()
        .unwrap();
    assert!(status.success());
    let json = std::fs::read(out.path().join("results.json")).unwrap();
    let report: serde_json::Value = serde_json::from_slice(&json).unwrap();
    let results = report["results"].as_array().unwrap();
    let rows: Vec<(&str, &str)> = results
        .iter()
        .map(|r| {
            (
                r["scenario"].as_str().unwrap(),
                r["target"].as_str().unwrap(),
            )
        })
        .collect();
    // The scenario table's order (the seeds'), not the command line's.
    assert_eq!(
        rows,
        [
            ("post-gz0", "sluice"),
            ("post-gz0", "baseline"),
            ("static-plain", "sluice"),
            ("static-plain", "baseline"),
        ]
    );
    for r in results {
        assert_eq!(r["outcome"]["kind"], "ok", "{r}");
        let run = &r["runs"][0];
        assert_eq!(run["failures"], 0, "{r}");
        assert!(run["requests"].as_u64().unwrap() >= 1000, "{r}");
        assert!(
            run["server_cpu_us_per_request"].as_f64().unwrap() > 0.0,
            "{r}"
        );
    }
    let plain = &results[2]["runs"][0];
    let page_bytes = plain["body_bytes"].as_u64().unwrap() / plain["requests"].as_u64().unwrap();
    assert!((70 * 1024..76 * 1024).contains(&page_bytes), "{page_bytes}");
}
