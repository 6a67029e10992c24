//! Case counts for the property tests of this crate (`*_proptest.rs`): a default that keeps each
//! property to a few seconds in the debug profile on a busy 2-core machine, and proptest's own
//! `PROPTEST_CASES` environment variable to run longer (`PROPTEST_CASES=100000 cargo test -p
//! sluice-http proptest`). See docs/testing.md.

use proptest::test_runner::Config;

/// proptest's configuration (which reads `PROPTEST_CASES` and the other `PROPTEST_*`
/// variables) with `default_cases` when `PROPTEST_CASES` is not set.
pub(crate) fn cases(default_cases: u32) -> Config {
    let mut config = Config::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = default_cases;
    }
    config
}
