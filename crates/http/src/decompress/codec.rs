//! One incremental decoder per content coding, all behind the same push-pull step: give it some
//! input and an output slice, it says how much it consumed and produced. Nothing here buffers
//! beyond the codec's own window, so the caller alone decides how much memory output may take.
//!
//! - gzip: [RFC 1952](https://www.rfc-editor.org/rfc/rfc1952), several members in a row allowed
//!   (§2.2), as `gzip -d` does.
//! - deflate: zlib-wrapped per [RFC 9110 §8.4.1.2](https://www.rfc-editor.org/rfc/rfc9110#section-8.4.1.2)
//!   ([RFC 1950](https://www.rfc-editor.org/rfc/rfc1950)); raw deflate
//!   ([RFC 1951](https://www.rfc-editor.org/rfc/rfc1951)) is tolerated because old clients sent
//!   it, detected from the first two bytes as browsers do.
//! - br: [RFC 7932](https://www.rfc-editor.org/rfc/rfc7932), window capped at 8 MiB like zstd's
//!   (see [`BROTLI_WINDOW_BITS_MAX`]); the large-window extension is not accepted.
//! - zstd: [RFC 8878](https://www.rfc-editor.org/rfc/rfc8878), window capped at 8 MiB as
//!   [RFC 9659 §3](https://www.rfc-editor.org/rfc/rfc9659#section-3) asks of HTTP decoders.
//!
//! Memory per decoder is therefore at most: gzip/deflate 32 KiB, br and zstd 8 MiB of window
//! (allocated by the codec, touched only as far as output has been written into it, so a body
//! refused at `max_size` touches at most `max_size` of it).

use brotli::{BrotliDecompressStream, BrotliResult, BrotliState, HeapAlloc, HuffmanCode};
use flate2::{Decompress, FlushDecompress, Status};
use zstd::stream::raw::{DParameter, InBuffer, Operation, OutBuffer};

use sluice_core::{Compression, ContentCoding};

/// Why a decoder gave up: the data is not a valid stream of its coding.
#[derive(Debug)]
pub(super) struct Corrupt(pub(super) String);

/// What one step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Step {
    pub consumed: usize,
    pub produced: usize,
}

type Brotli = BrotliState<HeapAlloc<u8>, HeapAlloc<u32>, HeapAlloc<HuffmanCode>>;

/// RFC 9659 §3: HTTP zstd decoders need not accept windows above 8 MiB; refusing them keeps a
/// hostile frame header from making us allocate up to the library default of 128 MiB.
const ZSTD_WINDOW_LOG_MAX: u32 = 23;

/// Brotli's window is declared in the stream's first byte (WBITS, RFC 7932 §9.1) and may be up
/// to 16 MiB; the decoder allocates it whole. Capped at 2^23 - 16 bytes, the same 8 MiB as zstd
/// (RFC 9659), so every coding is bounded alike. Encoders pick at most 22 by default (the
/// `brotli` tool picks the smallest window that holds the input, 24 only past 8 MiB): refused
/// streams are rare and get 400, as an over-sized zstd window does.
const BROTLI_WINDOW_BITS_MAX: u32 = 23;

/// The window size in bits declared by a brotli stream's first byte (RFC 7932 §9.1); `None` for
/// the large-window extension's marker, which the standard format does not allow.
fn brotli_window_bits(first: u8) -> Option<u32> {
    if first & 1 == 0 {
        return Some(16);
    }
    match (first >> 1) & 0b111 {
        0 => match (first >> 4) & 0b111 {
            0 => Some(17),
            1 => None,
            m => Some(8 + u32::from(m)),
        },
        n => Some(17 + u32::from(n)),
    }
}

/// The deflate flavour, unknown until two bytes have arrived.
enum Flavor {
    Sniffing {
        head: [u8; 2],
        len: usize,
    },
    /// `fed` counts how many of the sniffed bytes the decoder has consumed.
    Known {
        inner: Decompress,
        head: [u8; 2],
        fed: usize,
    },
}

enum Kind {
    Gzip(Decompress),
    Deflate(Flavor),
    Brotli(Box<Brotli>),
    Zstd(Box<zstd::stream::raw::Decoder<'static>>),
}

/// A decoder for one coding, with the bookkeeping needed to tell "ended cleanly" from "cut off".
pub(super) struct Decoder {
    kind: Kind,
    /// The current stream (gzip member, zstd frame...) is complete.
    done: bool,
    /// Any input at all was seen: an empty body is accepted as empty (clients send
    /// `Content-Encoding` on empty bodies), a non-empty one must end cleanly.
    seen: bool,
}

fn corrupt(coding: &str, err: impl std::fmt::Display) -> Corrupt {
    Corrupt(format!("invalid {coding} data: {err}"))
}

impl Decoder {
    pub(super) fn new(coding: Compression) -> Result<Self, Corrupt> {
        let kind = match coding.coding() {
            ContentCoding::Gzip => Kind::Gzip(Decompress::new_gzip(15)),
            ContentCoding::Deflate => Kind::Deflate(Flavor::Sniffing {
                head: [0; 2],
                len: 0,
            }),
            ContentCoding::Br => Kind::Brotli(Box::new(Brotli::new(
                HeapAlloc::new(0),
                HeapAlloc::new(0),
                HeapAlloc::new(HuffmanCode::default()),
            ))),
            ContentCoding::Zstd => {
                let mut dec = zstd::stream::raw::Decoder::new().map_err(|e| corrupt("zstd", e))?;
                dec.set_parameter(DParameter::WindowLogMax(ZSTD_WINDOW_LOG_MAX))
                    .map_err(|e| corrupt("zstd", e))?;
                Kind::Zstd(Box::new(dec))
            }
            // A `Compression` is never identity; refuse rather than panic if that ever changed.
            ContentCoding::Identity => return Err(Corrupt("identity has no decoder".into())),
        };
        Ok(Self {
            kind,
            done: false,
            seen: false,
        })
    }

    /// True when the input seen so far is a complete stream (or there was none).
    pub(super) fn is_complete(&self) -> bool {
        self.done || !self.seen
    }

    /// Decode some of `input` into `output`. Called again with the rest of the input until it
    /// makes no progress; an empty `input` still drains output the codec holds back.
    pub(super) fn step(&mut self, input: &[u8], output: &mut [u8]) -> Result<Step, Corrupt> {
        let first_input = !self.seen;
        self.seen |= !input.is_empty();
        if self.done && !input.is_empty() {
            match &mut self.kind {
                // RFC 1952 §2.2: a gzip file is a series of members; start the next one.
                Kind::Gzip(inner) => {
                    *inner = Decompress::new_gzip(15);
                    self.done = false;
                }
                // RFC 8878 §3: frames may follow each other; the context resets by itself.
                Kind::Zstd(_) => self.done = false,
                Kind::Deflate(_) | Kind::Brotli(_) => {
                    return Err(Corrupt("trailing data after the end of the stream".into()));
                }
            }
        }
        match &mut self.kind {
            Kind::Gzip(inner) => {
                let (step, end) = inflate(inner, input, output, "gzip")?;
                self.done |= end;
                Ok(step)
            }
            Kind::Deflate(flavor) => {
                let (step, end) = deflate(flavor, input, output)?;
                self.done |= end;
                Ok(step)
            }
            Kind::Brotli(state) => {
                if first_input && let Some(&first) = input.first() {
                    check_brotli_window(first)?;
                }
                let (mut avail_in, mut in_off) = (input.len(), 0);
                let (mut avail_out, mut out_off, mut total) = (output.len(), 0, 0);
                let result = BrotliDecompressStream(
                    &mut avail_in,
                    &mut in_off,
                    input,
                    &mut avail_out,
                    &mut out_off,
                    output,
                    &mut total,
                    state,
                );
                match result {
                    BrotliResult::ResultFailure => Err(corrupt("br", "decoder failure")),
                    BrotliResult::ResultSuccess => {
                        self.done = true;
                        Ok(Step {
                            consumed: in_off,
                            produced: out_off,
                        })
                    }
                    BrotliResult::NeedsMoreInput | BrotliResult::NeedsMoreOutput => Ok(Step {
                        consumed: in_off,
                        produced: out_off,
                    }),
                }
            }
            Kind::Zstd(dec) => {
                let mut inb = InBuffer::around(input);
                let mut outb = OutBuffer::around(output);
                let hint = dec
                    .run(&mut inb, &mut outb)
                    .map_err(|e| corrupt("zstd", e))?;
                let step = Step {
                    consumed: inb.pos(),
                    produced: outb.pos(),
                };
                // 0 means the frame is decoded and flushed; no input and no output after a
                // finished frame keeps it finished.
                if hint == 0 {
                    self.done = true;
                }
                Ok(step)
            }
        }
    }
}

fn check_brotli_window(first: u8) -> Result<(), Corrupt> {
    match brotli_window_bits(first) {
        Some(bits) if bits <= BROTLI_WINDOW_BITS_MAX => Ok(()),
        Some(bits) => Err(corrupt(
            "br",
            format_args!(
                "a window of {} MiB is over the 8 MiB limit (encode with --lgwin 23 or less)",
                (1u32 << bits) >> 20
            ),
        )),
        None => Err(corrupt("br", "large-window brotli is not accepted")),
    }
}

/// One zlib-family call; returns the step and whether the stream ended.
fn inflate(
    inner: &mut Decompress,
    input: &[u8],
    output: &mut [u8],
    coding: &str,
) -> Result<(Step, bool), Corrupt> {
    let (in0, out0) = (inner.total_in(), inner.total_out());
    let status = inner
        .decompress(input, output, FlushDecompress::None)
        .map_err(|e| corrupt(coding, e))?;
    // Both deltas are bounded by the slice lengths, so they fit in usize.
    let step = Step {
        consumed: usize::try_from(inner.total_in() - in0).unwrap_or(input.len()),
        produced: usize::try_from(inner.total_out() - out0).unwrap_or(output.len()),
    };
    Ok((step, status == Status::StreamEnd))
}

/// RFC 1950 §2.2: a zlib header has compression method 8, a window of at most 32 KiB and a
/// 16-bit value divisible by 31. Raw deflate passes this check by chance for few first bytes.
fn is_zlib_header(head: [u8; 2]) -> bool {
    head[0] & 0x0f == 8
        && head[0] >> 4 <= 7
        && (u16::from(head[0]) << 8 | u16::from(head[1])) % 31 == 0
}

fn deflate(flavor: &mut Flavor, input: &[u8], output: &mut [u8]) -> Result<(Step, bool), Corrupt> {
    let mut consumed = 0;
    if let Flavor::Sniffing { head, len } = flavor {
        let take = (2 - *len).min(input.len());
        head[*len..*len + take].copy_from_slice(&input[..take]);
        *len += take;
        consumed = take;
        if *len < 2 {
            return Ok((
                Step {
                    consumed,
                    produced: 0,
                },
                false,
            ));
        }
        let head = *head;
        *flavor = Flavor::Known {
            inner: Decompress::new(is_zlib_header(head)),
            head,
            fed: 0,
        };
    }
    let Flavor::Known { inner, head, fed } = flavor else {
        return Ok((
            Step {
                consumed,
                produced: 0,
            },
            false,
        ));
    };
    // The sniffed bytes go to the decoder first; a step may stop halfway through them when
    // `output` is small, so the next one resumes there.
    if *fed < 2 {
        let (step, end) = inflate(inner, &head[*fed..], output, "deflate")?;
        *fed += step.consumed;
        if *fed < 2 || end {
            return Ok((
                Step {
                    consumed,
                    produced: step.produced,
                },
                end,
            ));
        }
        let (rest, end) = inflate(
            inner,
            &input[consumed..],
            &mut output[step.produced..],
            "deflate",
        )?;
        return Ok((
            Step {
                consumed: consumed + rest.consumed,
                produced: step.produced + rest.produced,
            },
            end,
        ));
    }
    inflate(inner, input, output, "deflate")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn decode_all(
        coding: Compression,
        data: &[u8],
        chunk: usize,
    ) -> Result<(Vec<u8>, bool), Corrupt> {
        let mut dec = Decoder::new(coding)?;
        let mut out = Vec::new();
        let mut buf = [0u8; 7]; // tiny output: exercises resuming mid-header and mid-stream
        for piece in data.chunks(chunk) {
            let mut piece = piece;
            loop {
                let step = dec.step(piece, &mut buf)?;
                out.extend_from_slice(&buf[..step.produced]);
                piece = &piece[step.consumed..];
                if piece.is_empty() && step.produced == 0 {
                    break;
                }
            }
        }
        Ok((out, dec.is_complete()))
    }

    #[test]
    fn zlib_header_check_tells_zlib_from_raw() {
        assert!(is_zlib_header([0x78, 0x9c]));
        assert!(is_zlib_header([0x78, 0x01]));
        assert!(!is_zlib_header([0xcb, 0x48])); // raw deflate of "hello"
    }

    #[test]
    fn deflate_sniffing_survives_one_byte_input_and_tiny_output() -> Result<(), Corrupt> {
        let text = b"hello hello hello, deflate".repeat(20);
        for zlib in [true, false] {
            let mut enc =
                flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
            let raw = if zlib {
                let mut z =
                    flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
                z.write_all(&text).map_err(|e| Corrupt(e.to_string()))?;
                z.finish().map_err(|e| Corrupt(e.to_string()))?
            } else {
                enc.write_all(&text).map_err(|e| Corrupt(e.to_string()))?;
                enc.finish().map_err(|e| Corrupt(e.to_string()))?
            };
            let (out, complete) = decode_all(Compression::DEFLATE, &raw, 1)?;
            assert_eq!(out, text, "zlib={zlib}");
            assert!(complete);
        }
        Ok(())
    }

    #[test]
    fn empty_input_counts_as_complete_but_a_partial_header_does_not() -> Result<(), Corrupt> {
        assert!(decode_all(Compression::GZIP, b"", 1)?.1);
        assert!(!decode_all(Compression::DEFLATE, &[0x78], 1)?.1);
        Ok(())
    }

    fn brotli(data: &[u8], lgwin: u32) -> Vec<u8> {
        let mut out = Vec::new();
        let params = brotli::enc::BrotliEncoderParams {
            quality: 5,
            lgwin: lgwin as i32,
            ..Default::default()
        };
        let _ = brotli::BrotliCompress(&mut &data[..], &mut out, &params);
        out
    }

    #[test]
    fn brotli_window_bits_are_read_from_the_first_byte() {
        let data = b"window bits ".repeat(1000);
        for lgwin in 10..=24 {
            let encoded = brotli(&data, lgwin);
            // The encoder may shrink the window for a small input, never grow it.
            let bits = brotli_window_bits(encoded[0]);
            assert!(
                bits.is_some_and(|b| b <= lgwin.max(16)),
                "lgwin {lgwin}: {bits:?}"
            );
        }
        assert_eq!(brotli_window_bits(0b0000_1111), Some(24));
        assert_eq!(brotli_window_bits(0b0000_1101), Some(23));
        assert_eq!(brotli_window_bits(0b0000_0000), Some(16));
        assert_eq!(brotli_window_bits(0b0000_0001), Some(17));
        assert_eq!(brotli_window_bits(0b0010_0001), Some(10));
        assert_eq!(brotli_window_bits(0b0001_0001), None);
    }

    #[test]
    fn brotli_windows_over_8_mib_are_refused_and_smaller_ones_decode() -> Result<(), Corrupt> {
        // Over 8 MiB of input: the encoder keeps the window it is given.
        let data: Vec<u8> = (0..9u32 << 20).map(|i| (i % 251) as u8).collect();
        let (out, complete) = decode_all(Compression::BR, &brotli(&data[..1 << 16], 23), 4096)?;
        assert!(complete);
        assert_eq!(out, &data[..1 << 16]);
        let big = brotli(&data, 24);
        assert_eq!(brotli_window_bits(big[0]), Some(24));
        let err = decode_all(Compression::BR, &big, 4096).err();
        assert!(err.is_some_and(|e| e.0.contains("8 MiB")));
        Ok(())
    }

    #[test]
    fn trailing_bytes_after_a_deflate_stream_are_corrupt() -> Result<(), Corrupt> {
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(b"abc").map_err(|e| Corrupt(e.to_string()))?;
        let mut data = z.finish().map_err(|e| Corrupt(e.to_string()))?;
        data.extend_from_slice(b"junk");
        assert!(decode_all(Compression::DEFLATE, &data, 64).is_err());
        Ok(())
    }
}
