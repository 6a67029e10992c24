//! sluice's per-request HTTP features, one folder each. Each takes requests and headers and
//! returns responses and bodies; none of them opens a socket or knows about connections, so
//! they are tested with plain values and temporary directories.
//!
//! - [`static_files`]: serve a directory (validators, conditional GET, ranges, index, no
//!   traversal).
//! - [`headers`]: proxy header rules (hop-by-hop removal, `X-Forwarded-*`, `Via`, route edits).

pub mod compress_policy;
pub mod encoding;
pub mod headers;
pub mod static_files;
