//! External programs a suite needs (h2spec today; redis-server, dnsmasq, Chromium... later):
//! one place that finds them, and one rule for when one is missing.
//!
//! ```ignore
//! use sluice_testkit::external;
//!
//! #[tokio::test]
//! async fn h2spec_passes() {
//!     let Some(h2spec) = external::require(
//!         "h2spec",
//!         "go install github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible",
//!     ) else {
//!         return; // skipped, and said so loudly
//!     };
//!     // ... run `h2spec` ...
//! }
//! ```
//!
//! The rule: plain `cargo test` stays usable on a machine without the program (the suite prints
//! one loud `SKIPPED` line saying what is missing and how to install it, and passes without
//! running), while `scripts/test`, the README's test command and what CI runs, sets
//! [`STRICT_VAR`] (`SLUICE_TEST_STRICT=1`), which turns every such skip into a failure, after it
//! has installed every program the suites need. A suite that needs a new program calls
//! [`require`] and adds the program to `scripts/test`.
//!
//! A program is looked up, in order, in the environment variable named after it (upper case,
//! `-` and `.` as `_`: `$H2SPEC`, `$REDIS_SERVER`), in `PATH`, then where `go install` puts
//! binaries (`$GOBIN`, `$GOPATH/bin`, `$HOME/go/bin`), so a Go tool works right after `go
//! install` without a `PATH` change.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The environment variable that makes a missing program a failure instead of a skip. Any
/// value but empty or `0` turns it on.
pub const STRICT_VAR: &str = "SLUICE_TEST_STRICT";

/// Whether missing programs fail the suites that need them ([`STRICT_VAR`] is set).
pub fn strict() -> bool {
    std::env::var(STRICT_VAR).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// The path of `program`, or `None` after a loud line saying it is missing and that the caller
/// is skipped; `install` is the command that installs it (shown in that line). Under
/// [`STRICT_VAR`] a missing program panics with the same message instead, failing the test.
pub fn require(program: &str, install: &str) -> Option<PathBuf> {
    match find(program) {
        Some(found) => Some(found),
        None => missing(program, install, strict()),
    }
}

/// A file a step before the tests makes (the Debian package `scripts/test` builds), named by the
/// environment variable `variable`: its path, or, when the variable is unset or names no file, the
/// same skip or failure as a missing program, with `make` as the command that makes it.
pub fn require_file(variable: &str, make: &str) -> Option<PathBuf> {
    match std::env::var_os(variable).map(PathBuf::from) {
        Some(path) if path.is_file() => Some(path),
        _ => {
            let message = format!(
                "${variable} names no file; make one with `{make}` and set ${variable} to its \
                 path, or run scripts/test, which does"
            );
            skip_or_fail(&message, strict())
        }
    }
}

/// The skip (`None`, said loudly) or, when `strict`, the failure for a missing `program`.
fn missing(program: &str, install: &str, strict: bool) -> Option<PathBuf> {
    let message = format!(
        "`{program}` not found (looked in ${}, PATH, $GOBIN, $GOPATH/bin and ~/go/bin); \
         install it with `{install}`, or run scripts/test, which installs what the suites need",
        variable(program)
    );
    skip_or_fail(&message, strict)
}

/// `None` after a loud SKIPPED line with `message`, or, when `strict`, a panic with it.
fn skip_or_fail(message: &str, strict: bool) -> Option<PathBuf> {
    if strict {
        panic!("{message} ({STRICT_VAR} is set, so this is a failure, not a skip)");
    }
    // Straight to the process's stderr, not through `eprintln!`, which the test harness
    // captures and shows only for failing tests: a skip must be seen.
    let test = std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string();
    let _ = writeln!(
        std::io::stderr().lock(),
        "\n*** SKIPPED {test}: {message}. Set {STRICT_VAR}=1 to make this a failure. ***\n"
    );
    None
}

/// Where `program` is, by the lookup order of the module docs.
pub fn find(program: &str) -> Option<PathBuf> {
    let from_var = std::env::var_os(variable(program)).map(PathBuf::from);
    let path = std::env::var_os("PATH").unwrap_or_default();
    let on_path = std::env::split_paths(&path).map(|dir| dir.join(program));
    let go_dirs = [
        std::env::var_os("GOBIN").map(PathBuf::from),
        std::env::var_os("GOPATH").map(|p| Path::new(&p).join("bin")),
        std::env::var_os("HOME").map(|home| Path::new(&home).join("go/bin")),
    ];
    let from_go = go_dirs.into_iter().flatten().map(|dir| dir.join(program));
    from_var
        .into_iter()
        .chain(on_path)
        .chain(from_go)
        .find(|candidate| is_executable(candidate))
}

/// The environment variable that names `program`'s path: `h2spec` → `H2SPEC`,
/// `redis-server` → `REDIS_SERVER`.
pub fn variable(program: &str) -> String {
    program
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variable_names() {
        assert_eq!(variable("h2spec"), "H2SPEC");
        assert_eq!(variable("redis-server"), "REDIS_SERVER");
        assert_eq!(variable("chromium.bin"), "CHROMIUM_BIN");
    }

    #[test]
    fn finds_a_program_on_path_and_not_a_missing_one() {
        // `sh` is on every PATH a test runs with (cargo and rustc need one).
        let sh = find("sh").expect("sh on PATH");
        assert!(sh.ends_with("sh") && sh.is_file(), "{}", sh.display());
        assert_eq!(find("sluice-no-such-program-anywhere"), None);
    }

    #[test]
    fn a_missing_program_is_a_skip() {
        assert_eq!(
            missing("sluice-no-such-program", "apt-get install it", false),
            None
        );
    }

    #[test]
    #[should_panic(expected = "SLUICE_TEST_STRICT is set, so this is a failure")]
    fn a_missing_program_is_a_failure_when_strict() {
        missing("sluice-no-such-program", "apt-get install it", true);
    }
}
