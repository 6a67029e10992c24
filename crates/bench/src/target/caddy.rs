//! Caddy as a target: a Caddyfile generated per scenario, adapted to Caddy's JSON with `caddy
//! adapt`, and run with `caddy run --config caddy.json` (Caddy 2.6 from Debian, issue 13's
//! reference): the Go server whose gzip level 1 sent the fewest bytes of the proxied JSON.
//!
//! What it runs: static files (with `file_server { precompressed gzip br zstd }` for the
//! sidecars), compression on the fly with `encode` (gzip at the scenario's level; zstd only at
//! level 3, since Caddy 2.6's zstd encoder has no level setting and uses the library's default,
//! about zstd's 3), proxying to TCP or unix-socket origins, even balancing (`lb_policy
//! round_robin`) and TLS with HTTP/1.1 or HTTP/2 by ALPN on the lab's certificate. The rest is
//! "not supported", with the reason: stock Caddy has no brotli encoder, no response cache and no
//! request-body decoding, and 2.6's `lb_policy` has no weights (`weighted_round_robin` is not a
//! registered module in 2.6).
//!
//! It never touches the network or the user's directories: the admin endpoint is off (`admin
//! off`), automatic HTTPS is off (no certificate is requested, no redirect listener opened, no
//! local CA installed: `auto_https off`, `skip_install_trust`), the storage and Caddy's data and
//! config directories (`XDG_DATA_HOME`, `XDG_CONFIG_HOME`) are in the scenario's directory, and
//! autosave is off: Caddy 2.6's Caddyfile has no `persist_config` option, so the adapted JSON
//! gets `admin.config.persist = false` before it runs.
//!
//! The process: `taskset` then `caddy run` with `GOMAXPROCS` set to the worker count (1), so the
//! Go runtime runs one thread of Go code at a time on the server CPU, like one nginx worker. It is
//! one process; the sampler counts all of its threads (the Go runtime's included).

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::process::{Address, Process};
use super::{Context, Origins, StartError};
use crate::scenario::{Algorithm, Compression, Protocol, Scenario, Setup};

/// `caddy` on PATH (Debian installs it in /usr/bin).
pub fn binary() -> Option<PathBuf> {
    let caddy = PathBuf::from("caddy");
    Command::new(&caddy)
        .arg("version")
        .output()
        .is_ok()
        .then_some(caddy)
}

pub fn available() -> bool {
    binary().is_some()
}

/// `caddy version`'s line, e.g. `2.6.2`.
pub fn version() -> Option<String> {
    let out = Command::new(binary()?).arg("version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().next()?.trim();
    // Debian's prints only the version; upstream builds add a hash after a space.
    let version = line.split_whitespace().next().unwrap_or(line);
    (!version.is_empty()).then(|| format!("caddy {version}"))
}

pub fn start(
    scenario: &Scenario,
    ctx: &Context,
    origins: &Origins,
    addr: SocketAddr,
    dir: &Path,
) -> Result<Process, StartError> {
    let caddyfile = caddyfile(scenario, ctx, origins, addr, dir)?;
    super::tuning::verify(super::TargetKind::Caddy, scenario, &caddyfile)
        .map_err(StartError::Drift)?;
    let Some(caddy) = binary() else {
        return Err(StartError::NotSupported(
            "caddy is not installed (apt-get install caddy)".into(),
        ));
    };
    let path = dir.join("Caddyfile");
    std::fs::write(&path, caddyfile)
        .map_err(|e| StartError::Failed(format!("writing {}: {e}", path.display())))?;
    let json = adapt(&caddy, &path, dir).map_err(StartError::Failed)?;
    let json_path = dir.join("caddy.json");
    std::fs::write(&json_path, json)
        .map_err(|e| StartError::Failed(format!("writing {}: {e}", json_path.display())))?;
    let args = vec![
        "run".to_string(),
        "--config".into(),
        json_path.display().to_string(),
    ];
    Process::spawn_pinned_with_env(
        "caddy",
        &ctx.server_cpus,
        &caddy,
        &args,
        &env(ctx, dir),
        &dir.join("caddy.log"),
    )
    .map_err(StartError::Failed)
}

/// The environment of every `caddy` command: its runtime on `workers` threads, its data and
/// config directories under `dir`.
pub fn env(ctx: &Context, dir: &Path) -> Vec<(String, String)> {
    let mut env = vec![("GOMAXPROCS".into(), ctx.workers.max(1).to_string())];
    env.extend(directories(dir));
    env
}

/// Caddy's data and config directories, under `dir`.
fn directories(dir: &Path) -> [(String, String); 2] {
    [
        (
            "XDG_DATA_HOME".into(),
            dir.join("xdg-data").display().to_string(),
        ),
        (
            "XDG_CONFIG_HOME".into(),
            dir.join("xdg-config").display().to_string(),
        ),
    ]
}

/// `caddy adapt` of the Caddyfile at `path` into Caddy's JSON, with autosave turned off.
pub fn adapt(caddy: &Path, path: &Path, dir: &Path) -> Result<String, String> {
    let out = Command::new(caddy)
        .args(["adapt", "--adapter", "caddyfile", "--config"])
        .arg(path)
        .envs(directories(dir))
        .output()
        .map_err(|e| format!("running caddy adapt: {e}"))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let last = stderr.lines().last().unwrap_or("").trim().to_string();
        return Err(format!("caddy adapt refused {}: {last}", path.display()));
    }
    let mut json: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("caddy adapt printed no JSON: {e}"))?;
    without_autosave(&mut json)?;
    serde_json::to_string_pretty(&json).map_err(|e| format!("writing Caddy's JSON: {e}"))
}

/// `admin.config.persist = false`: Caddy 2.6 saves every config it loads to
/// `$XDG_CONFIG_HOME/caddy/autosave.json` unless told not to, and its Caddyfile cannot say so.
pub fn without_autosave(json: &mut serde_json::Value) -> Result<(), String> {
    let root = json
        .as_object_mut()
        .ok_or("Caddy's JSON config is not an object")?;
    let admin = root
        .entry("admin")
        .or_insert_with(|| serde_json::json!({}))
        .as_object_mut()
        .ok_or("Caddy's `admin` is not an object")?;
    admin.insert("config".into(), serde_json::json!({ "persist": false }));
    Ok(())
}

/// The Caddyfile for one scenario, or why Caddy does not run it. `dir` holds Caddy's storage.
pub fn caddyfile(
    scenario: &Scenario,
    ctx: &Context,
    origins: &Origins,
    addr: SocketAddr,
    dir: &Path,
) -> Result<String, StartError> {
    let not = |why: &str| Err(StartError::NotSupported(why.into()));
    let mut site = String::new();
    match &scenario.setup {
        Setup::Static { compress } => {
            let _ = writeln!(site, "\troot * {}", ctx.page_dir.display());
            site.push_str(&encode(*compress)?);
            site.push_str("\tfile_server\n");
        }
        Setup::Precompressed => {
            let _ = writeln!(
                site,
                "\troot * {}\n\tfile_server {{\n\t\tprecompressed gzip br zstd\n\t}}",
                ctx.precompressed_dir.display()
            );
        }
        Setup::Direct => {
            return Err(StartError::Failed(
                "a direct scenario has no server in front of the origin".into(),
            ));
        }
        Setup::Proxy(proxy) => {
            if proxy.decompress_requests {
                return not("Caddy cannot decompress request bodies");
            }
            if proxy.cache {
                return not("stock Caddy has no response cache (it needs a plugin)");
            }
            if proxy.weights.windows(2).any(|w| w[0] != w[1]) {
                return not("Caddy 2.6's lb_policy has no weights (no weighted_round_robin)");
            }
            if origins.addresses.len() != proxy.weights.len() || origins.addresses.is_empty() {
                return Err(StartError::Failed(format!(
                    "{} origins for {} weights",
                    origins.addresses.len(),
                    proxy.weights.len()
                )));
            }
            site.push_str(&encode(proxy.compress)?);
            let upstreams: Vec<String> = origins
                .addresses
                .iter()
                .map(|a| match a {
                    Address::Tcp(a) => a.to_string(),
                    Address::Unix(p) => format!("unix/{}", p.display()),
                })
                .collect();
            let _ = writeln!(site, "\treverse_proxy {} {{", upstreams.join(" "));
            if upstreams.len() > 1 {
                site.push_str("\t\tlb_policy round_robin\n");
            }
            // Idle upstream connections kept like nginx's `keepalive 100`.
            site.push_str(
                "\t\ttransport http {\n\t\t\tkeepalive 60s\n\t\t\t\
                 keepalive_idle_conns_per_host 100\n\t\t}\n\t}\n",
            );
        }
    }
    let protocols = match (scenario.load.tls, scenario.load.protocol) {
        (true, Protocol::H2) => "h1 h2",
        // Caddy serves HTTP/3 on the HTTPS port's UDP side.
        (true, Protocol::H3) => "h1 h2 h3",
        _ => "h1",
    };
    let mut file = String::new();
    let _ = writeln!(
        file,
        "{{\n\tadmin off\n\tauto_https off\n\tskip_install_trust\n\tgrace_period 1s\n\t\
         storage file_system {}\n\tlog default {{\n\t\toutput stderr\n\t\tlevel ERROR\n\t}}\n\t\
         servers {{\n\t\tprotocols {protocols}\n\t}}\n}}\n",
        dir.join("storage").display()
    );
    let _ = writeln!(file, ":{} {{\n\tbind {}", addr.port(), addr.ip());
    if scenario.load.tls {
        let _ = writeln!(file, "\ttls {} {}", ctx.cert.display(), ctx.key.display());
    }
    file.push_str(&site);
    file.push_str("}\n");
    Ok(file)
}

/// The `encode` block for a compression, or why Caddy cannot do it.
fn encode(compress: Option<Compression>) -> Result<String, StartError> {
    let Some(c) = compress else {
        return Ok(String::new());
    };
    let encoder = match c.algorithm {
        Algorithm::Gzip => format!("gzip {}", c.level),
        // klauspost/compress's SpeedDefault, "roughly equivalent to the default zstd level 3".
        Algorithm::Zstd if c.level == 3 => "zstd".into(),
        Algorithm::Zstd => {
            return Err(StartError::NotSupported(format!(
                "Caddy 2.6's zstd has no level setting (it uses about level 3), not {}",
                c.level
            )));
        }
        Algorithm::Br => {
            return Err(StartError::NotSupported(
                "stock Caddy has no brotli encoder".into(),
            ));
        }
    };
    // `minimum_length 0`: compress whatever the scenario asks for, like the others' configs.
    Ok(format!(
        "\tencode {{\n\t\t{encoder}\n\t\tminimum_length 0\n\t}}\n"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::test_support::*;

    fn file(name: &str) -> Result<String, StartError> {
        let s = scenario(name);
        let mut origins = Origins::none();
        for i in 0..s.origins() {
            origins.addresses.push(if s.unix_origins() {
                Address::Unix(format!("/w/o{i}.sock").into())
            } else {
                Address::Tcp(SocketAddr::from(([127, 0, 0, 1], 9000 + i as u16)))
            });
        }
        caddyfile(
            &s,
            &ctx(),
            &origins,
            SocketAddr::from(([127, 0, 0, 1], 8080)),
            Path::new("/w/d"),
        )
    }

    #[test]
    fn never_touches_the_network_and_listens_on_loopback_only() {
        let f = file("static-plain").unwrap();
        for line in [
            "\tadmin off\n",
            "\tauto_https off\n",
            "\tskip_install_trust\n",
            "\tstorage file_system /w/d/storage\n",
            ":8080 {\n\tbind 127.0.0.1\n",
            "\t\tprotocols h1\n",
            "\troot * /w/site\n\tfile_server\n",
        ] {
            assert!(f.contains(line), "{line:?}:\n{f}");
        }
        assert!(!f.contains("encode"), "{f}");
    }

    #[test]
    fn static_gzip_encodes_at_the_level_and_sidecars_are_precompressed() {
        let f = file("static-gzip-6").unwrap();
        assert!(f.contains("\tencode {\n\t\tgzip 6\n"), "{f}");
        let f = file("static-precompressed").unwrap();
        assert!(f.contains("precompressed gzip br zstd"), "{f}");
        assert!(f.contains("root * /w/site-precompressed"), "{f}");
        assert!(file("static-zstd").unwrap().contains("\t\tzstd\n"));
        assert!(matches!(
            file("static-br"),
            Err(StartError::NotSupported(_))
        ));
    }

    #[test]
    fn proxying_balances_evenly_over_keep_alive_connections() {
        let f = file("date-balanced").unwrap();
        assert!(
            f.contains("reverse_proxy 127.0.0.1:9000 127.0.0.1:9001 {\n\t\tlb_policy round_robin"),
            "{f}"
        );
        assert!(f.contains("keepalive_idle_conns_per_host 100"), "{f}");
        let gz = file("date-proxy-gzip-1").unwrap();
        assert!(gz.contains("gzip 1"), "{gz}");
        for name in ["date-uneven", "date-cached-c6", "post-gz1"] {
            assert!(
                matches!(file(name), Err(StartError::NotSupported(_))),
                "{name}"
            );
        }
    }

    #[test]
    fn tls_uses_the_lab_certificate_and_offers_h2_only_for_h2() {
        let h2 = file("tls-h2").unwrap();
        assert!(h2.contains("\ttls /w/cert.pem /w/key.pem\n"), "{h2}");
        assert!(h2.contains("protocols h1 h2\n"), "{h2}");
        assert!(h2.contains("reverse_proxy unix//w/o0.sock {"), "{h2}");
        let h1 = file("tls-h1").unwrap();
        assert!(h1.contains("protocols h1\n"), "{h1}");
        for name in ["tls-h3", "json-h3", "download-h3"] {
            let h3 = file(name).unwrap();
            assert!(h3.contains("protocols h1 h2 h3\n"), "{h3}");
            assert!(h3.contains("\ttls /w/cert.pem /w/key.pem\n"), "{h3}");
        }
    }

    #[test]
    fn autosave_is_turned_off_in_the_adapted_json() {
        let mut json = serde_json::json!({ "admin": { "disabled": true }, "apps": {} });
        without_autosave(&mut json).unwrap();
        assert_eq!(json["admin"]["disabled"], true);
        assert_eq!(json["admin"]["config"]["persist"], false);
        let mut bare = serde_json::json!({});
        without_autosave(&mut bare).unwrap();
        assert_eq!(bare["admin"]["config"]["persist"], false);
    }
}
