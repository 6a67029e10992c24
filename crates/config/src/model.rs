//! The typed, validated configuration: what the server runs on.
//!
//! Everything here has been checked: addresses parse, files exist, names refer to things that are
//! defined, and a route has exactly one action. Code that receives a [`Config`] never re-validates.
//! The quick commands (`sluice file-server`, `sluice reverse-proxy`) build these types directly.
//! The response cache's types are in `model/cache.rs`, rate limits in `model/rate_limit.rs`,
//! both re-exported here.

mod cache;
mod rate_limit;

pub use cache::*;
pub use rate_limit::*;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use sluice_core::{Compression, ContentCoding, SidecarCoding};

/// A whole, valid configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub server: ServerSettings,
    pub log: LogSettings,
    pub listeners: Vec<Listener>,
    /// Routes in file order; the first that matches a request wins.
    pub routes: Vec<Route>,
    pub upstreams: Vec<Upstream>,
    /// Response cache storage zones (`[caches.NAME]`), sorted by name. A zone no route uses is
    /// allowed (and holds nothing).
    pub caches: Vec<CacheZone>,
    /// The admin listener (`/metrics`); `None` when not configured.
    pub admin: Option<Admin>,
}

/// The admin listener (`[admin]`): Prometheus metrics at `/metrics`. Keep it on a private address.
#[derive(Debug, Clone)]
pub struct Admin {
    pub address: SocketAddr,
}

/// Process-wide settings (`[server]`).
#[derive(Debug, Clone)]
pub struct ServerSettings {
    /// Runtime worker threads; `None` means one per core.
    pub workers: Option<usize>,
    /// How long in-flight requests may take to finish after SIGTERM/SIGINT.
    pub shutdown_timeout: Duration,
    /// Value of the `Server` response header; `None` sends none.
    pub server_header: Option<http::HeaderValue>,
    /// Peers whose `X-Forwarded-*` headers are believed (`trusted_proxies`), for listeners that
    /// do not name their own; empty: nobody's.
    pub trusted_proxies: TrustedProxies,
    /// Where `serve` writes its process id (removed at exit), and where `sluice reload` finds
    /// the process to signal. `None`: no pid file.
    pub pid_file: Option<PathBuf>,
    /// Client connections open at once over all listeners; at the limit every listener stops
    /// accepting (the kernel's backlog holds new connections) until one closes.
    pub max_connections: usize,
}

impl ServerSettings {
    /// 25,000: room for two and a half busy listeners at their own default, well under the
    /// usual `ulimit -n` of a server (a proxied connection also holds an upstream socket).
    pub const DEFAULT_MAX_CONNECTIONS: usize = 25_000;
}

impl Default for ServerSettings {
    fn default() -> Self {
        Self {
            workers: None,
            shutdown_timeout: Duration::from_secs(30),
            server_header: Some(http::HeaderValue::from_static("sluice")),
            trusted_proxies: TrustedProxies::default(),
            pid_file: None,
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// Logging (`[log]`).
#[derive(Debug, Clone)]
pub struct LogSettings {
    /// A `tracing` filter for diagnostics on stderr, e.g. `"info"` or `"sluice=debug"`.
    pub level: String,
    pub access: AccessLog,
    pub format: AccessLogFormat,
    /// Access-log lines waiting for the writer; when the destination is slower than the traffic
    /// and this many are queued, further lines are dropped (and counted), never waited for.
    pub access_queue: usize,
}

impl Default for LogSettings {
    fn default() -> Self {
        Self {
            level: "info".into(),
            access: AccessLog::Stdout,
            format: AccessLogFormat::Combined,
            access_queue: 16 * 1024,
        }
    }
}

/// Where access log lines go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessLog {
    Off,
    Stdout,
    Stderr,
    File(PathBuf),
}

/// How access log lines look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessLogFormat {
    /// nginx's `combined` format.
    Combined,
    /// One JSON object per line.
    Json,
}

/// A listening socket (`[[listeners]]`).
#[derive(Debug, Clone)]
pub struct Listener {
    /// Name used by routes' `listeners = [...]` and in logs; defaults to the address.
    pub name: String,
    pub address: SocketAddr,
    pub protocols: Protocols,
    pub tls: Option<Tls>,
    pub limits: ListenerLimits,
    /// Every connection starts with a PROXY protocol header (v1 or v2) from a load balancer,
    /// and its source address is the client's. Off by default: with it on, whoever reaches
    /// the port can claim any client address.
    pub proxy_protocol: bool,
    /// Peers whose `X-Forwarded-For`, `-Proto` and `-Host` are believed (the listener's own
    /// `trusted_proxies`, or else `[server]`'s); from any other peer they are replaced.
    pub trusted_proxies: TrustedProxies,
}

/// `trusted_proxies = ["10.0.0.0/8", "192.0.2.7"]`: the addresses (CIDR blocks) of proxies in
/// front of sluice, as nginx's `set_real_ip_from`. Empty (the default) trusts nobody.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(pub Vec<ipnet::IpNet>);

impl TrustedProxies {
    /// Whether `ip` is one of the trusted proxies. An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`,
    /// how a dual-stack socket shows an IPv4 peer) counts as its IPv4 address.
    pub fn contains(&self, ip: std::net::IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.0.iter().any(|net| net.contains(&ip))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Listener {
    /// A plain-text listener offering HTTP/1.1 and h2c with default limits.
    pub fn plain(address: SocketAddr) -> Self {
        Self {
            name: address.to_string(),
            address,
            protocols: Protocols::default(),
            tls: None,
            limits: ListenerLimits::default(),
            proxy_protocol: false,
            trusted_proxies: TrustedProxies::default(),
        }
    }
}

/// Which HTTP versions a listener speaks. With TLS these are the ALPN protocols offered; without
/// TLS, `http2` means HTTP/2 by prior knowledge (h2c) on the same port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Protocols {
    pub http1: bool,
    pub http2: bool,
}

impl Default for Protocols {
    fn default() -> Self {
        Self {
            http1: true,
            http2: true,
        }
    }
}

/// Connection limits and timeouts of a listener.
#[derive(Debug, Clone)]
pub struct ListenerLimits {
    /// Time allowed for a client to send a request's headers (slowloris guard).
    pub header_read_timeout: Duration,
    /// How long an idle HTTP/1.1 keep-alive connection (or an HTTP/2 connection with no
    /// stream) stays open.
    pub idle_timeout: Duration,
    /// Maximum size of a request's header block, in bytes.
    pub max_header_size: usize,
    /// Maximum number of request headers.
    pub max_headers: usize,
    /// Maximum concurrent HTTP/2 streams per connection.
    pub max_concurrent_streams: u32,
    /// Time allowed for a TLS handshake.
    pub tls_handshake_timeout: Duration,
    /// Connections open at once on this listener; at the limit it stops accepting until one
    /// closes (the kernel's backlog holds the rest).
    pub max_connections: usize,
    /// Longest request target (path and query, or the whole absolute URI), in bytes (414).
    pub max_uri_length: usize,
    /// Most content codings a request's `Content-Encoding` may stack (415 beyond).
    pub max_content_codings: usize,
    /// HTTP/2: send a PING after this long without a frame from the client; `None`: never.
    pub h2_keep_alive_interval: Option<Duration>,
    /// HTTP/2: close the connection when a PING is not acknowledged within this.
    pub h2_keep_alive_timeout: Duration,
}

impl Default for ListenerLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(75),
            max_header_size: 64 * 1024,
            max_headers: 100,
            max_concurrent_streams: 250,
            tls_handshake_timeout: Duration::from_secs(10),
            max_connections: 10_000,
            max_uri_length: 8 * 1024,
            max_content_codings: 2,
            h2_keep_alive_interval: Some(Duration::from_secs(60)),
            h2_keep_alive_timeout: Duration::from_secs(20),
        }
    }
}

/// TLS on a listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tls {
    /// A certificate for `hosts` signed by a throw-away CA, made in memory at start-up.
    SelfSigned { hosts: Vec<String> },
    /// Certificates from PEM files. `default` is served when no SNI entry matches.
    Files {
        default: CertFiles,
        sni: Vec<SniCertificate>,
    },
}

/// A PEM certificate chain and its private key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// A certificate chosen when the client's SNI matches one of `hosts` (exact or `*.suffix`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SniCertificate {
    pub hosts: Vec<HostMatch>,
    pub files: CertFiles,
}

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
    pub action: Action,
    /// Compress responses of this route (whatever the action); `None` sends them as they are.
    pub compress: Option<Compress>,
    /// Cache responses of this route in a zone of [`Config::caches`]; only on proxy routes.
    /// `None`: nothing is stored or served from a cache.
    pub cache: Option<RouteCache>,
    /// Limit each client's request rate on this route; `None`: no limit.
    pub rate_limit: Option<RateLimit>,
    /// How large a request body may be and how long it may take to arrive.
    pub body: BodyLimits,
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

/// Forward to an upstream group.
#[derive(Debug, Clone)]
pub struct Proxy {
    /// Name of an entry in [`Config::upstreams`].
    pub upstream: String,
    /// What `Host` the upstream sees.
    pub host: HostHeader,
    /// Edits to the request before it is forwarded (after hop-by-hop removal and X-Forwarded-*).
    pub request_headers: HeaderEdits,
    /// Edits to the upstream's response before it is sent downstream.
    pub response_headers: HeaderEdits,
    /// Decode compressed request bodies before forwarding them (seed 000); `None` forwards them
    /// as they are.
    pub decompress_requests: Option<DecompressRequests>,
    /// How the forwarded request's path is rewritten; `None` forwards it as received.
    pub rewrite: Option<PathRewrite>,
    /// Which path goes upstream: the client's, byte for byte (the default), or its normal form.
    pub forward_path: ForwardPath,
    /// Which HTTP Upgrade protocols (WebSocket by default) are forwarded, and how long their
    /// tunnels may sit idle.
    pub upgrade: Upgrade,
}

/// `forward_path` of a proxy: the path the upstream receives. Routing always uses the normal
/// form; this only says what is sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ForwardPath {
    /// `"as_received"`: the path as the client wrote it (nginx's `proxy_pass` without a URI).
    #[default]
    AsReceived,
    /// `"normalized"`: the normal form the route matched (`/%61dmin/../x` goes as `/x`), for
    /// upstreams that must see exactly what sluice routed on.
    Normalized,
}

/// `upgrade` and `tunnel_idle_timeout` of a proxy: the protocols a client may switch to through
/// this route (RFC 9110 §7.8; WebSocket over HTTP/2 too, RFC 8441), and the tunnel's idle limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upgrade {
    pub protocols: UpgradeProtocols,
    /// A tunnel with no byte in either direction for this long is closed. Default 10 minutes:
    /// longer than any request timeout, as WebSocket applications ping every minute or so.
    pub idle_timeout: Duration,
}

impl Upgrade {
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(600);
}

impl Default for Upgrade {
    fn default() -> Self {
        Self {
            protocols: UpgradeProtocols::default(),
            idle_timeout: Self::DEFAULT_IDLE_TIMEOUT,
        }
    }
}

/// Which protocols an `Upgrade` request may switch to. `h2c` is never among them: it upgrades
/// one connection to HTTP/2, which is hop-by-hop (RFC 9113 §3.1 even deprecates it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpgradeProtocols {
    /// `upgrade = false`: `Upgrade` is dropped like any hop-by-hop field.
    None,
    /// `upgrade = true`: any protocol but `h2c`.
    Any,
    /// `upgrade = ["websocket", ...]`: these protocol names (lowercase; matched without case and
    /// without a `/version`). The default is `["websocket"]`.
    Only(Vec<String>),
}

impl Default for UpgradeProtocols {
    fn default() -> Self {
        Self::Only(vec!["websocket".to_owned()])
    }
}

impl UpgradeProtocols {
    /// Whether a client may switch to `protocol` (one member of `Upgrade`, maybe with a
    /// `/version`, or an HTTP/2 `:protocol`) through this route.
    pub fn allows(&self, protocol: &str) -> bool {
        let name = protocol.split('/').next().unwrap_or_default().trim();
        if name.is_empty() || name.eq_ignore_ascii_case("h2c") || name.eq_ignore_ascii_case("h2") {
            return false;
        }
        match self {
            Self::None => false,
            Self::Any => true,
            Self::Only(names) => names.iter().any(|n| n.eq_ignore_ascii_case(name)),
        }
    }
}

/// `strip_prefix` / `replace_prefix` of a proxy: the path the upstream sees. Only the forwarded
/// request changes (route matching and the cache key keep the normal-form path, the access log
/// the client's); the query and the path's percent-encoding are kept byte for byte. Applied to
/// the path being forwarded (see [`ForwardPath`]); when that is the received one and only its
/// normal form starts with `strip_prefix`, the normal form is rewritten and forwarded.
///
/// Both prefixes start with `/`, do not end with one, and hold only characters a URI path may
/// carry (no `?`, `#` or dot segments). At least one of them is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathRewrite {
    /// Removed from paths that equal it or continue with `/` after it (`/api` strips `/api` and
    /// `/api/users`, not `/apiary`); other paths are forwarded unchanged, `replace_prefix` or not.
    pub strip_prefix: Option<String>,
    /// Put where `strip_prefix` was removed, or, without `strip_prefix`, before every path.
    pub replace_prefix: Option<String>,
}

/// Limits for decoding request bodies: beyond either, the request is refused with 413.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecompressRequests {
    /// Most decoded bytes per request body.
    pub max_size: u64,
    /// Most decoded bytes per encoded byte.
    pub max_ratio: u64,
}

impl Default for DecompressRequests {
    fn default() -> Self {
        Self {
            max_size: 10 * 1024 * 1024,
            max_ratio: 100,
        }
    }
}

impl Proxy {
    /// Forward to `upstream` with the client's `Host` and no header edits.
    pub fn to(upstream: impl Into<String>) -> Self {
        Self {
            upstream: upstream.into(),
            host: HostHeader::Pass,
            request_headers: HeaderEdits::default(),
            response_headers: HeaderEdits::default(),
            decompress_requests: None,
            rewrite: None,
            forward_path: ForwardPath::AsReceived,
            upgrade: Upgrade::default(),
        }
    }
}

/// The `Host` header sent upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostHeader {
    /// The client's own `Host` (nginx `proxy_set_header Host $host`); the default.
    Pass,
    /// The upstream server's address (`host:port`; `localhost` for unix sockets).
    Upstream,
    /// A fixed value.
    Set(http::HeaderValue),
}

/// Header edits: `remove` first, then `set` (replacing any existing values).
#[derive(Debug, Clone, Default)]
pub struct HeaderEdits {
    pub set: Vec<(http::HeaderName, http::HeaderValue)>,
    pub remove: Vec<http::HeaderName>,
}

impl HeaderEdits {
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.remove.is_empty()
    }
}

/// A group of servers a proxy route forwards to (`[upstreams.NAME]`). `PartialEq` so a reload
/// can tell an unchanged group (kept running, with its pool and health state) from a changed one.
#[derive(Debug, Clone, PartialEq)]
pub struct Upstream {
    pub name: String,
    pub servers: Vec<UpstreamServer>,
    pub policy: BalancePolicy,
    pub keepalive: Keepalive,
    pub timeouts: UpstreamTimeouts,
    pub retry: Retry,
    /// Active HTTP health checks; `None` means passive checks only.
    pub health_check: Option<HealthCheck>,
    /// Speak HTTP/2 to the servers instead of HTTP/1.1: prior knowledge (h2c) in plain text,
    /// ALPN `h2` over TLS.
    pub http2: bool,
    /// Reach the servers over TLS (`https://` servers or a `tls` table); `None` is plain text.
    pub tls: Option<UpstreamTls>,
    /// Start every connection with a PROXY protocol v2 header carrying the client's address.
    /// Connections then carry one client's requests only (see docs/config.md).
    pub send_proxy_protocol: bool,
    /// Requests in progress per server, and the queue of those waiting for one.
    pub max_conns: MaxConns,
}

/// `max_conns`, `queue_size`, `queue_timeout` of an upstream group (nginx `max_conns` +
/// `queue`, HAProxy `maxconn` + `timeout queue`): each server takes at most `per_server`
/// requests at once; more wait in the server's queue, and get 503 when it is full or their
/// wait times out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaxConns {
    /// Requests in progress per server; `None`: no limit (the default, like nginx).
    pub per_server: Option<u32>,
    /// Requests waiting per server; 0: none wait, a full server answers 503 at once.
    pub queue_size: u32,
    /// Longest wait in the queue.
    pub queue_timeout: Duration,
}

impl Default for MaxConns {
    fn default() -> Self {
        Self {
            per_server: None,
            queue_size: 100,
            queue_timeout: Duration::from_secs(10),
        }
    }
}

impl Upstream {
    /// A group with default settings.
    pub fn new(name: impl Into<String>, servers: Vec<UpstreamServer>) -> Self {
        Self {
            name: name.into(),
            servers,
            policy: BalancePolicy::default(),
            keepalive: Keepalive::default(),
            timeouts: UpstreamTimeouts::default(),
            retry: Retry::default(),
            health_check: None,
            http2: false,
            tls: None,
            send_proxy_protocol: false,
            max_conns: MaxConns::default(),
        }
    }
}

/// TLS to the servers of a group. The default verifies certificates against the system's
/// roots, with each server's host as the name (SNI and verification).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpstreamTls {
    /// A PEM file of CA certificates trusted instead of the system's roots.
    pub ca: Option<PathBuf>,
    /// The name sent as SNI and verified in the certificate, instead of each server's host.
    pub server_name: Option<String>,
    /// A client certificate (PEM chain) and its key, for servers that require one (mTLS).
    pub client_cert: Option<CertFiles>,
    /// Accept any certificate: no protection against whoever sits on the path. `sluice check`
    /// warns about it.
    pub insecure_skip_verify: bool,
}

/// How a group picks a server for a request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum BalancePolicy {
    /// Smooth weighted round robin (nginx's algorithm); plain round robin when weights are equal.
    #[default]
    RoundRobin,
    /// Fewest in-flight requests (ties broken by weight, then round robin).
    LeastConnections,
    /// Two random servers, the one with fewer in-flight requests wins.
    PowerOfTwoChoices,
    /// Consistent hash of a request key: the same key goes to the same server while it is up.
    Hash(HashKey),
}

/// What the hash policy hashes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HashKey {
    ClientIp,
    /// The path and query.
    Uri,
    Header(http::HeaderName),
    Cookie(String),
}

/// Keep-alive connection pool settings, per server.
#[derive(Debug, Clone, PartialEq)]
pub struct Keepalive {
    /// Idle connections kept per server (nginx `keepalive`); 0 disables reuse.
    pub max_idle: usize,
    /// How long an idle connection is kept.
    pub idle_timeout: Duration,
    /// Requests sent over one connection before it is closed (nginx `keepalive_requests`);
    /// 0 = no limit, the default: nginx recycles connections to bound memory that grows per
    /// connection, which hyper's pool does not; a limit helps rebalance behind L4 balancers.
    pub max_requests: u32,
}

impl Default for Keepalive {
    fn default() -> Self {
        Self {
            max_idle: 64,
            idle_timeout: Duration::from_secs(60),
            max_requests: 0,
        }
    }
}

/// Upstream timeouts.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamTimeouts {
    /// Establishing a connection.
    pub connect: Duration,
    /// From the request being sent until the response headers arrive (504 when exceeded).
    pub response_header: Duration,
    /// Longest pause while reading the response body or writing the request body.
    pub idle: Duration,
}

impl Default for UpstreamTimeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(5),
            response_header: Duration::from_secs(60),
            idle: Duration::from_secs(60),
        }
    }
}

/// Retrying on another server when a connection fails or is reset before any response.
#[derive(Debug, Clone, PartialEq)]
pub struct Retry {
    /// Total attempts per request, the first included (1 = no retry).
    pub tries: u32,
    /// No new attempt starts after this much time since the first.
    pub budget: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Self {
            tries: 3,
            budget: Duration::from_secs(10),
        }
    }
}

/// Active HTTP health checks of every server of a group.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthCheck {
    pub path: String,
    pub interval: Duration,
    pub timeout: Duration,
    /// Statuses that count as healthy (default: 200..=399).
    pub expected_status: std::ops::RangeInclusive<u16>,
    /// Consecutive successes that bring a server back.
    pub rise: u32,
    /// Consecutive failures that take a server out.
    pub fall: u32,
}

impl Default for HealthCheck {
    fn default() -> Self {
        Self {
            path: "/".into(),
            interval: Duration::from_secs(5),
            timeout: Duration::from_secs(2),
            expected_status: 200..=399,
            rise: 2,
            fall: 3,
        }
    }
}

/// One server of an upstream group.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamServer {
    pub address: UpstreamAddress,
    /// Relative share of traffic (>= 1).
    pub weight: u32,
    /// Failures within `fail_timeout` that take the server out for `fail_timeout` (0 = never).
    pub max_fails: u32,
    pub fail_timeout: Duration,
    /// Takes traffic only when every primary server is down.
    pub backup: bool,
    /// Marked down by the operator: never used.
    pub down: bool,
}

impl UpstreamServer {
    /// A server with nginx's defaults (weight 1, max_fails 1, fail_timeout 10s).
    pub fn new(address: UpstreamAddress) -> Self {
        Self {
            address,
            weight: 1,
            max_fails: 1,
            fail_timeout: Duration::from_secs(10),
            backup: false,
            down: false,
        }
    }
}

/// Where an upstream server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamAddress {
    /// `host:port`; the host may be a name, resolved when connecting.
    Tcp(String),
    /// `unix:/path/to.sock`.
    Unix(PathBuf),
}
