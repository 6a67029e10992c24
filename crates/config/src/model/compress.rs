//! A route's response compression (`compress = { ... }`).

use std::time::Duration;

use sluice_core::{Compression, ContentCoding};

/// Response compression of a route (`compress = { ... }`). Which responses qualify and how the
/// coding is negotiated is `docs/compression.md`; these are the knobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compress {
    /// Codings produced, most preferred first, used when the client likes several equally;
    /// never empty, no duplicates. Default zstd, br, gzip.
    pub algorithms: Vec<Compression>,
    /// Level per algorithm; `None` uses the algorithm's default for live traffic (gzip and
    /// deflate 2, br 4, zstd 3). Always within [`Compression::levels`].
    pub levels: CompressLevels,
    /// Responses with a known `Content-Length` below this many bytes are sent as they are.
    pub min_length: u64,
    /// `Content-Type`s compressed (`text/*`, `application/json`, ...); `None` is the built-in
    /// allow-list of text-like types.
    pub types: Option<Vec<String>>,
    /// Longest time compressed output is held back while the response is still streaming;
    /// zero flushes after every chunk.
    pub flush_delay: Duration,
    /// CPU-adaptive compression (`max_cpu = "80%"`): above this share of the workers' CPU,
    /// on-the-fly compression steps down to the fastest level, then to identity. `None` (the
    /// default) always compresses at `levels`. `docs/performance.md` has the design.
    pub max_cpu: Option<CpuShare>,
}

/// A share of the CPU the process's worker threads can use together, as a whole percentage in
/// `1..=100` (so the same value means the same load on 1 or 16 workers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct CpuShare(u8);

impl CpuShare {
    /// `percent` in `1..=100`, else `None`.
    pub const fn from_percent(percent: u8) -> Option<Self> {
        if percent >= 1 && percent <= 100 {
            Some(Self(percent))
        } else {
            None
        }
    }

    /// The share as a percentage, `1..=100`.
    pub const fn percent(self) -> u8 {
        self.0
    }
}

impl Default for Compress {
    fn default() -> Self {
        Self {
            algorithms: vec![Compression::ZSTD, Compression::BR, Compression::GZIP],
            levels: CompressLevels::default(),
            min_length: 256,
            types: None,
            flush_delay: Duration::from_millis(50),
            max_cpu: None,
        }
    }
}

/// A configured level per algorithm (`None`: the algorithm's default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompressLevels {
    pub gzip: Option<u32>,
    pub deflate: Option<u32>,
    pub br: Option<u32>,
    pub zstd: Option<u32>,
}

impl CompressLevels {
    pub const fn get(&self, algorithm: Compression) -> Option<u32> {
        match algorithm.coding() {
            ContentCoding::Gzip => self.gzip,
            ContentCoding::Deflate => self.deflate,
            ContentCoding::Br => self.br,
            ContentCoding::Zstd => self.zstd,
            // Never inside a `Compression`.
            ContentCoding::Identity => None,
        }
    }
}
