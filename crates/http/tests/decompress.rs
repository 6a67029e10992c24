//! Request-body decompression end to end with real encoders: round trips for every coding and a
//! stack, odd chunkings, bombs (size and ratio), corrupt and truncated input, and error mapping.

use std::collections::VecDeque;
use std::io::Write;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, header::CONTENT_ENCODING};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use sluice_core::{BoxError, Compression, ErrorKind};
use sluice_http::decompress::{self, DecompressBody, DecompressError, DecompressLimits, FRAME};

type TestResult = Result<(), BoxError>;

/// A request body that hands out the given chunks one per poll.
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

/// Split `data` into chunks cycling through `sizes`.
fn chunked(data: &[u8], sizes: &[usize]) -> Chunks {
    let (mut out, mut rest, mut i) = (VecDeque::new(), data, 0);
    while !rest.is_empty() {
        let n = sizes[i % sizes.len()].min(rest.len());
        out.push_back(Bytes::copy_from_slice(&rest[..n]));
        rest = &rest[n..];
        i += 1;
    }
    Chunks(out)
}

fn encode(coding: &str, data: &[u8]) -> Result<Vec<u8>, BoxError> {
    use flate2::{Compression, write};
    Ok(match coding {
        "gzip" | "x-gzip" => {
            let mut e = write::GzEncoder::new(Vec::new(), Compression::default());
            e.write_all(data)?;
            e.finish()?
        }
        "deflate" => {
            let mut e = write::ZlibEncoder::new(Vec::new(), Compression::default());
            e.write_all(data)?;
            e.finish()?
        }
        "raw-deflate" => {
            let mut e = write::DeflateEncoder::new(Vec::new(), Compression::default());
            e.write_all(data)?;
            e.finish()?
        }
        "br" => {
            let mut out = Vec::new();
            brotli::BrotliCompress(&mut &data[..], &mut out, &Default::default())?;
            out
        }
        "zstd" => zstd::bulk::compress(data, 3)?,
        _ => data.to_vec(),
    })
}

/// What decoding produced: the bytes, the largest frame, and the error that ended it, if any.
struct Outcome {
    data: Vec<u8>,
    largest_frame: usize,
    error: Option<DecompressError>,
}

async fn decode(
    header: &'static str,
    body: Chunks,
    limits: DecompressLimits,
) -> Result<Outcome, BoxError> {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_ENCODING, HeaderValue::from_static(header));
    let codings = decompress::plan(&headers)?.ok_or("no codings")?;
    let mut body = DecompressBody::new(body, &codings, limits)?;
    let mut out = Outcome {
        data: Vec::new(),
        largest_frame: 0,
        error: None,
    };
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => {
                let data = frame.into_data().map_err(|_| "unexpected trailers")?;
                out.largest_frame = out.largest_frame.max(data.len());
                out.data.extend_from_slice(&data);
            }
            Err(err) => {
                out.error = Some(err);
                break;
            }
        }
    }
    Ok(out)
}

fn sample() -> Vec<u8> {
    // Text that compresses a few times (well under the default ratio), larger than a frame so
    // output spans several frames: pseudo-random numbers from a fixed LCG.
    let mut x: u32 = 12_345;
    (0..100_000)
        .flat_map(|_| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            format!("{},", (x >> 16) % 1000).into_bytes()
        })
        .collect()
}

#[tokio::test]
async fn every_coding_round_trips_in_any_chunking() -> TestResult {
    let text = sample();
    for (header, encoder) in [
        ("gzip", "gzip"),
        ("x-gzip", "x-gzip"),
        ("deflate", "deflate"),
        ("deflate", "raw-deflate"),
        ("br", "br"),
        ("zstd", "zstd"),
        ("identity, gzip", "gzip"),
    ] {
        let encoded = encode(encoder, &text)?;
        for sizes in [&[1][..], &[3, 1000, 7, 65_536, 2], &[usize::MAX]] {
            let got = decode(
                header,
                chunked(&encoded, sizes),
                DecompressLimits::default(),
            )
            .await?;
            assert!(got.error.is_none(), "{encoder} {sizes:?}: {:?}", got.error);
            assert!(got.data == text, "{encoder} {sizes:?}: wrong bytes");
            assert!(got.largest_frame <= FRAME);
        }
    }
    Ok(())
}

#[tokio::test]
async fn stacked_codings_are_undone_in_reverse() -> TestResult {
    let text = sample();
    // `Content-Encoding: gzip, br` = gzip applied first, then br.
    let encoded = encode("br", &encode("gzip", &text)?)?;
    let got = decode(
        "gzip, br",
        chunked(&encoded, &[5, 999]),
        DecompressLimits::default(),
    )
    .await?;
    assert!(got.error.is_none(), "{:?}", got.error);
    assert!(got.data == text);
    Ok(())
}

#[tokio::test]
async fn multi_member_gzip_and_multi_frame_zstd_decode_whole() -> TestResult {
    let mut gz = encode("gzip", b"first ")?;
    gz.extend(encode("gzip", b"second")?);
    let got = decode("gzip", chunked(&gz, &[4]), DecompressLimits::default()).await?;
    assert_eq!(got.data, b"first second");
    let mut zs = encode("zstd", b"one ")?;
    zs.extend(encode("zstd", b"two")?);
    let got = decode("zstd", chunked(&zs, &[3]), DecompressLimits::default()).await?;
    assert_eq!(got.data, b"one two");
    Ok(())
}

/// 1 GiB of zeros gzipped, streamed into the encoder so the test never holds 1 GiB.
fn gzip_bomb() -> Result<Vec<u8>, BoxError> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..1024 {
        enc.write_all(&zeros)?;
    }
    Ok(enc.finish()?)
}

#[tokio::test]
async fn gzip_bomb_is_refused_within_max_size() -> TestResult {
    let bomb = gzip_bomb()?;
    // Ratio check off: this exercises the size limit alone.
    let limits = DecompressLimits {
        max_size: 10 << 20,
        max_ratio: u64::MAX,
    };
    let got = decode("gzip", chunked(&bomb, &[16 * 1024]), limits).await?;
    let err = got.error.ok_or("the bomb decoded without error")?;
    assert_eq!(err.kind(), Some(ErrorKind::PayloadTooLarge));
    assert!(got.data.len() as u64 <= limits.max_size + FRAME as u64);
    assert!(got.largest_frame <= FRAME);
    // With default limits the ratio trips much earlier.
    let got = decode(
        "gzip",
        chunked(&bomb, &[16 * 1024]),
        DecompressLimits::default(),
    )
    .await?;
    assert_eq!(
        got.error.and_then(|e| e.kind()),
        Some(ErrorKind::PayloadTooLarge)
    );
    Ok(())
}

#[tokio::test]
async fn ratio_bomb_below_max_size_is_refused() -> TestResult {
    let zeros = vec![0u8; 2 << 20]; // 2 MiB, far below 10 MiB, but ~1000:1
    let got = decode(
        "zstd",
        chunked(&encode("zstd", &zeros)?, &[64]),
        DecompressLimits::default(),
    )
    .await?;
    assert_eq!(
        got.error.and_then(|e| e.kind()),
        Some(ErrorKind::PayloadTooLarge)
    );
    // A small body compressing beyond the ratio is fine: under one frame nothing is checked.
    let got = decode(
        "gzip",
        chunked(&encode("gzip", &[0u8; 30_000])?, &[64]),
        DecompressLimits::default(),
    )
    .await?;
    assert!(got.error.is_none() && got.data.len() == 30_000);
    Ok(())
}

#[tokio::test]
async fn corrupt_and_truncated_bodies_are_bad_requests() -> TestResult {
    let text = sample();
    for coding in ["gzip", "deflate", "br", "zstd"] {
        let encoded = encode(coding, &text)?;
        let mut corrupt = encoded.clone();
        for b in corrupt.iter_mut().skip(10).step_by(7) {
            *b ^= 0x5a;
        }
        let truncated = &encoded[..encoded.len() - 5];
        for (what, data) in [
            ("corrupt", &corrupt[..]),
            ("truncated", truncated),
            ("garbage", b"not compressed at all"),
        ] {
            let got = decode(coding, chunked(data, &[100]), DecompressLimits::default()).await?;
            let kind = got.error.and_then(|e| e.kind());
            assert_eq!(kind, Some(ErrorKind::BadRequest), "{coding} {what}");
        }
    }
    Ok(())
}

#[test]
fn unknown_coding_is_unsupported_media_type() {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip, lzma"));
    let kind = decompress::plan(&headers).err().map(|e| e.kind());
    assert_eq!(kind, Some(ErrorKind::UnsupportedMediaType));
    assert_eq!(decompress::ACCEPTED, "gzip, deflate, br, zstd");
}

/// What a client library does to a body error on its way out.
#[derive(Debug)]
struct Wrapper(BoxError);

impl std::fmt::Display for Wrapper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("request failed")
    }
}

impl std::error::Error for Wrapper {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.0)
    }
}

#[tokio::test]
async fn error_kind_is_found_through_wrapping_errors() -> TestResult {
    let bomb = encode("gzip", &vec![0u8; 12 << 20])?;
    let got = decode("gzip", chunked(&bomb, &[4096]), DecompressLimits::default()).await?;
    let err = got.error.ok_or("no error")?;
    let wrapped = Wrapper(Box::new(Wrapper(Box::new(err))));
    assert_eq!(
        decompress::error_kind(&wrapped),
        Some(ErrorKind::PayloadTooLarge)
    );
    let plain = std::io::Error::other("reset");
    assert_eq!(decompress::error_kind(&plain), None);
    Ok(())
}

#[tokio::test]
async fn after_an_error_the_body_never_reports_a_clean_end() -> TestResult {
    let mut body = DecompressBody::new(
        chunked(b"garbage!", &[8]),
        &[Compression::GZIP],
        DecompressLimits::default(),
    )?;
    assert!(matches!(body.frame().await, Some(Err(_))));
    assert!(matches!(body.frame().await, Some(Err(_))));
    assert!(!body.is_end_stream());
    Ok(())
}
