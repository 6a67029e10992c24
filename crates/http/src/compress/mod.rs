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
