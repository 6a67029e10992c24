//! The experiments, one function per report group, each pushing its scenarios in the order
//! of the group's table. Request counts are sized for a few seconds a run at the slowest
//! target's rate (see the comments), so the full suite stays in minutes.

use bytes::Bytes;
use http::Method;

use super::{Algorithm, Compression, LoadSpec, Protocol, ProxySetup, Scenario, Setup};
use crate::fixtures;

pub(super) fn seed_001(list: &mut Vec<Scenario>) {
    let page = format!("/{}", fixtures::PAGE_NAME);
    list.push(
        Scenario::new(
            "static-plain",
            "seed-001",
            Setup::Static { compress: None },
            LoadSpec::get(&page, 100, 30_000),
        )
        .label("compression", "off")
        .label("level", "-"),
    );
    // Sized for a few seconds a run at the slowest target's rate on two shared cores (nginx:
    // 850 .. 150 req/s from level 1 to 9), so the full suite stays under 20 minutes.
    let sweep: [(u32, u64); 5] = [(1, 6_000), (2, 5_000), (4, 3_000), (6, 1_500), (9, 1_200)];
    for (level, requests) in sweep {
        let compress = Compression {
            algorithm: Algorithm::Gzip,
            level,
        };
        let mut s = Scenario::new(
            &format!("static-gzip-{level}"),
            "seed-001",
            Setup::Static {
                compress: Some(compress),
            },
            LoadSpec::get(&page, 100, requests).header("accept-encoding", "gzip"),
        )
        .label("compression", "gzip on the fly")
        .label("level", level.to_string());
        s.check.encoding = Some(Algorithm::Gzip);
        list.push(s);
    }
    // Default levels: brotli 4 (the highest that is cheap to set up per response), zstd 3.
    for (algorithm, level, requests) in [(Algorithm::Br, 4, 1_500), (Algorithm::Zstd, 3, 8_000)] {
        let mut s = Scenario::new(
            &format!("static-{}", algorithm.token()),
            "seed-001",
            Setup::Static {
                compress: Some(Compression { algorithm, level }),
            },
            LoadSpec::get(&page, 100, requests).header("accept-encoding", algorithm.token()),
        )
        .label("compression", format!("{} on the fly", algorithm.token()))
        .label("level", level.to_string());
        s.check.encoding = Some(algorithm);
        list.push(s);
    }
    let mut s = Scenario::new(
        "static-precompressed",
        "seed-001",
        Setup::Precompressed,
        LoadSpec::get(&page, 100, 40_000).header("accept-encoding", "gzip"),
    )
    .label("compression", "gzip precompressed")
    .label("level", "9");
    s.check.encoding = Some(Algorithm::Gzip);
    list.push(s);
}

pub(super) fn seed_003(list: &mut Vec<Scenario>) {
    const PATH: &str = "/what-date-is-it";
    for clients in [1, 6] {
        let requests = if clients == 1 { 6_000 } else { 8_000 };
        list.push(
            Scenario::new(
                &format!("date-direct-c{clients}"),
                "seed-003",
                Setup::Direct,
                LoadSpec::get(PATH, clients, requests),
            )
            .label("setup", "direct")
            .label("caching", "no")
            .label("balancing", "no")
            .label("concurrency", clients.to_string()),
        );
        list.push(
            Scenario::new(
                &format!("date-proxy-c{clients}"),
                "seed-003",
                Setup::Proxy(ProxySetup::to_one()),
                LoadSpec::get(PATH, clients, requests / 2),
            )
            .label("setup", "proxy")
            .label("caching", "no")
            .label("balancing", "no")
            .label("concurrency", clients.to_string()),
        );
    }
    for (name, weights, label) in [
        ("date-balanced", vec![1, 1], "even"),
        ("date-uneven", vec![3, 1], "3:1"),
    ] {
        let mut s = Scenario::new(
            name,
            "seed-003",
            Setup::Proxy(ProxySetup {
                weights,
                ..ProxySetup::to_one()
            }),
            LoadSpec::get(PATH, 6, 4_000),
        )
        .label("setup", "proxy")
        .label("caching", "no")
        .label("balancing", label)
        .label("concurrency", "6");
        s.check.balance = true;
        list.push(s);
    }
    // About two seconds a run at nginx's rate, the slowest cache here (c=6: ~10,000 req/s at
    // 90 µs a request; c=1: ~1,300, each request waiting for the last across two CPUs).
    for (clients, requests) in [(1, 3_000), (6, 20_000)] {
        let mut s = Scenario::new(
            &format!("date-cached-c{clients}"),
            "seed-003",
            Setup::Proxy(ProxySetup {
                cache: true,
                ..ProxySetup::to_one()
            }),
            LoadSpec::get(PATH, clients, requests),
        )
        .label("setup", "proxy")
        .label("caching", "yes")
        .label("balancing", "no")
        .label("concurrency", clients.to_string());
        s.check.cache_hit = true;
        list.push(s);
    }
}

pub(super) fn api_compress(list: &mut Vec<Scenario>) {
    let compress = Compression {
        algorithm: Algorithm::Gzip,
        level: 1,
    };
    let mut s = Scenario::new(
        "date-proxy-gzip-1",
        "api-compress",
        Setup::Proxy(ProxySetup {
            compress: Some(compress),
            ..ProxySetup::to_one()
        }),
        LoadSpec::get("/what-date-is-it", 6, 4_000).header("accept-encoding", "gzip"),
    )
    .label("compression", "gzip")
    .label("level", "1")
    .label("concurrency", "6");
    s.check.encoding = Some(Algorithm::Gzip);
    list.push(s);
}

/// DESIGN.md §5's "cached + gzip level 6" row: the proxied JSON, cached, asked for gzip. A cache
/// that stores the compressed variant (sluice, Varnish) serves the same bytes on every hit;
/// nginx stores identity and gzips every hit, which is what the row measures.
pub(super) fn cache_compress(list: &mut Vec<Scenario>) {
    let compress = Compression {
        algorithm: Algorithm::Gzip,
        level: 6,
    };
    // nginx gzips 340 KB at level 6 per hit: ~1,000 req/s, so six seconds a run. More than the
    // usual two, for the caches that store the gzip: Varnish answers ~20,000 req/s, and /proc
    // counts CPU in 10 ms ticks, so fewer requests would leave its µs per request to ±5 µs.
    let mut s = Scenario::new(
        "date-cached-gzip-6",
        "cache-compress",
        Setup::Proxy(ProxySetup {
            compress: Some(compress),
            cache: true,
            ..ProxySetup::to_one()
        }),
        LoadSpec::get("/what-date-is-it", 6, 6_000).header("accept-encoding", "gzip"),
    )
    .label("compression", "gzip")
    .label("level", "6")
    .label("caching", "yes")
    .label("concurrency", "6");
    s.check.encoding = Some(Algorithm::Gzip);
    s.check.cache_hit = true;
    list.push(s);
}

pub(super) fn seed_000(list: &mut Vec<Scenario>) {
    let raw = fixtures::post_json();
    let gzipped = fixtures::gzip(&raw, 6);
    let raw_sha = fixtures::sha256_hex(&raw);
    let gz_sha = fixtures::sha256_hex(&gzipped);
    let post = |body: &Bytes, gzip: bool, requests: u64| {
        let mut load =
            LoadSpec::get("/reqinfo", 5, requests).header("content-type", "application/json");
        if gzip {
            load = load.header("content-encoding", "gzip");
        }
        load.method = Method::POST;
        load.body = Some(body.clone());
        load
    };
    list.push(
        Scenario::new(
            "post-get",
            "seed-000",
            Setup::Proxy(ProxySetup::to_one()),
            LoadSpec::get("/hello", 5, 50_000),
        )
        .label("case", "GET")
        .label("request body", "-"),
    );
    let cases = [
        ("post-gz0", "GZ0", &gzipped, true, false, &gz_sha, 30_000),
        ("post-gz1", "GZ1", &gzipped, true, true, &raw_sha, 20_000),
        ("post-raw", "RAW", &raw, false, false, &raw_sha, 15_000),
    ];
    for (name, case, body, gzip, decompress, sha, requests) in cases {
        let size = format!(
            "{} KB {}",
            body.len().div_ceil(1000),
            if gzip { "gzip" } else { "raw" }
        );
        let mut s = Scenario::new(
            name,
            "seed-000",
            Setup::Proxy(ProxySetup {
                decompress_requests: decompress,
                ..ProxySetup::to_one()
            }),
            post(body, gzip, requests),
        )
        .label("case", case)
        .label("request body", size);
        s.check.origin_saw_sha256 = Some(sha.clone());
        list.push(s);
    }
}

pub(super) fn seed_002(list: &mut Vec<Scenario>) {
    // HTTP/3 beside them (issue 24): the same request over QUIC, one connection per client
    // like the others (h2load's `-c 100 -m 1`); only the built-in driver speaks it.
    for protocol in [Protocol::H1, Protocol::H2, Protocol::H3] {
        let mut load = LoadSpec::get("/hello", 100, 20_000);
        load.protocol = protocol;
        load.tls = true;
        let name = match protocol {
            Protocol::H1 => "tls-h1",
            Protocol::H2 => "tls-h2",
            Protocol::H3 => "tls-h3",
        };
        list.push(
            Scenario::new(
                name,
                "seed-002",
                Setup::Proxy(ProxySetup {
                    unix_origins: true,
                    ..ProxySetup::to_one()
                }),
                load,
            )
            .label("protocol", protocol.alpn())
            .label("concurrency", "100"),
        );
    }
}

pub(super) fn seed_004(list: &mut Vec<Scenario>) {
    let path = format!(
        "/stream?chunks={}&size={}",
        fixtures::STREAM_CHUNKS,
        fixtures::STREAM_CHUNK_SIZE
    );
    for compress in [
        None,
        Some(Compression {
            algorithm: Algorithm::Gzip,
            level: 1,
        }),
    ] {
        let (name, label) = if compress.is_some() {
            ("stream-gzip-1", "gzip level 1")
        } else {
            ("stream-raw", "raw")
        };
        let mut load = LoadSpec::get(&path, 1, 3);
        if compress.is_some() {
            load = load.header("accept-encoding", "gzip");
        }
        let mut s = Scenario::new(
            name,
            "seed-004",
            Setup::Proxy(ProxySetup {
                compress,
                ..ProxySetup::to_one()
            }),
            load,
        )
        .label("body", label);
        s.check.encoding = compress.map(|c| c.algorithm);
        s.throughput = true;
        list.push(s);
    }
}

/// Issue 13's fairness row (`h2load --h1 -c 1000` on the static page): 1,000 keep-alive
/// connections each with one request at a time. The figure is the spread of the latencies
/// (standard deviation, p99, max) next to req/s: a server that serves some connections for too
/// long before turning to the others shows it as a wide spread at the same req/s.
pub(super) fn many_conns(list: &mut Vec<Scenario>) {
    let page = format!("/{}", fixtures::PAGE_NAME);
    // 60 requests per connection: about three seconds a run at nginx's ~20,000 req/s here; a
    // quick run keeps 6 per connection.
    list.push(
        Scenario::new(
            "static-c1000",
            "many-conns",
            Setup::Static { compress: None },
            LoadSpec::get(&page, 1_000, 60_000),
        )
        .label("file", "74 KB, no compression")
        .label("connections", "1000"),
    );
}

/// Issue 24's HTTP/3 rows beyond seed 002's small response: the 340 KB JSON proxied (seed 003's
/// body, c=6) and a 10 MiB static download (c=4), each over HTTP/2 and HTTP/3 on TLS, so the
/// table compares the two transports on the same server in one run.
pub(super) fn http3(list: &mut Vec<Scenario>) {
    for protocol in [Protocol::H2, Protocol::H3] {
        let mut load = LoadSpec::get("/what-date-is-it", 6, 4_000);
        load.protocol = protocol;
        load.tls = true;
        list.push(
            Scenario::new(
                &format!("json-{}", protocol.alpn()),
                "http3",
                Setup::Proxy(ProxySetup::to_one()),
                load,
            )
            .label("body", "340 KB JSON, proxied")
            .label("protocol", protocol.alpn())
            .label("concurrency", "6"),
        );
    }
    for protocol in [Protocol::H2, Protocol::H3] {
        // A 10 MiB file moves in a few ms to tens of ms: 200 are a few seconds at the slowest.
        let mut load = LoadSpec::get(&format!("/{}", fixtures::DOWNLOAD_NAME), 4, 200);
        load.protocol = protocol;
        load.tls = true;
        list.push(
            Scenario::new(
                &format!("download-{}", protocol.alpn()),
                "http3",
                Setup::Static { compress: None },
                load,
            )
            .label("body", "10 MiB file")
            .label("protocol", protocol.alpn())
            .label("concurrency", "4"),
        );
    }
}
