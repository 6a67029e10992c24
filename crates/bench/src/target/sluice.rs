//! sluice as a target: a TOML config per scenario (syntax: docs/config.md), validated with
//! `sluice check` first so that a scenario needing a feature that has not landed yet is
//! reported as not supported, with the check's message, instead of failing, and lights up by
//! itself when the feature lands.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

use super::process::{Address, Process};
use super::{Context, Origins, StartError};
use crate::scenario::{Compression, Scenario, Setup};

pub fn start(
    scenario: &Scenario,
    ctx: &Context,
    origins: &Origins,
    addr: SocketAddr,
    dir: &Path,
) -> Result<Process, StartError> {
    let toml = config(scenario, ctx, origins, addr)?;
    start_toml(&toml, ctx, dir)
}

/// Write `toml` as `dir/sluice.toml`, have `sluice check` accept it (a refusal is "not
/// supported", with its first line), and start `sluice serve` on it pinned to the server CPUs.
pub fn start_toml(toml: &str, ctx: &Context, dir: &Path) -> Result<Process, StartError> {
    let path = dir.join("sluice.toml");
    std::fs::write(&path, toml)
        .map_err(|e| StartError::Failed(format!("writing {}: {e}", path.display())))?;
    let check = Command::new(&ctx.exe)
        .arg("check")
        .arg(&path)
        .output()
        .map_err(|e| StartError::Failed(format!("running sluice check: {e}")))?;
    if !check.status.success() {
        // The first line names the problem (`unknown key `compress` in routes[0]`); the
        // rest points into the generated file, which is kept in the run directory.
        let message = String::from_utf8_lossy(&check.stderr);
        let first = message.lines().next().unwrap_or("").trim();
        let first = first.strip_prefix("error: ").unwrap_or(first);
        return Err(StartError::NotSupported(format!(
            "sluice check refused the config: {first}"
        )));
    }
    let args = vec![
        "serve".to_string(),
        "--config".into(),
        path.display().to_string(),
    ];
    Process::spawn_pinned(
        "sluice",
        &ctx.server_cpus,
        &ctx.exe,
        &args,
        &dir.join("sluice.log"),
    )
    .map_err(StartError::Failed)
}

/// The config for one scenario.
pub fn config(
    scenario: &Scenario,
    ctx: &Context,
    origins: &Origins,
    addr: SocketAddr,
) -> Result<String, StartError> {
    let mut toml = String::new();
    let _ = writeln!(
        toml,
        "[server]\nworkers = {}\nshutdown_timeout = \"1s\"\n\n[log]\naccess = \"off\"\nlevel = \"warn\"\n",
        ctx.workers
    );
    let _ = writeln!(toml, "[[listeners]]\naddress = \"{addr}\"");
    if scenario.load.tls {
        // h3 needs a TCP protocol beside it (its Alt-Svc is sent there).
        let protocols = match scenario.load.protocol {
            crate::scenario::Protocol::H3 => "\"h2\", \"h3\"".to_string(),
            other => format!("\"{}\"", other.alpn()),
        };
        let _ = writeln!(
            toml,
            "protocols = [{}]\ntls = {{ cert = {:?}, key = {:?} }}",
            protocols,
            ctx.cert.display().to_string(),
            ctx.key.display().to_string()
        );
    }
    toml.push('\n');
    match &scenario.setup {
        Setup::Static { compress } => {
            let _ = writeln!(
                toml,
                "[[routes]]\npath_prefix = \"/\"\nstatic = {{ root = {:?} }}",
                ctx.page_dir.display().to_string()
            );
            push_compress(&mut toml, *compress);
        }
        Setup::Precompressed => {
            let _ = writeln!(
                toml,
                "[[routes]]\npath_prefix = \"/\"\nstatic = {{ root = {:?}, precompressed = true }}",
                ctx.precompressed_dir.display().to_string()
            );
        }
        Setup::Direct => {
            return Err(StartError::Failed(
                "a direct scenario has no server in front of the origin".into(),
            ));
        }
        Setup::Proxy(proxy) => {
            let servers: Vec<String> = origins
                .addresses
                .iter()
                .zip(&proxy.weights)
                .map(|(address, weight)| {
                    let address = match address {
                        Address::Tcp(a) => a.to_string(),
                        Address::Unix(p) => format!("unix:{}", p.display()),
                    };
                    format!("{{ address = {address:?}, weight = {weight} }}")
                })
                .collect();
            let _ = writeln!(
                toml,
                "[upstreams.backend]\nservers = [{}]\nkeepalive = {{ max_idle = 100 }}\n",
                servers.join(", ")
            );
            if proxy.cache {
                let _ = writeln!(toml, "[caches.{CACHE_ZONE}]\nmemory = \"64MiB\"\n");
            }
            let _ = writeln!(toml, "[[routes]]\npath_prefix = \"/\"");
            if proxy.cache {
                push_cache(&mut toml, proxy.compress);
            }
            push_compress(&mut toml, proxy.compress);
            let _ = writeln!(toml, "[routes.proxy]\nupstream = \"backend\"");
            if proxy.decompress_requests {
                let _ = writeln!(toml, "decompress_requests = {{}}");
            }
        }
    }
    Ok(toml)
}

/// The cache zone of the cached scenarios (`[caches.bench]`).
const CACHE_ZONE: &str = "bench";

/// Route-level caching. The demo origin's `max-age=5` decides freshness; `valid` is the TTL for
/// a 200 that says nothing, like nginx's `proxy_cache_valid 200 1m`. With compression, the
/// stored variant is encoded at the scenario's level (`levels`), so a hit serves the bytes the
/// scenario asked for rather than the cache's default level.
fn push_cache(toml: &mut String, compress: Option<Compression>) {
    let levels = compress.map_or(String::new(), |c| {
        format!(", levels = {{ {} = {} }}", c.algorithm.token(), c.level)
    });
    let _ = writeln!(
        toml,
        "cache = {{ zone = \"{CACHE_ZONE}\", valid = {{ \"200\" = \"1m\" }}{levels} }}"
    );
}

/// Route-level response compression: one algorithm at the scenario's level.
fn push_compress(toml: &mut String, compress: Option<Compression>) {
    if let Some(c) = compress {
        let token = c.algorithm.token();
        let _ = writeln!(
            toml,
            "compress = {{ algorithms = [\"{token}\"], levels = {{ {token} = {} }} }}",
            c.level
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario;

    fn context() -> Context {
        Context::for_tests("/tmp/bench")
    }

    fn rendered(name: &str) -> String {
        let s = scenario::all(false)
            .into_iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no scenario {name}"));
        let mut origins = Origins::none();
        origins
            .addresses
            .push(Address::Tcp(SocketAddr::from(([127, 0, 0, 1], 9000))));
        let addr = SocketAddr::from(([127, 0, 0, 1], 8080));
        match config(&s, &context(), &origins, addr) {
            Ok(toml) => toml,
            Err(e) => panic!("{name}: {e:?}"),
        }
    }

    /// The route of a proxy config: from `[[routes]]` up to its `[routes.proxy]` table.
    fn route(toml: &str) -> &str {
        let start = toml.find("[[routes]]").unwrap();
        let end = toml.find("[routes.proxy]").unwrap();
        &toml[start..end]
    }

    #[test]
    fn a_cached_scenario_gets_the_zone_and_a_route_cache() {
        for name in ["date-cached-c1", "date-cached-c6"] {
            let toml = rendered(name);
            let zone = toml.find("[caches.bench]\nmemory = \"64MiB\"\n").unwrap();
            // The zone is a top-level table: before the first `[[routes]]`, or TOML would
            // read it as part of the route.
            assert!(zone < toml.find("[[routes]]").unwrap(), "{toml}");
            assert_eq!(
                route(&toml),
                "[[routes]]\npath_prefix = \"/\"\n\
                 cache = { zone = \"bench\", valid = { \"200\" = \"1m\" } }\n",
                "{name}"
            );
        }
    }

    #[test]
    fn a_cached_and_compressed_scenario_stores_the_variant_at_its_level() {
        let toml = rendered("date-cached-gzip-6");
        assert_eq!(
            route(&toml),
            "[[routes]]\npath_prefix = \"/\"\n\
             cache = { zone = \"bench\", valid = { \"200\" = \"1m\" }, levels = { gzip = 6 } }\n\
             compress = { algorithms = [\"gzip\"], levels = { gzip = 6 } }\n"
        );
    }

    #[test]
    fn scenarios_without_a_cache_name_none() {
        for s in scenario::all(false) {
            if s.setup == Setup::Direct {
                continue;
            }
            let cached = matches!(&s.setup, Setup::Proxy(p) if p.cache);
            let toml = rendered(&s.name);
            assert_eq!(toml.contains("[caches."), cached, "{}", s.name);
            assert_eq!(toml.contains("cache = {"), cached, "{}", s.name);
        }
    }
}
