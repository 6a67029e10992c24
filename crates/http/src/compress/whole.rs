//! Whole-buffer compression for representations compressed once and served many times (the
//! response cache's stored variants): ratio first, speed second.
//!
//! gzip and deflate go through miniz_oxide rather than the zlib-rs the streaming [`Encoder`]
//! uses: zlib-rs is zlib-ng's algorithm, whose levels 2–6 ("fast" and "medium" strategies) are
//! tuned for throughput on the fly and can cost a lot of ratio on repetitive data. Measured on
//! the demo's 340 KB date JSON at level 6: zlib-rs 2,224 B, zlib (nginx, Varnish) 1,064 B,
//! miniz_oxide 1,064 B (its raw deflate is 1,046 B). For a body compressed once, the bytes are
//! what every later response pays; the CPU is paid once. br and zstd use the [`Encoder`].

use std::io;

use bytes::BytesMut;
use sluice_core::{Compression, ContentCoding};

use super::Encoder;

/// `data` compressed as one `coding` stream at `level` (`None`: the encoder's default; out of
/// range: clamped). CPU-heavy at high levels: call it off the async runtime.
pub fn compress_whole(coding: Compression, level: Option<i32>, data: &[u8]) -> io::Result<Vec<u8>> {
    let level = level.map(|l| Encoder::clamp_level(coding, l));
    match coding.coding() {
        ContentCoding::Gzip => Ok(gzip(data, miniz_level(level))),
        ContentCoding::Deflate => Ok(miniz_oxide::deflate::compress_to_vec_zlib(
            data,
            miniz_level(level),
        )),
        _ => {
            let mut encoder = Encoder::new(coding, level)?;
            let mut out = BytesMut::with_capacity(data.len() / 4 + 64);
            encoder.write(data, &mut out)?;
            encoder.finish(&mut out)?;
            Ok(out.to_vec())
        }
    }
}

/// miniz_oxide takes 0–10 (10: its "uber" level beyond zlib's 9); sluice's range is 1–9.
fn miniz_level(level: Option<i32>) -> u8 {
    u8::try_from(level.unwrap_or(6).clamp(1, 9)).unwrap_or(6)
}

/// One gzip member (RFC 1952): a fixed 10-byte header (no name, no time, OS unknown, as
/// flate2 writes it), the raw deflate stream, CRC-32 and the length mod 2^32, little-endian.
fn gzip(data: &[u8], level: u8) -> Vec<u8> {
    let deflated = miniz_oxide::deflate::compress_to_vec(data, level);
    let mut out = Vec::with_capacity(deflated.len() + 18);
    out.extend_from_slice(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff]);
    out.extend_from_slice(&deflated);
    let mut crc = flate2::Crc::new();
    crc.update(data);
    out.extend_from_slice(&crc.sum().to_le_bytes());
    // ISIZE is the input size modulo 2^32 (RFC 1952 §2.3.1): truncation is the format.
    out.extend_from_slice(&((data.len() as u64 & 0xffff_ffff) as u32).to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::io::Read;

    fn json() -> Vec<u8> {
        let record = r#"{"year":2026,"month":11,"day":24}"#;
        let mut out = b"[".to_vec();
        for i in 0..10_000 {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(record.as_bytes());
        }
        out.push(b']');
        out
    }

    #[test]
    fn every_coding_round_trips_and_gzip_matches_zlibs_ratio() {
        let data = json();
        for coding in [
            ContentCoding::Gzip,
            ContentCoding::Deflate,
            ContentCoding::Br,
            ContentCoding::Zstd,
        ] {
            let coding = Compression::new(coding).unwrap();
            let out = compress_whole(coding, Some(6), &data).unwrap();
            let mut decoded = Vec::new();
            match coding.coding() {
                ContentCoding::Gzip => {
                    flate2::read::GzDecoder::new(&out[..])
                        .read_to_end(&mut decoded)
                        .unwrap();
                }
                ContentCoding::Deflate => {
                    flate2::read::ZlibDecoder::new(&out[..])
                        .read_to_end(&mut decoded)
                        .unwrap();
                }
                ContentCoding::Br => {
                    brotli::Decompressor::new(&out[..], 4096)
                        .read_to_end(&mut decoded)
                        .unwrap();
                }
                _ => decoded = zstd::decode_all(&out[..]).unwrap(),
            }
            assert_eq!(decoded, data, "{coding:?}");
        }
        // The streaming encoder (zlib-rs) at the same level: the stored variant must not be
        // larger (it is about half on this input).
        let gz = compress_whole(
            Compression::new(ContentCoding::Gzip).unwrap(),
            Some(6),
            &data,
        )
        .unwrap();
        let mut streaming =
            Encoder::new(Compression::new(ContentCoding::Gzip).unwrap(), Some(6)).unwrap();
        let mut out = BytesMut::new();
        streaming.write(&data, &mut out).unwrap();
        streaming.finish(&mut out).unwrap();
        assert!(gz.len() <= out.len(), "{} > {}", gz.len(), out.len());
    }
}
