//! The happy path: valid files map to the expected typed values, defaults included, and relative
//! paths resolve against the config file's directory. Proxies, upstream groups and the admin
//! listener are in `typed/proxy.rs`, compression in `typed/compress.rs`, the response cache in
//! `typed/cache.rs`, rate limits in `typed/rate_limit.rs`, a proxy's
//! upgrades (WebSocket) in `typed/upgrade.rs`.

// Helper functions of this test crate are outside #[test] functions, where clippy.toml's
// allow-*-in-tests does not reach.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::fs;
use std::path::Path;
use std::time::Duration;

use sluice_config::*;

#[path = "typed/cache.rs"]
mod cache;
#[path = "typed/compress.rs"]
mod compress;
#[path = "typed/fleet.rs"]
mod fleet;
#[path = "typed/paths.rs"]
mod paths;
#[path = "typed/proxy.rs"]
mod proxy;
#[path = "typed/rate_limit.rs"]
mod rate_limit;
#[path = "typed/upgrade.rs"]
mod upgrade;

const FULL: &str = r#"
[server]
workers = 4
shutdown_timeout = "1m 30s"
server_header = ""
pid_file = "logs/sluice.pid"

[log]
level = "sluice=debug,info"
access = "logs/access.log"
format = "json"

[[listeners]]
name = "public"
address = "0.0.0.0:8080"
protocols = "http/1.1"
header_read_timeout = "5s"
idle_timeout = "2m"
tls_handshake_timeout = "3s"
max_header_size = "16KiB"
max_headers = 50
max_concurrent_streams = 10

[[listeners]]
address = "[::1]:8443"
[listeners.tls]
cert = "certs/default.pem"
key = "certs/default-key.pem"
[[listeners.tls.sni]]
hosts = ["API.example.com", "*.internal.example.com"]
cert = "certs/api.pem"
key = "certs/api-key.pem"

[[listeners]]
name = "dev"
address = "127.0.0.1:0"
tls = { self_signed = true, hosts = ["dev.test", "127.0.0.1"] }

[upstreams.api]
servers = ["app:9001", { address = "unix:/run/app.sock", weight = 3 }]

[[routes]]
name = "health"
path = "/healthz"
respond = { status = 204, headers = { "Cache-Control" = "no-store" } }

[[routes]]
host = ["Example.com", "*.example.com"]
path_prefix = "/old/"
listeners = ["public"]
redirect = { to = "https://example.com{uri}" }

[[routes]]
path_prefix = "/api/"
proxy = { upstream = "api" }

[[routes]]
path_prefix = "/static/"
static = { root = "public", index = ["index.htm", "index.html"], strip_prefix = true, follow_symlinks_outside_root = true }
"#;

#[test]
fn a_full_config_maps_to_typed_values() {
    let dir = tempfile::tempdir().unwrap();
    for sub in ["public", "logs", "certs"] {
        fs::create_dir(dir.path().join(sub)).unwrap();
    }
    for file in ["default.pem", "default-key.pem", "api.pem", "api-key.pem"] {
        fs::write(dir.path().join("certs").join(file), "PEM").unwrap();
    }
    let file = dir.path().join("sluice.toml");
    fs::write(&file, FULL).unwrap();
    let config = load(&file).unwrap_or_else(|d| panic!("{d}"));

    assert_eq!(config.server.workers, Some(4));
    assert_eq!(config.server.shutdown_timeout, Duration::from_secs(90));
    assert_eq!(config.server.server_header, None);
    assert_eq!(
        config.server.pid_file,
        Some(std::path::absolute(dir.path().join("logs/sluice.pid")).unwrap())
    );
    assert_eq!(config.log.level, "sluice=debug,info");
    assert_eq!(
        config.log.access,
        AccessLog::File(dir.path().join("logs/access.log"))
    );
    assert_eq!(config.log.format, AccessLogFormat::Json);

    let [public, secure, dev] = config.listeners.as_slice() else {
        panic!("three listeners")
    };
    assert_eq!(public.name, "public");
    assert_eq!(public.address, "0.0.0.0:8080".parse().unwrap());
    assert_eq!(
        public.protocols,
        Protocols {
            http1: true,
            http2: false,
            http3: false
        }
    );
    assert!(public.tls.is_none());
    assert_eq!(public.limits.header_read_timeout, Duration::from_secs(5));
    assert_eq!(public.limits.idle_timeout, Duration::from_secs(120));
    assert_eq!(public.limits.tls_handshake_timeout, Duration::from_secs(3));
    assert_eq!(public.limits.max_header_size, 16 * 1024);
    assert_eq!(public.limits.max_headers, 50);
    assert_eq!(public.limits.max_concurrent_streams, 10);

    assert_eq!(
        secure.name, "[::1]:8443",
        "the name defaults to the address"
    );
    let Some(Tls::Files { default, sni }) = &secure.tls else {
        panic!("file certificates")
    };
    assert_eq!(default.cert, dir.path().join("certs/default.pem"));
    assert_eq!(default.key, dir.path().join("certs/default-key.pem"));
    assert_eq!(
        sni[0].hosts,
        [
            HostMatch::Exact("api.example.com".into()),
            HostMatch::Suffix(".internal.example.com".into())
        ]
    );
    assert_eq!(sni[0].files.cert, dir.path().join("certs/api.pem"));
    let Some(Tls::SelfSigned { hosts }) = &dev.tls else {
        panic!("self-signed")
    };
    assert_eq!(hosts, &["dev.test", "127.0.0.1"]);

    let [upstream] = config.upstreams.as_slice() else {
        panic!("one upstream")
    };
    assert_eq!(upstream.name, "api");
    assert_eq!(
        upstream.servers[0].address,
        UpstreamAddress::Tcp("app:9001".into())
    );
    assert_eq!(upstream.servers[0].weight, 1);
    assert_eq!(
        upstream.servers[1].address,
        UpstreamAddress::Unix("/run/app.sock".into())
    );
    assert_eq!(upstream.servers[1].weight, 3);

    let [health, redirect, api, files] = config.routes.as_slice() else {
        panic!("four routes")
    };
    assert_eq!(health.name, "health");
    assert_eq!(health.path, PathMatch::Exact("/healthz".into()));
    assert!(health.hosts.is_empty() && health.listeners.is_empty());
    let Action::Respond(response) = &health.action else {
        panic!("respond")
    };
    assert_eq!(response.status, 204);
    assert_eq!(response.headers["cache-control"], "no-store");
    assert!(response.body.is_empty());

    assert_eq!(redirect.name, "route 2");
    assert_eq!(
        redirect.hosts,
        [
            HostMatch::Exact("example.com".into()),
            HostMatch::Suffix(".example.com".into())
        ]
    );
    assert_eq!(redirect.listeners, ["public"]);
    let Action::Redirect(to) = &redirect.action else {
        panic!("redirect")
    };
    assert_eq!(
        (to.to.as_str(), to.status.as_u16()),
        ("https://example.com{uri}", 302)
    );

    assert!(matches!(&api.action, Action::Proxy(Proxy { upstream, .. }) if upstream == "api"));
    assert_eq!(api.path, PathMatch::Prefix("/api/".into()));

    let Action::Static(static_files) = &files.action else {
        panic!("static")
    };
    assert_eq!(static_files.root, dir.path().join("public"));
    assert!(static_files.root.is_absolute());
    assert_eq!(static_files.index, ["index.htm", "index.html"]);
    assert!(static_files.strip_prefix && static_files.follow_symlinks_outside_root);
}

#[test]
fn a_minimal_config_gets_every_default() {
    let text = "[[listeners]]\naddress = \"127.0.0.1:8080\"\n\n[[routes]]\nrespond = {}\n";
    let config = parse_str(text, Path::new("minimal.toml")).unwrap();
    assert_eq!(config.server.workers, None);
    assert_eq!(config.server.shutdown_timeout, Duration::from_secs(30));
    assert_eq!(config.server.server_header.as_ref().unwrap(), "sluice");
    assert_eq!(config.log.level, "info");
    assert_eq!(config.log.access, AccessLog::Stdout);
    assert_eq!(config.log.format, AccessLogFormat::Combined);
    assert!(config.admin.is_none());
    assert!(config.upstreams.is_empty());
    let listener = &config.listeners[0];
    assert_eq!(listener.name, "127.0.0.1:8080");
    assert_eq!(
        listener.protocols,
        Protocols {
            http1: true,
            http2: true,
            http3: false
        }
    );
    let defaults = ListenerLimits::default();
    assert_eq!(
        listener.limits.header_read_timeout,
        defaults.header_read_timeout
    );
    assert_eq!(listener.limits.idle_timeout, Duration::from_secs(75));
    assert_eq!(listener.limits.max_header_size, 64 * 1024);
    assert_eq!(listener.limits.max_headers, 100);
    assert_eq!(listener.limits.max_concurrent_streams, 250);
    assert_eq!(
        listener.limits.tls_handshake_timeout,
        Duration::from_secs(10)
    );
    assert!(!listener.proxy_protocol, "PROXY protocol is opt-in");
    let route = &config.routes[0];
    assert_eq!(
        (route.name.as_str(), &route.path),
        ("route 1", &PathMatch::Prefix("/".into()))
    );
    let Action::Respond(response) = &route.action else {
        panic!("respond")
    };
    assert_eq!(response.status, 200);
    assert!(response.headers.is_empty());
}

#[test]
fn proxy_protocol_is_read_per_listener() {
    let text = "[[listeners]]\naddress = \"127.0.0.1:8080\"\nproxy_protocol = true\n\n\
                [[listeners]]\naddress = \"127.0.0.1:8081\"\nproxy_protocol = false\n\n\
                [[routes]]\nrespond = { body = \"hi\" }\n";
    let config = parse_str(text, Path::new("x.toml")).unwrap();
    assert!(config.listeners[0].proxy_protocol);
    assert!(!config.listeners[1].proxy_protocol);
}

#[test]
fn the_self_signed_shorthand_covers_localhost() {
    let text = "[[listeners]]\naddress = \"127.0.0.1:8443\"\ntls = \"self-signed\"\n";
    let config = parse_str(text, Path::new("x.toml")).unwrap();
    let Some(Tls::SelfSigned { hosts }) = &config.listeners[0].tls else {
        panic!("self-signed")
    };
    assert_eq!(hosts, &["localhost", "127.0.0.1"]);
}

#[test]
fn a_bare_file_name_resolves_paths_against_the_current_directory() {
    // Tests run in the crate directory, which has a `src` directory.
    let text =
        "[[listeners]]\naddress = \"127.0.0.1:1\"\n[[routes]]\nstatic = { root = \"src\" }\n";
    let config = parse_str(text, Path::new("sluice.toml")).unwrap();
    let Action::Static(files) = &config.routes[0].action else {
        panic!("static")
    };
    assert_eq!(files.root, std::env::current_dir().unwrap().join("src"));
}

#[test]
fn diagnostics_carry_file_line_column_and_key_path() {
    let text = "[[listeners]]\naddress = \"127.0.0.1:1\"\nidle_timeout = 30\n";
    let diagnostics = parse_str(text, Path::new("conf/x.toml")).unwrap_err();
    let d = diagnostics.iter().next().unwrap();
    assert_eq!(d.file, Path::new("conf/x.toml"));
    assert_eq!((d.line, d.column), (3, 16));
    assert_eq!(d.key_path, "listeners[0].idle_timeout");
    assert_eq!(d.hint.as_deref(), Some(r#"write "30s""#));
    assert_eq!(d.snippet.as_ref().unwrap().text, "idle_timeout = 30");
}

#[test]
fn unit_parsers_are_public_for_the_cli() {
    assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
    assert!(parse_duration("30").unwrap_err().contains(r#"write "30s""#));
    assert_eq!(parse_size("10MiB"), Ok(10 << 20));
    assert!(parse_size("10k").is_err());
}

#[test]
fn precompressed_is_a_switch_or_an_ordered_list() {
    let codings = |value: &str| {
        let text = format!(
            "[[listeners]]\naddress = \"127.0.0.1:1\"\n[[routes]]\nstatic = {{ root = \"src\"{value} }}\n"
        );
        let config = parse_str(&text, Path::new("sluice.toml")).unwrap();
        let Action::Static(files) = &config.routes[0].action else {
            panic!("static")
        };
        files.precompressed.clone()
    };
    use sluice_core::SidecarCoding as S;
    assert_eq!(codings(""), []);
    assert_eq!(codings(", precompressed = false"), []);
    assert_eq!(codings(", precompressed = true"), [S::ZSTD, S::BR, S::GZIP]);
    assert_eq!(
        codings(r#", precompressed = ["gzip", "br"]"#),
        [S::GZIP, S::BR]
    );
}

/// `static = { root = "src"VALUE }` in a minimal file, and what `pick` takes of the route.
fn static_route<T>(value: &str, pick: impl Fn(&StaticFiles) -> T) -> Result<T, Diagnostics> {
    let text = format!(
        "[[listeners]]\naddress = \"127.0.0.1:1\"\n[[routes]]\nstatic = {{ root = \"src\"{value} }}\n"
    );
    parse_str(&text, Path::new("sluice.toml")).map(|config| {
        let Action::Static(files) = &config.routes[0].action else {
            panic!("static")
        };
        pick(files)
    })
}

#[test]
fn memory_cache_is_a_size_and_zero_turns_it_off() {
    let parse = |value: &str| static_route(value, |files| files.memory_cache);
    assert_eq!(parse("").unwrap(), 32 << 20);
    assert_eq!(parse(r#", memory_cache = "4MiB""#).unwrap(), 4 << 20);
    assert_eq!(parse(", memory_cache = 0").unwrap(), 0);
    let diagnostics = parse(r#", memory_cache = "lots""#).unwrap_err();
    let d = diagnostics.iter().next().unwrap();
    assert_eq!(d.key_path, "routes[0].static.memory_cache");
    assert_eq!((d.line, d.column), (4, 41));
}

#[test]
fn memory_cache_recheck_is_a_duration_of_at_most_one_second() {
    let parse = |value: &str| static_route(value, |files| files.memory_cache_recheck);
    use std::time::Duration;
    assert_eq!(parse("").unwrap(), Duration::from_millis(100));
    assert_eq!(
        parse(r#", memory_cache_recheck = "250ms""#).unwrap(),
        Duration::from_millis(250)
    );
    assert_eq!(
        parse(r#", memory_cache_recheck = "0s""#).unwrap(),
        Duration::ZERO
    );
    assert_eq!(
        parse(r#", memory_cache_recheck = "1s""#).unwrap(),
        Duration::from_secs(1)
    );
    let diagnostics = parse(r#", memory_cache_recheck = "5s""#).unwrap_err();
    let d = diagnostics.iter().next().unwrap();
    assert_eq!(d.key_path, "routes[0].static.memory_cache_recheck");
    assert_eq!((d.line, d.column), (4, 49));
    assert!(d.message.contains("at most 1s"), "{}", d.message);
    assert!(d.hint.as_deref().unwrap_or_default().contains("0s"));
    let diagnostics = parse(", memory_cache_recheck = 100").unwrap_err();
    let d = diagnostics.iter().next().unwrap();
    assert_eq!(d.key_path, "routes[0].static.memory_cache_recheck");
}

#[test]
fn sendfile_is_on_unless_turned_off_and_takes_only_a_boolean() {
    let parse = |value: &str| static_route(value, |files| files.sendfile);
    assert!(parse("").unwrap());
    assert!(parse(", sendfile = true").unwrap());
    assert!(!parse(", sendfile = false").unwrap());
    let diagnostics = parse(r#", sendfile = "off""#).unwrap_err();
    let d = diagnostics.iter().next().unwrap();
    assert_eq!((d.line, d.column), (4, 37), "{d:?}");
    assert_eq!(d.key_path, "routes[0].static.sendfile");
    assert!(
        d.hint
            .as_deref()
            .unwrap_or_default()
            .contains("true or false")
    );
}

#[test]
fn limits_map_to_typed_values_with_zero_meaning_none() {
    let defaults = parse_str(
        "[[listeners]]\naddress = \"127.0.0.1:8080\"\n[[routes]]\nrespond = {}\n",
        Path::new("d.toml"),
    )
    .unwrap();
    assert_eq!(defaults.server.max_connections, 25_000);
    assert_eq!(defaults.log.access_queue, 16 * 1024);
    let limits = &defaults.listeners[0].limits;
    assert_eq!(limits.max_connections, 10_000);
    assert_eq!(limits.max_uri_length, 8 * 1024);
    assert_eq!(limits.max_content_codings, 2);
    assert_eq!(limits.h2_keep_alive_interval, Some(Duration::from_secs(60)));
    assert_eq!(limits.h2_keep_alive_timeout, Duration::from_secs(20));
    assert_eq!(defaults.routes[0].body.max_size, Some(10 * 1024 * 1024));
    assert_eq!(
        defaults.routes[0].body.timeout,
        Some(Duration::from_secs(300))
    );

    let text = std::fs::read_to_string("tests/golden/limits_ok.toml").unwrap();
    let config = parse_str(&text, Path::new("limits_ok.toml")).unwrap();
    assert_eq!(config.server.max_connections, 50_000);
    assert_eq!(config.log.access_queue, 1024);
    let limits = &config.listeners[0].limits;
    assert_eq!(limits.max_connections, 1000);
    assert_eq!(limits.max_uri_length, 16 * 1024);
    assert_eq!(limits.max_content_codings, 1);
    assert_eq!(
        limits.h2_keep_alive_interval, None,
        "\"0s\" turns pings off"
    );
    assert_eq!(limits.h2_keep_alive_timeout, Duration::from_secs(5));
    assert_eq!(
        config.routes[0].body,
        BodyLimits {
            max_size: None,
            timeout: None
        }
    );
    assert_eq!(config.routes[1].body.max_size, Some(1024 * 1024));
    assert_eq!(config.routes[1].body.timeout, Some(Duration::from_secs(30)));
    let api = config.upstreams.iter().find(|u| u.name == "api").unwrap();
    assert_eq!(
        api.max_conns,
        MaxConns {
            per_server: Some(100),
            queue_size: 0,
            queue_timeout: Duration::from_secs(2)
        }
    );
}
