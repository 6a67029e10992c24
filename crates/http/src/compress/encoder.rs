//! One streaming encoder per response, for every content coding sluice produces.
//!
//! [`Encoder`] hides the three libraries behind `write` / `flush` / `finish`, all appending to a
//! caller-owned [`BytesMut`] so the caller decides when bytes become a frame. `flush` is a *sync*
//! flush (deflate `Z_SYNC_FLUSH`, brotli `BROTLI_OPERATION_FLUSH`, zstd `ZSTD_e_flush`): everything
//! written so far becomes decodable, yet the stream continues. That is what lets a streamed
//! response be ONE gzip member / brotli stream / zstd frame (seed 004: a gzip member per chunk
//! breaks browsers).

use std::io;

use brotli::enc::encode::{
    BrotliEncoderDestroyInstance, BrotliEncoderOperation, BrotliEncoderParameter,
    BrotliEncoderStateStruct,
};
use brotli::enc::{StandardAlloc, interface};
use bytes::{Bytes, BytesMut};
use flate2::{Compress, FlushCompress, Status};
use sluice_core::{Compression, ContentCoding};

/// How much output space is offered to a codec per call. Also the size at which the body emits a
/// frame, so a call rarely needs to grow `out` twice.
const STEP: usize = 16 * 1024;

/// Brotli window: 4 MiB, brotli's default (22); larger windows cost memory per response.
const BROTLI_LGWIN: u32 = 22;

/// A streaming compressor producing exactly one stream.
pub struct Encoder {
    codec: Codec,
    finished: bool,
}

enum Codec {
    Flate(Compress),
    // Boxed: the brotli state is several KiB inline and would bloat every `Encoder`.
    Br(Box<Brotli>),
    Zstd(Box<zstd::stream::raw::Encoder<'static>>),
}

/// Owns a brotli state and releases it the way brotli's own writer does.
struct Brotli(BrotliEncoderStateStruct<StandardAlloc>);

impl Drop for Brotli {
    fn drop(&mut self) {
        BrotliEncoderDestroyInstance(&mut self.0);
    }
}

impl Encoder {
    /// A new encoder for one stream of `coding`: `gzip` is one gzip member (header, raw
    /// deflate, CRC32 + ISIZE trailer), `deflate` the zlib format (RFC 9110 §8.4.1.2), `br` one
    /// brotli stream, `zstd` one frame with a window of at most 8 MiB (RFC 9659). `level`
    /// `None` means [`Encoder::default_level`], out-of-range levels are clamped. Fails only if
    /// the zstd context cannot be created or configured.
    pub fn new(coding: Compression, level: Option<i32>) -> io::Result<Self> {
        let level = Self::clamp_level(coding, level.unwrap_or_else(|| Self::default_level(coding)));
        let flate_level = flate2::Compression::new(zlib_rs_level(level));
        let codec = match coding.coding() {
            ContentCoding::Gzip => Codec::Flate(Compress::new_gzip(flate_level, 15)),
            ContentCoding::Deflate => Codec::Flate(Compress::new(flate_level, true)),
            ContentCoding::Br => {
                let mut state = BrotliEncoderStateStruct::new(StandardAlloc::default());
                let quality = u32::try_from(level).unwrap_or(4);
                state.set_parameter(BrotliEncoderParameter::BROTLI_PARAM_QUALITY, quality);
                state.set_parameter(BrotliEncoderParameter::BROTLI_PARAM_LGWIN, BROTLI_LGWIN);
                Codec::Br(Box::new(Brotli(state)))
            }
            ContentCoding::Zstd => Codec::Zstd(Box::new(zstd::stream::raw::Encoder::new(level)?)),
            // A `Compression` is never identity; refuse rather than panic if that ever changed.
            ContentCoding::Identity => return Err(io::Error::other("identity has no encoder")),
        };
        Ok(Encoder {
            codec,
            finished: false,
        })
    }

    /// `input` compressed whole, as one stream of `coding` at `level` (as [`Encoder::new`]),
    /// for a body held in memory whose encoded form is kept and served again (a static file's
    /// variant). The result is copied to an allocation of its exact size: it is kept, so
    /// growth slack would be memory held for nothing.
    pub fn encode_all(coding: Compression, level: Option<i32>, input: &[u8]) -> io::Result<Bytes> {
        let mut encoder = Encoder::new(coding, level)?;
        // Text compresses 3–5x at live levels; one growth step at most for the rest.
        let mut out = BytesMut::with_capacity(input.len() / 3 + STEP);
        encoder.write(input, &mut out)?;
        encoder.finish(&mut out)?;
        Ok(Bytes::copy_from_slice(&out))
    }

    /// Level used when none is configured: tuned for live traffic. gzip 2 compresses like
    /// zlib's 2 or better (see [`zlib_rs_level`]); brotli above 4 costs milliseconds of set-up
    /// per response (DESIGN.md §6).
    pub const fn default_level(coding: Compression) -> i32 {
        match coding.coding() {
            ContentCoding::Br => 4,
            ContentCoding::Zstd => 3,
            ContentCoding::Gzip | ContentCoding::Deflate | ContentCoding::Identity => 2,
        }
    }

    /// Clamp `level` into the range `coding` accepts ([`Compression::levels`]). Negative (fast)
    /// zstd levels are not offered, and zstd stops at 19: levels ≤ 19 never pick a window log
    /// above 23 (8 MiB).
    pub fn clamp_level(coding: Compression, level: i32) -> i32 {
        let (min, max) = coding.levels();
        level.clamp(min as i32, max as i32)
    }

    /// Compress `input`, appending whatever the codec emits to `out`. The codec may keep some
    /// output back until the next call, `flush` or `finish`.
    pub fn write(&mut self, input: &[u8], out: &mut BytesMut) -> io::Result<()> {
        self.run(input, out, Op::Process)
    }

    /// Make everything written so far decodable by the client, keeping the stream open.
    pub fn flush(&mut self, out: &mut BytesMut) -> io::Result<()> {
        self.run(&[], out, Op::Flush)
    }

    /// End the stream (gzip trailer, brotli last block, zstd epilogue). Calling it again is a
    /// no-op; writing afterwards is an error.
    pub fn finish(&mut self, out: &mut BytesMut) -> io::Result<()> {
        if self.finished {
            return Ok(());
        }
        self.run(&[], out, Op::Finish)?;
        self.finished = true;
        Ok(())
    }

    fn run(&mut self, input: &[u8], out: &mut BytesMut, op: Op) -> io::Result<()> {
        if self.finished {
            return Err(io::Error::other("compressed stream already finished"));
        }
        match &mut self.codec {
            Codec::Flate(c) => flate(c, input, out, op),
            Codec::Br(b) => brotli(&mut b.0, input, out, op),
            Codec::Zstd(z) => zstd_run(z, input, out, op),
        }
    }
}

/// The zlib-rs level that carries sluice's gzip / deflate `level` (clamped to 1–9).
///
/// sluice's levels mean zlib's: at level N, no more bytes than zlib (nginx's compressor) at
/// level N, for as little CPU as zlib-rs can do it. zlib-rs's own levels are zlib-ng's
/// algorithms and do not line up with zlib's (docs/compression-levels.md, "gzip at the fast
/// levels", has the measurements on the lab's page, the date JSON and seed 004's stream):
///
/// - 1 → 2: zlib-rs 1 is zlib-ng's "quick" strategy (static Huffman codes, one hash probe),
///   25–80% more bytes than zlib 1; zlib-rs 2 ("fast", zlib's own level-1 parameters) is smaller
///   than zlib 1 on every fixture at 1.8–4.7x less CPU than zlib 1.
/// - 2 → 2, 3 → 3: again smaller than zlib's 2 and 3, and cheaper.
/// - 4–8 → 7: zlib-rs 4–6 is zlib-ng's "medium" strategy, which stops at zlib's level-1 ratio on
///   highly repetitive bodies (the date JSON: 2,223 B where zlib 4–9 gives 1,064 B); zlib-rs 7
///   is lazy matching like zlib 4–9 and smaller than zlib 8 on every fixture. It costs more
///   than zlib 4–5 (about 2.4x and 1.5x on the page), less than zlib 6–8.
/// - 9 → 8: zlib-rs 9 is *larger* than zlib-rs 8 on the page and the stream (and than zlib 9);
///   zlib-rs 8 is smaller than zlib 9 everywhere.
///
/// The unit test `gzip_is_no_larger_than_zlib_at_every_level` holds every level to zlib's sizes.
pub fn zlib_rs_level(level: i32) -> u32 {
    match level {
        ..=2 => 2,
        3 => 3,
        4..=8 => 7,
        _ => 8,
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Process,
    Flush,
    Finish,
}

/// Offer `STEP` bytes of space at the end of `out` to `f`, keep the `n` bytes it reports as
/// written. `out`'s allocation is reused across calls, so this allocates only when it grows.
fn fill<T>(
    out: &mut BytesMut,
    f: impl FnOnce(&mut [u8]) -> io::Result<(usize, T)>,
) -> io::Result<(usize, T)> {
    let start = out.len();
    out.resize(start + STEP, 0);
    let result = f(&mut out[start..]);
    let written = result.as_ref().map_or(0, |(n, _)| (*n).min(STEP));
    out.truncate(start + written);
    result
}

fn stalled() -> io::Error {
    io::Error::other("compressor made no progress")
}

fn flate(c: &mut Compress, mut input: &[u8], out: &mut BytesMut, op: Op) -> io::Result<()> {
    let flush = match op {
        Op::Process => FlushCompress::None,
        Op::Flush => FlushCompress::Sync,
        Op::Finish => FlushCompress::Finish,
    };
    loop {
        let (in0, out0) = (c.total_in(), c.total_out());
        let (produced, status) = fill(out, |buf| {
            let status = c.compress(input, buf, flush).map_err(io::Error::other)?;
            Ok(((c.total_out() - out0) as usize, status))
        })?;
        let consumed = (c.total_in() - in0) as usize;
        input = input.get(consumed..).unwrap_or_default();
        // zlib's rule: a flush is complete once a call leaves output space unused.
        let done = match op {
            Op::Process => input.is_empty(),
            Op::Flush => input.is_empty() && produced < STEP,
            Op::Finish => status == Status::StreamEnd,
        };
        if done {
            return Ok(());
        }
        if consumed == 0 && produced == 0 {
            return Err(stalled());
        }
    }
}

fn brotli(
    s: &mut BrotliEncoderStateStruct<StandardAlloc>,
    input: &[u8],
    out: &mut BytesMut,
    op: Op,
) -> io::Result<()> {
    let operation = match op {
        Op::Process => BrotliEncoderOperation::BROTLI_OPERATION_PROCESS,
        Op::Flush => BrotliEncoderOperation::BROTLI_OPERATION_FLUSH,
        Op::Finish => BrotliEncoderOperation::BROTLI_OPERATION_FINISH,
    };
    let mut nop = |_: &mut interface::PredictionModeContextMap<brotli::InputReferenceMut>,
                   _: &mut [interface::StaticCommand],
                   _: interface::InputPair,
                   _: &mut StandardAlloc| ();
    let mut avail_in = input.len();
    let mut in_offset = 0;
    loop {
        let before_in = avail_in;
        let (produced, ok) = fill(out, |buf| {
            let mut avail_out = buf.len();
            let mut out_offset = 0;
            let ok = s.compress_stream(
                operation,
                &mut avail_in,
                input,
                &mut in_offset,
                &mut avail_out,
                buf,
                &mut out_offset,
                &mut None,
                &mut nop,
            );
            Ok((out_offset, ok))
        })?;
        if !ok {
            return Err(io::Error::other("brotli encoder rejected its input"));
        }
        let done = match op {
            Op::Process => avail_in == 0,
            Op::Flush => avail_in == 0 && !s.has_more_output(),
            Op::Finish => s.is_finished(),
        };
        if done {
            return Ok(());
        }
        if before_in == avail_in && produced == 0 && op == Op::Process {
            return Err(stalled());
        }
    }
}

fn zstd_run(
    z: &mut zstd::stream::raw::Encoder<'static>,
    input: &[u8],
    out: &mut BytesMut,
    op: Op,
) -> io::Result<()> {
    use zstd::stream::raw::{InBuffer, Operation, OutBuffer};
    let mut inb = InBuffer::around(input);
    loop {
        let before = inb.pos();
        // For flush/finish zstd returns how many bytes it still holds; 0 means done.
        let (produced, remaining) = fill(out, |buf| {
            let mut outb = OutBuffer::around(buf);
            let remaining = match op {
                Op::Process => z.run(&mut inb, &mut outb).map(|_| 0)?,
                Op::Flush => z.flush(&mut outb)?,
                Op::Finish => z.finish(&mut outb, true)?,
            };
            Ok((outb.pos(), remaining))
        })?;
        let done = match op {
            Op::Process => inb.pos() == input.len(),
            Op::Flush | Op::Finish => remaining == 0,
        };
        if done {
            return Ok(());
        }
        if inb.pos() == before && produced == 0 && op == Op::Process {
            return Err(stalled());
        }
    }
}
