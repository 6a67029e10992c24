//! What the lab's test files share: how a test that needs something installed (a peer, h2load,
//! an origin's runtime) skips.

/// `SLUICE_TEST_STRICT=1` (the name every external suite of the workspace uses) turns a skip
/// into a failure, for machines that must have everything installed.
pub const STRICT_ENV: &str = "SLUICE_TEST_STRICT";

/// Call where a test cannot run because `what` is missing: under `SLUICE_TEST_STRICT` this
/// panics; otherwise it says so loudly on stderr and the test returns.
///
/// The same rule and the same loud line as `sluice_testkit::external` (which the rest of the
/// workspace uses): strict unless the variable is unset, empty or `0`, and the line written to
/// the process's stderr, not through `eprintln!`, which the test harness captures and shows
/// only for failing tests. Not that function itself: the testkit depends on this crate.
#[allow(clippy::panic, dead_code)]
pub fn skip(test: &str, what: &str) {
    use std::io::Write;
    if std::env::var(STRICT_ENV).is_ok_and(|v| !v.is_empty() && v != "0") {
        panic!("{test}: {what}, and {STRICT_ENV} forbids skipping");
    }
    let _ = writeln!(
        std::io::stderr().lock(),
        "\n*** SKIPPED {test}: {what}. Set {STRICT_ENV}=1 to make this a failure. ***\n"
    );
}
