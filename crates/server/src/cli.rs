//! The `sluice` command line. Each subcommand is a small function; the ones that serve build a
//! typed [`Config`] (from a file or from flags) and hand it to [`run_server`].
//!
//! Command names are a contract with users and docs: `serve`, `check`, `reload`, `file-server`,
//! `origin`, `cert`, `reverse-proxy`, `demo`, `precompress`, `bench`. The process lifecycle
//! (runtime, signals, drain, reload, pid file) is `lifecycle/`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use sluice_config::{
    AccessLog, Action, BalancePolicy, CertFiles, Compress, Config, DecompressRequests, HashKey,
    Listener, LogSettings, PathMatch, Proxy, Route, ServerSettings, StaticFiles, Tls, Upstream,
    UpstreamAddress, UpstreamServer, UpstreamTls,
};

use sluice_core::SidecarCoding;

use crate::lifecycle::fail;
use crate::lifecycle::{with_pool_runtime, with_runtime};
use crate::{cert, lifecycle};

#[derive(Parser)]
#[command(
    name = "sluice",
    version,
    about = "A reverse proxy and web server that makes compression, HTTP/2, caching and load balancing fast"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server from a configuration file.
    Serve {
        /// The TOML configuration file.
        #[arg(short, long, default_value = "sluice.toml")]
        config: PathBuf,
    },
    /// Validate a configuration file and print every error with its line and column.
    Check {
        /// The TOML configuration file.
        #[arg(value_name = "FILE", default_value = "sluice.toml")]
        config: PathBuf,
        /// The same file given as `serve` takes it (`sluice check -c FILE` works too).
        #[arg(
            short = 'c',
            long = "config",
            value_name = "FILE",
            conflicts_with = "config"
        )]
        config_flag: Option<PathBuf>,
    },
    /// Reload a running `sluice serve` without dropping a connection: checks the file, then sends
    /// SIGHUP to the process named in its `[server] pid_file`.
    Reload {
        /// The TOML configuration file the server runs (`serve -c FILE`).
        #[arg(short, long, default_value = "sluice.toml")]
        config: PathBuf,
    },
    /// Serve a directory, no configuration file needed.
    FileServer(FileServerArgs),
    /// Run the demo origin (JSON APIs, request echo, chunked stream) on TCP and/or a unix socket.
    Origin(OriginArgs),
    /// Write a development CA and a certificate for some host names.
    Cert(CertArgs),
    /// Proxy to one or more upstream servers, no configuration file needed.
    ReverseProxy(ReverseProxyArgs),
    /// Start two demo origins and a balancing proxy in front of them, and print what to try.
    Demo(DemoArgs),
    /// The lab: run the seeds' experiments against sluice, nginx and a bare hyper baseline.
    Bench(sluice_bench::BenchCommand),
    /// Write .gz/.br/.zst files beside the compressible files of a directory, for static
    /// routes with `precompressed` on.
    Precompress(PrecompressArgs),
}

#[derive(Args)]
struct PrecompressArgs {
    /// Directory to walk (symbolic links are not followed).
    #[arg(value_name = "DIR")]
    dir: PathBuf,
    /// Codings to write, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "gzip,br,zstd", value_parser = sidecar_coding())]
    algorithms: Vec<SidecarCoding>,
    /// `max` (gzip 9, br 11, zstd 19) or a number, clamped into each coding's range.
    #[arg(long, default_value = "max", value_parser = parse_level)]
    level: LevelArg,
    /// Files smaller than this many bytes are left alone.
    #[arg(long, value_name = "BYTES", default_value_t = 256)]
    min_size: u64,
    /// Remove the .gz/.br/.zst files of the compressible files instead of writing them.
    #[arg(long)]
    clean: bool,
    /// Files compressed in parallel (default: one per core).
    #[arg(long)]
    jobs: Option<usize>,
}

#[derive(Clone, Copy)]
enum LevelArg {
    Max,
    Fixed(i32),
}

/// A sidecar coding by its token, exactly as clap's value enums take them (lower case), listed in
/// the order `sluice precompress` writes and reports them.
fn sidecar_coding() -> impl clap::builder::TypedValueParser<Value = SidecarCoding> {
    use clap::builder::{PossibleValuesParser, TypedValueParser};
    let tokens = crate::precompress::ALGORITHMS.map(SidecarCoding::as_str);
    PossibleValuesParser::new(tokens).try_map(|token| {
        crate::precompress::ALGORITHMS
            .into_iter()
            .find(|coding| coding.as_str() == token)
            .ok_or("not a sidecar coding")
    })
}

fn parse_level(text: &str) -> Result<LevelArg, String> {
    if text == "max" {
        return Ok(LevelArg::Max);
    }
    text.parse()
        .map(LevelArg::Fixed)
        .map_err(|_| format!("expected `max` or a number, found `{text}`"))
}

#[derive(Args)]
struct ReverseProxyArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// An upstream server: `host:port`, `https://host[:port]` (TLS) or `unix:/path` (repeatable).
    #[arg(long = "to", value_name = "ADDR", required = true)]
    to: Vec<String>,
    /// Balancing policy: round_robin, least_conn, p2c, or hash (by client IP).
    #[arg(long, default_value = "round_robin")]
    policy: PolicyArg,
    /// `self-signed` to serve HTTPS with a certificate made at start-up.
    #[arg(long, value_name = "self-signed")]
    tls: Option<TlsMode>,
    /// Log each request to stdout in nginx's combined format.
    #[arg(long)]
    access_log: bool,
    /// Compress responses (zstd, br, gzip by the client's Accept-Encoding; defaults of
    /// `compress = {}`).
    #[arg(long)]
    compress: bool,
    /// Decode gzip/deflate/br/zstd request bodies before forwarding them (10 MiB, ratio 100).
    #[arg(long)]
    decompress_requests: bool,
    /// Cache GET/HEAD responses in memory by RFC 9111 (what the origin's Cache-Control allows),
    /// with a budget of SIZE (default 64MiB). With --compress, each cached response is
    /// compressed once per coding and served from memory on later hits.
    #[arg(long, value_name = "SIZE", num_args = 0..=1, default_missing_value = "64MiB")]
    cache: Option<String>,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Clone, Copy, clap::ValueEnum)]
#[value(rename_all = "snake_case")]
enum PolicyArg {
    RoundRobin,
    LeastConn,
    P2c,
    Hash,
}

#[derive(Args)]
struct DemoArgs {
    /// Address of the proxy.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Address of the admin listener (Prometheus /metrics).
    #[arg(long, default_value = "127.0.0.1:9901")]
    admin: SocketAddr,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Args)]
struct FileServerArgs {
    /// Directory to serve.
    #[arg(long, default_value = ".")]
    root: PathBuf,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// `self-signed` to serve HTTPS with a certificate made at start-up.
    #[arg(long, value_name = "self-signed", conflicts_with_all = ["cert", "key"])]
    tls: Option<TlsMode>,
    /// PEM certificate chain (with --key) to serve HTTPS.
    #[arg(long, requires = "key")]
    cert: Option<PathBuf>,
    /// PEM private key (with --cert).
    #[arg(long, requires = "cert")]
    key: Option<PathBuf>,
    /// Log each request to stdout in nginx's combined format.
    #[arg(long)]
    access_log: bool,
    /// Compress responses on the fly (defaults of `compress = {}`).
    #[arg(long)]
    compress: bool,
    /// Serve .zst/.br/.gz files beside the requested file to clients that accept them
    /// (write them with `sluice precompress DIR`).
    #[arg(long)]
    precompressed: bool,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum TlsMode {
    SelfSigned,
}

#[derive(Args)]
struct OriginArgs {
    /// TCP address to listen on.
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// Unix socket path to listen on (removed first if it is a stale socket).
    #[arg(long)]
    unix: Option<PathBuf>,
    /// Adds `X-Origin: NAME` to every response, to see which origin answered.
    #[arg(long)]
    name: Option<String>,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Args)]
struct CertArgs {
    /// Host names or IP addresses the certificate is for (repeatable).
    #[arg(long = "host", value_name = "NAME", default_values_t = cert::DEFAULT_HOSTS.map(String::from))]
    hosts: Vec<String>,
    /// Directory to write ca.pem, cert.pem and key.pem into.
    #[arg(long, default_value = "certs")]
    out: PathBuf,
}

#[derive(Args, Clone)]
struct CommonArgs {
    /// Runtime worker threads (default: one per core).
    #[arg(long)]
    workers: Option<usize>,
    /// Diagnostics filter, e.g. `info` or `sluice=debug`.
    #[arg(long, default_value = "info")]
    log_level: String,
}

/// Parse the command line and run it.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve { config: path } => match sluice_config::check(&path) {
            Ok((config, warnings)) => {
                if !warnings.is_empty() {
                    eprintln!("{warnings}");
                }
                run_server(config, Some(path))
            }
            Err(diagnostics) => {
                eprintln!("{diagnostics}");
                ExitCode::from(2)
            }
        },
        Command::Check {
            config,
            config_flag,
        } => check(&config_flag.unwrap_or(config)),
        Command::Reload { config } => lifecycle::request_reload(&config),
        Command::FileServer(args) => match file_server_config(args) {
            Ok(config) => run_server(config, None),
            Err(message) => fail(&message),
        },
        Command::Origin(args) => run_origin(args),
        Command::Cert(args) => write_cert(&args),
        Command::ReverseProxy(args) => match reverse_proxy_config(args) {
            Ok(config) => run_server(config, None),
            Err(message) => fail(&message),
        },
        Command::Demo(args) => run_demo(args),
        Command::Bench(cmd) => sluice_bench::main(cmd),
        Command::Precompress(args) => precompress(args),
    }
}

fn precompress(args: PrecompressArgs) -> ExitCode {
    let mut algorithms = Vec::new();
    for coding in args.algorithms {
        if !algorithms.contains(&coding) {
            algorithms.push(coding);
        }
    }
    let options = crate::precompress::Options {
        dir: args.dir,
        algorithms,
        level: match args.level {
            LevelArg::Max => None,
            LevelArg::Fixed(level) => Some(level),
        },
        min_size: args.min_size,
        clean: args.clean,
        jobs: args.jobs.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
        }),
        progress: true,
    };
    match crate::precompress::run(&options) {
        Ok(summary) => {
            print!("{}", summary.render(&options));
            if summary.errors.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(message) => fail(&message),
    }
}

/// Errors fail the check (exit 1); warnings are printed and pass.
fn check(path: &Path) -> ExitCode {
    match sluice_config::check(path) {
        Ok((config, warnings)) => {
            if !warnings.is_empty() {
                eprintln!("{warnings}\n");
            }
            println!(
                "{}: ok ({} listener(s), {} route(s), {} upstream(s))",
                path.display(),
                config.listeners.len(),
                config.routes.len(),
                config.upstreams.len()
            );
            ExitCode::SUCCESS
        }
        Err(diagnostics) => {
            eprintln!("{diagnostics}");
            ExitCode::from(1)
        }
    }
}

fn file_server_config(args: FileServerArgs) -> Result<Config, String> {
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
    };
    Ok(quick_config(
        listener,
        vec![route],
        &args.common,
        args.access_log,
    ))
}

fn reverse_proxy_config(args: ReverseProxyArgs) -> Result<Config, String> {
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
        action: Action::Proxy(proxy),
        compress: args.compress.then(Compress::default),
        cache: None,
        rate_limit: None,
        body: Default::default(),
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
fn quick_config(
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
    }
}

/// Run a server until SIGTERM/SIGINT, then drain; SIGHUP reloads `source` when there is one.
pub fn run_server(config: Config, source: Option<PathBuf>) -> ExitCode {
    lifecycle::serve(config, source)
}

fn run_origin(args: OriginArgs) -> ExitCode {
    if args.listen.is_none() && args.unix.is_none() {
        return fail("give --listen ADDR and/or --unix PATH");
    }
    let (level, workers) = (args.common.log_level.clone(), args.common.workers);
    // The lab's stand-in application, not the server under test: tokio's work-stealing pool,
    // so `--workers N` origins use N cores without a hand-over of their own.
    with_pool_runtime(&level, workers, |mut signals| async move {
        let origin = sluice_origin::Origin::new(sluice_origin::OriginOptions { name: args.name });
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let mut tasks = Vec::new();
        if let Some(addr) = args.listen {
            let listener = match tokio::net::TcpListener::bind(addr).await {
                Ok(l) => l,
                Err(e) => return fail(&format!("--listen {addr}: {e}")),
            };
            println!(
                "origin listening on http://{}",
                listener.local_addr().unwrap_or(addr)
            );
            tasks.push(tokio::spawn(
                origin
                    .clone()
                    .serve_tcp(listener, signalled(stopped.clone())),
            ));
        }
        if let Some(path) = args.unix {
            let listener = match bind_unix(&path) {
                Ok(l) => l,
                Err(e) => return fail(&format!("--unix {}: {e}", path.display())),
            };
            println!("origin listening on unix:{}", path.display());
            tasks.push(tokio::spawn(
                origin
                    .clone()
                    .serve_unix(listener, signalled(stopped.clone())),
            ));
        }
        signals
            .stop("the origin has no config file to reload")
            .await;
        let _ = stop.send(true);
        for task in tasks {
            let _ = task.await;
        }
        ExitCode::SUCCESS
    })
}

async fn signalled(mut rx: tokio::sync::watch::Receiver<bool>) {
    let _ = rx.wait_for(|stop| *stop).await;
}

/// Bind a unix socket, replacing a stale socket file (but never another kind of file).
fn bind_unix(path: &Path) -> std::io::Result<tokio::net::UnixListener> {
    use std::os::unix::fs::FileTypeExt;
    if let Ok(meta) = std::fs::symlink_metadata(path)
        && meta.file_type().is_socket()
    {
        std::fs::remove_file(path)?;
    }
    tokio::net::UnixListener::bind(path)
}

fn run_demo(args: DemoArgs) -> ExitCode {
    let (level, workers) = (args.common.log_level.clone(), args.common.workers);
    with_runtime(&level, workers, |mut signals, workers| async move {
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let mut servers = Vec::new();
        for name in ["origin-a", "origin-b"] {
            let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
                Ok(l) => l,
                Err(e) => return fail(&format!("starting the demo origin: {e}")),
            };
            let Ok(addr) = listener.local_addr() else {
                return fail("starting the demo origin: no local address");
            };
            let origin = sluice_origin::Origin::new(sluice_origin::OriginOptions {
                name: Some(name.into()),
            });
            tokio::spawn(origin.serve_tcp(listener, signalled(stopped.clone())));
            servers.push(UpstreamServer::new(UpstreamAddress::Tcp(addr.to_string())));
        }
        let route = Route {
            name: "demo".into(),
            hosts: Vec::new(),
            path: PathMatch::Prefix("/".into()),
            listeners: Vec::new(),
            action: Action::Proxy(Proxy::to("origins")),
            compress: Some(Compress::default()),
            cache: None,
            rate_limit: None,
            body: Default::default(),
        };
        // The date API is cached (the origin says `max-age=5`): curl it twice to see MISS,
        // then HIT, and once more after 5 s for a new MISS.
        let cached = Route {
            name: "demo-cached".into(),
            path: PathMatch::Exact("/what-date-is-it".into()),
            cache: Some(sluice_config::RouteCache::new("demo")),
            ..route.clone()
        };
        let mut config = quick_config(
            Listener::plain(args.listen),
            vec![cached, route],
            &args.common,
            true,
        );
        config.caches = vec![sluice_config::CacheZone::new("demo")];
        config.upstreams.push(Upstream::new("origins", servers));
        config.admin = Some(sluice_config::Admin {
            address: args.admin,
        });
        let server = match crate::start_on(&config, workers).await {
            Ok(server) => server,
            Err(e) => return fail(&e.to_string()),
        };
        let proxy = server
            .listeners()
            .first()
            .map_or(args.listen, |l| l.address);
        println!();
        println!("sluice demo: a proxy on http://{proxy} balancing two demo origins (round robin)");
        println!("try:");
        println!("  curl -s http://{proxy}/what-date-is-it | head -c 200; echo");
        println!(
            "  curl -si http://{proxy}/what-date-is-it | grep -i x-cache  # MISS, then HIT for 5 s"
        );
        println!(
            "  curl -si http://{proxy}/hello | grep -i x-origin     # run twice: origin-a, origin-b"
        );
        println!("  curl -s -d name=sluice http://{proxy}/what-is-my-name | head -c 120; echo");
        println!(
            "  curl -s http://{}/metrics | grep sluice_requests_total",
            args.admin
        );
        println!(
            "  curl -X PURGE 'http://{}/cache/demo?key=http://{proxy}/what-date-is-it'",
            args.admin
        );
        println!("Ctrl-C stops it.");
        signals.stop("the demo has no config file to reload").await;
        let _ = stop.send(true);
        server.shutdown(config.server.shutdown_timeout).await;
        ExitCode::SUCCESS
    })
}

fn write_cert(args: &CertArgs) -> ExitCode {
    let dev = match cert::generate(&args.hosts) {
        Ok(dev) => dev,
        Err(e) => return fail(&format!("making the certificate: {e}")),
    };
    let files = match cert::write_files(&dev, &args.out) {
        Ok(files) => files,
        Err(e) => return fail(&format!("writing into {}: {e}", args.out.display())),
    };
    println!(
        "wrote a development CA and a certificate for {}:",
        args.hosts.join(", ")
    );
    println!("  CA certificate:  {}", files.ca_cert.display());
    println!(
        "  certificate:     {}  (leaf + CA chain)",
        files.cert.display()
    );
    println!("  private key:     {}", files.key.display());
    println!();
    println!("use them in a listener:");
    println!(
        "  [listeners.tls]\n  cert = \"{}\"\n  key = \"{}\"",
        files.cert.display(),
        files.key.display()
    );
    println!();
    println!("trust the CA:");
    println!(
        "  curl:    curl --cacert {} https://localhost:8443/",
        files.ca_cert.display()
    );
    println!(
        "  Debian:  sudo cp {} /usr/local/share/ca-certificates/sluice-dev.crt && sudo update-ca-certificates",
        files.ca_cert.display()
    );
    println!(
        "  browser: import {} as a trusted authority (Firefox: Settings > Certificates)",
        files.ca_cert.display()
    );
    ExitCode::SUCCESS
}
