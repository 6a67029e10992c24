//! Cost of `Accept-Encoding` negotiation per request, on the fields real clients send, with the
//! server preference the compressor uses (zstd, br, gzip). Runs once per compressible response.
//!
//! `cargo bench -p sluice-http --bench negotiate -- --warm-up-time 1 --measurement-time 3`
#![allow(clippy::unwrap_used)]

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use http::{HeaderMap, HeaderValue, header::ACCEPT_ENCODING};
use sluice_core::ContentCoding;
use sluice_http::encoding::negotiate_headers;

const OFFERED: [ContentCoding; 3] = [ContentCoding::Zstd, ContentCoding::Br, ContentCoding::Gzip];

/// (case, Accept-Encoding lines).
const FIELDS: &[(&str, &[&str])] = &[
    ("chrome", &["gzip, deflate, br, zstd"]),
    ("firefox", &["gzip, deflate, br, zstd"]),
    ("safari", &["gzip, deflate, br"]),
    ("curl-compressed", &["deflate, gzip, br, zstd"]),
    ("none", &[]),
    ("q-values", &["br;q=1.0, gzip;q=0.8, *;q=0.1"]),
    ("identity-refused", &["gzip;q=0, identity;q=0, *;q=0"]),
    ("two-lines", &["gzip", "br;q=0.9"]),
];

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("negotiate");
    for (case, lines) in FIELDS {
        let mut headers = HeaderMap::new();
        for line in *lines {
            headers.append(ACCEPT_ENCODING, HeaderValue::from_static(line));
        }
        group.bench_with_input(BenchmarkId::from_parameter(case), &headers, |b, h| {
            b.iter(|| negotiate_headers(black_box(h), black_box(&OFFERED)))
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(50);
    targets = bench
}
criterion_main!(benches);
