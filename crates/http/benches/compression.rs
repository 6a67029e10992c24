//! Compression throughput per algorithm and level (issue 4 item 10), through
//! `sluice_http::compress::Encoder` exactly as the server drives it: a fresh encoder per
//! response, `write` of the body, `finish`. Two bodies: a generated ~70 KB HTML page (the
//! seeds' static page size) and the demo origin's `/what-date-is-it` JSON (340 KB).
//!
//! Throughput is input MB/s. The compressed size and ratio of each case are printed once, before
//! it is measured. Slow levels (brotli 11, zstd 19) run on the page only. A third body, the
//! page's first 4 KiB, shows the fixed cost of setting up an encoder per response. Results and what they
//! mean for the default levels: docs/compression-levels.md.
//!
//! The `gzip-levels/*` and `gzip-stream/*` groups (support/gzip_levels.rs) set gzip at every
//! level 1–9 against zlib, zlib-rs and libdeflate, in CPU time (support/cpu_time.rs) and bytes.
//!
//! `cargo bench -p sluice-http --bench compression -- --warm-up-time 1 --measurement-time 3`
//! `cargo bench -p sluice-http --bench compression -- gzip-levels --warm-up-time 0.5 --measurement-time 1`
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use bytes::BytesMut;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use sluice_core::Compression;
use sluice_http::compress::Encoder;

#[path = "support/cpu_time.rs"]
mod cpu_time;
#[path = "../src/compress/fixtures.rs"]
mod fixtures;
#[path = "support/gzip_levels.rs"]
mod gzip_levels;

/// Compress `input` as one response.
fn compress(alg: Compression, level: i32, input: &[u8]) -> BytesMut {
    let mut out = BytesMut::new();
    let mut encoder = Encoder::new(alg, Some(level)).unwrap();
    encoder.write(input, &mut out).unwrap();
    encoder.finish(&mut out).unwrap();
    out
}

/// A ~70 KB HTML page shaped like a real one: head with inline CSS, navigation, an article of
/// paragraphs drawn from a vocabulary (so words repeat as in prose, not as in a fill pattern),
/// a data table and a footer. Deterministic (a fixed LCG), so every run measures the same bytes.
fn html_page() -> Vec<u8> {
    const WORDS: &[&str] = &[
        "the",
        "proxy",
        "server",
        "request",
        "response",
        "cache",
        "upstream",
        "header",
        "client",
        "of",
        "and",
        "to",
        "in",
        "is",
        "that",
        "for",
        "with",
        "compression",
        "latency",
        "body",
        "stream",
        "connection",
        "timeout",
        "balance",
        "route",
        "static",
        "file",
        "gzip",
        "brotli",
        "zstd",
        "negotiation",
        "encoding",
        "content",
        "length",
        "chunked",
        "keep-alive",
        "TLS",
        "certificate",
        "handshake",
        "window",
        "level",
        "throughput",
        "memory",
        "buffer",
        "frame",
        "a",
        "an",
        "it",
        "on",
        "by",
        "as",
        "be",
        "this",
        "are",
        "or",
        "from",
        "at",
        "which",
        "configuration",
        "listener",
        "health",
        "check",
        "weight",
        "retry",
        "budget",
        "metrics",
    ];
    let mut seed: u64 = 0x5eed;
    let mut next = |n: usize| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((seed >> 33) as usize) % n
    };
    let mut page = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>sluice: field notes on compression</title>\n<style>\n\
         body{margin:0;font-family:system-ui,-apple-system,sans-serif;line-height:1.6;color:#222}\n\
         header,footer{background:#0b3d59;color:#fff;padding:1rem 2rem}\n\
         nav a{color:#cde;margin-right:1rem;text-decoration:none}\n\
         article{max-width:46rem;margin:2rem auto;padding:0 1rem}\n\
         table{border-collapse:collapse;width:100%}td,th{border:1px solid #ccc;padding:.3rem}\n\
         </style>\n</head>\n<body>\n<header><nav>",
    );
    for i in 0..24 {
        page.push_str(&format!(
            "<a href=\"/docs/section-{i}.html\" class=\"nav-link\">Section {i}</a>"
        ));
    }
    page.push_str("</nav></header>\n<article>\n");
    let mut section = 0;
    while page.len() < 56_000 {
        if next(6) == 0 {
            section += 1;
            page.push_str(&format!(
                "<h2 id=\"s{section}\">{} {}</h2>\n",
                WORDS[next(WORDS.len())],
                WORDS[next(WORDS.len())]
            ));
        }
        page.push_str("<p>");
        for w in 0..40 + next(60) {
            if w > 0 {
                page.push(' ');
            }
            let word = WORDS[next(WORDS.len())];
            if next(25) == 0 {
                page.push_str(&format!("<a href=\"/wiki/{word}\">{word}</a>"));
            } else if next(30) == 0 {
                page.push_str(&format!("<code>{word}_{}</code>", next(1000)));
            } else {
                page.push_str(word);
            }
        }
        page.push_str(".</p>\n");
    }
    page.push_str("<table><tr><th>id</th><th>name</th><th>bytes</th><th>ratio</th></tr>\n");
    while page.len() < 70_000 {
        page.push_str(&format!(
            "<tr><td>{}</td><td>{}-{}</td><td>{}</td><td>{}.{:02}</td></tr>\n",
            next(100_000),
            WORDS[next(WORDS.len())],
            WORDS[next(WORDS.len())],
            next(10_000_000),
            1 + next(9),
            next(100)
        ));
    }
    page.push_str(
        "</table>\n</article>\n<footer>sluice documentation</footer>\n</body>\n</html>\n",
    );
    page.into_bytes()
}

/// The demo origin's `/what-date-is-it` body, as benchmarks and `sluice bench` fetch it.
fn dates_json() -> Vec<u8> {
    use http_body_util::BodyExt;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    runtime.block_on(async {
        let origin = sluice_origin::Origin::new(sluice_origin::OriginOptions::default());
        let request = http::Request::get("/what-date-is-it")
            .body(sluice_core::Body::Empty)
            .unwrap();
        let response = origin.handle(request).await;
        assert_eq!(response.status(), 200);
        response
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec()
    })
}

/// The cases: (algorithm, levels on both bodies, levels on the page only).
const CASES: &[(Compression, &[i32], &[i32])] = &[
    (Compression::GZIP, &[1, 2, 4, 6, 9], &[]),
    (Compression::DEFLATE, &[2, 6], &[]),
    (Compression::BR, &[1, 2, 3, 4, 5, 6], &[11]),
    (Compression::ZSTD, &[1, 3, 9], &[19]),
];

fn bench(c: &mut Criterion) {
    let page = html_page();
    // A small response shows the per-response set-up cost (hash tables allocated and cleared).
    let small = page[..4096].to_vec();
    let bodies = [
        ("html-70k", page),
        ("json-340k", dates_json()),
        ("html-4k", small),
    ];
    for (name, body) in &bodies {
        let mut group = c.benchmark_group(format!("compress/{name}"));
        group.throughput(Throughput::Bytes(body.len() as u64));
        for &(alg, levels, page_only) in CASES {
            let extra = if *name == "html-70k" { page_only } else { &[] };
            for &level in levels.iter().chain(extra) {
                let size = compress(alg, level, body).len();
                println!(
                    "ratio {name} {}-{level}: {} -> {size} bytes, {:.2}x",
                    alg.as_str(),
                    body.len(),
                    body.len() as f64 / size as f64
                );
                let id = BenchmarkId::new(alg.as_str(), level);
                group.bench_with_input(id, body, |b, body| b.iter(|| compress(alg, level, body)));
            }
        }
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench
}
criterion_group! {
    name = gzip;
    config = Criterion::default().sample_size(10).with_measurement(cpu_time::CpuTime);
    targets = gzip_levels::bench
}
criterion_main!(benches, gzip);
