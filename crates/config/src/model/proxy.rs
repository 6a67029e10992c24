//! A proxy route's settings (`proxy = { ... }`): the upstream, `Host`, path rewriting,
//! upgrades, request decompression and header edits.

use std::time::Duration;

/// Forward to an upstream group.
#[derive(Debug, Clone)]
pub struct Proxy {
    /// Name of an entry in [`Config::upstreams`](super::Config::upstreams).
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
