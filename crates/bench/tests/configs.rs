//! The generated target configs are valid: every sluice config that needs only landed features
//! loads with sluice-config, and every nginx.conf passes `nginx -t` (when nginx is installed).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::path::Path;

use sluice_bench::scenario::{self, Scenario, Setup};
use sluice_bench::target::process::Address;
use sluice_bench::target::{Context, Origins, StartError, nginx, sluice};

fn context(dir: &Path) -> Context {
    for sub in ["site", "site-precompressed"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    // A certificate nginx can load.
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    std::fs::write(dir.join("cert.pem"), cert.cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), cert.signing_key.serialize_pem()).unwrap();
    Context {
        work_dir: dir.into(),
        exe: "sluice".into(),
        server_cpus: "0".into(),
        load_cpus: "1".into(),
        workers: 1,
        page_dir: dir.join("site"),
        precompressed_dir: dir.join("site-precompressed"),
        cert: dir.join("cert.pem"),
        key: dir.join("key.pem"),
    }
}

fn origins(s: &Scenario, dir: &Path) -> Origins {
    let mut origins = Origins::none();
    for i in 0..s.origins() {
        origins.addresses.push(if s.unix_origins() {
            Address::Unix(dir.join(format!("o{i}.sock")))
        } else {
            Address::Tcp(SocketAddr::from(([127, 0, 0, 1], 9000 + i as u16)))
        });
    }
    origins
}

const LISTEN: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 0);

/// Scenarios whose sluice config uses only what has landed (compression, precompressed
/// files and the cache are being built).
fn needs_only_landed_features(s: &Scenario) -> bool {
    match &s.setup {
        Setup::Static { compress } => compress.is_none(),
        Setup::Precompressed | Setup::Direct => false,
        Setup::Proxy(p) => p.compress.is_none() && !p.cache,
    }
}

#[test]
fn sluice_configs_load() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let mut loaded = 0;
    for s in scenario::all(false) {
        if !needs_only_landed_features(&s) {
            continue;
        }
        let toml = sluice::config(&s, &ctx, &origins(&s, dir.path()), LISTEN).unwrap();
        let path = dir.path().join(format!("{}.toml", s.name));
        std::fs::write(&path, &toml).unwrap();
        if let Err(diagnostics) = sluice_config::load(&path) {
            panic!("{}:\n{toml}\n{diagnostics}", s.name);
        }
        loaded += 1;
    }
    assert!(loaded >= 10, "{loaded}");
    let cached = scenario::all(false)
        .into_iter()
        .find(|s| s.name == "date-cached")
        .unwrap();
    assert!(matches!(
        sluice::config(&cached, &ctx, &origins(&cached, dir.path()), LISTEN),
        Err(StartError::NotSupported(why)) if why == "no cache yet"
    ));
}

#[test]
fn nginx_configs_pass_nginx_t() {
    if !nginx::available() {
        eprintln!("nginx is not installed: skipped");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let mut tested = 0;
    for s in scenario::all(false) {
        if s.setup == Setup::Direct {
            continue;
        }
        let prefix = dir.path().join(&s.name);
        std::fs::create_dir_all(&prefix).unwrap();
        // nginx refuses port 0; `nginx -t` does not bind, so any port will do.
        let listen = SocketAddr::from(([127, 0, 0, 1], 18080));
        let conf = match nginx::config(&s, &ctx, &origins(&s, dir.path()), listen, &prefix) {
            Ok(conf) => conf,
            Err(StartError::NotSupported(_)) => continue,
            Err(StartError::Failed(e)) => panic!("{}: {e}", s.name),
        };
        let path = prefix.join("nginx.conf");
        std::fs::write(&path, &conf).unwrap();
        let out = std::process::Command::new("nginx")
            .arg("-t")
            .arg("-p")
            .arg(&prefix)
            .arg("-c")
            .arg(&path)
            .args(["-e", "stderr"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{}:\n{conf}\n{stderr}", s.name);
        assert!(!stderr.contains("[warn]"), "{}:\n{conf}\n{stderr}", s.name);
        tested += 1;
    }
    assert!(tested >= 15, "{tested}");
}
