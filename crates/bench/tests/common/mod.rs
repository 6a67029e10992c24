//! What the lab's test files share: how a test that needs something installed (a peer, h2load,
//! an origin's runtime) skips.

/// `SLUICE_TEST_STRICT=1` (the name every external suite of the workspace uses) turns a skip
/// into a failure, for machines that must have everything installed.
pub const STRICT_ENV: &str = "SLUICE_TEST_STRICT";

/// Call where a test cannot run because `what` is missing: under `SLUICE_TEST_STRICT=1` this
/// panics; otherwise it says so loudly on stderr and the test returns.
#[allow(clippy::panic, dead_code)]
pub fn skip(test: &str, what: &str) {
    if std::env::var(STRICT_ENV).is_ok_and(|v| v == "1") {
        panic!("{test}: {what}, and {STRICT_ENV}=1 forbids skipping");
    }
    eprintln!("SKIPPED {test}: {what} (set {STRICT_ENV}=1 to make this a failure)");
}
