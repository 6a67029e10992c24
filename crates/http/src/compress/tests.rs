//! Unit tests for [`super::Encoder`]: levels, flush, finish, zstd window, whole bodies.

// Test code: a failed unwrap is a failed test.

use std::io::Read;

use bytes::BytesMut;

use sluice_core::{Compression, ContentCoding};

use super::Encoder;

const ALL: [Compression; 4] = Compression::ALL;

fn decode(alg: Compression, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    match alg.coding() {
        ContentCoding::Identity => {
            out.extend_from_slice(data);
            Ok(data.len())
        }
        ContentCoding::Gzip => flate2::read::GzDecoder::new(data).read_to_end(&mut out),
        ContentCoding::Deflate => flate2::read::ZlibDecoder::new(data).read_to_end(&mut out),
        ContentCoding::Br => brotli::Decompressor::new(data, 4096).read_to_end(&mut out),
        ContentCoding::Zstd => {
            let mut d = zstd::stream::read::Decoder::new(data).unwrap();
            d.window_log_max(23).unwrap();
            d.read_to_end(&mut out)
        }
    }
    .unwrap();
    out
}

#[test]
fn levels_are_clamped_into_range() {
    let clamp = Encoder::clamp_level;
    assert_eq!(clamp(Compression::GZIP, 0), 1);
    assert_eq!(clamp(Compression::GZIP, 42), 9);
    assert_eq!(clamp(Compression::BR, -3), 0);
    assert_eq!(clamp(Compression::BR, 12), 11);
    assert_eq!(clamp(Compression::ZSTD, 22), 19);
    assert_eq!(clamp(Compression::ZSTD, -5), 1);
    for alg in ALL {
        let default = Encoder::default_level(alg);
        assert_eq!(clamp(alg, default), default);
        for level in [i32::MIN, -1, 0, 100, i32::MAX] {
            assert!(Encoder::new(alg, Some(level)).is_ok(), "{alg:?} {level}");
        }
    }
}

#[test]
fn write_flush_write_finish_is_one_stream() {
    for alg in ALL {
        let mut enc = Encoder::new(alg, None).unwrap();
        let mut out = BytesMut::new();
        enc.write(b"hello ", &mut out).unwrap();
        enc.flush(&mut out).unwrap();
        let flushed = out.len();
        assert!(flushed > 0, "{alg:?}: a flush emits the pending block");
        enc.flush(&mut out).unwrap(); // a second flush with no input is harmless
        enc.write(b"world", &mut out).unwrap();
        enc.finish(&mut out).unwrap();
        assert_eq!(decode(alg, &out), b"hello world", "{alg:?}");
    }
}

#[test]
fn finish_is_idempotent_and_closes_the_stream() {
    for alg in ALL {
        let mut enc = Encoder::new(alg, Some(1)).unwrap();
        let mut out = BytesMut::new();
        enc.finish(&mut out).unwrap();
        let len = out.len();
        enc.finish(&mut out).unwrap();
        assert_eq!(out.len(), len, "{alg:?}");
        assert!(enc.write(b"late", &mut out).is_err(), "{alg:?}");
        assert!(decode(alg, &out).is_empty());
    }
}

#[test]
fn output_larger_than_one_step_is_complete() {
    // Incompressible input forces several output steps per call.
    let mut seed = 1u32;
    let data: Vec<u8> = (0..100_000)
        .map(|_| {
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            (seed >> 16) as u8
        })
        .collect();
    for alg in ALL {
        let mut enc = Encoder::new(alg, None).unwrap();
        let mut out = BytesMut::new();
        enc.write(&data, &mut out).unwrap();
        enc.finish(&mut out).unwrap();
        assert_eq!(decode(alg, &out), data, "{alg:?}");
    }
}

#[test]
fn zstd_window_stays_within_8_mib_at_the_highest_level() {
    let mut enc = Encoder::new(Compression::ZSTD, Some(99)).unwrap();
    let mut out = BytesMut::new();
    enc.write(&[b'a'; 10_000], &mut out).unwrap();
    enc.finish(&mut out).unwrap();
    // `decode` refuses windows above 2^23.
    assert_eq!(decode(Compression::ZSTD, &out), vec![b'a'; 10_000]);
}

#[test]
fn encode_all_is_one_stream_of_its_exact_size() {
    let text = b"compress once, serve many; ".repeat(2_000);
    for alg in ALL {
        let encoded = Encoder::encode_all(alg, None, &text).unwrap();
        assert!(
            encoded.len() < text.len() / 10,
            "{alg:?}: {}",
            encoded.len()
        );
        assert_eq!(decode(alg, &encoded), text, "{alg:?}");
        // The same stream the streaming encoder makes in one write.
        let mut enc = Encoder::new(alg, None).unwrap();
        let mut out = BytesMut::new();
        enc.write(&text, &mut out).unwrap();
        enc.finish(&mut out).unwrap();
        assert_eq!(encoded, out.freeze(), "{alg:?}");
    }
    let empty = Encoder::encode_all(Compression::GZIP, None, b"").unwrap();
    assert!(decode(Compression::GZIP, &empty).is_empty());
}
