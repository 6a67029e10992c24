//! The typed, validated configuration: what the server runs on.
//!
//! Everything here has been checked: addresses parse, files exist, names refer to things that are
//! defined, and a route has exactly one action. Code that receives a [`Config`] never re-validates.
//! The quick commands (`sluice file-server`, `sluice reverse-proxy`) build these types directly.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, StatusCode};

/// A whole, valid configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub server: ServerSettings,
    pub log: LogSettings,
    pub listeners: Vec<Listener>,
    /// Routes in file order; the first that matches a request wins.
    pub routes: Vec<Route>,
    pub upstreams: Vec<Upstream>,
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
}

impl Default for ServerSettings {
    fn default() -> Self {
        Self {
            workers: None,
            shutdown_timeout: Duration::from_secs(30),
            server_header: Some(http::HeaderValue::from_static("sluice")),
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
}

impl Default for LogSettings {
    fn default() -> Self {
        Self {
            level: "info".into(),
            access: AccessLog::Stdout,
            format: AccessLogFormat::Combined,
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
        }
    }
}

/// TLS on a listener.
#[derive(Debug, Clone)]
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
#[derive(Debug, Clone)]
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

/// How a route matches the request path (before percent-decoding).
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
}

impl StaticFiles {
    pub fn new(root: PathBuf) -> Self {
        Self {
            root,
            index: vec!["index.html".into()],
            strip_prefix: false,
            follow_symlinks_outside_root: false,
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
}

/// A group of servers a proxy route forwards to (`[upstreams.NAME]`).
#[derive(Debug, Clone)]
pub struct Upstream {
    pub name: String,
    pub servers: Vec<UpstreamServer>,
}

/// One server of an upstream group.
#[derive(Debug, Clone)]
pub struct UpstreamServer {
    pub address: UpstreamAddress,
    /// Relative share of traffic (>= 1).
    pub weight: u32,
}

/// Where an upstream server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamAddress {
    /// `host:port`; the host may be a name, resolved when connecting.
    Tcp(String),
    /// `unix:/path/to.sock`.
    Unix(PathBuf),
}
