//! Whole-buffer compression for representations compressed once and served many times (the
//! response cache's stored variants): ratio first, speed second.
//!
//! Every coding goes through the [`Encoder`]. gzip and deflate used to go through miniz_oxide
//! here, because zlib-rs's levels 2–6 are zlib-ng's "fast" and "medium" strategies, which lose
//! a lot of ratio on repetitive data; since the encoder maps sluice's levels onto the zlib-rs
//! levels that match zlib's ratio ([`zlib_rs_level`](super::encoder::zlib_rs_level)), zlib-rs
//! is no larger than zlib at every level on the fixtures, where miniz_oxide is larger at levels
//! 1 and 5–9 and 1.2–7x slower (docs/compression-levels.md, "gzip at the fast levels"). The only
//! difference from the live path is the default level: 6 for gzip and deflate (zlib's and
//! nginx's default), since the bytes are what every later response pays and the CPU is paid once.

use std::io;

use bytes::BytesMut;
use sluice_core::{Compression, ContentCoding};

use super::Encoder;

/// gzip / deflate level of a stored variant when none is configured (zlib's default).
const STORED_FLATE_LEVEL: i32 = 6;

/// `data` compressed as one `coding` stream at `level` (`None`: 6 for gzip and deflate, the
/// encoder's default for the others; out of range: clamped). CPU-heavy at high levels: call it
/// off the async runtime.
pub fn compress_whole(coding: Compression, level: Option<i32>, data: &[u8]) -> io::Result<Vec<u8>> {
    let level = match coding.coding() {
        ContentCoding::Gzip | ContentCoding::Deflate => level.or(Some(STORED_FLATE_LEVEL)),
        _ => level,
    };
    let mut encoder = Encoder::new(coding, level)?;
    let mut out = BytesMut::with_capacity(data.len() / 4 + 64);
    encoder.write(data, &mut out)?;
    encoder.finish(&mut out)?;
    Ok(out.to_vec())
}

#[cfg(test)]
mod tests {
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
        // zlib 1.2.13 at level 6 (nginx's default): 1,064 B on this body (python3
        // `len(zlib.compress(data, 6))` + 12 for gzip's header and trailer in place of zlib's).
        let gz = compress_whole(Compression::GZIP, Some(6), &data).unwrap();
        assert!(gz.len() <= 1_064, "{} > 1064", gz.len());
        // No level given: a stored variant is made at zlib's default, 6, not the live default.
        assert_eq!(compress_whole(Compression::GZIP, None, &data).unwrap(), gz);
    }
}
