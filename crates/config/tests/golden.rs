//! Golden tests: each `tests/golden/NAME.toml` is loaded and the rendered diagnostics must equal
//! `tests/golden/NAME.expected` byte for byte. Paths are given relative to the crate directory
//! (where cargo runs tests), so the files do not depend on where the checkout lives.
//!
//! `UPDATE_GOLDEN=1 cargo test -p sluice-config --test golden` rewrites the expected files;
//! review the diff before committing it.

// Helper functions of this test crate are outside #[test] functions, where clippy.toml's
// allow-*-in-tests does not reach.
#![allow(clippy::unwrap_used)]

use std::fs;
use std::path::{Path, PathBuf};

const DIR: &str = "tests/golden";

fn render(path: &Path) -> String {
    match sluice_config::check(path) {
        Ok((_, warnings)) if warnings.is_empty() => {
            format!("(no errors: {} is valid)\n", path.display())
        }
        Ok((_, warnings)) => format!("{warnings}\n(no errors: {} is valid)\n", path.display()),
        Err(diagnostics) => format!("{diagnostics}\n"),
    }
}

fn golden_cases() -> Vec<PathBuf> {
    let mut cases: Vec<PathBuf> = fs::read_dir(DIR)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
        .collect();
    cases.sort();
    cases
}

#[test]
fn every_golden_matches_its_expected_output() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut failures = Vec::new();
    for case in golden_cases() {
        let actual = render(&case);
        let expected_path = case.with_extension("expected");
        if update {
            fs::write(&expected_path, &actual).unwrap();
            continue;
        }
        match fs::read_to_string(&expected_path) {
            Ok(expected) if expected == actual => {}
            Ok(expected) => failures.push(format!(
                "--- {} (expected)\n{expected}\n+++ actual\n{actual}",
                expected_path.display()
            )),
            Err(_) => failures.push(format!(
                "{} is missing; run with UPDATE_GOLDEN=1",
                expected_path.display()
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "golden mismatches:\n\n{}",
        failures.join("\n")
    );
}

#[test]
fn every_expected_file_has_a_case() {
    for entry in fs::read_dir(DIR).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|ext| ext == "expected") {
            assert!(
                path.with_extension("toml").exists(),
                "stale golden {}",
                path.display()
            );
        }
    }
}

#[test]
fn three_mistakes_are_all_reported_with_their_places() {
    let path = Path::new(DIR).join("three_mistakes.toml");
    let diagnostics = sluice_config::load(&path).unwrap_err();
    assert_eq!(diagnostics.len(), 3, "{diagnostics}");
    let found: Vec<(usize, usize, &str)> = diagnostics
        .iter()
        .map(|d| (d.line, d.column, d.key_path.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            (5, 1, "listeners[0].idle_timout"),
            (6, 23, "listeners[0].header_read_timeout"),
            (11, 22, "routes[0].proxy.upstream"),
        ]
    );
    let text = diagnostics.to_string();
    assert!(
        text.contains("--> tests/golden/three_mistakes.toml:5:1"),
        "{text}"
    );
    assert!(
        text.contains("--> tests/golden/three_mistakes.toml:6:23"),
        "{text}"
    );
    assert!(
        text.contains("--> tests/golden/three_mistakes.toml:11:22"),
        "{text}"
    );
    assert!(text.ends_with("3 errors"));
}

#[test]
fn an_unreadable_file_is_one_diagnostic_with_a_hint() {
    let path = Path::new(DIR).join("does-not-exist.toml");
    let diagnostics = sluice_config::load(&path).unwrap_err();
    assert_eq!(diagnostics.len(), 1);
    let d = diagnostics.iter().next().unwrap();
    assert_eq!((d.line, d.column, d.snippet.is_none()), (0, 0, true));
    assert!(
        d.message.starts_with("cannot read the config file"),
        "{}",
        d.message
    );
    assert!(d.hint.as_deref().unwrap().contains("check the path"));
    let text = diagnostics.to_string();
    assert!(
        text.contains("\n  --> tests/golden/does-not-exist.toml\n"),
        "{text}"
    );
}

/// Every table of the schema, each with one unknown key: each must be reported with a hint from
/// the keys that table really has. A table missing from `schema::table_keys` shows up here as an
/// unknown key without a hint.
#[test]
fn every_table_of_the_schema_is_known_to_the_key_hints() {
    let text = r#"
zz = 1
[server]
zz = 1
[log]
zz = 1
[[listeners]]
address = "127.0.0.1:1"
zz = 1
[listeners.tls]
zz = 1
cert = "c"
key = "k"
[[listeners.tls.sni]]
zz = 1
[[routes]]
zz = 1
static = { root = ".", zz = 1 }
respond = { zz = 1 }
redirect = { to = "/", zz = 1 }
[routes.proxy]
upstream = "a"
zz = 1
request_headers = { zz = 1 }
response_headers = { zz = 1 }
decompress_requests = { zz = 1 }
[routes.compress]
zz = 1
levels = { zz = 1 }
[routes.cache]
zz = 1
levels = { zz = 1 }
[routes.rate_limit]
zz = 1
[routes.response_headers]
zz = 1
[routes.dictionary]
zz = 1
levels = { zz = 1 }
[upstreams.a]
zz = 1
servers = [{ address = "h:1", zz = 1 }]
keepalive = { zz = 1 }
timeouts = { zz = 1 }
retry = { zz = 1 }
health_check = { zz = 1 }
tls = { zz = 1 }
[caches.a]
zz = 1
disk = { zz = 1 }
[admin]
address = "127.0.0.1:2"
zz = 1
[acme]
zz = 1
external_account = { zz = 1 }
"#;
    let diagnostics = sluice_config::parse_str(text, Path::new("schema.toml")).unwrap_err();
    let unknown: Vec<_> = diagnostics
        .iter()
        .filter(|d| d.message.starts_with("unknown key `zz`"))
        .collect();
    let tables = [
        "zz",
        "server.zz",
        "log.zz",
        "listeners[0].zz",
        "listeners[0].tls.zz",
        "listeners[0].tls.sni[0].zz",
        "routes[0].zz",
        "routes[0].static.zz",
        "routes[0].respond.zz",
        "routes[0].redirect.zz",
        "routes[0].proxy.zz",
        "upstreams.a.zz",
        "upstreams.a.servers[0].zz",
        "routes[0].proxy.request_headers.zz",
        "routes[0].proxy.response_headers.zz",
        "routes[0].proxy.decompress_requests.zz",
        "routes[0].compress.zz",
        "routes[0].compress.levels.zz",
        "routes[0].cache.zz",
        "routes[0].cache.levels.zz",
        "routes[0].rate_limit.zz",
        "routes[0].response_headers.zz",
        "routes[0].dictionary.zz",
        "routes[0].dictionary.levels.zz",
        "caches.a.zz",
        "caches.a.disk.zz",
        "upstreams.a.keepalive.zz",
        "upstreams.a.timeouts.zz",
        "upstreams.a.retry.zz",
        "upstreams.a.health_check.zz",
        "upstreams.a.tls.zz",
        "admin.zz",
        "acme.zz",
        "acme.external_account.zz",
    ];
    let mut paths: Vec<&str> = unknown.iter().map(|d| d.key_path.as_str()).collect();
    paths.sort_unstable();
    let mut expected = tables.to_vec();
    expected.sort_unstable();
    assert_eq!(paths, expected);
    for d in unknown {
        let hint = d
            .hint
            .as_deref()
            .unwrap_or_else(|| panic!("no hint for {}", d.key_path));
        assert!(
            hint.starts_with("expected one of `"),
            "{}: {hint}",
            d.key_path
        );
    }
}

/// A route's own key written inside its action table is pointed back to the route, rather than
/// answered with the action's keys.
#[test]
fn a_key_of_the_enclosing_table_says_where_it_goes() {
    let text = "[[listeners]]\naddress = \"127.0.0.1:1\"\n[[routes]]\nstatic = { root = \".\", compress = {} }\n";
    let diagnostics = sluice_config::parse_str(text, Path::new("misplaced.toml")).unwrap_err();
    let d = diagnostics.iter().next().unwrap();
    assert_eq!(d.message, "unknown key `compress` in routes[0].static");
    assert_eq!(
        d.hint.as_deref(),
        Some("`compress` is a key of `routes[0]`, not of `static`: write it beside `static`")
    );
}

/// Half-written files are what an editor saves: every prefix of every golden and example must
/// give diagnostics (or a config), never a panic, and every diagnostic must point inside the file.
#[test]
fn truncated_files_never_panic() {
    let mut files = golden_cases();
    files.extend(
        fs::read_dir("../../examples")
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "toml")),
    );
    for file in files {
        let text = fs::read_to_string(&file).unwrap();
        let lines = text.lines().count();
        for (end, _) in text.char_indices() {
            if let Err(diagnostics) = sluice_config::parse_str(&text[..end], &file) {
                assert!(!diagnostics.is_empty());
                for d in &diagnostics {
                    assert!(
                        d.line <= lines,
                        "{}: line {} of {lines}",
                        file.display(),
                        d.line
                    );
                    assert_eq!(d.line == 0, d.snippet.is_none());
                }
            }
        }
    }
}
