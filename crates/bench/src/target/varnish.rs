//! Varnish as a target: `varnishd -F` with a VCL generated per scenario, the best cache on
//! this machine (DESIGN.md §5): it stores a gzipped object once and serves every hit from it,
//! where nginx stores identity and gzips every hit.
//!
//! What it runs: the cache scenarios (a 1 minute TTL, `beresp.do_gzip` when the scenario
//! compresses, at the level of the global parameter `gzip_level`) and, because it is a plain
//! reverse proxy with `return (pass)`, the one-origin proxy scenarios without compression
//! (`date-proxy-*`, the POSTs, the raw stream). The rest is not supported, honestly: it serves
//! no files, has no TLS, cannot decode request bodies, and balancing or on-the-fly compression
//! of uncached responses would be a Varnish set-up of our own invention, not a peer's.
//!
//! The process: the manager (the PID started through taskset) forks the cache child that
//! serves the traffic; the sampler counts the process tree, so the child's CPU is the bulk of
//! what is measured. Both inherit the pinning. `-j none` keeps both as the user that runs the
//! lab: Varnish's default jail as root switches to its `varnish`/`vcache` users, which cannot
//! reach a work directory under a private home (`/root` is 0700), and the jail changes nothing
//! that is measured.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::process::{Address, Process};
use super::{Context, Origins, StartError};
use crate::scenario::{Algorithm, Compression, ProxySetup, Scenario, Setup};

/// Debian's path, outside a non-root user's PATH.
const SBIN_VARNISHD: &str = "/usr/sbin/varnishd";

/// The cache's storage: room for every object of a scenario many times over.
const STORAGE: &str = "malloc,256m";

/// `varnishd`: on PATH, else where Debian puts it.
pub fn binary() -> Option<PathBuf> {
    super::process::find_binary("varnishd", "-V", SBIN_VARNISHD)
}

pub fn available() -> bool {
    binary().is_some()
}

/// `varnishd -V`'s first line (it writes it to stderr).
pub fn version() -> Option<String> {
    let out = Command::new(binary()?).arg("-V").output().ok()?;
    let text = String::from_utf8_lossy(&out.stderr);
    let line = text.lines().next()?.trim().to_string();
    (!line.is_empty()).then_some(line)
}

pub fn start(
    scenario: &Scenario,
    ctx: &Context,
    origins: &Origins,
    addr: SocketAddr,
    dir: &Path,
) -> Result<Process, StartError> {
    let vcl = vcl(scenario, origins)?;
    let Some(varnishd) = binary() else {
        return Err(StartError::NotSupported(
            "varnish is not installed (apt-get install varnish)".into(),
        ));
    };
    let path = dir.join("varnish.vcl");
    let args = args(scenario, addr, &dir.join("varnishd"), &path);
    super::tuning::verify(
        super::TargetKind::Varnish,
        scenario,
        &format!("{}\n{vcl}", args.join(" ")),
    )
    .map_err(StartError::Drift)?;
    std::fs::write(&path, vcl)
        .map_err(|e| StartError::Failed(format!("writing {}: {e}", path.display())))?;
    Process::spawn_pinned(
        "varnish",
        &ctx.server_cpus,
        &varnishd,
        &args,
        &dir.join("varnish.log"),
    )
    .map_err(StartError::Failed)
}

/// The command line: foreground, one thread pool with its threads made up front (no run pays
/// for creating them), the scenario's gzip level, the VCL and the work directory.
pub fn args(scenario: &Scenario, addr: SocketAddr, work_dir: &Path, vcl: &Path) -> Vec<String> {
    // A thread per connection, and one per backend fetch: twice the concurrency, with room.
    let threads = 2 * scenario.load.concurrency() + 10;
    let mut args: Vec<String> = [
        "-F",
        "-j",
        "none",
        "-a",
        &addr.to_string(),
        "-f",
        &vcl.display().to_string(),
        "-n",
        &work_dir.display().to_string(),
        "-s",
        STORAGE,
        "-p",
        "thread_pools=1",
        "-p",
        &format!("thread_pool_min={threads}"),
    ]
    .map(String::from)
    .to_vec();
    if let Setup::Proxy(ProxySetup {
        compress: Some(c), ..
    }) = &scenario.setup
    {
        args.extend(["-p".into(), format!("gzip_level={}", c.level)]);
    }
    args
}

/// The VCL for one scenario, or why Varnish does not run it.
pub fn vcl(scenario: &Scenario, origins: &Origins) -> Result<String, StartError> {
    let not = |why: &str| Err(StartError::NotSupported(why.into()));
    let proxy = match &scenario.setup {
        Setup::Static { .. } | Setup::Precompressed => {
            return not("Varnish serves no files: it is a cache in front of an origin");
        }
        Setup::Direct => {
            return Err(StartError::Failed(
                "a direct scenario has no server in front of the origin".into(),
            ));
        }
        Setup::Proxy(proxy) => proxy,
    };
    if scenario.load.tls {
        return not("Varnish has no TLS (it needs a terminator such as hitch)");
    }
    if proxy.decompress_requests {
        return not("Varnish cannot decompress request bodies");
    }
    if proxy.weights.len() != 1 {
        return not("balancing is not set up for Varnish (no smooth weighted round robin)");
    }
    match proxy.compress {
        Some(Compression {
            algorithm: Algorithm::Gzip,
            ..
        }) if proxy.cache => {}
        Some(Compression {
            algorithm: Algorithm::Br | Algorithm::Zstd,
            ..
        }) => return not("Varnish compresses with gzip only"),
        Some(_) => return not("Varnish is measured as a cache: it compresses what it stores"),
        None => {}
    }
    let Some(origin) = origins.addresses.first() else {
        return Err(StartError::Failed("the scenario has no origin".into()));
    };
    let mut vcl = String::from("vcl 4.1;\n\nbackend origin {\n");
    match origin {
        Address::Tcp(a) => {
            let _ = writeln!(
                vcl,
                "    .host = \"{}\";\n    .port = \"{}\";",
                a.ip(),
                a.port()
            );
        }
        Address::Unix(p) => {
            let _ = writeln!(vcl, "    .path = \"{}\";", p.display());
        }
    }
    vcl.push_str("}\n");
    if !proxy.cache {
        // A plain reverse proxy: nothing is looked up or stored.
        vcl.push_str("\nsub vcl_recv {\n    return (pass);\n}\n");
        return Ok(vcl);
    }
    // The TTL overrides the origin's `max-age=5` (nginx and sluice obey it, so they fetch
    // again every 5 s: one 340 KB fetch among thousands of hits, lost in the noise).
    vcl.push_str("\nsub vcl_backend_response {\n    set beresp.ttl = 1m;\n");
    if proxy.compress.is_some() {
        // Stored gzipped once; a client that does not accept gzip gets it inflated.
        vcl.push_str("    set beresp.do_gzip = true;\n");
    }
    vcl.push_str(
        "}\n\nsub vcl_deliver {\n    if (obj.hits > 0) {\n        \
         set resp.http.X-Cache-Status = \"HIT\";\n    } else {\n        \
         set resp.http.X-Cache-Status = \"MISS\";\n    }\n}\n",
    );
    Ok(vcl)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario;
    use crate::target::test_support::*;

    fn one_origin() -> Origins {
        let mut origins = Origins::none();
        origins
            .addresses
            .push(Address::Tcp(SocketAddr::from(([127, 0, 0, 1], 9000))));
        origins
    }

    #[test]
    fn a_cached_and_compressed_scenario_stores_gzip_at_its_level() {
        let s = scenario("date-cached-gzip-6");
        let vcl = vcl(&s, &one_origin()).unwrap();
        assert!(
            vcl.contains(".host = \"127.0.0.1\";\n    .port = \"9000\";"),
            "{vcl}"
        );
        assert!(vcl.contains("set beresp.ttl = 1m;"), "{vcl}");
        assert!(vcl.contains("set beresp.do_gzip = true;"), "{vcl}");
        assert!(vcl.contains("X-Cache-Status = \"HIT\""), "{vcl}");
        assert!(!vcl.contains("return (pass)"), "{vcl}");
        let args = args(
            &s,
            SocketAddr::from(([127, 0, 0, 1], 8080)),
            Path::new("/w"),
            Path::new("/w/v.vcl"),
        );
        let joined = args.join(" ");
        assert!(joined.contains("-p gzip_level=6"), "{joined}");
        assert!(
            joined.contains("-a 127.0.0.1:8080 -f /w/v.vcl -n /w"),
            "{joined}"
        );
        assert!(joined.contains("-p thread_pools=1"), "{joined}");
    }

    #[test]
    fn a_cached_scenario_without_compression_stores_identity() {
        let vcl = vcl(&scenario("date-cached-c6"), &one_origin()).unwrap();
        assert!(vcl.contains("set beresp.ttl = 1m;"), "{vcl}");
        assert!(!vcl.contains("do_gzip"), "{vcl}");
        let args = args(
            &scenario("date-cached-c6"),
            SocketAddr::from(([127, 0, 0, 1], 8080)),
            Path::new("/w"),
            Path::new("/w/v.vcl"),
        );
        assert!(
            !args.iter().any(|a| a.starts_with("gzip_level")),
            "{args:?}"
        );
    }

    #[test]
    fn one_origin_proxying_passes_and_the_rest_is_not_supported() {
        let mut passed = Vec::new();
        for s in scenario::all(false) {
            if s.setup == Setup::Direct {
                continue;
            }
            let cached = matches!(&s.setup, Setup::Proxy(p) if p.cache);
            match vcl(&s, &one_origin()) {
                Ok(vcl) if cached => assert!(!vcl.contains("return (pass)"), "{}", s.name),
                Ok(vcl) => {
                    assert!(vcl.contains("return (pass)"), "{}", s.name);
                    passed.push(s.name);
                }
                Err(StartError::NotSupported(_)) => assert!(!cached, "{}", s.name),
                Err(e) => panic!("{}: {e:?}", s.name),
            }
        }
        assert_eq!(
            passed,
            [
                "post-get",
                "post-gz0",
                "post-raw",
                "date-proxy-c1",
                "date-proxy-c6",
                "stream-raw"
            ]
        );
    }
}
