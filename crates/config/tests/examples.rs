//! Every TOML file in the workspace's `examples/` directory must validate: they are what people
//! copy, and the documentation points at them.

use std::path::PathBuf;

#[test]
fn every_example_validates() {
    let dir = PathBuf::from("../../examples");
    let mut examples: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("the workspace has an examples/ directory")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
        .collect();
    examples.sort();
    assert!(
        examples.iter().any(|p| p.ends_with("sluice.toml")),
        "examples/sluice.toml, the documented reference, is missing"
    );
    let failures: Vec<String> = examples
        .iter()
        .filter_map(|path| sluice_config::load(path).err().map(|d| format!("{d}")))
        .collect();
    assert!(
        failures.is_empty(),
        "invalid examples:\n{}",
        failures.join("\n\n")
    );
}
