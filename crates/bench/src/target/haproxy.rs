//! HAProxy as a target: `haproxy -db -f haproxy.cfg` with a config generated per scenario, set
//! up like issue 13's reference measurement (HAProxy 2.6 from Debian, one thread, 64 KiB
//! buffers, logging off): the proxy to beat on proxying and TLS.
//!
//! What it runs: proxying to one origin or balanced over several (`balance roundrobin`, whose
//! weights are smooth like nginx's and sluice's), TLS termination with HTTP/1.1 or HTTP/2 by
//! ALPN, gzip on the fly at level 1, and the cache (`cache` section) for the cached scenarios.
//! The rest is "not supported", with the reason: HAProxy serves no files, cannot decode request
//! bodies, compresses with gzip only, and Debian builds it with libslz, which has a single level
//! (HAProxy passes `!!tune.comp.maxlevel` to it: any level above 0 is SLZ's one, close to zlib's
//! level 1 in cost and about its ratio), so a scenario asking for gzip level 6 cannot be set up.
//!
//! The cache: HAProxy's default `max-object-size` is a 256th of `total-max-size`, so a 64 MB
//! cache would refuse the 340 KB JSON (256 KB); the config raises it to 1 MB (it may be up to
//! half the cache). Hits carry `X-Cache-Status: HIT` from `res.cache_hit`. HAProxy obeys the
//! origin's `Cache-Control: max-age=5` like nginx and sluice (one refetch every 5 s).
//!
//! The process: `-db` keeps it in the foreground as one process (no master, no daemon), so the
//! PID that taskset started is the server the sampler measures.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::process::{Address, Process};
use super::{Context, Origins, StartError};
use crate::scenario::{Algorithm, Protocol, Scenario, Setup};

/// Debian's path, outside a non-root user's PATH.
const SBIN_HAPROXY: &str = "/usr/sbin/haproxy";

/// The reference measurement's buffers (HAProxy's default is 16 KiB).
const BUFSIZE: usize = 65_536;

/// The cache's size in MB, and the largest object it stores (the 340 KB JSON fits).
const CACHE_MB: u32 = 64;
const CACHE_MAX_OBJECT_BYTES: u32 = 1 << 20;

/// The certificate and key in one PEM, as `bind ... ssl crt` wants them.
const CERT_AND_KEY: &str = "cert-and-key.pem";

/// `haproxy`: on PATH, else where Debian puts it.
pub fn binary() -> Option<PathBuf> {
    super::process::find_binary("haproxy", "-v", SBIN_HAPROXY)
}

pub fn available() -> bool {
    binary().is_some()
}

/// `haproxy -v`'s first line, e.g. `HAProxy version 2.6.12-1+deb12u4 2026/10/17 - ...`.
pub fn version() -> Option<String> {
    let out = Command::new(binary()?).arg("-v").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().next()?.trim();
    let line = line.split(" - ").next().unwrap_or(line).to_string();
    (!line.is_empty()).then_some(line)
}

pub fn start(
    scenario: &Scenario,
    ctx: &Context,
    origins: &Origins,
    addr: SocketAddr,
    dir: &Path,
) -> Result<Process, StartError> {
    let cfg = config(scenario, ctx, origins, addr, dir)?;
    super::tuning::verify(super::TargetKind::Haproxy, scenario, &cfg).map_err(StartError::Drift)?;
    let Some(haproxy) = binary() else {
        return Err(StartError::NotSupported(
            "haproxy is not installed (apt-get install haproxy)".into(),
        ));
    };
    if scenario.load.tls {
        write_cert_and_key(ctx, dir)?;
    }
    let path = dir.join("haproxy.cfg");
    std::fs::write(&path, cfg)
        .map_err(|e| StartError::Failed(format!("writing {}: {e}", path.display())))?;
    let args = vec!["-db".to_string(), "-f".into(), path.display().to_string()];
    Process::spawn_pinned(
        "haproxy",
        &ctx.server_cpus,
        &haproxy,
        &args,
        &dir.join("haproxy.log"),
    )
    .map_err(StartError::Failed)
}

/// `DIR/cert-and-key.pem`: the lab's certificate followed by its key.
pub fn write_cert_and_key(ctx: &Context, dir: &Path) -> Result<PathBuf, StartError> {
    let read = |path: &Path| {
        std::fs::read_to_string(path)
            .map_err(|e| StartError::Failed(format!("reading {}: {e}", path.display())))
    };
    let mut pem = read(&ctx.cert)?;
    if !pem.ends_with('\n') {
        pem.push('\n');
    }
    pem.push_str(&read(&ctx.key)?);
    let path = dir.join(CERT_AND_KEY);
    std::fs::write(&path, pem)
        .map_err(|e| StartError::Failed(format!("writing {}: {e}", path.display())))?;
    Ok(path)
}

/// The haproxy.cfg for one scenario, or why HAProxy does not run it. `dir` is where the
/// combined certificate is written for TLS scenarios.
pub fn config(
    scenario: &Scenario,
    ctx: &Context,
    origins: &Origins,
    addr: SocketAddr,
    dir: &Path,
) -> Result<String, StartError> {
    let not = |why: &str| Err(StartError::NotSupported(why.into()));
    // No config for a row HAProxy cannot serve (`start` refuses it too).
    if scenario.load.protocol == crate::scenario::Protocol::H3
        && let Some(why) = super::no_http3(super::TargetKind::Haproxy)
    {
        return not(why);
    }
    let proxy = match &scenario.setup {
        Setup::Static { .. } | Setup::Precompressed => {
            return not("HAProxy serves no files: it is a proxy in front of an origin");
        }
        Setup::Direct => {
            return Err(StartError::Failed(
                "a direct scenario has no server in front of the origin".into(),
            ));
        }
        Setup::Proxy(proxy) => proxy,
    };
    if proxy.decompress_requests {
        return not("HAProxy cannot decompress request bodies");
    }
    if let Some(c) = proxy.compress {
        if c.algorithm != Algorithm::Gzip {
            return Err(StartError::NotSupported(format!(
                "HAProxy compresses with gzip only, not {}",
                c.algorithm.token()
            )));
        }
        if c.level != 1 {
            return Err(StartError::NotSupported(format!(
                "Debian's HAProxy compresses with libslz, which has one level (about zlib's 1): \
                 gzip level {} cannot be set",
                c.level
            )));
        }
    }
    if origins.addresses.len() != proxy.weights.len() || origins.addresses.is_empty() {
        return Err(StartError::Failed(format!(
            "{} origins for {} weights",
            origins.addresses.len(),
            proxy.weights.len()
        )));
    }

    let mut cfg = String::from("global\n");
    let _ = writeln!(cfg, "    nbthread {}", ctx.workers.max(1));
    // Room for every client and upstream connection, and the splice pipes (target/tuning.rs).
    cfg.push_str("    maxconn 4096\n");
    let _ = writeln!(cfg, "    tune.bufsize {BUFSIZE}");
    if proxy.compress.is_some() {
        // With libslz any level above 0 is its single level; 1 says so.
        cfg.push_str("    tune.comp.maxlevel 1\n");
    }
    // No `log` line anywhere: logging is off.
    cfg.push_str(
        "\ndefaults\n    mode http\n    option http-keep-alive\n    timeout connect 5s\n    \
         timeout client 60s\n    timeout server 60s\n    timeout http-request 10s\n    \
         timeout http-keep-alive 60s\n",
    );
    if proxy.cache {
        let _ = writeln!(
            cfg,
            "\ncache bench\n    total-max-size {CACHE_MB}\n    \
             max-object-size {CACHE_MAX_OBJECT_BYTES}\n    max-age 60"
        );
    }
    let _ = write!(cfg, "\nfrontend bench\n    bind {addr}");
    if scenario.load.tls {
        let alpn = match scenario.load.protocol {
            Protocol::H1 => "http/1.1",
            // HAProxy 2.6 in Debian has no QUIC: no h3 row runs against it.
            Protocol::H2 | Protocol::H3 => "h2,http/1.1",
        };
        let _ = write!(
            cfg,
            " ssl crt {} alpn {alpn}",
            dir.join(CERT_AND_KEY).display()
        );
    }
    cfg.push('\n');
    if proxy.compress.is_some() {
        cfg.push_str(
            "    compression algo gzip\n    compression type application/json text/html\n",
        );
    }
    cfg.push_str("    default_backend origins\n\nbackend origins\n    balance roundrobin\n");
    // One pool of idle upstream connections shared by all clients, like nginx's `keepalive`.
    cfg.push_str("    http-reuse always\n");
    if proxy.compress.is_none() && !proxy.cache {
        // Bodies no filter reads go from socket to socket through a kernel pipe.
        cfg.push_str("    option splice-response\n");
    }
    if proxy.cache {
        cfg.push_str(
            "    http-request cache-use bench\n    http-response cache-store bench\n    \
             http-response set-header X-Cache-Status HIT if { res.cache_hit }\n    \
             http-response set-header X-Cache-Status MISS unless { res.cache_hit }\n",
        );
    }
    for (i, (address, weight)) in origins.addresses.iter().zip(&proxy.weights).enumerate() {
        let server = match address {
            Address::Tcp(a) => a.to_string(),
            Address::Unix(p) => format!("unix@{}", p.display()),
        };
        let _ = writeln!(cfg, "    server origin-{i} {server} weight {weight}");
    }
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::test_support::*;

    fn origins(s: &Scenario) -> Origins {
        let mut origins = Origins::none();
        for i in 0..s.origins() {
            origins.addresses.push(if s.unix_origins() {
                Address::Unix(format!("/w/o{i}.sock").into())
            } else {
                Address::Tcp(SocketAddr::from(([127, 0, 0, 1], 9000 + i as u16)))
            });
        }
        origins
    }

    fn cfg(name: &str) -> Result<String, StartError> {
        let s = scenario(name);
        config(
            &s,
            &ctx(),
            &origins(&s),
            SocketAddr::from(([127, 0, 0, 1], 8080)),
            Path::new("/w/d"),
        )
    }

    #[test]
    fn proxying_uses_one_thread_large_buffers_and_no_log() {
        let cfg = cfg("date-proxy-c6").unwrap();
        for line in [
            "nbthread 1",
            "tune.bufsize 65536",
            "bind 127.0.0.1:8080\n",
            "server origin-0 127.0.0.1:9000 weight 1",
            "balance roundrobin",
            "timeout client 60s",
        ] {
            assert!(cfg.contains(line), "{line}:\n{cfg}");
        }
        for absent in ["log ", "compression", "cache", "ssl"] {
            assert!(!cfg.contains(absent), "{absent}:\n{cfg}");
        }
    }

    #[test]
    fn uneven_balancing_weighs_the_servers() {
        let cfg = cfg("date-uneven").unwrap();
        assert!(
            cfg.contains("server origin-0 127.0.0.1:9000 weight 3\n")
                && cfg.contains("server origin-1 127.0.0.1:9001 weight 1\n"),
            "{cfg}"
        );
    }

    #[test]
    fn tls_terminates_with_the_scenarios_alpn_in_front_of_a_unix_socket() {
        let h1 = cfg("tls-h1").unwrap();
        assert!(
            h1.contains("bind 127.0.0.1:8080 ssl crt /w/d/cert-and-key.pem alpn http/1.1\n"),
            "{h1}"
        );
        assert!(h1.contains("server origin-0 unix@/w/o0.sock"), "{h1}");
        let h2 = cfg("tls-h2").unwrap();
        assert!(h2.contains("alpn h2,http/1.1\n"), "{h2}");
    }

    #[test]
    fn gzip_level_1_compresses_and_other_levels_are_not_supported() {
        let cfg = cfg("date-proxy-gzip-1").unwrap();
        assert!(cfg.contains("tune.comp.maxlevel 1"), "{cfg}");
        assert!(cfg.contains("compression algo gzip"), "{cfg}");
        assert!(cfg.contains("compression type application/json"), "{cfg}");
        match super::tests::cfg("date-cached-gzip-6") {
            Err(StartError::NotSupported(why)) => assert!(why.contains("libslz"), "{why}"),
            other => panic!("{:?}", other.map_err(|e| format!("{e:?}"))),
        }
    }

    #[test]
    fn the_cache_stores_the_340_kb_json_and_marks_hits() {
        let cfg = cfg("date-cached-c6").unwrap();
        assert!(cfg.contains("cache bench\n"), "{cfg}");
        assert!(cfg.contains("max-object-size 1048576"), "{cfg}");
        assert!(cfg.contains("http-request cache-use bench"), "{cfg}");
        assert!(cfg.contains("http-response cache-store bench"), "{cfg}");
        assert!(
            cfg.contains("X-Cache-Status HIT if { res.cache_hit }"),
            "{cfg}"
        );
    }

    #[test]
    fn files_and_request_decompression_are_not_supported() {
        for name in [
            "static-plain",
            "static-precompressed",
            "static-c1000",
            "post-gz1",
        ] {
            assert!(
                matches!(cfg(name), Err(StartError::NotSupported(_))),
                "{name}"
            );
        }
    }
}
