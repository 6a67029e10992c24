//! A route's compression dictionaries (`dictionary = ...`, RFC 9842): which responses are
//! offered to browsers as dictionaries, and the bounds on what sluice keeps and makes.
//! `docs/compression.md` ("Dictionaries") describes the behaviour.

use sluice_core::DictionaryCoding;
use sluice_core::match_pattern::MatchPattern;

/// `dictionary = "auto"` or `dictionary = { match = "/assets/app.*.js", ... }` of a route.
#[derive(Debug, Clone)]
pub struct Dictionaries {
    pub mode: DictionaryMode,
    /// The dictionary codings made, in order of preference when a client accepts several
    /// equally. Default `dcz`, `dcb`.
    pub codings: Vec<DictionaryCoding>,
    /// zstd level of `dcz` deltas (default 19) and brotli quality of `dcb` (default 11): a
    /// delta is made once and served many times, so high levels pay.
    pub dcz_level: u32,
    pub dcb_level: u32,
    /// The largest response kept as a dictionary or compressed with one (default 4 MiB).
    pub max_size: u64,
    /// Memory for this route's dictionaries and deltas together (default 64 MiB).
    pub memory: u64,
    /// Deltas kept per response: one per dictionary a client presented, most recent first
    /// (default 4).
    pub deltas_per_response: usize,
}

impl Dictionaries {
    pub const DEFAULT_MAX_SIZE: u64 = 4 * 1024 * 1024;
    pub const DEFAULT_MEMORY: u64 = 64 * 1024 * 1024;
    pub const DEFAULT_DELTAS_PER_RESPONSE: usize = 4;
    pub const DEFAULT_DCZ_LEVEL: u32 = 19;
    pub const DEFAULT_DCB_LEVEL: u32 = 11;

    /// The defaults around `mode`.
    pub fn new(mode: DictionaryMode) -> Self {
        Self {
            mode,
            codings: DictionaryCoding::ALL.to_vec(),
            dcz_level: Self::DEFAULT_DCZ_LEVEL,
            dcb_level: Self::DEFAULT_DCB_LEVEL,
            max_size: Self::DEFAULT_MAX_SIZE,
            memory: Self::DEFAULT_MEMORY,
            deltas_per_response: Self::DEFAULT_DELTAS_PER_RESPONSE,
        }
    }
}

/// Which responses become dictionaries.
#[derive(Debug, Clone)]
pub enum DictionaryMode {
    /// `match = "..."`: responses to requests this pattern covers carry `Use-As-Dictionary`
    /// with it, and sluice keeps them to compress later responses it covers.
    Managed {
        pattern: MatchPattern,
        /// `match_dest`: request destinations (`Sec-Fetch-Dest`) the dictionary is for; empty
        /// is every one.
        match_dest: Vec<String>,
        /// `id`: sent back by clients in `Dictionary-ID`.
        id: Option<String>,
    },
    /// `"auto"`: versioned resources (a content hash or version in the path, a `?v=` query)
    /// are recognised, and the version a client holds is the dictionary for the next.
    Auto,
}
