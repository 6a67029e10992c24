//! A route (`[[routes]]`): how it matches requests, its body limits and its action (static
//! files, a fixed response, a redirect; a proxy is in `proxy.rs`).

use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use sluice_core::SidecarCoding;

use super::{
    Access, Compress, Dictionaries, MaxAge, Proxy, RateLimit, ResponseHeaders, RouteCache,
    RouteMatchers,
};

/// A route (`[[routes]]`): which requests it takes, and what it does with them.
#[derive(Debug, Clone)]
pub struct Route {
    /// Name in logs and metrics; defaults to `route N` (1-based, file order).
    pub name: String,
    /// Any of these hosts; empty matches every host.
    pub hosts: Vec<HostMatch>,
    pub path: PathMatch,
    /// Only requests arriving on these listeners (by name); empty means all.
    pub listeners: Vec<String>,
    /// Method, header, query, client and path-regex matchers (and their `not` forms).
    pub matchers: RouteMatchers,
    /// `allow` / `deny`, `basic_auth`, `forward_auth`.
    pub access: Access,
    pub action: Action,
    /// Compress responses of this route (whatever the action); `None` sends them as they are.
    pub compress: Option<Compress>,
    /// Cache responses of this route in a zone of [`Config::caches`](super::Config::caches); only on proxy routes.
    /// `None`: nothing is stored or served from a cache.
    pub cache: Option<RouteCache>,
    /// Limit each client's request rate on this route; `None`: no limit.
    pub rate_limit: Option<RateLimit>,
    /// How large a request body may be and how long it may take to arrive.
    pub body: BodyLimits,
    /// Edits to the route's responses, whatever made them; `None`: none.
    pub response_headers: Option<ResponseHeaders>,
    /// Compression dictionaries (RFC 9842) made and used on this route; `None`: responses of
    /// an origin that does RFC 9842 itself pass through, and sluice makes none.
    pub dictionary: Option<Dictionaries>,
}

/// Request body limits of a route (`max_body_size`, `body_timeout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyLimits {
    /// Most bytes of request body as the client sends it (before any decoding); `None`: no
    /// limit. Over it: 413.
    pub max_size: Option<u64>,
    /// Longest time from the request head to the body's last byte; `None`: no limit. Over it:
    /// 408.
    pub timeout: Option<Duration>,
}

impl Default for BodyLimits {
    /// 10 MiB (nginx's 1 MiB `client_max_body_size` is famously too small for APIs and
    /// uploads; 10 MiB fits JSON and form posts with room, and bounds what a route accepts by
    /// default), and 5 minutes: 10 MiB at 300 kbit/s, a slow mobile uplink.
    fn default() -> Self {
        Self {
            max_size: Some(10 * 1024 * 1024),
            timeout: Some(Duration::from_secs(300)),
        }
    }
}
/// How a route matches the `Host` (or `:authority`), compared without port and case-insensitively.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostMatch {
    /// `example.com`: exactly this host (stored lowercase).
    Exact(String),
    /// `*.example.com`: any host ending in `.example.com` (stored as `.example.com`, lowercase);
    /// not `example.com` itself.
    Suffix(String),
}

impl HostMatch {
    /// Whether `host` (lowercase, without port) matches.
    pub fn matches(&self, host: &str) -> bool {
        match self {
            HostMatch::Exact(h) => h == host,
            HostMatch::Suffix(s) => host.len() > s.len() && host.ends_with(s.as_str()),
        }
    }
}

/// How a route matches the request path: its normal form (RFC 3986 §6.2.2: unreserved
/// characters decoded, dot segments removed; see `sluice_core::uri_path`), which the configured
/// path is in too (validation refuses one that is not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathMatch {
    /// Exactly this path.
    Exact(String),
    /// Paths starting with this string (`"/"` matches everything).
    Prefix(String),
}

impl PathMatch {
    pub fn matches(&self, path: &str) -> bool {
        match self {
            PathMatch::Exact(p) => p == path,
            PathMatch::Prefix(p) => path.starts_with(p.as_str()),
        }
    }
}

/// What a route does. Later capabilities add variants; every match on it is in the server's
/// pipeline.
#[derive(Debug, Clone)]
pub enum Action {
    Static(StaticFiles),
    Respond(FixedResponse),
    Redirect(Redirect),
    Proxy(Proxy),
}

/// Serve files from a directory.
#[derive(Debug, Clone)]
pub struct StaticFiles {
    /// The served directory, absolute (resolved against the config file's directory).
    pub root: PathBuf,
    /// File names tried, in order, when a directory is requested.
    pub index: Vec<String>,
    /// Remove the route's path prefix before mapping to a file (nginx `alias`); default keeps it
    /// (nginx `root`).
    pub strip_prefix: bool,
    /// Follow symbolic links that lead outside `root`. Off by default: such links answer 404.
    pub follow_symlinks_outside_root: bool,
    /// Serve `file.zst` / `file.br` / `file.gz` beside a file to clients that accept that
    /// coding, most preferred first. Empty: off (the default).
    pub precompressed: Vec<SidecarCoding>,
    /// Bytes of small files (each at most 256 KiB) kept in memory for this route, served
    /// without touching the disk while they stay unchanged. 0: off.
    pub memory_cache: u64,
    /// How long a file in the memory cache is served without a `stat` of its paths after one
    /// found them unchanged (at most [`Self::MAX_MEMORY_CACHE_RECHECK`]); zero: before every hit.
    pub memory_cache_recheck: Duration,
    /// Send memory-cached files over plain HTTP/1.1 with `sendfile(2)` from the file instead of
    /// copying them from memory (nginx's `sendfile`). On by default.
    pub sendfile: bool,
    /// The `Cache-Control` files are sent with (nginx's `expires`); `None`: none.
    pub max_age: Option<MaxAge>,
}

impl StaticFiles {
    /// The default of `memory_cache`: 32 MiB, about 400 pages of 75 KB.
    pub const DEFAULT_MEMORY_CACHE: u64 = 32 * 1024 * 1024;
    /// The default of `memory_cache_recheck`: a change is seen within 100 ms.
    pub const DEFAULT_MEMORY_CACHE_RECHECK: Duration = Duration::from_millis(100);
    /// The longest `memory_cache_recheck`: entries are looked up afresh after 1 s anyway.
    pub const MAX_MEMORY_CACHE_RECHECK: Duration = Duration::from_secs(1);

    pub fn new(root: PathBuf) -> Self {
        Self {
            root,
            index: vec!["index.html".into()],
            strip_prefix: false,
            follow_symlinks_outside_root: false,
            precompressed: Vec::new(),
            memory_cache: Self::DEFAULT_MEMORY_CACHE,
            memory_cache_recheck: Self::DEFAULT_MEMORY_CACHE_RECHECK,
            sendfile: true,
            max_age: None,
        }
    }
}

/// Answer with a fixed status, headers and body.
#[derive(Debug, Clone)]
pub struct FixedResponse {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// Redirect to `to`, where `{uri}` is replaced with the request's path and query, `{path}` with
/// its path, `{host}` with its host.
#[derive(Debug, Clone)]
pub struct Redirect {
    pub to: String,
    /// 301, 302, 303, 307 or 308; default 302 (a permanent redirect is cached by browsers for
    /// good, so it must be asked for).
    pub status: StatusCode,
}
