//! Any text as a request path: normalising must never panic, must be idempotent, and must leave
//! no dot segment; the alternate reading must never panic either. Run with
//! `cargo fuzz run uri_path` (nightly) from `fuzz/`; the proptest properties in
//! `crates/core/src/uri_path_tests.rs` are the stable stand-in run by `cargo test`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_core::uri_path::{alternate, normalize};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = format!("/{text}");
    if let Ok(normal) = normalize(&path) {
        let again = normalize(&normal).ok();
        assert_eq!(again.as_deref(), Some(normal.as_ref()));
        assert!(!normal.split('/').any(|s| s == "." || s == ".."));
        if let Some(Ok(read)) = alternate(&normal) {
            assert!(!read.split('/').any(|s| s == "." || s == ".."));
        }
    }
});
