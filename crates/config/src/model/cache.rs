//! The response cache's settings: storage zones (`[caches.NAME]`) and a proxy route's `cache`
//! option, which stores the route's responses in one of them.
//!
//! A zone is storage (a memory budget, optionally a disk tier) and what may be kept in it; a
//! route says which zone, under which key, and for how long responses without freshness
//! information stay fresh. Several routes may share one zone, as in nginx (`proxy_cache_path`
//! defines a zone, `proxy_cache` uses it). The defaults follow nginx where it has one.
//! The quick command `sluice reverse-proxy --cache SIZE` builds these with
//! [`CacheZone::memory_only`] and [`RouteCache::new`].

use std::path::PathBuf;
use std::time::Duration;

use http::{HeaderName, Method, StatusCode};

use super::CompressLevels;

/// A named cache storage (`[caches.NAME]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheZone {
    /// The table's key; what a route's `cache.zone` names, and the label in metrics.
    pub name: String,
    /// Bytes of the memory tier (bodies and stored headers). At least 1.
    pub memory: u64,
    /// Responses larger than this are streamed through and not stored. At least 1; without a
    /// disk tier at most `memory`, with one at most the disk's size (larger than `memory`, a
    /// response is stored on disk only). Left out of the file: 8 MiB, or that limit if smaller.
    pub max_object_size: u64,
    /// A second, larger tier on disk; `None` keeps everything in memory.
    pub disk: Option<CacheDisk>,
    /// When a stale response may be served instead of an upstream failure or while it is being
    /// refreshed (nginx `proxy_cache_use_stale`). Empty: never (the default); no duplicates.
    pub use_stale: Vec<UseStale>,
    /// Store responses that carry `Set-Cookie`. Off by default, as in nginx: such a response is
    /// usually one user's, and serving it to another leaks their session.
    pub store_set_cookie: bool,
    /// RFC 9111 §4.2.2 heuristic freshness for responses with `Last-Modified` and no explicit
    /// lifetime: 10% of the time since the modification, at most this long. `None`: off (the
    /// default), such responses are stale at once unless the route's `valid` gives a lifetime.
    pub heuristic: Option<Duration>,
    /// The fleet's shared tier behind memory and disk (`[caches.NAME.shared]`); `None`: this
    /// instance's tiers only.
    pub shared: Option<CacheShared>,
    /// Send the surrogate-key fields (`Surrogate-Key`, `Cache-Tag`, `xkey`) on to clients.
    /// Off by default: they are read and stored for `PURGE /cache/ZONE?tag=`, and removed.
    pub keep_tag_headers: bool,
}

/// `[caches.NAME.shared]`: a Redis (or Valkey, KeyDB, Dragonfly) server that instances of a
/// fleet share, so what one stored another serves. docs/fleet.md says what is kept there and
/// what happens when it is down (every lookup is a miss, never an error or a delay past
/// `deadline`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheShared {
    /// `redis://[user:password@]host[:port][/db]` or `redis+unix:///path/to/socket`.
    pub redis: String,
    /// The most a lookup may take before it counts as a miss. Default 20 ms.
    pub deadline: Duration,
    /// Larger responses stay in this instance's tiers. Default 1 MiB.
    pub max_object_size: u64,
    /// The longest a response is kept there, whatever its freshness and stale windows say.
    /// Default one day.
    pub max_ttl: Duration,
}

impl CacheShared {
    pub const DEFAULT_DEADLINE: Duration = Duration::from_millis(20);
    pub const DEFAULT_MAX_OBJECT_SIZE: u64 = 1024 * 1024;
    pub const DEFAULT_MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);
}

impl CacheZone {
    /// The default memory budget: 64 MiB.
    pub const DEFAULT_MEMORY: u64 = 64 * 1024 * 1024;
    /// The default largest stored response: 8 MiB (larger ones are usually downloads, cheap to
    /// stream and costly to hold).
    pub const DEFAULT_MAX_OBJECT_SIZE: u64 = 8 * 1024 * 1024;
    /// The cap of `heuristic = true`: one day.
    pub const DEFAULT_HEURISTIC_CAP: Duration = Duration::from_secs(24 * 60 * 60);

    /// A zone with every default: 64 MiB of memory, no disk.
    pub fn new(name: impl Into<String>) -> Self {
        Self::memory_only(name, Self::DEFAULT_MEMORY)
    }

    /// A zone of `memory` bytes (at least 1) and no disk, otherwise defaults. The largest stored
    /// response is the default 8 MiB, or `memory` when that is smaller, so that every response
    /// it admits fits.
    pub fn memory_only(name: impl Into<String>, memory: u64) -> Self {
        Self {
            name: name.into(),
            memory,
            max_object_size: Self::DEFAULT_MAX_OBJECT_SIZE.min(memory),
            disk: None,
            use_stale: Vec::new(),
            store_set_cookie: false,
            heuristic: None,
            shared: None,
            keep_tag_headers: false,
        }
    }
}

/// The disk tier of a zone (`disk = { path, size }`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheDisk {
    /// The directory, absolute (resolved against the config file's directory). It exists, or
    /// its parent does and the server creates it at start-up.
    pub path: PathBuf,
    /// Bytes the tier may use. At least 1.
    pub size: u64,
}

/// A condition under which a stale response is served (nginx `proxy_cache_use_stale`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UseStale {
    /// No upstream server could be connected to, or the connection failed before a response.
    Error,
    /// The upstream did not answer in time.
    Timeout,
    /// The upstream answered 500.
    Http500,
    /// The upstream answered 502.
    Http502,
    /// The upstream answered 503.
    Http503,
    /// The upstream answered 504.
    Http504,
    /// Another request is refreshing the entry: answer with the stale one meanwhile instead of
    /// waiting (nginx's `updating`, RFC 5861's stale-while-revalidate without a time limit).
    Updating,
}

impl UseStale {
    pub const ALL: [UseStale; 7] = [
        Self::Error,
        Self::Timeout,
        Self::Http500,
        Self::Http502,
        Self::Http503,
        Self::Http504,
        Self::Updating,
    ];

    /// The word, as written in the config (nginx's).
    pub const fn token(self) -> &'static str {
        match self {
            Self::Error => "error",
            Self::Timeout => "timeout",
            Self::Http500 => "http_500",
            Self::Http502 => "http_502",
            Self::Http503 => "http_503",
            Self::Http504 => "http_504",
            Self::Updating => "updating",
        }
    }

    /// The word's condition, exactly as written (lower case).
    pub fn from_token(token: &str) -> Option<UseStale> {
        Self::ALL.into_iter().find(|u| u.token() == token)
    }

    /// The upstream status this condition covers, for the `http_NNN` ones.
    pub fn status(self) -> Option<StatusCode> {
        match self {
            Self::Http500 => Some(StatusCode::INTERNAL_SERVER_ERROR),
            Self::Http502 => Some(StatusCode::BAD_GATEWAY),
            Self::Http503 => Some(StatusCode::SERVICE_UNAVAILABLE),
            Self::Http504 => Some(StatusCode::GATEWAY_TIMEOUT),
            Self::Error | Self::Timeout | Self::Updating => None,
        }
    }
}

/// A proxy route's response caching (`cache = { zone = "..." }`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteCache {
    /// Name of an entry in [`super::Config::caches`].
    pub zone: String,
    /// What a stored response is looked up by (nginx `proxy_cache_key`), in this order. Never
    /// empty, no duplicates. Default scheme, host, path, query.
    pub key: Vec<CacheKeyPart>,
    /// Lifetimes of responses that carry no freshness information (nginx
    /// `proxy_cache_valid`): at most one per status, in ascending order, then at most one
    /// [`StatusMatch::Any`]. Empty (the default): such responses are not stored, unless the
    /// zone's `heuristic` gives them a lifetime. Look one up with [`Self::fallback_lifetime`].
    pub valid: Vec<FallbackLifetime>,
    /// A request meeting any of these is sent upstream without a lookup; its response may still
    /// be stored (nginx `proxy_cache_bypass`).
    pub bypass: Vec<RequestCondition>,
    /// A request meeting any of these has its response not stored (nginx `proxy_no_cache`).
    pub no_store: Vec<RequestCondition>,
    /// Requests for a key before its response is stored (nginx `proxy_cache_min_uses`), so
    /// that one-off URLs do not push out popular ones. At least 1, the default.
    pub min_uses: u32,
    /// How long a request waits for another request's in-flight miss on the same key before
    /// going upstream itself (request collapsing, nginx `proxy_cache_lock_timeout`). `None`:
    /// collapsing off, every miss goes upstream (`"0s"` in the file). Default 5 s.
    pub lock_timeout: Option<Duration>,
    /// Which request methods use the cache.
    pub methods: CacheMethods,
    /// The response header saying HIT, MISS, ...; `None` sends none. Default `x-cache-status`.
    pub status_header: Option<HeaderName>,
    /// Levels of the compressed variants stored once per coding when the route also compresses
    /// (compress once, serve many): higher than on-the-fly levels, since the cost is paid once
    /// per stored response. Every algorithm has a level here (the defaults are filled in:
    /// [`Self::DEFAULT_LEVELS`]), each within [`sluice_core::Compression::levels`].
    pub levels: CompressLevels,
}

impl RouteCache {
    /// The default `lock_timeout`: 5 s (nginx's default).
    pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(5);
    /// The default levels of stored variants: gzip and deflate 6, br 9, zstd 12.
    pub const DEFAULT_LEVELS: CompressLevels = CompressLevels {
        gzip: Some(6),
        deflate: Some(6),
        br: Some(9),
        zstd: Some(12),
    };

    /// Caching in `zone` with every default.
    pub fn new(zone: impl Into<String>) -> Self {
        Self {
            zone: zone.into(),
            key: Self::default_key(),
            valid: Vec::new(),
            bypass: Vec::new(),
            no_store: Vec::new(),
            min_uses: 1,
            lock_timeout: Some(Self::DEFAULT_LOCK_TIMEOUT),
            methods: CacheMethods::default(),
            status_header: Some(HeaderName::from_static("x-cache-status")),
            levels: Self::DEFAULT_LEVELS,
        }
    }

    /// The default key: scheme, host, path, query (the request's URL).
    pub fn default_key() -> Vec<CacheKeyPart> {
        vec![
            CacheKeyPart::Scheme,
            CacheKeyPart::Host,
            CacheKeyPart::Path,
            CacheKeyPart::Query,
        ]
    }

    /// The `valid` lifetime of a response with `status`: its own entry, else `any`'s.
    pub fn fallback_lifetime(&self, status: StatusCode) -> Option<Duration> {
        let of = |wanted: StatusMatch| {
            self.valid
                .iter()
                .find(|v| v.status == wanted)
                .map(|v| v.lifetime)
        };
        of(StatusMatch::Code(status)).or_else(|| of(StatusMatch::Any))
    }
}

/// One part of a cache key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CacheKeyPart {
    /// `http` or `https`, as the client used.
    Scheme,
    /// The request's host (without port, lowercase).
    Host,
    /// The request path, as received.
    Path,
    /// The query string, as received (empty when there is none).
    Query,
    /// The request method. Off by default: HEAD is answered from a stored GET.
    Method,
    /// A request header's value (all values, in order; empty when absent).
    Header(HeaderName),
    /// A request cookie's value (empty when absent). Names are case-sensitive.
    Cookie(String),
}

/// A request header or cookie that, when present with a value other than empty or `"0"`, turns
/// part of caching off for the request (nginx's `proxy_cache_bypass` / `proxy_no_cache`
/// semantics).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RequestCondition {
    Header(HeaderName),
    /// Names are case-sensitive.
    Cookie(String),
}

/// The lifetime a status gets when its response carries no freshness information.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FallbackLifetime {
    pub status: StatusMatch,
    /// Zero: not stored.
    pub lifetime: Duration,
}

/// Which responses a [`FallbackLifetime`] is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusMatch {
    Code(StatusCode),
    /// Every status without an entry of its own.
    Any,
}

/// The request methods a route's cache serves. Only safe methods whose responses a later GET
/// may reuse: GET, and HEAD answered from a stored GET (RFC 9110 §9.3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CacheMethods {
    /// GET only: HEAD requests go upstream.
    Get,
    /// GET, and HEAD answered from a stored GET's headers; the default.
    #[default]
    GetAndHead,
}

impl CacheMethods {
    /// Whether a request with `method` uses the cache.
    pub fn allows(self, method: &Method) -> bool {
        *method == Method::GET || (self == Self::GetAndHead && *method == Method::HEAD)
    }
}
