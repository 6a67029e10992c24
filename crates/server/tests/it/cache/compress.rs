//! Compress once, serve many: on a cached route with `compress`, each coding's variant is made
//! once from the stored response and then served from storage, with its own length and ETag.

use std::io::Read;

use super::{Edge, Origin, Reply, Setup, names, requests_series, zone_series};

/// About 40 KB of JSON.
fn json() -> Vec<u8> {
    let items: Vec<String> = (0..600)
        .map(|i| {
            format!(
                r#"{{"id":{i},"name":"item {i}","tags":["cache","compress"],"n":{}}}"#,
                i * 7 % 13
            )
        })
        .collect();
    format!(r#"{{"items":[{}]}}"#, items.join(",")).into_bytes()
}

fn decode(coding: &str, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    match coding {
        "gzip" => drop(
            flate2::read::GzDecoder::new(data)
                .read_to_end(&mut out)
                .unwrap(),
        ),
        "br" => drop(
            brotli::Decompressor::new(data, 4096)
                .read_to_end(&mut out)
                .unwrap(),
        ),
        "zstd" => out = zstd::decode_all(data).unwrap(),
        _ => out = data.to_vec(),
    }
    out
}

/// A value from the metrics text, 0 when the series is absent.
fn value_or_zero(text: &str, series: &str) -> f64 {
    let present = text.lines().any(|l| l.starts_with(series));
    if present {
        crate::metric(text, series)
    } else {
        0.0
    }
}

#[tokio::test]
async fn compress_once_serve_many() {
    const ROUNDS: usize = 100;
    const CODINGS: [&str; 4] = ["gzip", "br", "zstd", "identity"];
    let origin = Origin::start().await;
    let json = json();
    assert!((35_000..45_000).contains(&json.len()), "{}", json.len());
    let reply = Reply::ok(json.clone()).header("content-type", "application/json");
    origin.set(
        "/data.json",
        reply.cache_control("max-age=60").header("etag", "\"abc\""),
    );
    let edge = Edge::start(
        &origin,
        Setup {
            route: "compress = {}",
            ..Setup::default()
        },
    )
    .await;

    for round in 0..ROUNDS {
        for coding in CODINGS {
            let resp = edge
                .get_with("/data.json", &[("accept-encoding", coding)])
                .await;
            let context = format!("round {round}, {coding}: {:?}", resp.headers);
            assert_eq!(resp.status, 200, "{context}");
            let encoding = resp.header("content-encoding");
            let identity = coding == "identity";
            assert_eq!(encoding, (!identity).then_some(coding), "{context}");
            assert!(
                decode(coding, &resp.body) == json,
                "{context}: does not decode to the origin's"
            );
            if round == 0 && coding == "gzip" {
                assert_eq!(resp.cache(), "MISS", "{context}");
                continue;
            }
            assert_eq!(resp.cache(), "HIT", "{context}");
            if identity {
                assert_eq!(resp.header("etag"), Some("\"abc\""), "{context}");
                continue;
            }
            let vary = resp.header("vary").unwrap_or("").to_ascii_lowercase();
            assert!(vary.contains("accept-encoding"), "{context}");
            // The first request of a coding is the one that makes its variant (streamed as it is
            // made); from the second round on every coded response is the stored variant.
            if round < 1 {
                continue;
            }
            let length = resp
                .header("content-length")
                .map(|l| l.parse::<usize>().unwrap());
            assert_eq!(length, Some(resp.body.len()), "{context}");
            let etag = format!("W/\"abc-{coding}\"");
            assert_eq!(resp.header("etag"), Some(etag.as_str()), "{context}");
        }
    }

    assert_eq!(origin.requests("/data.json"), 1);
    assert_eq!(origin.last("/data.json").header("accept-encoding"), None);
    for coding in ["gzip", "br", "zstd"] {
        let made = zone_series(names::VARIANTS_MADE, &[("coding", coding)]);
        edge.wait_metric(&made, 1.0).await;
        assert_eq!(edge.metric(&made).await, 1.0, "{coding}");
    }
    let text = edge.metrics().await;
    assert_eq!(
        crate::metric(&text, &requests_series("hit")),
        (ROUNDS * 4 - 1) as f64
    );
    // Exactly one compression per coding in total: the variants above. Nothing went through
    // the on-the-fly compressor, not even for the miss (a small response is stored first, then
    // its client gets the variant like every later one).
    for algorithm in ["gzip", "br", "zstd"] {
        let series = format!("{}{{algorithm=\"{algorithm}\"}}", names::COMPRESS_BYTES_IN);
        let fed = value_or_zero(&text, &series);
        assert_eq!(fed, 0.0, "{algorithm}: {fed} bytes compressed on the fly");
    }
}
