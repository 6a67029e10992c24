//! Any bytes as `Cache-Control`, targeted (`CDN-Cache-Control`, RFC 9213) and `Pragma` field
//! lines: the RFC 9111 directive parsers must never panic and never return a delta-seconds value
//! above 2^31 (§1.2.2). Run with `cargo fuzz run cache_control` (nightly) from `fuzz/`; the
//! stable stand-in is `crates/cache/src/policy/tests/proptest.rs`.

#![no_main]

use std::time::Duration;

use http::{HeaderMap, HeaderValue, header};
use libfuzzer_sys::fuzz_target;
use sluice_cache::policy::{CDN_CACHE_CONTROL, RequestDirectives, ResponseDirectives, Settings};

fuzz_target!(|data: &[u8]| {
    // NUL separates field lines; each line's first byte says which field it is.
    let mut headers = HeaderMap::new();
    for line in data.split(|&b| b == 0) {
        let Some((&which, value)) = line.split_first() else {
            continue;
        };
        let Ok(value) = HeaderValue::from_bytes(value) else {
            continue;
        };
        let name = match which % 3 {
            0 => header::CACHE_CONTROL,
            1 => CDN_CACHE_CONTROL,
            _ => header::PRAGMA,
        };
        headers.append(name, value);
    }
    let cap = Duration::from_secs(1 << 31);
    let d = ResponseDirectives::parse(&headers, &Settings::default());
    for delta in [d.max_age, d.s_maxage, d.stale_while_revalidate, d.stale_if_error] {
        assert!(delta.is_none_or(|d| d <= cap));
    }
    RequestDirectives::parse(&headers);
});
