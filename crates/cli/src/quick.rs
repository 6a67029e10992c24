//! `sluice file-server` and `sluice reverse-proxy`: a typed config made from flags, no file.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;
use sluice_config::{
    AccessLog, Action, BalancePolicy, CertFiles, Compress, Config, DecompressRequests, HashKey,
    Listener, LogSettings, PathMatch, Proxy, Route, ServerSettings, StaticFiles, Tls, Upstream,
    UpstreamAddress, UpstreamServer, UpstreamTls,
};
use sluice_core::SidecarCoding;

use crate::CommonArgs;

#[derive(Args)]
pub struct ReverseProxyArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// An upstream server: `host:port`, `https://host[:port]` (TLS) or `unix:/path` (repeatable).
    #[arg(long = "to", value_name = "ADDR", required = true)]
    pub to: Vec<String>,
    /// Balancing policy: round_robin, least_conn, p2c, or hash (by client IP).
    #[arg(long, default_value = "round_robin")]
    pub policy: PolicyArg,
    /// `self-signed` to serve HTTPS with a certificate made at start-up.
    #[arg(long, value_name = "self-signed")]
    pub tls: Option<TlsMode>,
    /// Log each request to stdout in nginx's combined format.
    #[arg(long)]
    pub access_log: bool,
    /// Compress responses (zstd, br, gzip by the client's Accept-Encoding; defaults of
    /// `compress = {}`).
    #[arg(long)]
    pub compress: bool,
    /// Decode gzip/deflate/br/zstd request bodies before forwarding them (10 MiB, ratio 100).
    #[arg(long)]
    pub decompress_requests: bool,
    /// Cache GET/HEAD responses in memory by RFC 9111 (what the origin's Cache-Control allows),
    /// with a budget of SIZE (default 64MiB). With --compress, each cached response is
    /// compressed once per coding and served from memory on later hits.
    #[arg(long, value_name = "SIZE", num_args = 0..=1, default_missing_value = "64MiB")]
    pub cache: Option<String>,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Clone, Copy, clap::ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum PolicyArg {
    RoundRobin,
    LeastConn,
    P2c,
    Hash,
}

#[derive(Args)]
pub struct FileServerArgs {
    /// Directory to serve.
    #[arg(long, default_value = ".")]
    pub root: PathBuf,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// `self-signed` to serve HTTPS with a certificate made at start-up.
    #[arg(long, value_name = "self-signed", conflicts_with_all = ["cert", "key"])]
    pub tls: Option<TlsMode>,
    /// PEM certificate chain (with --key) to serve HTTPS.
    #[arg(long, requires = "key")]
    pub cert: Option<PathBuf>,
    /// PEM private key (with --cert).
    #[arg(long, requires = "cert")]
    pub key: Option<PathBuf>,
    /// Log each request to stdout in nginx's combined format.
    #[arg(long)]
    pub access_log: bool,
    /// Compress responses on the fly (defaults of `compress = {}`).
    #[arg(long)]
    pub compress: bool,
    /// Serve .zst/.br/.gz files beside the requested file to clients that accept them
    /// (write them with `sluice precompress DIR`).
    #[arg(long)]
    pub precompressed: bool,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum TlsMode {
    SelfSigned,
}

pub fn file_server_config(args: FileServerArgs) -> Result<Config, String> {
    let root = std::fs::canonicalize(&args.root)
        .map_err(|e| format!("--root {}: {e}", args.root.display()))?;
    if !root.is_dir() {
        return Err(format!("--root {} is not a directory", root.display()));
    }
    let mut listener = Listener::plain(args.listen);
    listener.tls = match (args.tls, args.cert, args.key) {
        (Some(TlsMode::SelfSigned), _, _) => Some(Tls::SelfSigned { hosts: Vec::new() }),
        (None, Some(cert), Some(key)) => Some(Tls::Files {
            default: CertFiles { cert, key },
            sni: Vec::new(),
        }),
        _ => None,
    };
    let route = Route {
        name: "files".into(),
        hosts: Vec::new(),
        path: PathMatch::Prefix("/".into()),
        listeners: Vec::new(),
        matchers: Default::default(),
        access: Default::default(),
        action: Action::Static(StaticFiles {
            precompressed: if args.precompressed {
                SidecarCoding::ALL.to_vec()
            } else {
                Vec::new()
            },
            ..StaticFiles::new(root)
        }),
        compress: args.compress.then(Compress::default),
        cache: None,
        rate_limit: None,
        body: Default::default(),
        response_headers: None,
        dictionary: None,
    };
    Ok(quick_config(
        listener,
        vec![route],
        &args.common,
        args.access_log,
    ))
}

pub fn reverse_proxy_config(args: ReverseProxyArgs) -> Result<Config, String> {
    let servers = args
        .to
        .iter()
        .map(|to| parse_upstream_address(to).map(UpstreamServer::new))
        .collect::<Result<Vec<_>, _>>()?;
    let mut upstream = Upstream::new("backend", servers);
    // `https://` servers: TLS with the defaults (system roots, the host as the name).
    let https = args
        .to
        .iter()
        .filter(|to| to.starts_with("https://"))
        .count();
    if https == args.to.len() {
        upstream.tls = Some(UpstreamTls::default());
    } else if https > 0 {
        return Err(
            "--to: give every server as https://, or none (one group speaks one way)".into(),
        );
    }
    upstream.policy = match args.policy {
        PolicyArg::RoundRobin => BalancePolicy::RoundRobin,
        PolicyArg::LeastConn => BalancePolicy::LeastConnections,
        PolicyArg::P2c => BalancePolicy::PowerOfTwoChoices,
        PolicyArg::Hash => BalancePolicy::Hash(HashKey::ClientIp),
    };
    let mut listener = Listener::plain(args.listen);
    if args.tls.is_some() {
        listener.tls = Some(Tls::SelfSigned { hosts: Vec::new() });
    }
    let mut proxy = Proxy::to("backend");
    proxy.decompress_requests = args.decompress_requests.then(DecompressRequests::default);
    let route = Route {
        name: "proxy".into(),
        hosts: Vec::new(),
        path: PathMatch::Prefix("/".into()),
        listeners: Vec::new(),
        matchers: Default::default(),
        access: Default::default(),
        action: Action::Proxy(proxy),
        compress: args.compress.then(Compress::default),
        cache: None,
        rate_limit: None,
        body: Default::default(),
        response_headers: None,
        dictionary: None,
    };
    let mut route = route;
    let mut caches = Vec::new();
    if let Some(size) = &args.cache {
        let bytes = sluice_config::parse_size(size)
            .map_err(|e| format!("--cache {size}: {e} (e.g. --cache 256MiB)"))?;
        if bytes == 0 {
            return Err(format!(
                "--cache {size}: the cache needs some memory, e.g. --cache 64MiB"
            ));
        }
        caches.push(sluice_config::CacheZone::memory_only("proxy", bytes));
        let mut cache = sluice_config::RouteCache::new("proxy");
        if !args.compress {
            // `levels` are for the variants of a compressing route only.
            cache.levels = sluice_config::CompressLevels::default();
        }
        route.cache = Some(cache);
    }
    let mut config = quick_config(listener, vec![route], &args.common, args.access_log);
    config.upstreams.push(upstream);
    config.caches = caches;
    Ok(config)
}

/// `host:port`, `http://host:port`, `https://host[:port]` or `unix:/path`.
fn parse_upstream_address(text: &str) -> Result<UpstreamAddress, String> {
    if let Some(path) = text.strip_prefix("unix:") {
        if path.is_empty() {
            return Err(format!(
                "--to {text}: give the socket path, e.g. unix:/run/app.sock"
            ));
        }
        return Ok(UpstreamAddress::Unix(PathBuf::from(path)));
    }
    let host_port = text
        .strip_prefix("http://")
        .unwrap_or(text)
        .trim_end_matches('/');
    let host_port = match host_port.strip_prefix("https://") {
        // RFC 9110 §4.2.2: https without a port means 443.
        Some(rest) if !rest.contains(':') || rest.ends_with(']') => format!("{rest}:443"),
        Some(rest) => rest.to_string(),
        None => host_port.to_string(),
    };
    match host_port.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {
            Ok(UpstreamAddress::Tcp(host_port.clone()))
        }
        _ => Err(format!(
            "--to {text}: expected host:port (e.g. 127.0.0.1:9000) or unix:/path"
        )),
    }
}

/// A config for the quick commands.
pub fn quick_config(
    listener: Listener,
    routes: Vec<Route>,
    common: &CommonArgs,
    access_log: bool,
) -> Config {
    Config {
        server: ServerSettings {
            workers: common.workers,
            ..ServerSettings::default()
        },
        log: LogSettings {
            level: common.log_level.clone(),
            access: if access_log {
                AccessLog::Stdout
            } else {
                AccessLog::Off
            },
            ..LogSettings::default()
        },
        listeners: vec![listener],
        routes,
        upstreams: Vec::new(),
        caches: Vec::new(),
        admin: None,
        acme: None,
    }
}
