//! Process-wide settings (`[server]`), logging (`[log]`) and the admin listener (`[admin]`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::TrustedProxies;

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
