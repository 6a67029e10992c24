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
        let _ = writeln!(
            toml,
            "protocols = [\"{}\"]\ntls = {{ cert = {:?}, key = {:?} }}",
            scenario.load.protocol.alpn(),
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
            if proxy.cache {
                return Err(StartError::NotSupported("no cache yet".into()));
            }
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
            let _ = writeln!(toml, "[[routes]]\npath_prefix = \"/\"");
            push_compress(&mut toml, proxy.compress);
            let _ = writeln!(toml, "[routes.proxy]\nupstream = \"backend\"");
            if proxy.decompress_requests {
                let _ = writeln!(toml, "decompress_requests = {{}}");
            }
        }
    }
    Ok(toml)
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
