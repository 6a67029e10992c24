//! The server crate's layers point one way (the crate README draws them): each folder of
//! `src/` may import only the folders below it. Read from the `use` lines and every other
//! `crate::` path in code (comments are not imports), so a wrong import fails here rather
//! than in a reviewer's head. Unit tests are not held to it (they may set a case up with
//! another layer's code): what follows a file's `#[cfg(test)]`, which ends each file by the
//! crate's convention (an indented one marks a test helper and does not count), and the files that are tests whole (`tests.rs`, `*_tests.rs`,
//! `*_proptest.rs`).

use std::collections::BTreeSet;
use std::path::Path;

/// Each layer, top to bottom, with the layers it may import. `ops` is the top; `shared` imports
/// none. "net knows no feature; features do not import ops" follow from the order.
const LAYERS: &[(&str, &[&str])] = &[
    ("ops", &["net", "pipeline", "features", "shared"]),
    ("net", &["pipeline", "shared"]),
    ("pipeline", &["features", "shared"]),
    ("features", &["shared"]),
    ("shared", &[]),
];

/// Every import of `src` that crosses the layers the wrong way, as `file: layer -> layer`.
fn wrong_imports(src: &Path) -> Vec<String> {
    let mut wrong = Vec::new();
    for (layer, allowed) in LAYERS {
        let mut files = Vec::new();
        rust_files(&src.join(layer), &mut files);
        assert!(!files.is_empty(), "src/{layer}/ has no .rs file");
        for file in files.into_iter().filter(|f| !is_test_file(f)) {
            let text = std::fs::read_to_string(&file).unwrap();
            let code = text.split("\n#[cfg(test)]\n").next().unwrap_or_default();
            for target in imported_layers(code) {
                if target != *layer && !allowed.contains(&target.as_str()) {
                    let name = file.strip_prefix(src).unwrap().display();
                    wrong.push(format!("src/{name}: {layer} -> {target}"));
                }
            }
        }
    }
    wrong
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn is_test_file(path: &Path) -> bool {
    let stem = path.file_stem().unwrap().to_string_lossy();
    stem == "tests" || stem.ends_with("_tests") || stem.ends_with("_proptest")
}

/// The top-level folders named by `crate::…` paths in the code of `text`, including each
/// name of a grouped `crate::{a, b::c}`.
fn imported_layers(text: &str) -> BTreeSet<String> {
    let code: String = text
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut found = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                found.insert(first_segment(item.trim()));
            }
        } else {
            found.insert(first_segment(rest));
        }
    }
    found.retain(|name| !name.is_empty());
    found
}

fn first_segment(path: &str) -> String {
    path.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

#[test]
fn each_layer_imports_only_the_layers_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let wrong = wrong_imports(&src);
    assert!(
        wrong.is_empty(),
        "imports against the layers:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn a_wrong_import_is_found() {
    // A copy of the layout with one import that goes the wrong way per rule of the issue: the
    // connection layer naming a feature, a feature naming ops, the bottom naming anything.
    let dir = tempfile::tempdir().unwrap();
    for (layer, _) in LAYERS {
        std::fs::create_dir_all(dir.path().join(layer)).unwrap();
        std::fs::write(dir.path().join(layer).join("mod.rs"), "//! fine\n").unwrap();
    }
    std::fs::write(
        dir.path().join("net/conn.rs"),
        "use crate::pipeline::Pipeline;\nuse crate::features::tunnel::Tunnel;\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.path().join("features/proxy")).unwrap();
    std::fs::write(
        dir.path().join("features/proxy/mod.rs"),
        "// crate::ops in a comment is no import\nfn f() { crate::{shared::metrics, ops::running}::x(); }\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("shared/cpu.rs"), "use crate::net::idle;\n").unwrap();
    // Test code may use any layer.
    std::fs::write(
        dir.path().join("shared/client.rs"),
        "fn f() {}\n#[cfg(test)]\nmod tests {\n    use crate::ops::running;\n}\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("shared/tests.rs"),
        "use crate::ops::running;\n",
    )
    .unwrap();
    let wrong = wrong_imports(dir.path());
    assert_eq!(
        wrong,
        [
            "src/net/conn.rs: net -> features",
            "src/features/proxy/mod.rs: features -> ops",
            "src/shared/cpu.rs: shared -> net",
        ],
    );
}
