//! Streaming response compression (DESIGN.md capabilities 7–8).
//!
//! A response is compressed as ONE stream — one gzip member, one brotli stream, one zstd frame —
//! however many chunks it arrives in. Per-chunk members (seed 004) decode in curl but not in
//! browsers. Streaming works through sync flushes instead: whenever the upstream pauses, or
//! at the latest after a delay, everything received so far is made decodable and sent.
//!
//! - [`encoder`]: [`Encoder`], `write` / `flush` / `finish` over flate2 (zlib-rs), brotli, zstd;
//!   `encode_all` for a body in memory whose encoded form is kept (static files' variants).
//! - [`body`]: [`CompressBody`], an `http_body::Body` adapter deciding *when* to flush.
//! - [`whole`]: [`compress_whole`], one buffer compressed for keeps (the cache's variants).
//!
//! gzip and deflate levels mean zlib's: at level N sluice sends no more bytes than zlib at N
//! (nginx's compressor), through the zlib-rs level [`encoder::zlib_rs_level`] picks.
//!
//! Negotiation (which coding, whether to compress at all) and header edits live elsewhere.
//!
//! Why not `async-compression` (read at 0.4.52): since 0.4.31 its `bufread` encoders do sync-flush
//! when the reader returns `Pending` with input since the last flush, so they no longer hold a
//! paused stream back. What sluice needs and it does not do:
//! - a flush *deadline* ([`CompressOptions::flush_delay`]): an upstream that trickles fast
//!   enough never to return `Pending` is never flushed there until it ends;
//! - telling a pause from a read boundary: it flushes on *every* `Pending` (each sync flush ends
//!   a deflate block and costs bytes), where [`CompressBody`] waits for the producer's turns
//!   (`coalesce::ProducerTurns`) and lets a body of known length wait for the deadline (its
//!   pauses are read boundaries);
//! - `http_body` frames: it reads `AsyncBufRead` / writes `AsyncWrite` bytes, so a response body
//!   would go through a reader adapter (one more copy) and its trailers would be lost;
//! - a flush after every chunk for `text/event-stream`, and a cap on frames per poll
//!   (`body::BUDGET`) so an always-ready upstream does not hold the worker thread.
//!
//! Levels (through `Level::Precise` and [`encoder::zlib_rs_level`]), the zlib-rs backend (cargo
//! unifies flate2's features), brotli's window and zstd's 8 MiB window (RFC 9659) could all be
//! set through it; they are not the reason. The one-shot paths ([`whole`], `encode_all`) use the
//! sync codecs in any case, so [`Encoder`] over flate2 / brotli / zstd serves both.

pub mod body;
pub mod encoder;
pub mod whole;

pub use body::{CompressBody, CompressOptions};
pub use encoder::Encoder;
pub use whole::compress_whole;

#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod zlib_parity;
