//! An upstream group (`[upstreams.NAME]`): its servers, balancing, keep-alive, timeouts,
//! retries, health checks and TLS.

use std::path::PathBuf;
use std::time::Duration;

use super::CertFiles;

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
    /// How `dns+` servers are looked up (the `[resolver]` table); `None` when the group has
    /// none.
    pub resolver: Option<super::Resolver>,
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
            resolver: None,
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
    /// `dns+a:NAME:PORT` or `dns+srv:NAME`: the servers are what the name resolves to, looked
    /// up in the background and kept up to date (see [`super::DnsRecords`]). Never a peer's
    /// own address: a group's peers are the resolved `Tcp` addresses.
    Dns(super::DnsRecords),
}
