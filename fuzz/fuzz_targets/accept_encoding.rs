//! Any bytes as an `Accept-Encoding` value: negotiation must never panic and must only pick an
//! offered coding or identity. Run with `cargo fuzz run accept_encoding` (nightly) from `fuzz/`;
//! `negotiate_tests::random_fields_never_panic` is the stable stand-in run by `cargo test`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_core::ContentCoding;
use sluice_http::encoding::{Negotiated, negotiate_fields};

const OFFERED: [ContentCoding; 4] = [
    ContentCoding::Zstd,
    ContentCoding::Br,
    ContentCoding::Gzip,
    ContentCoding::Deflate,
];

fuzz_target!(|data: &[u8]| {
    // Split the input at NUL into several field lines, as a request may carry more than one.
    let fields = data.split(|&b| b == 0);
    if let Negotiated::Use(encoding) = negotiate_fields(fields, &OFFERED) {
        assert!(encoding == ContentCoding::Identity || OFFERED.contains(&encoding));
    }
});
