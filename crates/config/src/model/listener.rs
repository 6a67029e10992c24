//! A listening socket (`[[listeners]]`): its address, protocols, limits, TLS and the proxies
//! it trusts.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::HostMatch;

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
    /// `tls.session_ticket_keys`: a file of ticket keys shared by a fleet (docs/fleet.md), so a
    /// client moved to another instance resumes its session; read at start-up and on every
    /// reload. `None`: random keys of this process, rotated every 6 hours.
    pub session_ticket_keys: Option<PathBuf>,
    /// HTTP/3 settings, read when `protocols` has `h3` (docs/http3.md).
    pub http3: Http3,
}

/// A TLS listener's HTTP/3 (QUIC) side: what its TCP responses advertise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Http3 {
    /// `alt_svc_max_age`: the `ma` of the `Alt-Svc: h3=":PORT"` its TCP responses carry (RFC 7838
    /// §3); `None` (`"0s"`): no `Alt-Svc`, clients reach h3 only when told otherwise.
    pub alt_svc_max_age: Option<Duration>,
}

impl Default for Http3 {
    fn default() -> Self {
        Self {
            // A day, as Caddy and Cloudflare advertise.
            alt_svc_max_age: Some(Duration::from_secs(24 * 60 * 60)),
        }
    }
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
            session_ticket_keys: None,
            http3: Http3::default(),
        }
    }
}

/// Which HTTP versions a listener speaks. With TLS these are the ALPN protocols offered; without
/// TLS, `http2` means HTTP/2 by prior knowledge (h2c) on the same port. `http3` (ALPN `h3`, TLS
/// listeners only) serves HTTP/3 over QUIC on a UDP socket bound to the same address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Protocols {
    pub http1: bool,
    pub http2: bool,
    pub http3: bool,
}

impl Default for Protocols {
    fn default() -> Self {
        Self {
            http1: true,
            http2: true,
            http3: false,
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
    /// Certificates ordered from an ACME CA (`tls = "acme"`, docs/acme.md) for `names`: the
    /// listener's `acme_names`, or its routes' exact hosts. A self-signed certificate for the
    /// same names serves until the first one arrives.
    Acme { names: Vec<String> },
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
