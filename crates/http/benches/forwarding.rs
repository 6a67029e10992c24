//! Cost of the forwarding headers the proxy adds to every request (`X-Forwarded-For`, `-Proto`,
//! `-Host`, `Via`), next to the way they were built before (a `String` per value, `format!` for
//! the joined list, `HeaderValue::from_str` copying it again, only the first line of a list
//! read), kept here as the baseline the change is measured against.
//!
//! `cargo bench -p sluice-http --bench forwarding -- --warm-up-time 1 --measurement-time 3`
#![allow(clippy::unwrap_used)]

use std::hint::black_box;
use std::net::IpAddr;

use criterion::{Criterion, criterion_group, criterion_main};
use http::{HeaderMap, HeaderName, HeaderValue, header};
use sluice_http::headers::{self, Hop, X_FORWARDED_FOR, X_FORWARDED_HOST, X_FORWARDED_PROTO};

/// The previous implementation, verbatim but for names.
mod before {
    use super::*;

    pub fn append_list(headers: &mut HeaderMap, name: HeaderName, value: &str) {
        let joined = match headers.get(&name).and_then(|v| v.to_str().ok()) {
            Some(existing) if !existing.is_empty() => format!("{existing}, {value}"),
            _ => value.to_string(),
        };
        if let Ok(v) = HeaderValue::from_str(&joined) {
            headers.insert(name, v);
        }
    }

    pub fn add_forwarded(headers: &mut HeaderMap, ip: IpAddr, host: Option<&str>) {
        append_list(headers, X_FORWARDED_FOR, &ip.to_string());
        append_list(headers, X_FORWARDED_PROTO, "http");
        if let Some(host) = host {
            append_list(headers, X_FORWARDED_HOST, host);
        }
        append_list(headers, header::VIA, &format!("{} sluice", "1.1"));
    }
}

/// A browser-like request head, optionally already behind another proxy.
fn request_headers(behind_proxy: bool) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(header::HOST, HeaderValue::from_static("www.example.test"));
    h.insert(
        header::USER_AGENT,
        HeaderValue::from_static("Mozilla/5.0 (X11; Linux x86_64)"),
    );
    h.insert(
        header::ACCEPT,
        HeaderValue::from_static("text/html,*/*;q=0.8"),
    );
    h.insert(
        header::ACCEPT_ENCODING,
        HeaderValue::from_static("gzip, deflate, br, zstd"),
    );
    if behind_proxy {
        h.insert(X_FORWARDED_FOR, HeaderValue::from_static("198.51.100.23"));
        h.insert(header::VIA, HeaderValue::from_static("1.1 edge"));
    }
    h
}

fn bench(c: &mut Criterion) {
    let ip: IpAddr = "192.0.2.41".parse().unwrap();
    for behind_proxy in [false, true] {
        let base = request_headers(behind_proxy);
        let case = if behind_proxy {
            "behind-proxy"
        } else {
            "direct"
        };
        let mut group = c.benchmark_group(format!("forwarding/{case}"));
        group.bench_function("before", |b| {
            b.iter_batched_ref(
                || base.clone(),
                |h| {
                    let host = h
                        .get(header::HOST)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned);
                    before::add_forwarded(h, black_box(ip), host.as_deref());
                },
                criterion::BatchSize::SmallInput,
            )
        });
        group.bench_function("after", |b| {
            b.iter_batched_ref(
                || base.clone(),
                |h| {
                    let hop = Hop {
                        peer_ip: black_box(ip),
                        // The appending path, which `before` measured too.
                        trusted: true,
                        tls: false,
                        host: h.get(header::HOST).cloned(),
                        version: http::Version::HTTP_11,
                    };
                    headers::add_forwarded(h, hop);
                },
                criterion::BatchSize::SmallInput,
            )
        });
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(50);
    targets = bench
}
criterion_main!(benches);
