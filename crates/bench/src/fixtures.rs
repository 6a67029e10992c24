//! The bytes the scenarios move: a realistic ~70 KB HTML page (seed 001 measured a 74 KB
//! page), a ~40 KB JSON request body that gzips to ~10 KB (seed 000), and the encoders and
//! decoders the checks and the baseline share.
//!
//! Everything is generated deterministically (a fixed-seed generator), so every target and every
//! run sees the same bytes and compression ratios are comparable across runs.

use std::io::{Read, Write};

use bytes::Bytes;
use sha2::{Digest, Sha256};

use crate::scenario::{Algorithm, Compression};

/// File name of the page inside the static root.
pub const PAGE_NAME: &str = "index.html";
/// Seed 004: 2048 chunks of 16 KiB, ~34 MB: long enough for a steady MB/s (a run is tens of
/// milliseconds at the fastest target), short enough that the stream rows (a check, the runs,
/// every target, every origin) fit the full run's five minutes. It was 8192 (~134 MB), which
/// alone took three of them.
pub const STREAM_CHUNKS: usize = 2048;
pub const STREAM_CHUNK_SIZE: usize = 16 * 1024;
/// The large download of the `http3` group: a 10 MiB file of random bytes beside the page
/// (incompressible, so no coding changes what is sent).
pub const DOWNLOAD_NAME: &str = "download.bin";
pub const DOWNLOAD_SIZE: usize = 10 * 1024 * 1024;

/// A small deterministic generator (xorshift64*): fixtures must not change between runs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }
}

const WORDS: &[&str] = &[
    "server",
    "request",
    "response",
    "latency",
    "throughput",
    "compression",
    "level",
    "ratio",
    "cache",
    "origin",
    "upstream",
    "balancer",
    "connection",
    "stream",
    "header",
    "body",
    "client",
    "network",
    "kernel",
    "buffer",
    "window",
    "window",
    "the",
    "a",
    "of",
    "and",
    "to",
    "in",
    "with",
    "for",
    "is",
    "on",
    "that",
    "by",
    "this",
    "fast",
    "slow",
    "static",
    "dynamic",
    "benchmark",
    "configuration",
    "directive",
    "module",
    "worker",
    "process",
    "thread",
    "memory",
    "socket",
    "gzip",
    "brotli",
    "zstd",
    "deflate",
    "encoding",
    "negotiation",
    "browser",
    "page",
    "site",
    "content",
    "delivery",
    "measure",
    "result",
    "table",
    "chart",
    "minimum",
    "maximum",
    "average",
];

/// The page: a blog-like HTML document of about 72 KB with navigation, articles, a table and
/// a footer; text drawn from a vocabulary so it compresses like real prose (~4-5x with gzip).
pub fn page() -> Bytes {
    let mut rng = Rng(0x5eed_0001);
    let mut html = String::with_capacity(80 * 1024);
    html.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>Tuning compression on a web server</title>\n\
         <link rel=\"stylesheet\" href=\"/assets/site.css\">\n</head>\n<body>\n\
         <header class=\"site-header\"><nav><ul>\n",
    );
    for i in 0..24 {
        let word = rng.pick(WORDS);
        html.push_str(&format!(
            "<li class=\"nav-item\"><a href=\"/{word}/{i}\">{word} {i}</a></li>\n"
        ));
    }
    html.push_str("</ul></nav></header>\n<main>\n");
    let mut article = 0;
    while html.len() < 70 * 1024 {
        article += 1;
        html.push_str(&format!(
            "<article id=\"post-{article}\" class=\"post\">\n<h2>{} {} {}</h2>\n\
             <p class=\"meta\">Posted on 2026-{:02}-{:02} by <a href=\"/authors/{}\">{}</a></p>\n",
            rng.pick(WORDS),
            rng.pick(WORDS),
            rng.pick(WORDS),
            1 + rng.next() % 12,
            1 + rng.next() % 28,
            rng.next() % 1000,
            rng.pick(WORDS),
        ));
        for _ in 0..(3 + rng.next() % 4) {
            html.push_str("<p>");
            for w in 0..(40 + rng.next() % 60) {
                if w > 0 {
                    html.push(' ');
                }
                html.push_str(rng.pick(WORDS));
                if rng.next().is_multiple_of(17) {
                    html.push_str(&format!(" {}", rng.next() % 100_000));
                }
            }
            html.push_str(".</p>\n");
        }
        if article % 3 == 0 {
            html.push_str(
                "<table class=\"results\">\n<tr><th>level</th><th>req/s</th><th>bytes</th></tr>\n",
            );
            for level in 1..=9 {
                html.push_str(&format!(
                    "<tr><td>{level}</td><td>{}</td><td>{}</td></tr>\n",
                    rng.next() % 40_000,
                    rng.next() % 80_000
                ));
            }
            html.push_str("</table>\n");
        }
        html.push_str("</article>\n");
    }
    html.push_str(
        "</main>\n<footer class=\"site-footer\"><p>&copy; 2026 sluice lab</p></footer>\n\
         </body>\n</html>\n",
    );
    Bytes::from(html)
}

/// The large download ([`DOWNLOAD_NAME`]): [`DOWNLOAD_SIZE`] deterministic random bytes.
pub fn download() -> Bytes {
    let mut rng = Rng(0x5eed_0003);
    let mut data = Vec::with_capacity(DOWNLOAD_SIZE);
    while data.len() < DOWNLOAD_SIZE {
        data.extend_from_slice(&rng.next().to_le_bytes());
    }
    data.truncate(DOWNLOAD_SIZE);
    Bytes::from(data)
}

/// Seed 000's request body: ~40 KB of JSON records that gzip to ~10 KB.
pub fn post_json() -> Bytes {
    let mut rng = Rng(0x5eed_0000);
    let mut json = String::from("[");
    let mut i = 0u64;
    while json.len() < 40 * 1000 {
        if i > 0 {
            json.push(',');
        }
        json.push_str(&format!(
            "{{\"id\":{i},\"user\":\"{}-{:x}\",\"event\":\"{}\",\"value\":{},\"ts\":{}}}",
            rng.pick(WORDS),
            rng.next() % 0xffff_ffff,
            rng.pick(WORDS),
            rng.next() % 1_000_000,
            1_790_000_000 + rng.next() % 10_000_000,
        ));
        i += 1;
    }
    json.push(']');
    Bytes::from(json)
}

pub fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

pub fn gzip(data: &[u8], level: u32) -> Bytes {
    compress(
        data,
        Compression {
            algorithm: Algorithm::Gzip,
            level,
        },
    )
}

/// Encode `data` as one whole stream.
pub fn compress(data: &[u8], compression: Compression) -> Bytes {
    let level = compression.level;
    let result = match compression.algorithm {
        Algorithm::Gzip => {
            let mut enc =
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(level));
            enc.write_all(data).and_then(|()| enc.finish())
        }
        Algorithm::Br => {
            let mut out = Vec::new();
            let params = brotli::enc::BrotliEncoderParams {
                quality: level as i32,
                ..Default::default()
            };
            brotli::BrotliCompress(&mut &data[..], &mut out, &params).map(|_| out)
        }
        Algorithm::Zstd => zstd::stream::encode_all(data, level as i32),
    };
    // Writing into a Vec cannot fail; an empty body would fail the checks loudly anyway.
    Bytes::from(result.unwrap_or_default())
}

/// Decode a body by its `Content-Encoding` (`None` or `identity`: as is).
pub fn decode(encoding: Option<&str>, data: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let result = match encoding.map(str::trim) {
        None | Some("identity") => {
            out.extend_from_slice(data);
            Ok(0)
        }
        Some("gzip" | "x-gzip") => flate2::read::MultiGzDecoder::new(data).read_to_end(&mut out),
        Some("br") => brotli::Decompressor::new(data, 64 * 1024).read_to_end(&mut out),
        Some("zstd") => zstd::stream::Decoder::new(data).and_then(|mut d| d.read_to_end(&mut out)),
        Some(other) => return Err(format!("unexpected Content-Encoding {other:?}")),
    };
    result.map_err(|e| format!("the {encoding:?} body does not decode: {e}"))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_is_about_70_kb_and_compresses_like_prose() {
        let page = page();
        assert!(
            (70 * 1024..76 * 1024).contains(&page.len()),
            "{}",
            page.len()
        );
        let ratio = page.len() as f64 / gzip(&page, 6).len() as f64;
        assert!((3.0..8.0).contains(&ratio), "gzip ratio {ratio}");
        assert_eq!(page, super::page(), "deterministic");
    }

    #[test]
    fn post_body_is_40_kb_and_gzips_to_about_10() {
        let json = post_json();
        assert!((40_000..41_000).contains(&json.len()));
        let gz = gzip(&json, 6).len();
        assert!((6_000..16_000).contains(&gz), "{gz}");
    }

    #[test]
    fn every_algorithm_round_trips() {
        let page = page();
        for algorithm in [Algorithm::Gzip, Algorithm::Br, Algorithm::Zstd] {
            let c = compress(
                &page,
                Compression {
                    algorithm,
                    level: 3,
                },
            );
            assert!(c.len() < page.len() / 2);
            assert_eq!(decode(Some(algorithm.token()), &c).unwrap(), page);
        }
        assert!(decode(Some("gzip"), b"not gzip").is_err());
        assert!(decode(Some("compress"), b"x").is_err());
    }
}
