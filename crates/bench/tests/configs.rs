//! The generated target configs are valid: every sluice config loads with sluice-config and
//! asks for what its scenario means (compression algorithm and level, precompressed files,
//! request decompression, TLS, the origins), every nginx.conf passes `nginx -t`, every VCL
//! compiles with `varnishd -C`, every haproxy.cfg passes `haproxy -c` and every Caddyfile adapts
//! and passes `caddy validate` (each when that peer is installed; skipped with a message when
//! not).
//!
//! The cached scenarios' sluice configs (`[caches.*]`, a route's `cache`) have a test of their
//! own, [`cached_sluice_configs_load`]: it fails until sluice-config knows the cache.

// Helper functions of this test crate are outside #[test] functions, where clippy.toml's
// allow-*-in-tests does not reach.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use std::net::SocketAddr;
use std::path::Path;

use sluice_bench::scenario::{self, Scenario, Setup};
use sluice_bench::target::process::Address;
use sluice_bench::target::{Context, Origins, StartError, caddy, haproxy, nginx, sluice, varnish};
use sluice_config::model;

fn context(dir: &Path) -> Context {
    for sub in ["site", "site-precompressed"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    // A certificate nginx can load.
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    std::fs::write(dir.join("cert.pem"), cert.cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), cert.signing_key.serialize_pem()).unwrap();
    Context::for_tests(dir)
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

/// The route's `compress` in the loaded model says what the scenario asked for: that one
/// algorithm at that level, or nothing.
fn assert_compress(name: &str, route: &model::Route, wanted: Option<scenario::Compression>) {
    let Some(wanted) = wanted else {
        assert!(route.compress.is_none(), "{name}: compresses unasked");
        return;
    };
    let compress = route
        .compress
        .as_ref()
        .unwrap_or_else(|| panic!("{name}: no compress"));
    assert_eq!(compress.algorithms.len(), 1, "{name}");
    let algorithm = compress.algorithms[0];
    assert_eq!(algorithm.as_str(), wanted.algorithm.token(), "{name}");
    assert_eq!(compress.levels.get(algorithm), Some(wanted.level), "{name}");
}

fn cached(s: &Scenario) -> bool {
    matches!(&s.setup, Setup::Proxy(p) if p.cache)
}

#[test]
fn every_sluice_config_loads_and_asks_for_what_the_scenario_means() {
    let loaded = load_sluice_configs(|s| !cached(s));
    // Every scenario but the direct ones and the cached ones (the next test).
    let expected = scenario::all(false)
        .iter()
        .filter(|s| s.setup != Setup::Direct && !cached(s))
        .count();
    assert_eq!(loaded, expected);
}

/// Passes only once sluice-config has the response cache (`[caches.NAME]`, a route's `cache =
/// { zone, valid, levels }`): until then it fails with the loader's "unknown key" diagnostics.
#[test]
fn cached_sluice_configs_load() {
    let loaded = load_sluice_configs(cached);
    assert_eq!(
        loaded, 3,
        "date-cached-c1, date-cached-c6, date-cached-gzip-6"
    );
}

/// Generate and load the sluice config of every scenario `pick` selects, checking that it asks
/// for what the scenario means; returns how many loaded.
fn load_sluice_configs(pick: impl Fn(&Scenario) -> bool) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let mut loaded = 0;
    for s in scenario::all(false) {
        if s.setup == Setup::Direct || !pick(&s) {
            continue;
        }
        let toml = match sluice::config(&s, &ctx, &origins(&s, dir.path()), LISTEN) {
            Ok(toml) => toml,
            Err(e) => panic!("{}: {e:?}", s.name),
        };
        let path = dir.path().join(format!("{}.toml", s.name));
        std::fs::write(&path, &toml).unwrap();
        let config = match sluice_config::load(&path) {
            Ok(config) => config,
            Err(diagnostics) => panic!("{}:\n{toml}\n{diagnostics}", s.name),
        };
        let [listener] = &config.listeners[..] else {
            panic!("{}: one listener", s.name)
        };
        assert_eq!(listener.tls.is_some(), s.load.tls, "{}", s.name);
        let [route] = &config.routes[..] else {
            panic!("{}: one route", s.name)
        };
        match (&s.setup, &route.action) {
            (Setup::Static { compress }, model::Action::Static(files)) => {
                assert!(files.precompressed.is_empty(), "{}", s.name);
                assert_eq!(files.root, ctx.page_dir, "{}", s.name);
                assert_compress(&s.name, route, *compress);
            }
            (Setup::Precompressed, model::Action::Static(files)) => {
                // gzip at least: the sidecar nginx's gzip_static serves too.
                assert!(!files.precompressed.is_empty(), "{}", s.name);
                assert_eq!(files.root, ctx.precompressed_dir, "{}", s.name);
                assert_compress(&s.name, route, None);
            }
            (Setup::Proxy(p), model::Action::Proxy(proxy)) => {
                assert_eq!(
                    proxy.decompress_requests.is_some(),
                    p.decompress_requests,
                    "{}",
                    s.name
                );
                let [upstream] = &config.upstreams[..] else {
                    panic!("{}: one upstream", s.name)
                };
                assert_eq!(upstream.servers.len(), p.weights.len(), "{}", s.name);
                assert_compress(&s.name, route, p.compress);
            }
            (setup, action) => panic!("{}: {setup:?} became {action:?}", s.name),
        }
        loaded += 1;
    }
    loaded
}

#[test]
fn nginx_configs_pass_nginx_t() {
    if !nginx::available() {
        common::skip(module_path!(), "nginx is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let mut tested = 0;
    let mut not_supported = Vec::new();
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
            Err(StartError::NotSupported(_)) => {
                not_supported.push(s.name.clone());
                continue;
            }
            Err(e) => panic!("{}: {e:?}", s.name),
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
        if s.setup == Setup::Precompressed {
            assert!(conf.contains("gzip_static on;"), "{conf}");
        }
        if cached(&s) {
            // On every answer, errors included, so the check sees why a request missed.
            assert!(
                conf.contains("add_header X-Cache-Status $upstream_cache_status always;"),
                "{conf}"
            );
        }
        tested += 1;
    }
    // What Debian's nginx cannot do: brotli, zstd, request-body decompression, HTTP/3.
    assert_eq!(
        not_supported,
        [
            "post-gz1",
            "static-br",
            "static-zstd",
            "tls-h3",
            "json-h3",
            "download-h3"
        ]
    );
    assert!(tested >= 15, "{tested}");
}

#[test]
fn varnish_vcls_compile() {
    if !varnish::available() {
        common::skip(module_path!(), "varnish is not installed");
        return;
    }
    let varnishd = varnish::binary().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut compiled = Vec::new();
    for s in scenario::all(false) {
        if s.setup == Setup::Direct {
            continue;
        }
        let vcl = match varnish::vcl(&s, &origins(&s, dir.path())) {
            Ok(vcl) => vcl,
            Err(StartError::NotSupported(_)) => continue,
            Err(e) => panic!("{}: {e:?}", s.name),
        };
        let path = dir.path().join(format!("{}.vcl", s.name));
        std::fs::write(&path, &vcl).unwrap();
        // `-C` compiles the VCL to C and prints it: varnishd's `nginx -t`.
        let out = std::process::Command::new(&varnishd)
            .arg("-C")
            .arg("-f")
            .arg(&path)
            .arg("-n")
            .arg(dir.path().join("varnishd"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{}:\n{vcl}\n{stderr}", s.name);
        compiled.push(s.name);
    }
    // The cached scenarios, and plain proxying to one origin.
    assert_eq!(
        compiled,
        [
            "post-get",
            "post-gz0",
            "post-raw",
            "date-proxy-c1",
            "date-proxy-c6",
            "date-cached-c1",
            "date-cached-c6",
            "date-cached-gzip-6",
            "stream-raw"
        ]
    );
}

#[test]
fn haproxy_configs_pass_haproxy_c() {
    let Some(haproxy_bin) = haproxy::binary() else {
        common::skip(module_path!(), "haproxy is not installed");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let mut checked = Vec::new();
    let mut not_supported = Vec::new();
    for s in scenario::all(false) {
        if s.setup == Setup::Direct {
            continue;
        }
        let target_dir = dir.path().join(&s.name);
        std::fs::create_dir_all(&target_dir).unwrap();
        let listen = SocketAddr::from(([127, 0, 0, 1], 18080));
        let cfg = match haproxy::config(&s, &ctx, &origins(&s, dir.path()), listen, &target_dir) {
            Ok(cfg) => cfg,
            Err(StartError::NotSupported(_)) => {
                not_supported.push(s.name.clone());
                continue;
            }
            Err(e) => panic!("{}: {e:?}", s.name),
        };
        if s.load.tls {
            // `haproxy -c` loads the certificate.
            haproxy::write_cert_and_key(&ctx, &target_dir).unwrap();
        }
        let path = target_dir.join("haproxy.cfg");
        std::fs::write(&path, &cfg).unwrap();
        let out = std::process::Command::new(&haproxy_bin)
            .arg("-c")
            .arg("-f")
            .arg(&path)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{}:\n{cfg}\n{text}", s.name);
        // A warning means HAProxy would run something else than what the config says.
        assert!(!text.contains("[WARNING]"), "{}:\n{cfg}\n{text}", s.name);
        checked.push(s.name);
    }
    assert_eq!(
        checked,
        [
            "post-get",
            "post-gz0",
            "post-raw",
            "tls-h1",
            "tls-h2",
            "date-proxy-c1",
            "date-proxy-c6",
            "date-balanced",
            "date-uneven",
            "date-cached-c1",
            "date-cached-c6",
            "date-proxy-gzip-1",
            "stream-raw",
            "stream-gzip-1",
            "json-h2",
        ]
    );
    // No file server, no request decoding, one gzip level (libslz).
    assert!(not_supported.contains(&"static-plain".to_string()));
    assert!(not_supported.contains(&"post-gz1".to_string()));
    assert!(not_supported.contains(&"date-cached-gzip-6".to_string()));
    assert!(not_supported.contains(&"tls-h3".to_string()));
}

#[test]
fn caddyfiles_adapt_and_pass_caddy_validate() {
    let Some(caddy_bin) = caddy::binary() else {
        common::skip(module_path!(), "caddy is not installed");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let mut validated = Vec::new();
    for s in scenario::all(false) {
        if s.setup == Setup::Direct {
            continue;
        }
        let target_dir = dir.path().join(&s.name);
        std::fs::create_dir_all(&target_dir).unwrap();
        let listen = SocketAddr::from(([127, 0, 0, 1], 18080));
        let file = match caddy::caddyfile(&s, &ctx, &origins(&s, dir.path()), listen, &target_dir) {
            Ok(file) => file,
            Err(StartError::NotSupported(_)) => continue,
            Err(e) => panic!("{}: {e:?}", s.name),
        };
        let path = target_dir.join("Caddyfile");
        std::fs::write(&path, &file).unwrap();
        // What the lab runs: the adapted JSON with autosave off.
        let json = caddy::adapt(&caddy_bin, &path, &target_dir)
            .unwrap_or_else(|e| panic!("{}:\n{file}\n{e}", s.name));
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(value["admin"]["disabled"], true, "{}", s.name);
        assert_eq!(value["admin"]["config"]["persist"], false, "{}", s.name);
        let json_path = target_dir.join("caddy.json");
        std::fs::write(&json_path, &json).unwrap();
        let out = std::process::Command::new(&caddy_bin)
            .args(["validate", "--config"])
            .arg(&json_path)
            .envs(caddy::env(&ctx, &target_dir))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{}:\n{file}\n{stderr}", s.name);
        validated.push(s.name);
    }
    assert_eq!(
        validated,
        [
            "post-get",
            "post-gz0",
            "post-raw",
            "static-plain",
            "static-gzip-1",
            "static-gzip-2",
            "static-gzip-4",
            "static-gzip-6",
            "static-gzip-9",
            "static-zstd",
            "static-precompressed",
            "tls-h1",
            "tls-h2",
            "tls-h3",
            "date-proxy-c1",
            "date-proxy-c6",
            "date-balanced",
            "date-proxy-gzip-1",
            "stream-raw",
            "stream-gzip-1",
            "json-h2",
            "json-h3",
            "download-h2",
            "download-h3",
            "static-c1000",
        ]
    );
}
