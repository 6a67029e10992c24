//! Any text as a `Range` value for a representation of any length: the decision must never
//! panic and never name a byte outside the representation (RFC 9110 §14). Run with
//! `cargo fuzz run range` (nightly) from `fuzz/`; the stable stand-in is
//! `crates/http/src/static_files/range_proptest.rs`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_http::static_files::range::{RangeDecision, decide};

fuzz_target!(|data: &[u8]| {
    // The first eight bytes are the length, the rest the header value.
    let Some((len, value)) = data.split_first_chunk::<8>() else {
        return;
    };
    let len = u64::from_le_bytes(*len);
    let Ok(value) = std::str::from_utf8(value) else {
        return;
    };
    if let RangeDecision::Partial { start, end } = decide(Some(value), len) {
        assert!(start <= end && end < len);
    }
});
