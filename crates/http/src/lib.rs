//! sluice's per-request HTTP features, one folder each. Each takes requests and headers and
//! returns responses and bodies; none of them opens a socket or knows about connections, so
//! they are tested with plain values and temporary directories.
//!
//! - [`static_files`]: serve a directory (validators, conditional GET, ranges, index, no
//!   traversal).
//! - [`decompress`]: request-body decompression with size and ratio limits (gzip bombs → 413).
//! - [`encoding`]: `Accept-Encoding` negotiation (RFC 9110 §12.5.3), shared by every feature.
//! - [`compress_policy`]: whether a response gets compressed, and the header changes if so.
//! - [`compress`]: streaming response compression (gzip, deflate, br, zstd) as ONE stream with
//!   sync flushes when the upstream pauses, after a delay, or per event.
//! - [`coalesce`]: a streamed body handed to the connection in runs, not a write per chunk.
//! - [`headers`]: proxy header rules (hop-by-hop removal, `X-Forwarded-*`, `Via`, route edits),
//!   and what a response's `Content-Type` says (media type, message streams).

pub mod coalesce;
pub mod compress;
pub mod compress_policy;
pub mod decompress;
pub mod dictionary;
pub mod encoding;
pub mod headers;
pub mod static_files;

#[cfg(test)]
mod proptest_config;
