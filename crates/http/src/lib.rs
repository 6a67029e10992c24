//! sluice's per-request HTTP features, one folder each. Each takes requests and headers and
//! returns responses and bodies; none of them opens a socket or knows about connections, so
//! they are tested with plain values and temporary directories.
//!
//! - [`static_files`]: serve a directory (validators, conditional GET, ranges, index, no
//!   traversal).
//! - [`compress`]: streaming response compression (gzip, deflate, br, zstd) as ONE stream with
//!   sync flushes when the upstream pauses, after a delay, or per event.
//! - [`headers`]: proxy header rules (hop-by-hop removal, `X-Forwarded-*`, `Via`, route edits).

pub mod compress;
pub mod headers;
pub mod static_files;
