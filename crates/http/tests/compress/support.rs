//! Fixtures, test bodies and decoders shared by the compression tests.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame};
use sluice_core::{BoxError, Compression, ContentCoding};
use tokio::sync::mpsc;

pub const ALL: [Compression; 4] = Compression::ALL;

/// ~200 KB of API-like JSON: repetitive keys, varied values, like the demo origin's records.
pub fn json_fixture() -> Vec<u8> {
    let names = [
        "Ada", "Grace", "Linus", "Barbara", "Ken", "Margaret", "Dennis", "Radia",
    ];
    let mut seed: u64 = 0x5eed;
    let mut out = String::from("[");
    let mut i = 0;
    while out.len() < 200_000 {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let r = seed >> 33;
        if i > 0 {
            out.push(',');
        }
        out.push_str(&format!(
            "{{\"id\":{i},\"name\":\"{}\",\"year\":{},\"month\":{},\"day\":{},\"score\":{}.{},\"tags\":[\"t{}\",\"t{}\"]}}\n",
            names[(r % 8) as usize],
            1950 + r % 75,
            1 + r % 12,
            1 + (r >> 8) % 28,
            r % 1000,
            (r >> 12) % 100,
            (r >> 4) % 50,
            (r >> 20) % 50,
        ));
        i += 1;
    }
    out.push(']');
    out.into_bytes()
}

/// Split `data` into unevenly sized chunks (1 byte up to ~40 KB).
pub fn uneven_chunks(data: &[u8]) -> Vec<Bytes> {
    let sizes = [1, 13, 4096, 517, 40_000, 2, 16_384, 999, 7];
    let mut chunks = Vec::new();
    let (mut at, mut k) = (0, 0);
    while at < data.len() {
        let end = (at + sizes[k % sizes.len()]).min(data.len());
        chunks.push(Bytes::copy_from_slice(&data[at..end]));
        at = end;
        k += 1;
    }
    chunks
}

/// A body fed through a tokio channel: `Pending` whenever the channel is empty.
pub struct ChannelBody(pub mpsc::UnboundedReceiver<Result<Frame<Bytes>, BoxError>>);

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = BoxError;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.0.poll_recv(cx)
    }
}

/// A body that is always ready: its chunks, then (if `endless`) small chunks forever.
pub struct ReadyBody {
    pub chunks: VecDeque<Bytes>,
    pub endless: Option<Bytes>,
}

impl Body for ReadyBody {
    type Data = Bytes;
    type Error = BoxError;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let next = self.chunks.pop_front().or_else(|| self.endless.clone());
        Poll::Ready(next.map(|b| Ok(Frame::data(b))))
    }
}

/// Decode a complete stream with the crates, requiring exactly one gzip member / zstd frame.
pub fn decode(alg: Compression, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    match alg.coding() {
        ContentCoding::Identity => out.extend_from_slice(data),
        ContentCoding::Gzip => {
            // bufread::GzDecoder stops after the first member; the rest must be empty.
            let mut d = flate2::bufread::GzDecoder::new(data);
            d.read_to_end(&mut out).unwrap();
            assert!(d.into_inner().is_empty(), "more than one gzip member");
        }
        ContentCoding::Deflate => {
            flate2::read::ZlibDecoder::new(data)
                .read_to_end(&mut out)
                .unwrap();
        }
        ContentCoding::Br => {
            brotli::Decompressor::new(data, 4096)
                .read_to_end(&mut out)
                .unwrap();
        }
        ContentCoding::Zstd => {
            let frame = zstd::zstd_safe::find_frame_compressed_size(data).unwrap();
            assert_eq!(frame, data.len(), "more than one zstd frame");
            let mut d = zstd::stream::read::Decoder::new(data).unwrap();
            d.window_log_max(23).unwrap(); // RFC 9659: clients may refuse more than 8 MiB
            d.read_to_end(&mut out).unwrap();
        }
    }
    out
}

/// Decodes a stream piece by piece, the way a browser renders a streamed response.
pub enum StreamDecoder {
    Identity,
    Flate(flate2::Decompress),
    Br(Box<brotli::DecompressorWriter<Vec<u8>>>),
    Zstd(zstd::stream::raw::Decoder<'static>),
}

impl StreamDecoder {
    pub fn new(alg: Compression) -> Self {
        match alg.coding() {
            ContentCoding::Identity => StreamDecoder::Identity,
            ContentCoding::Gzip => StreamDecoder::Flate(flate2::Decompress::new_gzip(15)),
            ContentCoding::Deflate => StreamDecoder::Flate(flate2::Decompress::new(true)),
            // A large buffer: brotli-decompressor's writer stops early when a write fills its
            // buffer exactly, which would look like an incomplete flush.
            ContentCoding::Br => StreamDecoder::Br(Box::new(brotli::DecompressorWriter::new(
                Vec::new(),
                1 << 20,
            ))),
            ContentCoding::Zstd => StreamDecoder::Zstd(zstd::stream::raw::Decoder::new().unwrap()),
        }
    }

    /// Feed compressed bytes; returns everything decodable so far.
    pub fn feed(&mut self, mut input: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            StreamDecoder::Identity => out.extend_from_slice(input),
            StreamDecoder::Flate(d) => loop {
                out.reserve(64 * 1024);
                let before = d.total_in();
                d.decompress_vec(input, &mut out, flate2::FlushDecompress::None)
                    .unwrap();
                input = &input[(d.total_in() - before) as usize..];
                if input.is_empty() && out.len() < out.capacity() {
                    break;
                }
            },
            StreamDecoder::Br(w) => {
                w.write_all(input).unwrap();
                w.flush().unwrap();
                out = std::mem::take(w.get_mut());
            }
            StreamDecoder::Zstd(d) => {
                use zstd::stream::raw::{InBuffer, Operation, OutBuffer};
                let mut inb = InBuffer::around(input);
                loop {
                    let mut buf = vec![0; 64 * 1024];
                    let mut outb = OutBuffer::around(&mut buf[..]);
                    d.run(&mut inb, &mut outb).unwrap();
                    let n = outb.pos();
                    out.extend_from_slice(&buf[..n]);
                    if inb.pos() == input.len() && n < buf.len() {
                        break;
                    }
                }
            }
        }
        out
    }
}
