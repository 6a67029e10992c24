//! Every file a document names exists: the docs (`docs/`, every README) say where things are,
//! and a move that leaves them pointing at nothing is a bug they would keep. A path is a word of
//! a document that starts at one of the repository's folders (`crates/`, `docs/`,
//! `examples/`, `scripts/`, `fuzz/`, `.ci/`), or has a `/` and ends in a source or document
//! extension (`.rs`, `.md`, `.sh`, `.py`, `.go`), or is a bare `.rs` or `.md` file name. It
//! must name a tracked file or folder: the word is a path from the repository's root, or the
//! tail of one (`net/conn.rs` names `crates/server/src/net/conn.rs`, `conn.rs` a file of that
//! name anywhere). Not paths: words in a URL or a Rust path (`::`), globs (`*_tests.rs`),
//! placeholders (`DIR/report.md`), absolute paths (a measurement's scratch files on the
//! machine it ran on), and `DESIGN.md`, the steering side's design kept beside the repository
//! (`../shared/`). Other projects' files are named by crate and module, not by path.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

const EXTENSIONS: &[&str] = &[".rs", ".md", ".sh", ".py", ".go"];
/// Bare file names (no `/`) are checked for these only: the files a reader looks for.
const BARE: &[&str] = &[".rs", ".md"];
const OUTSIDE: &[&str] = &["DESIGN.md"];
const FOLDERS: &[&str] = &["crates/", "docs/", "examples/", "scripts/", "fuzz/", ".ci/"];

fn tracked(root: &Path) -> Vec<String> {
    let out = Command::new("git")
        .args(["ls-files", "--cached", "--others", "--exclude-standard"])
        .current_dir(root)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git ls-files failed");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The path-like words of `text`.
fn paths_in(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for word in text
        .split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | '*')))
    {
        let word = word.trim_matches(|c| c == '.' || c == '-');
        if word.is_empty()
            || word.contains("//")
            || word.contains("..")
            || word.contains('*')
            || word.starts_with('/')
            || OUTSIDE.contains(&word)
            || word.split('/').any(is_placeholder)
        {
            continue;
        }
        let ends = |exts: &[&str]| {
            exts.iter()
                .any(|e| word.ends_with(e) && word.len() > e.len())
        };
        let is_path = FOLDERS.iter().any(|f| word.starts_with(f))
            || (word.contains('/') && ends(EXTENSIONS))
            || ends(BARE);
        if is_path {
            found.push(word.trim_start_matches("./").to_owned());
        }
    }
    found
}

/// `DIR`, `NAME`: a segment in capitals with no extension stands for a name.
fn is_placeholder(segment: &str) -> bool {
    segment.len() > 1 && segment.chars().all(|c| c.is_ascii_uppercase() || c == '_')
}

/// The words that look like paths but are parts of URLs, `peer:` references or Rust paths:
/// taken out before [`paths_in`] reads the text.
fn without_urls(text: &str) -> String {
    text.split_whitespace()
        .filter(|w| !w.contains("://") && !w.contains("::"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn exists(word: &str, files: &[String], folders: &BTreeSet<String>) -> bool {
    let word = word.trim_end_matches('/');
    let tail = format!("/{word}");
    files.iter().any(|f| f == word || f.ends_with(&tail))
        || folders.iter().any(|d| d == word || d.ends_with(&tail))
}

#[test]
fn every_path_a_document_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let files = tracked(&root);
    let folders: BTreeSet<String> = files
        .iter()
        .flat_map(|f| {
            let parts: Vec<&str> = f.split('/').collect();
            (1..parts.len()).map(move |n| parts[..n].join("/"))
        })
        .collect();
    let mut missing = Vec::new();
    for doc in files.iter().filter(|f| f.ends_with(".md")) {
        let text = std::fs::read_to_string(root.join(doc)).unwrap();
        for (n, line) in text.lines().enumerate() {
            for word in paths_in(&without_urls(line)) {
                if !exists(&word, &files, &folders) {
                    missing.push(format!("{doc}:{}: {word}", n + 1));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "documents name files that do not exist (moved? say where they are now):\n{}",
        missing.join("\n")
    );
}

#[test]
fn a_path_to_nothing_is_found() {
    let files = vec!["crates/server/src/net/conn.rs".to_owned()];
    let folders = BTreeSet::from(["crates/server/src/net".to_owned()]);
    let words = paths_in(&without_urls(
        "see `net/conn.rs`, [conn](crates/server/src/net/conn.rs), src/pipeline.rs, \
         https://example.test/x.md, `crate::net::conn.rs`, `*_tests.rs`, DIR/report.md, \
         /tmp/x.sh, pair.sh and DESIGN.md",
    ));
    assert_eq!(
        words,
        [
            "net/conn.rs",
            "crates/server/src/net/conn.rs",
            "src/pipeline.rs"
        ]
    );
    let missing: Vec<_> = words
        .iter()
        .filter(|w| !exists(w, &files, &folders))
        .collect();
    assert_eq!(missing, ["src/pipeline.rs"]);
}
