//! Property tests of request-body decoding: any bytes as any stack of codings, in any chunking,
//! end in data or an error (never a panic, a hang or a silent end after an error); nothing is
//! yielded past the limits; what sluice's compressors produce decodes to their input; a cut-off
//! stream is an error; and decompression bombs stop at `max_size`.
//!
//! Input sizes are bounded by the strategies and every loop here by a count, so a decoder that
//! stops making progress fails the test instead of hanging it.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame};
use proptest::prelude::*;
use sluice_core::{Compression, ErrorKind};

use super::codec::Decoder;
use super::{DecompressBody, DecompressLimits, FRAME, plan};
use crate::compress::{Encoder, compress_whole};
use crate::proptest_config::cases;

/// A request body that is always ready: the given chunks, one per poll.
struct Chunks(VecDeque<Bytes>);

impl Body for Chunks {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        Poll::Ready(self.0.pop_front().map(|b| Ok(Frame::data(b))))
    }
}

/// `data` cut into chunks whose sizes cycle through `sizes`.
fn chunked(data: &[u8], sizes: &[usize]) -> Chunks {
    let (mut out, mut rest, mut i) = (VecDeque::new(), data, 0);
    while !rest.is_empty() {
        let n = sizes[i % sizes.len()].clamp(1, rest.len());
        out.push_back(Bytes::copy_from_slice(&rest[..n]));
        rest = &rest[n..];
        i += 1;
    }
    Chunks(out)
}

struct Outcome {
    data: Vec<u8>,
    error: Option<ErrorKind>,
    encoded: u64,
}

/// Poll the decoded body to its end or its first error. The body is always ready, so every
/// poll yields a non-empty frame or ends: more polls than chunks plus output bytes is a hang.
fn decode(
    data: &[u8],
    sizes: &[usize],
    codings: &[Compression],
    limits: DecompressLimits,
) -> Outcome {
    let chunks = chunked(data, sizes);
    let max_polls = chunks.0.len() as u64 + limits.max_size.min(1 << 24) + 3;
    let mut body = DecompressBody::new(chunks, codings, limits).unwrap();
    let mut cx = Context::from_waker(Waker::noop());
    let mut out = Outcome {
        data: Vec::new(),
        error: None,
        encoded: 0,
    };
    for _ in 0..max_polls {
        match Pin::new(&mut body).poll_frame(&mut cx) {
            Poll::Pending => panic!("an always-ready body made the decoder pend"),
            Poll::Ready(None) => {
                assert!(body.is_end_stream());
                out.encoded = body.encoded_bytes();
                return out;
            }
            Poll::Ready(Some(Ok(frame))) => {
                let data = frame.into_data().unwrap();
                assert!(
                    !data.is_empty() && data.len() <= FRAME,
                    "frame of {}",
                    data.len()
                );
                out.data.extend_from_slice(&data);
            }
            Poll::Ready(Some(Err(err))) => {
                out.error = Some(err.kind().unwrap());
                out.encoded = body.encoded_bytes();
                // A failed body keeps failing: nobody may take it for a complete one.
                let again = Pin::new(&mut body).poll_frame(&mut cx);
                assert!(matches!(again, Poll::Ready(Some(Err(_)))));
                assert!(!body.is_end_stream());
                return out;
            }
        }
    }
    panic!("no end after {max_polls} polls");
}

fn codings() -> impl Strategy<Value = Vec<Compression>> {
    proptest::collection::vec(proptest::sample::select(Compression::ALL.to_vec()), 1..=2)
}

fn chunk_sizes() -> impl Strategy<Value = Vec<usize>> {
    proptest::collection::vec(prop_oneof![1usize..8, 1usize..5000], 1..6)
}

/// Bodies worth compressing: repetitive text of a few words (compresses well, spans frames) or
/// random bytes (does not compress at all).
fn plain() -> impl Strategy<Value = Vec<u8>> {
    let words = proptest::sample::select(vec!["sluice ", "gzip ", "{\"a\":1}", "\n", "zzzzzzzz"]);
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..3000),
        proptest::collection::vec(words, 0..12_000).prop_map(|w| w.concat().into_bytes()),
    ]
}

/// `data` as sluice's streaming encoder writes it: in pieces, with sync flushes between some.
fn stream_encode(coding: Compression, level: i32, data: &[u8], cuts: &[(usize, bool)]) -> Vec<u8> {
    let mut encoder = Encoder::new(coding, Some(level)).unwrap();
    let mut out = BytesMut::new();
    let mut rest = data;
    for &(size, flush) in cuts.iter().cycle().take(64) {
        let (piece, after) = rest.split_at(size.min(rest.len()));
        encoder.write(piece, &mut out).unwrap();
        if flush {
            encoder.flush(&mut out).unwrap();
        }
        rest = after;
        if rest.is_empty() {
            break;
        }
    }
    encoder.write(rest, &mut out).unwrap();
    encoder.finish(&mut out).unwrap();
    out.to_vec()
}

/// Limits that never get in the way of a round trip.
const GENEROUS: DecompressLimits = DecompressLimits {
    max_size: 1 << 30,
    max_ratio: u64::MAX,
};

/// A valid stream of `coding` with some damage: a flipped byte, an insertion, or bytes cut.
fn damaged() -> impl Strategy<Value = (Compression, Vec<u8>)> {
    let coding = proptest::sample::select(Compression::ALL.to_vec());
    let data = proptest::collection::vec(any::<u8>(), 0..600);
    (coding, data, any::<usize>(), any::<u8>(), 0..3u8).prop_map(|(coding, data, at, byte, how)| {
        let mut encoded = compress_whole(coding, None, &data).unwrap();
        let at = at % (encoded.len() + 1);
        match how {
            0 if at < encoded.len() => encoded[at] ^= byte | 1,
            1 => encoded.insert(at, byte),
            _ => encoded.truncate(at),
        }
        (coding, encoded)
    })
}

proptest! {
    #![proptest_config(cases(300))]

    /// Any bytes: data or an error, and never a byte past `max_size`, nor (past the first
    /// frame) past `max_ratio` times the encoded bytes read.
    #[test]
    fn any_bytes_end_in_data_or_an_error_within_the_limits(
        input in prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..4096),
            damaged().prop_map(|(_, bytes)| bytes),
        ],
        codings in codings(),
        sizes in chunk_sizes(),
        max_size in prop_oneof![0u64..1024, 0u64..(256 << 10)],
        max_ratio in 1u64..1000,
    ) {
        let limits = DecompressLimits { max_size, max_ratio };
        let out = decode(&input, &sizes, &codings, limits);
        let total = out.data.len() as u64;
        prop_assert!(total <= max_size, "{total} > {max_size}");
        prop_assert!(
            total <= FRAME as u64 || total <= out.encoded.saturating_mul(max_ratio),
            "{total} bytes from {} encoded at ratio {max_ratio}", out.encoded
        );
        prop_assert!(matches!(
            out.error,
            None | Some(ErrorKind::BadRequest | ErrorKind::PayloadTooLarge)
        ));
    }

    /// A valid stream with one byte flipped, inserted or cut: decoding still ends.
    #[test]
    fn damaged_streams_end_in_data_or_an_error(
        (coding, input) in damaged(),
        sizes in chunk_sizes(),
    ) {
        let out = decode(&input, &sizes, &[coding], DecompressLimits::default());
        prop_assert!(matches!(out.error, None | Some(ErrorKind::BadRequest)));
    }

    /// What the streaming encoder writes (any level, any write sizes and flush points) decodes
    /// to its input, in any chunking.
    #[test]
    fn streamed_compression_round_trips(
        data in plain(),
        coding in proptest::sample::select(Compression::ALL.to_vec()),
        level in any::<i32>(),
        cuts in proptest::collection::vec((1usize..20_000, any::<bool>()), 1..6),
        sizes in chunk_sizes(),
    ) {
        let (min, max) = coding.levels();
        // The top levels cost seconds per case in a debug build; the clamping itself is
        // `Encoder::clamp_level`'s unit test.
        let level = (level.rem_euclid((max - min + 1) as i32) + min as i32).min(9);
        let encoded = stream_encode(coding, level, &data, &cuts);
        let out = decode(&encoded, &sizes, &[coding], GENEROUS);
        prop_assert_eq!(out.error, None);
        prop_assert!(out.data == data, "{} bytes decoded to {}", data.len(), out.data.len());
    }

    /// What the compress-once path stores decodes to its input, also under a second coding
    /// (`Content-Encoding: a, b` is undone b first, RFC 9110 §8.4).
    #[test]
    fn whole_and_stacked_compression_round_trips(
        data in plain(),
        first in proptest::sample::select(Compression::ALL.to_vec()),
        second in proptest::option::of(proptest::sample::select(Compression::ALL.to_vec())),
        sizes in chunk_sizes(),
    ) {
        let mut encoded = compress_whole(first, None, &data).unwrap();
        let mut codings = vec![first];
        if let Some(second) = second {
            encoded = compress_whole(second, None, &encoded).unwrap();
            codings.insert(0, second);
        }
        let out = decode(&encoded, &sizes, &codings, GENEROUS);
        prop_assert_eq!(out.error, None);
        prop_assert!(out.data == data, "{} bytes decoded to {}", data.len(), out.data.len());
    }

    /// A stream cut anywhere before its end is a truncated body (400), never a complete one.
    #[test]
    fn cut_off_streams_are_bad_requests(
        data in plain(),
        coding in proptest::sample::select(Compression::ALL.to_vec()),
        cut in any::<usize>(),
        sizes in chunk_sizes(),
    ) {
        let encoded = compress_whole(coding, None, &data).unwrap();
        // Cut at least one byte, keep at least one (no body at all is a valid empty body).
        let cut = 1 + cut % (encoded.len() - 1).max(1);
        prop_assume!(cut < encoded.len());
        let out = decode(&encoded[..cut], &sizes, &[coding], GENEROUS);
        prop_assert_eq!(out.error, Some(ErrorKind::BadRequest));
    }
}

proptest! {
    #![proptest_config(cases(40))]

    /// A bomb (a long run of one byte, compressed) is refused with 413 before a byte past
    /// `max_size` is yielded, and by the ratio limit when that is the tighter one.
    #[test]
    fn bombs_stop_at_the_limits(
        coding in proptest::sample::select(Compression::ALL.to_vec()),
        len in (FRAME + 1)..(1 << 20),
        byte in any::<u8>(),
        max_size in 0u64..(1 << 19),
        sizes in chunk_sizes(),
    ) {
        let encoded = compress_whole(coding, None, &vec![byte; len]).unwrap();
        let by_size = decode(
            &encoded,
            &sizes,
            &[coding],
            DecompressLimits { max_size, max_ratio: u64::MAX },
        );
        prop_assert_eq!(by_size.error, (max_size < len as u64).then_some(ErrorKind::PayloadTooLarge));
        prop_assert!(by_size.data.len() as u64 <= max_size);

        let ratio = (len as u64 / encoded.len() as u64 / 2).max(1);
        let by_ratio = decode(
            &encoded,
            &sizes,
            &[coding],
            DecompressLimits { max_size: u64::MAX, max_ratio: ratio },
        );
        prop_assert_eq!(by_ratio.error, Some(ErrorKind::PayloadTooLarge));
    }

    /// One decoder alone, fed any bytes with output buffers of any size down to one byte: every
    /// step makes progress or the decoder is done with what it was given; never a loop.
    #[test]
    fn a_decoder_step_always_progresses_or_stops(
        input in proptest::collection::vec(any::<u8>(), 0..2048),
        coding in proptest::sample::select(Compression::ALL.to_vec()),
        out_size in 1usize..64,
    ) {
        let mut decoder = Decoder::new(coding).unwrap();
        let mut output = vec![0; out_size];
        let mut rest = &input[..];
        let mut produced = 0usize;
        let mut ended = false;
        for _ in 0..(input.len() + (1 << 18) + 2) {
            let Ok(step) = decoder.step(rest, &mut output) else {
                ended = true;
                break;
            };
            prop_assert!(step.consumed <= rest.len() && step.produced <= out_size);
            rest = &rest[step.consumed..];
            produced += step.produced;
            if (step.consumed == 0 && step.produced == 0) || produced >= 1 << 18 {
                ended = true;
                break;
            }
        }
        prop_assert!(ended, "a decoder neither progressed nor stopped");
    }
}

proptest! {
    #![proptest_config(cases(2000))]

    /// Any `Content-Encoding` lines: a plan of known codings (identity dropped), or a 415.
    #[test]
    fn any_content_encoding_plans_or_is_unsupported(
        lines in proptest::collection::vec(
            "(gzip|x-gzip|GZIP|br|zstd|deflate|identity|compress|[ -~]{0,4})(, ?(gzip|br|identity|[ -~]{0,3})){0,3}",
            0..3,
        ),
    ) {
        let mut headers = http::HeaderMap::new();
        for line in &lines {
            headers.append(http::header::CONTENT_ENCODING, http::HeaderValue::from_str(line).unwrap());
        }
        match plan(&headers) {
            Ok(Some(codings)) => prop_assert!(!codings.is_empty()),
            Ok(None) => {}
            Err(err) => prop_assert_eq!(err.kind(), ErrorKind::UnsupportedMediaType),
        }
    }
}
