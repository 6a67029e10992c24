//! The servers under test. Each target turns a scenario into its own configuration, starts
//! pinned to the server CPUs, and is stopped after the scenario:
//! - [`sluice`]: the same binary with `serve --config` on a generated TOML file;
//! - [`nginx`]: the `nginx` on PATH with a generated nginx.conf;
//! - [`varnish`]: `varnishd` with a generated VCL (the cache scenarios and plain proxying);
//! - [`haproxy`]: `haproxy` with a generated haproxy.cfg (proxying, balancing, TLS, gzip level 1,
//!   the cache);
//! - [`caddy`]: `caddy run` on a generated Caddyfile (files, proxying, even balancing, TLS,
//!   gzip and zstd);
//! - [`baseline`]: a bare hyper server answering the same bytes from memory, the upper bound.
//!
//! The demo origins are started here too ([`Origins`]), pinned to the load CPUs like the seeds'
//! backends that shared the core with the load generator.

pub mod baseline;
pub mod caddy;
pub mod haproxy;
pub mod nginx;
pub mod process;
pub mod sluice;
pub mod tuning;
pub mod varnish;

/// What the config generators' unit tests share: a scenario by name, a context of fixed paths.
#[cfg(test)]
pub(crate) mod test_support {
    use super::Context;
    use crate::scenario::{self, Scenario};

    pub(crate) fn scenario(name: &str) -> Scenario {
        scenario::all(false)
            .into_iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no scenario {name}"))
    }

    pub(crate) fn ctx() -> Context {
        Context::for_tests("/w")
    }
}

use std::path::PathBuf;

use crate::check;
use crate::client::Endpoint;
use crate::scenario::Scenario;
use process::{Address, Process, free_port};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TargetKind {
    Sluice,
    Nginx,
    Haproxy,
    Caddy,
    Varnish,
    Baseline,
}

impl TargetKind {
    pub fn name(self) -> &'static str {
        match self {
            TargetKind::Sluice => "sluice",
            TargetKind::Nginx => "nginx",
            TargetKind::Haproxy => "haproxy",
            TargetKind::Caddy => "caddy",
            TargetKind::Varnish => "varnish",
            TargetKind::Baseline => "baseline",
        }
    }
}

/// What every target needs to start: where to write, which binary, which CPUs, and the
/// fixtures prepared once per run.
#[derive(Debug, Clone)]
pub struct Context {
    /// Scratch directory for configs, logs, sockets.
    pub work_dir: PathBuf,
    /// The `sluice` binary (this one).
    pub exe: PathBuf,
    pub server_cpus: String,
    pub load_cpus: String,
    pub workers: usize,
    /// Static root with the page only.
    pub page_dir: PathBuf,
    /// Static root with the page and its `.gz` / `.br` / `.zst` sidecars.
    pub precompressed_dir: PathBuf,
    /// Development certificate (PEM) for the TLS scenarios.
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Context {
    /// The lab's layout under `work_dir` (`site/`, `site-precompressed/`, `cert.pem`,
    /// `key.pem`), the server on CPU 0 with one worker, the load on CPU 1, `sluice` as the
    /// binary: what tests of the targets' configs start from. Nothing is created on disk.
    pub fn for_tests(work_dir: impl Into<PathBuf>) -> Self {
        let work_dir = work_dir.into();
        Self {
            exe: "sluice".into(),
            server_cpus: "0".into(),
            load_cpus: "1".into(),
            workers: 1,
            page_dir: work_dir.join("site"),
            precompressed_dir: work_dir.join("site-precompressed"),
            cert: work_dir.join("cert.pem"),
            key: work_dir.join("key.pem"),
            work_dir,
        }
    }
}

/// Why a target is not running.
#[derive(Debug)]
pub enum StartError {
    /// The target cannot do what the scenario needs.
    NotSupported(String),
    /// The generated config lacks a line of the peer's documented tuning ([`tuning`]): the
    /// row is refused rather than measured against a weaker peer.
    Drift(String),
    Failed(String),
}

/// A started target.
pub struct Running {
    pub endpoint: Endpoint,
    pub process: Process,
}

impl Running {
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }
}

/// Start `kind` for `scenario` in front of `origins`.
pub fn start(
    kind: TargetKind,
    scenario: &Scenario,
    ctx: &Context,
    origins: &Origins,
) -> Result<Running, StartError> {
    if scenario.load.protocol == crate::scenario::Protocol::H3
        && let Some(why) = no_http3(kind)
    {
        return Err(StartError::NotSupported(why.into()));
    }
    let addr = free_port().map_err(StartError::Failed)?;
    let dir = target_dir(ctx, scenario, kind)?;
    let mut process = match kind {
        TargetKind::Sluice => sluice::start(scenario, ctx, origins, addr, &dir)?,
        TargetKind::Nginx => nginx::start(scenario, ctx, origins, addr, &dir)?,
        TargetKind::Haproxy => haproxy::start(scenario, ctx, origins, addr, &dir)?,
        TargetKind::Caddy => caddy::start(scenario, ctx, origins, addr, &dir)?,
        TargetKind::Varnish => varnish::start(scenario, ctx, origins, addr, &dir)?,
        TargetKind::Baseline => baseline::start(scenario, ctx, addr, &dir)?,
    };
    process
        .wait_ready(&Address::Tcp(addr))
        .map_err(StartError::Failed)?;
    Ok(Running {
        endpoint: Endpoint {
            addr,
            tls: scenario.load.tls,
        },
        process,
    })
}

/// Why `kind` cannot serve HTTP/3, or `None` when it can (sluice, Caddy).
pub fn no_http3(kind: TargetKind) -> Option<&'static str> {
    match kind {
        TargetKind::Sluice | TargetKind::Caddy => None,
        TargetKind::Nginx => Some(
            "nginx 1.22 in Debian has no HTTP/3 (its QUIC module, ngx_http_v3_module, came \
             with nginx 1.25)",
        ),
        TargetKind::Haproxy => Some(
            "HAProxy 2.6 in Debian is built without QUIC (`haproxy -vv`: -QUIC; it needs a \
             QUIC-enabled TLS library)",
        ),
        TargetKind::Varnish => Some("Varnish has no TLS, so no QUIC"),
        TargetKind::Baseline => Some("the baseline is hyper over TCP; it has no QUIC"),
    }
}

/// `work_dir/<scenario>-<target>`, created, as an absolute path: every target's config and
/// command line name files in it, and each server reads a relative path against something of
/// its own (nginx its prefix, Varnish `vcl_path` and /var/lib/varnish, Caddy its config's
/// directory), not against the directory the lab was started in (`--out relout` gave nginx
/// `relout/work/x/relout/work/x/nginx.conf`).
fn target_dir(ctx: &Context, scenario: &Scenario, kind: TargetKind) -> Result<PathBuf, StartError> {
    let dir = ctx
        .work_dir
        .join(format!("{}-{}", scenario.name, kind.name()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| StartError::Failed(format!("creating {}: {e}", dir.display())))?;
    std::path::absolute(&dir)
        .map_err(|e| StartError::Failed(format!("resolving {}: {e}", dir.display())))
}

/// The demo origins of one scenario, named `origin-0`, `origin-1`, ... (`X-Origin`).
pub struct Origins {
    pub addresses: Vec<Address>,
    processes: Vec<Process>,
}

impl Origins {
    pub fn none() -> Self {
        Self {
            addresses: Vec::new(),
            processes: Vec::new(),
        }
    }

    /// Start the origins `scenario` needs, pinned to the load CPUs, each an instance of
    /// `program` (sluice's demo origin, or one of the zoo's).
    pub fn start(
        scenario: &Scenario,
        ctx: &Context,
        program: &crate::zoo::OriginProgram,
    ) -> Result<Self, String> {
        let mut origins = Self::none();
        for i in 0..scenario.origins() {
            let name = check::origin_name(i);
            let address = if scenario.unix_origins() {
                let path = ctx.work_dir.join(format!("{}-{name}.sock", scenario.name));
                let _ = std::fs::remove_file(&path);
                Address::Unix(std::path::absolute(&path).unwrap_or(path))
            } else {
                Address::Tcp(free_port()?)
            };
            let args = program.args(&name, &address);
            let log = ctx.work_dir.join(format!(
                "{}-{name}-{}.log",
                scenario.name,
                program.kind.name()
            ));
            let mut process =
                Process::spawn_pinned(&name, &ctx.load_cpus, &program.program, &args, &log)?;
            process.wait_ready(&address)?;
            origins.addresses.push(address);
            origins.processes.push(process);
        }
        Ok(origins)
    }

    /// The first origin's PID (the measured server of a direct scenario).
    pub fn first_pid(&self) -> Option<u32> {
        self.processes.first().map(Process::pid)
    }

    pub fn stop(self) {
        for p in self.processes {
            p.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_dir_under_a_relative_work_dir_is_absolute_and_exists() {
        let temp = tempfile::tempdir().unwrap();
        // The work directory as `--out relout` gives it: relative to the current directory.
        let here = std::env::current_dir().unwrap();
        let relative = relative_to(temp.path(), &here).join("relout/work");
        assert!(relative.is_relative());
        let ctx = Context::for_tests(&relative);
        let scenario = test_support::scenario("static-plain");
        let dir = target_dir(&ctx, &scenario, TargetKind::Nginx).unwrap();
        assert!(dir.is_absolute(), "{}", dir.display());
        assert!(dir.is_dir());
        assert_eq!(
            dir.canonicalize().unwrap(),
            temp.path()
                .canonicalize()
                .unwrap()
                .join("relout/work/static-plain-nginx")
        );
    }

    /// `to` as a path relative to `from` (both absolute): enough `..` to reach `/`, then `to`.
    fn relative_to(to: &std::path::Path, from: &std::path::Path) -> PathBuf {
        let mut relative = PathBuf::new();
        for _ in from.components().skip(1) {
            relative.push("..");
        }
        relative.join(to.strip_prefix("/").unwrap())
    }

    /// The h3 rows run against sluice and Caddy only; every other target says why not, before
    /// anything is started.
    #[test]
    fn only_sluice_and_caddy_serve_http3() {
        let ctx = Context::for_tests("/nonexistent-lab-dir");
        for name in ["tls-h3", "json-h3", "download-h3"] {
            let s = test_support::scenario(name);
            assert_eq!(s.load.protocol, crate::scenario::Protocol::H3);
            assert!(s.load.tls, "{name}");
            for kind in [
                TargetKind::Nginx,
                TargetKind::Haproxy,
                TargetKind::Varnish,
                TargetKind::Baseline,
            ] {
                match start(kind, &s, &ctx, &Origins::none()) {
                    Err(StartError::NotSupported(why)) => {
                        assert_eq!(Some(why.as_str()), no_http3(kind), "{name}")
                    }
                    Err(other) => panic!("{name} {}: {other:?}", kind.name()),
                    Ok(_) => panic!("{name} {}: started", kind.name()),
                }
            }
            assert_eq!(no_http3(TargetKind::Sluice), None);
            assert_eq!(no_http3(TargetKind::Caddy), None);
        }
    }
}
