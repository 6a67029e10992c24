//! nginx as a target: an nginx.conf per scenario for the `nginx` on PATH, set up like the
//! seeds' (one worker, access log off, upstream keepalive 100 with HTTP/1.1 and an empty
//! `Connection`, gzip_static for precompressed files) and tuned as operators tune it
//! (`open_file_cache`, `sendfile`, `tcp_nopush`, `reuseport`, a listen backlog, proxy buffers
//! that hold the JSON: the list and its reasons are `tuning.rs`, checked before start), every
//! temp path under the scenario's directory (`-p PREFIX -e stderr`) so it needs no root-owned
//! directory.
//!
//! What this nginx cannot do is reported as not supported: brotli and zstd (no modules in
//! Debian's nginx-light / nginx), and request-body decompression (seed 000 used a third-party
//! module).

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

use super::process::{Address, Process};
use super::{Context, Origins, StartError};
use crate::scenario::{Algorithm, Compression, Scenario, Setup};

/// Whether an `nginx` binary can be run.
pub fn available() -> bool {
    Command::new("nginx").arg("-v").output().is_ok()
}

/// `nginx -v`'s version line.
pub fn version() -> Option<String> {
    let out = Command::new("nginx").arg("-v").output().ok()?;
    let text = String::from_utf8_lossy(&out.stderr).trim().to_string();
    (!text.is_empty()).then_some(text)
}

pub fn start(
    scenario: &Scenario,
    ctx: &Context,
    origins: &Origins,
    addr: SocketAddr,
    dir: &Path,
) -> Result<Process, StartError> {
    if !available() {
        return Err(StartError::NotSupported(
            "nginx is not installed (apt-get install nginx)".into(),
        ));
    }
    let conf = config(scenario, ctx, origins, addr, dir)?;
    super::tuning::verify(super::TargetKind::Nginx, scenario, &conf).map_err(StartError::Drift)?;
    let path = dir.join("nginx.conf");
    std::fs::write(&path, conf)
        .map_err(|e| StartError::Failed(format!("writing {}: {e}", path.display())))?;
    let nginx = Path::new("nginx");
    let args = vec![
        "-p".to_string(),
        dir.display().to_string(),
        "-c".into(),
        path.display().to_string(),
        "-e".into(),
        "stderr".into(),
    ];
    Process::spawn_pinned(
        "nginx",
        &ctx.server_cpus,
        nginx,
        &args,
        &dir.join("nginx.log"),
    )
    .map_err(StartError::Failed)
}

/// The nginx.conf for one scenario.
pub fn config(
    scenario: &Scenario,
    ctx: &Context,
    origins: &Origins,
    addr: SocketAddr,
    dir: &Path,
) -> Result<String, StartError> {
    // No config for a row nginx cannot serve (`start` refuses it too; `sluice import`'s test
    // asks for every scenario's config directly).
    if scenario.load.protocol == crate::scenario::Protocol::H3
        && let Some(why) = super::no_http3(super::TargetKind::Nginx)
    {
        return Err(StartError::NotSupported(why.into()));
    }
    let prefix = dir.display();
    let mut conf = String::new();
    // One worker: a single process (nothing to fork, the sampler sees it all); more: a master.
    if ctx.workers <= 1 {
        conf.push_str("daemon off;\nmaster_process off;\nworker_processes 1;\n");
    } else {
        let _ = writeln!(conf, "daemon off;\nworker_processes {};", ctx.workers);
    }
    let _ = writeln!(
        conf,
        "pid {prefix}/nginx.pid;\nerror_log stderr warn;\nevents {{ worker_connections 4096; }}\n\
         http {{\n  access_log off;\n  default_type application/octet-stream;\n  \
         types {{ text/html html; application/json json; }}\n  sendfile on;\n  tcp_nopush on;\n  \
         keepalive_requests 1000000;\n  client_body_temp_path {prefix}/body;\n  \
         proxy_temp_path {prefix}/proxy;\n  fastcgi_temp_path {prefix}/fastcgi;\n  \
         uwsgi_temp_path {prefix}/uwsgi;\n  scgi_temp_path {prefix}/scgi;"
    );
    // reuseport and a backlog for 1,000 clients connecting at once (target/tuning.rs).
    let mut listen = format!("listen {addr} reuseport backlog=4096");
    if scenario.load.tls {
        listen.push_str(" ssl");
        if scenario.load.protocol == crate::scenario::Protocol::H2 {
            listen.push_str(" http2");
        }
    }
    let mut location = String::new();
    match &scenario.setup {
        Setup::Static { compress } => {
            let _ = writeln!(location, "      root {};", ctx.page_dir.display());
            location.push_str(OPEN_FILE_CACHE);
            location.push_str(&gzip(*compress)?);
        }
        Setup::Precompressed => {
            let _ = writeln!(
                location,
                "      root {};\n      gzip_static on;\n      gzip_vary on;",
                ctx.precompressed_dir.display()
            );
            location.push_str(OPEN_FILE_CACHE);
        }
        Setup::Direct => {
            return Err(StartError::Failed(
                "a direct scenario has no server in front of the origin".into(),
            ));
        }
        Setup::Proxy(proxy) => {
            if proxy.decompress_requests {
                return Err(StartError::NotSupported(
                    "nginx cannot decompress request bodies (seed 000 used a third-party module)"
                        .into(),
                ));
            }
            let _ = writeln!(conf, "  upstream backend {{");
            for (address, weight) in origins.addresses.iter().zip(&proxy.weights) {
                let server = match address {
                    Address::Tcp(a) => a.to_string(),
                    Address::Unix(p) => format!("unix:{}", p.display()),
                };
                let _ = writeln!(conf, "    server {server} weight={weight};");
            }
            let _ = writeln!(conf, "    keepalive 100;\n  }}");
            location.push_str(
                "      proxy_pass http://backend;\n      proxy_http_version 1.1;\n      \
                 proxy_set_header Connection \"\";\n",
            );
            // Buffers that hold the 340 KB JSON in memory, and never a temporary file
            // (target/tuning.rs has the reasons).
            location.push_str(
                "      proxy_buffer_size 64k;\n      proxy_buffers 8 64k;\n      \
                 proxy_busy_buffers_size 128k;\n      proxy_max_temp_file_size 0;\n",
            );
            if proxy.cache {
                // The demo origin sends `Cache-Control: max-age=5`, which nginx obeys;
                // `proxy_cache_valid` is the TTL of a 200 that says nothing. The cache stores
                // the identity response: with gzip on, every hit is compressed again.
                let _ = writeln!(
                    conf,
                    "  proxy_cache_path {prefix}/cache levels=1:2 keys_zone=bench:10m;"
                );
                location.push_str(
                    "      proxy_cache bench;\n      proxy_cache_valid 200 1m;\n      \
                     add_header X-Cache-Status $upstream_cache_status always;\n",
                );
            }
            location.push_str(&gzip(proxy.compress)?);
        }
    }
    let _ = writeln!(conf, "  server {{\n    {listen};");
    if scenario.load.tls {
        let _ = writeln!(
            conf,
            "    ssl_certificate {};\n    ssl_certificate_key {};",
            ctx.cert.display(),
            ctx.key.display()
        );
    }
    let _ = writeln!(conf, "    location / {{\n{location}    }}\n  }}\n}}");
    Ok(conf)
}

/// Descriptors and stats of hot files kept between requests (target/tuning.rs).
const OPEN_FILE_CACHE: &str = "      open_file_cache max=1000 inactive=60s;\n";

fn gzip(compress: Option<Compression>) -> Result<String, StartError> {
    let Some(c) = compress else {
        return Ok(String::new());
    };
    if c.algorithm != Algorithm::Gzip {
        return Err(StartError::NotSupported(format!(
            "this nginx has no {} module",
            c.algorithm.token()
        )));
    }
    Ok(format!(
        "      gzip on;\n      gzip_comp_level {};\n      gzip_types application/json;\n      \
         gzip_min_length 0;\n      gzip_proxied any;\n      gzip_vary on;\n",
        c.level
    ))
}
