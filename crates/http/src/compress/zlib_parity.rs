//! sluice's gzip and deflate are no larger than zlib's (nginx's compressor) at every level 1–9,
//! on the lab's page, the date JSON and a slice of seed 004's stream, compressed whole and,
//! for the stream, with a sync flush after every 16 KiB frame as a paused upstream causes.
//! A size comparison, so a behaviour test: it would fail if a level were mapped to a zlib-rs
//! strategy with a worse ratio (zlib-rs 1, or 4–6 on the JSON, or 9), whatever the timings.

// Test code: a failed unwrap is a failed test.

use std::io::{Read, Write};
use std::process::{Command, Stdio};

use bytes::{Bytes, BytesMut};
use sluice_core::Compression;

use super::fixtures;
use super::{Encoder, compress_whole};

/// zlib 1.2.13's gzip sizes (window bits 31, memLevel 8, default strategy, as nginx calls it)
/// at levels 1–9, measured with python3's `zlib` module on the fixtures; the test below
/// re-measures them whenever python3 is installed.
const ZLIB_PAGE: [usize; 9] = [
    22208, 22082, 21488, 20394, 19667, 18847, 18761, 18743, 18743,
];
const ZLIB_JSON: [usize; 9] = [2224, 2224, 2224, 1064, 1064, 1064, 1064, 1064, 1064];
const ZLIB_STREAM: [usize; 9] = [
    302074, 307525, 307056, 292207, 286748, 272609, 271934, 271901, 271901,
];
/// The stream again, a sync flush after every 16 KiB frame.
const ZLIB_STREAM_FLUSHED: [usize; 9] = [
    304250, 309683, 308730, 294300, 288957, 274696, 274036, 273993, 273993,
];
const FRAME: usize = 16 * 1024;
/// gzip's header and trailer (18 bytes) against zlib format's (6).
const GZIP_OVER_ZLIB: usize = 12;

fn encode(coding: Compression, level: i32, frames: &[&[u8]], flush: bool) -> Vec<u8> {
    let mut encoder = Encoder::new(coding, Some(level)).unwrap();
    let mut out = BytesMut::new();
    for frame in frames {
        encoder.write(frame, &mut out).unwrap();
        if flush {
            encoder.flush(&mut out).unwrap();
        }
    }
    encoder.finish(&mut out).unwrap();
    out.to_vec()
}

fn gunzip(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(data)
        .read_to_end(&mut out)
        .unwrap();
    out
}

fn references() -> Vec<(&'static str, Vec<u8>, [usize; 9])> {
    let [(_, page), (_, json), (_, stream)] = fixtures::all();
    vec![
        ("page", page, ZLIB_PAGE),
        ("json", json, ZLIB_JSON),
        ("stream", stream, ZLIB_STREAM),
    ]
}

#[test]
fn gzip_is_no_larger_than_zlib_at_every_level() {
    for (name, body, zlib) in references() {
        for level in 1..=9 {
            let zlib = zlib[level as usize - 1];
            let gzip = encode(Compression::GZIP, level, &[&body], false);
            assert!(
                gzip.len() <= zlib,
                "{name} gzip {level}: {} > zlib's {zlib}",
                gzip.len()
            );
            assert_eq!(gunzip(&gzip), body, "{name} gzip {level}");
            let deflate = encode(Compression::DEFLATE, level, &[&body], false);
            assert!(
                deflate.len() <= zlib - GZIP_OVER_ZLIB,
                "{name} deflate {level}: {} > zlib's {}",
                deflate.len(),
                zlib - GZIP_OVER_ZLIB
            );
            // A stored variant (the response cache's) is the same compressor: never larger.
            let whole = compress_whole(Compression::GZIP, Some(level), &body).unwrap();
            assert!(
                whole.len() <= zlib,
                "{name} whole {level}: {} > {zlib}",
                whole.len()
            );
            let kept = Encoder::encode_all(Compression::GZIP, Some(level), &body).unwrap();
            assert!(
                kept.len() <= zlib,
                "{name} encode_all {level}: {} > {zlib}",
                kept.len()
            );
        }
    }
}

#[test]
fn flushed_stream_is_no_larger_than_zlibs_flushed_the_same_way() {
    let frames = fixtures::stream_frames();
    assert_eq!(
        frames.len(),
        64,
        "one frame per element, as the origin sends them"
    );
    let frames: Vec<&[u8]> = frames.iter().map(Bytes::as_ref).collect();
    for level in 1..=9 {
        let zlib = ZLIB_STREAM_FLUSHED[level as usize - 1];
        let gzip = encode(Compression::GZIP, level, &frames, true);
        assert!(
            gzip.len() <= zlib,
            "gzip {level} flushed: {} > zlib's {zlib}",
            gzip.len()
        );
        assert_eq!(gunzip(&gzip), frames.concat(), "gzip {level} flushed");
    }
}

/// The stream's latency contract, at the levels a stream is served with (gzip 1–3; 1–2 share
/// an encoder): after every sync flush, a streaming decoder fed the output so far yields exactly
/// the frames written so far, none held back. Any faster encoder swapped in for these levels
/// must keep this, or an upstream pause (seed 005, server-sent events) would strand bytes.
#[test]
fn every_flush_delivers_every_byte_written_before_it() {
    let frames = fixtures::stream_frames();
    for level in 1..=3 {
        let mut encoder = Encoder::new(Compression::GZIP, Some(level)).unwrap();
        let mut decoder = flate2::write::GzDecoder::new(Vec::new());
        let mut out = BytesMut::new();
        let mut written = 0;
        for (i, frame) in frames.iter().enumerate() {
            encoder.write(frame, &mut out).unwrap();
            encoder.flush(&mut out).unwrap();
            written += frame.len();
            decoder.write_all(&out.split()).unwrap();
            decoder.flush().unwrap();
            assert_eq!(
                decoder.get_ref().len(),
                written,
                "gzip {level}: frame {i} not fully decodable after its flush"
            );
        }
        encoder.finish(&mut out).unwrap();
        decoder.write_all(&out).unwrap();
        assert_eq!(decoder.finish().unwrap(), frames.concat(), "gzip {level}");
    }
}

/// The constants above are real zlib's sizes: re-measured with python3's `zlib` (the C zlib
/// it links) when python3 is installed; without it there is nothing to compare with, and the
/// test says so loudly rather than fail, unless `SLUICE_TEST_STRICT` is set (not empty, not
/// `0`: the workspace's rule, `sluice_testkit::external`), which `scripts/test` sets after
/// installing python3: then a missing python3 fails.
#[test]
fn zlib_reference_sizes_are_zlibs() {
    const PY: &str = "import sys, zlib\n\
        chunk = int(sys.argv[1]); data = sys.stdin.buffer.read()\n\
        for level in range(1, 10):\n\
        \x20   c = zlib.compressobj(level, zlib.DEFLATED, 31); n = 0\n\
        \x20   step = chunk or len(data)\n\
        \x20   for i in range(0, len(data), step):\n\
        \x20       n += len(c.compress(data[i:i + step]))\n\
        \x20       if chunk: n += len(c.flush(zlib.Z_SYNC_FLUSH))\n\
        \x20   print(n + len(c.flush()))\n";
    let measure = |body: &[u8], chunk: usize| -> Option<Vec<usize>> {
        let mut child = Command::new("python3")
            .args(["-c", PY, &chunk.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .ok()?;
        child.stdin.take()?.write_all(body).ok()?;
        let out = child.wait_with_output().ok()?;
        assert!(out.status.success(), "python3 zlib failed");
        Some(
            String::from_utf8(out.stdout)
                .unwrap()
                .lines()
                .map(|l| l.parse().unwrap())
                .collect(),
        )
    };
    let mut cases: Vec<(&str, Vec<u8>, usize, [usize; 9])> = references()
        .into_iter()
        .map(|(name, body, zlib)| (name, body, 0, zlib))
        .collect();
    cases.push((
        "stream flushed",
        fixtures::stream_frames().concat(),
        FRAME,
        ZLIB_STREAM_FLUSHED,
    ));
    for (name, body, chunk, expected) in cases {
        let Some(sizes) = measure(&body, chunk) else {
            let message = "python3 not found: zlib's reference sizes not re-measured";
            let strict =
                std::env::var("SLUICE_TEST_STRICT").is_ok_and(|v| !v.is_empty() && v != "0");
            assert!(
                !strict,
                "{message}, and SLUICE_TEST_STRICT forbids skipping"
            );
            // Past the harness's capture, which would hide the line of a passing test.
            let _ = writeln!(std::io::stderr().lock(), "\n*** SKIPPED {message} ***\n");
            return;
        };
        assert_eq!(sizes, expected, "zlib's sizes for {name}");
    }
}
