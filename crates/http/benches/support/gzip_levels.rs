//! gzip at every level 1–9: sluice's [`Encoder`] against zlib (the reference: nginx's
//! compressor), the raw zlib-rs levels and libdeflate, in bytes and CPU time, on the lab's page,
//! the date JSON and a 1 MiB slice of seed 004's stream (docs/performance.md, "gzip at the fast
//! levels"). On the stream, raw zlib-rs 1–3 and, where their python3 bindings are installed,
//! ISA-L's igzip, zlib-ng and libdeflate are set beside it too ("The stream row").
//!
//! zlib itself runs in python3's `zlib` module (zlib 1.2.x, the library nginx links): its sizes
//! and CPU time per response (`time.process_time`, the C call dominating) are printed in the
//! size table before the criterion groups; without python3 that column says so.

use std::io::Write;
use std::process::{Command, Stdio};

use bytes::{Bytes, BytesMut};
use criterion::{BenchmarkId, Criterion, Throughput};
use sluice_core::Compression;
use sluice_http::compress::{Encoder, compress_whole};

use super::cpu_time::CpuTime;
use super::fixtures;

/// zlib's gzip size and CPU ns per response for levels 1–9; with `chunk`, each `chunk` bytes
/// are followed by a sync flush (as a streamed response is flushed).
const ZLIB_PY: &str = r#"
import sys, time, zlib
chunk = int(sys.argv[1]); data = sys.stdin.buffer.read()
def run(level):
    c = zlib.compressobj(level, zlib.DEFLATED, 31); out = 0
    if chunk:
        for i in range(0, len(data), chunk):
            out += len(c.compress(data[i:i + chunk])) + len(c.flush(zlib.Z_SYNC_FLUSH))
    else:
        out += len(c.compress(data))
    return out + len(c.flush())
for level in range(1, 10):
    size = run(level); n = 0; t0 = time.process_time()
    while True:
        run(level); n += 1; t = time.process_time() - t0
        if t >= 0.2: break
    print(size, t / n * 1e9)
"#;

/// The other deflate encoders on the stream, through their python3 bindings (the C libraries
/// themselves: `isal` is Intel ISA-L's igzip, `zlib_ng` zlib-ng, `deflate` libdeflate), where
/// installed (`pip install isal zlib-ng deflate`): one line per encoder, level and mode, with the
/// gzip bytes and CPU ns per pass. `flushed` = a sync flush after every `chunk` bytes, as the
/// server flushes a stream of unknown length; libdeflate has no streaming API, so its `flushed`
/// line compresses each chunk as its own deflate stream (no history across chunks), the best a
/// whole-buffer encoder can do for a flushed stream.
const CANDIDATES_PY: &str = r#"
import sys, time, zlib
chunk = int(sys.argv[1]); data = sys.stdin.buffer.read()
parts = [data[i:i + chunk] for i in range(0, len(data), chunk)]
def stream(mod, level, flush):
    def run():
        c = mod.compressobj(level, mod.DEFLATED, 31); out = 0
        for p in parts:
            out += len(c.compress(p))
            if flush: out += len(c.flush(mod.Z_SYNC_FLUSH))
        return out + len(c.flush())
    return run
cases = [("zlib", 1, m, stream(zlib, 1, m == "flushed")) for m in ("whole", "flushed")]
try:
    from zlib_ng import zlib_ng
    cases += [("zlib-ng", l, m, stream(zlib_ng, l, m == "flushed")) for l in (1, 2, 3) for m in ("whole", "flushed")]
except ImportError: print("zlib-ng - - 0 0")
try:
    from isal import isal_zlib
    cases += [("isa-l", l, m, stream(isal_zlib, l, m == "flushed")) for l in (0, 1, 2, 3) for m in ("whole", "flushed")]
except ImportError: print("isa-l - - 0 0")
try:
    import deflate
    for l in (1, 2, 3):
        cases.append(("libdeflate", l, "whole", lambda l=l: len(deflate.gzip_compress(data, l))))
        cases.append(("libdeflate", l, "flushed", lambda l=l: 18 + sum(len(deflate.deflate_compress(p, l)) for p in parts)))
except ImportError: print("libdeflate - - 0 0")
for name, level, mode, run in cases:
    size = run(); n = 0; t0 = time.process_time()
    while True:
        run(); n += 1; t = time.process_time() - t0
        if t >= 0.3: break
    print(name, level, mode, size, t / n * 1e9)
"#;

/// `(bytes, cpu ns)` per level 1–9 from real zlib, or `None` without python3.
pub fn zlib_reference(body: &[u8], chunk: usize) -> Option<Vec<(usize, f64)>> {
    let mut child = Command::new("python3")
        .args(["-c", ZLIB_PY, &chunk.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .ok()?;
    child.stdin.take()?.write_all(body).ok()?;
    let out = child.wait_with_output().ok()?;
    String::from_utf8(out.stdout)
        .ok()?
        .lines()
        .map(|l| {
            let (size, ns) = l.split_once(' ')?;
            Some((size.parse().ok()?, ns.parse().ok()?))
        })
        .collect()
}

/// [`CANDIDATES_PY`]'s lines, or `None` without python3.
fn candidates(body: &[u8], chunk: usize) -> Option<String> {
    let mut child = Command::new("python3")
        .args(["-c", CANDIDATES_PY, &chunk.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .ok()?;
    child.stdin.take()?.write_all(body).ok()?;
    String::from_utf8(child.wait_with_output().ok()?.stdout).ok()
}

fn sluice(level: i32, frames: &[&[u8]], flush: bool) -> usize {
    let mut out = BytesMut::new();
    let mut encoder = Encoder::new(Compression::GZIP, Some(level)).unwrap();
    for frame in frames {
        encoder.write(frame, &mut out).unwrap();
        if flush {
            encoder.flush(&mut out).unwrap();
        }
    }
    encoder.finish(&mut out).unwrap();
    out.len()
}

/// Raw zlib-rs at `level` (not sluice's mapping), one write per frame, optionally sync-flushed.
fn zlib_rs_frames(level: u32, frames: &[&[u8]], flush: bool) -> usize {
    let mut c = flate2::Compress::new_gzip(flate2::Compression::new(level), 15);
    let mut out = Vec::with_capacity(frames.iter().map(|f| f.len()).sum::<usize>() + 1024);
    let mode = if flush {
        flate2::FlushCompress::Sync
    } else {
        flate2::FlushCompress::None
    };
    for frame in frames {
        // Room for the whole frame stored plus a flush marker: one call consumes the frame.
        out.reserve(frame.len() + 64);
        let before = c.total_in();
        c.compress_vec(frame, &mut out, mode).unwrap();
        assert_eq!(c.total_in() - before, frame.len() as u64);
    }
    out.reserve(64);
    c.compress_vec(&[], &mut out, flate2::FlushCompress::Finish)
        .unwrap();
    out.len()
}

fn zlib_rs(level: u32, body: &[u8]) -> usize {
    let mut c = flate2::Compress::new_gzip(flate2::Compression::new(level), 15);
    let mut out = Vec::with_capacity(body.len() + 1024);
    c.compress_vec(body, &mut out, flate2::FlushCompress::Finish)
        .unwrap();
    out.len()
}

fn libdeflate(level: i32, body: &[u8]) -> usize {
    let mut c = libdeflater::Compressor::new(libdeflater::CompressionLvl::new(level).unwrap());
    let mut out = vec![0; c.gzip_compress_bound(body.len())];
    c.gzip_compress(body, &mut out).unwrap()
}

fn miniz(level: u8, body: &[u8]) -> usize {
    miniz_oxide::deflate::compress_to_vec(body, level).len() + 18
}

pub fn bench(c: &mut Criterion<CpuTime>) {
    let frames = fixtures::stream_frames();
    let frames: Vec<&[u8]> = frames.iter().map(Bytes::as_ref).collect();
    for (name, body) in fixtures::all() {
        let zlib = zlib_reference(&body, 0);
        println!(
            "gzip sizes, {name} ({} bytes); zlib = python3 zlib, cpu per response",
            body.len()
        );
        println!(
            "level | zlib B | zlib cpu µs | sluice B | sluice whole B | zlib-rs B | libdeflate B | miniz B"
        );
        for level in 1..=9 {
            let (zb, zt) = zlib.as_ref().map_or((0, 0.0), |z| z[level as usize - 1]);
            println!(
                "{level} | {zb} | {:.1} | {} | {} | {} | {} | {}",
                zt / 1e3,
                sluice(level, &[&body], false),
                compress_whole(Compression::GZIP, Some(level), &body)
                    .unwrap()
                    .len(),
                zlib_rs(level as u32, &body),
                libdeflate(level, &body),
                miniz(level as u8, &body),
            );
        }
        let mut group = c.benchmark_group(format!("gzip-levels/{name}"));
        group.throughput(Throughput::Bytes(body.len() as u64));
        for level in 1..=9 {
            group.bench_with_input(BenchmarkId::new("sluice", level), &body, |b, body| {
                b.iter(|| sluice(level, &[body], false))
            });
            group.bench_with_input(BenchmarkId::new("whole", level), &body, |b, body| {
                b.iter(|| compress_whole(Compression::GZIP, Some(level), body).unwrap())
            });
            group.bench_with_input(BenchmarkId::new("zlib-rs", level), &body, |b, body| {
                b.iter(|| zlib_rs(level as u32, body))
            });
            group.bench_with_input(BenchmarkId::new("libdeflate", level), &body, |b, body| {
                b.iter(|| libdeflate(level, body))
            });
        }
        group.finish();
    }
    // The stream as the server compresses it: one write per 16 KiB frame, with or without a
    // sync flush after each (the worst case of the flush policy: the upstream paused every frame).
    let total: usize = frames.iter().map(|f| f.len()).sum();
    let zlib = zlib_reference(&frames.concat(), 16 * 1024);
    println!("gzip sizes, stream-1m flushed every 16 KiB frame ({total} bytes)");
    println!("level | zlib B | zlib cpu µs | sluice B");
    for level in 1..=9 {
        let (zb, zt) = zlib.as_ref().map_or((0, 0.0), |z| z[level as usize - 1]);
        println!(
            "{level} | {zb} | {:.1} | {}",
            zt / 1e3,
            sluice(level, &frames, true)
        );
    }
    // The stream row's candidates (docs/performance.md, "The stream row"): raw zlib-rs 1–3 here,
    // the C encoders through python3 (CPU per pass of the same 1 MiB, MB/s of input).
    println!("stream-1m, other encoders (python3 bindings of the C libraries)");
    println!("encoder | level | mode | bytes | ratio | cpu ms | MB/s");
    for level in 1..=3 {
        for (mode, flush) in [("whole", false), ("flushed", true)] {
            let size = zlib_rs_frames(level, &frames, flush);
            println!(
                "zlib-rs | {level} | {mode} | {size} | {:.3}x | (criterion: zlib-rs-frames) |",
                total as f64 / size as f64
            );
        }
    }
    for line in candidates(&frames.concat(), 16 * 1024)
        .unwrap_or_default()
        .lines()
    {
        let fields: Vec<&str> = line.split(' ').collect();
        let [name, level, mode, size, ns] = fields[..] else {
            continue;
        };
        let (size, ns): (f64, f64) = (size.parse().unwrap_or(0.0), ns.parse().unwrap_or(0.0));
        if size == 0.0 {
            println!("{name} | not installed (pip install isal zlib-ng deflate)");
            continue;
        }
        println!(
            "{name} | {level} | {mode} | {size} | {:.3}x | {:.2} | {:.0}",
            total as f64 / size,
            ns / 1e6,
            total as f64 / (ns / 1e3)
        );
    }
    let mut group = c.benchmark_group("gzip-stream/stream-1m");
    group.throughput(Throughput::Bytes(total as u64));
    for level in 1..=9 {
        for (id, flush) in [("frames", false), ("frames-flushed", true)] {
            group.bench_with_input(BenchmarkId::new(id, level), &frames, |b, frames| {
                b.iter(|| sluice(level, frames, flush))
            });
        }
    }
    for level in 1..=3 {
        for (id, flush) in [("zlib-rs-frames", false), ("zlib-rs-frames-flushed", true)] {
            group.bench_with_input(BenchmarkId::new(id, level), &frames, |b, frames| {
                b.iter(|| zlib_rs_frames(level, frames, flush))
            });
        }
    }
    group.finish();
}
