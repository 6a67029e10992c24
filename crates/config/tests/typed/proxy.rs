//! Proxies, upstream groups and the admin listener: a full file maps to the expected typed
//! values, and everything left out gets the model's `Default`s. Part of the `typed` test.

use std::path::Path;
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use sluice_config::*;

const FULL: &str = r#"
[[listeners]]
address = "127.0.0.1:8080"

[admin]
address = "127.0.0.1:9901"

[upstreams.api]
servers = [
  "app:9001",
  { address = "unix:/run/app.sock", weight = 3, max_fails = 0, fail_timeout = "0s", backup = true },
  { address = "10.0.0.3:9001", max_fails = 5, fail_timeout = "30s", down = true },
]
policy = "hash"
hash_key = "header:X-User-Id"
http2 = true
[upstreams.api.keepalive]
max_idle = 0
idle_timeout = "90s"
[upstreams.api.timeouts]
connect = "1s"
response_header = "30s"
idle = "2m"
[upstreams.api.retry]
tries = 1
budget = "3s"
[upstreams.api.health_check]
path = "/health?full=1"
interval = "10s"
timeout = "1500ms"
expected_status = "200-299"
rise = 1
fall = 5

[upstreams.spare]
servers = ["127.0.0.1:9100"]
policy = "least_conn"

[[routes]]
path_prefix = "/api/"
[routes.proxy]
upstream = "api"
host = "upstream"
request_headers = { set = { "X-Env" = "prod", "x-b" = "2" }, remove = ["X-Debug", "x-trace"] }
response_headers = { remove = "x-powered-by" }

[[routes]]
proxy = { upstream = "spare", host = "spare.internal:8080", response_headers = { set = { "X-Frame-Options" = "DENY" } } }
"#;

#[test]
fn a_full_proxy_config_maps_to_typed_values() {
    let config = parse_str(FULL, Path::new("proxy.toml")).unwrap_or_else(|d| panic!("{d}"));
    assert_eq!(
        config.admin.as_ref().unwrap().address,
        "127.0.0.1:9901".parse().unwrap()
    );
    check_full_upstreams(&config.upstreams);
    let [api, spare] = config.routes.as_slice() else {
        panic!("two routes")
    };
    check_full_proxies(api, spare);
}

fn check_full_upstreams(upstreams: &[Upstream]) {
    let [api, spare] = upstreams else {
        panic!("two upstreams, by name")
    };
    assert_eq!(api.name, "api");
    let [app, unix, down] = api.servers.as_slice() else {
        panic!("three servers")
    };
    assert_eq!(app.address, UpstreamAddress::Tcp("app:9001".into()));
    assert_eq!((app.weight, app.max_fails), (1, 1));
    assert_eq!(app.fail_timeout, Duration::from_secs(10));
    assert!(!app.backup && !app.down);
    assert_eq!(unix.address, UpstreamAddress::Unix("/run/app.sock".into()));
    assert_eq!((unix.weight, unix.max_fails), (3, 0));
    assert_eq!(
        unix.fail_timeout,
        Duration::ZERO,
        "0s is fine without max_fails"
    );
    assert!(unix.backup && !unix.down);
    assert_eq!(down.address, UpstreamAddress::Tcp("10.0.0.3:9001".into()));
    assert_eq!((down.weight, down.max_fails), (1, 5));
    assert_eq!(down.fail_timeout, Duration::from_secs(30));
    assert!(!down.backup && down.down);

    assert_eq!(
        api.policy,
        BalancePolicy::Hash(HashKey::Header(HeaderName::from_static("x-user-id")))
    );
    assert!(api.http2);
    assert_eq!(api.keepalive.max_idle, 0);
    assert_eq!(api.keepalive.idle_timeout, Duration::from_secs(90));
    assert_eq!(api.timeouts.connect, Duration::from_secs(1));
    assert_eq!(api.timeouts.response_header, Duration::from_secs(30));
    assert_eq!(api.timeouts.idle, Duration::from_secs(120));
    assert_eq!(
        (api.retry.tries, api.retry.budget),
        (1, Duration::from_secs(3))
    );
    let check = api.health_check.as_ref().unwrap();
    assert_eq!(check.path, "/health?full=1");
    assert_eq!(check.interval, Duration::from_secs(10));
    assert_eq!(check.timeout, Duration::from_millis(1500));
    assert_eq!(check.expected_status, 200..=299);
    assert_eq!((check.rise, check.fall), (1, 5));

    assert_eq!(spare.name, "spare");
    assert_eq!(spare.policy, BalancePolicy::LeastConnections);
    assert!(spare.health_check.is_none() && !spare.http2);
}

fn check_full_proxies(api: &Route, spare: &Route) {
    let Action::Proxy(api) = &api.action else {
        panic!("proxy")
    };
    assert_eq!(api.upstream, "api");
    assert_eq!(api.host, HostHeader::Upstream);
    let set: Vec<(&str, &str)> = api
        .request_headers
        .set
        .iter()
        .map(|(name, value)| (name.as_str(), value.to_str().unwrap()))
        .collect();
    assert_eq!(
        set,
        [("x-env", "prod"), ("x-b", "2")],
        "file order, lowercase"
    );
    let removed: Vec<&str> = api
        .request_headers
        .remove
        .iter()
        .map(|n| n.as_str())
        .collect();
    assert_eq!(removed, ["x-debug", "x-trace"]);
    assert!(api.response_headers.set.is_empty());
    assert_eq!(
        api.response_headers.remove,
        [HeaderName::from_static("x-powered-by")]
    );

    let Action::Proxy(spare) = &spare.action else {
        panic!("proxy")
    };
    assert_eq!(spare.upstream, "spare");
    assert_eq!(
        spare.host,
        HostHeader::Set(HeaderValue::from_static("spare.internal:8080"))
    );
    assert!(spare.request_headers.is_empty());
    assert_eq!(spare.response_headers.set.len(), 1);
    assert_eq!(spare.response_headers.set[0].0, "x-frame-options");
    assert_eq!(spare.response_headers.set[0].1, "DENY");
}

#[test]
fn a_minimal_proxy_gets_the_model_defaults() {
    let text = r#"
[[listeners]]
address = "127.0.0.1:8080"
[upstreams.app]
servers = ["127.0.0.1:9001"]
[upstreams.checked]
servers = ["127.0.0.1:9002"]
health_check = {}
[[routes]]
proxy = { upstream = "app" }
"#;
    let config = parse_str(text, Path::new("proxy.toml")).unwrap_or_else(|d| panic!("{d}"));
    assert!(config.admin.is_none());
    let Action::Proxy(proxy) = &config.routes[0].action else {
        panic!("proxy")
    };
    let expected = Proxy::to("app");
    assert_eq!(proxy.upstream, expected.upstream);
    assert_eq!(proxy.host, expected.host);
    assert!(proxy.request_headers.is_empty() && proxy.response_headers.is_empty());
    assert_eq!(proxy.rewrite, None, "the path is forwarded as received");

    let [app, checked] = config.upstreams.as_slice() else {
        panic!("two upstreams")
    };
    assert_default_group(app, "app", UpstreamAddress::Tcp("127.0.0.1:9001".into()));

    let check = checked.health_check.as_ref().unwrap();
    let default = HealthCheck::default();
    assert_eq!(check.path, default.path);
    assert_eq!(check.interval, default.interval);
    assert_eq!(check.timeout, default.timeout);
    assert_eq!(check.expected_status, default.expected_status);
    assert_eq!((check.rise, check.fall), (default.rise, default.fall));
}

#[test]
fn an_admin_on_port_0_never_clashes() {
    let text = "[[listeners]]\naddress = \"127.0.0.1:0\"\n[admin]\naddress = \"127.0.0.1:0\"\n";
    let config = parse_str(text, Path::new("a.toml")).unwrap_or_else(|d| panic!("{d}"));
    assert_eq!(
        config.admin.unwrap().address,
        "127.0.0.1:0".parse().unwrap()
    );
}

#[test]
fn every_policy_and_hash_key_maps() {
    let cases = [
        ("policy = \"round_robin\"", BalancePolicy::RoundRobin),
        ("policy = \"least_conn\"", BalancePolicy::LeastConnections),
        ("policy = \"p2c\"", BalancePolicy::PowerOfTwoChoices),
        (
            "policy = \"hash\"\nhash_key = \"client_ip\"",
            BalancePolicy::Hash(HashKey::ClientIp),
        ),
        (
            "policy = \"hash\"\nhash_key = \"uri\"",
            BalancePolicy::Hash(HashKey::Uri),
        ),
        (
            "policy = \"hash\"\nhash_key = \"cookie:session_id\"",
            BalancePolicy::Hash(HashKey::Cookie("session_id".into())),
        ),
    ];
    for (lines, expected) in cases {
        let text = format!(
            "[[listeners]]\naddress = \"127.0.0.1:1\"\n[upstreams.a]\nservers = [\"h:1\"]\n{lines}\n"
        );
        let config = parse_str(&text, Path::new("p.toml")).unwrap_or_else(|d| panic!("{d}"));
        assert_eq!(config.upstreams[0].policy, expected, "{lines}");
    }
}

/// `upstream` is a group named `name` of one server at `address`, all settings the model's
/// defaults.
fn assert_default_group(upstream: &Upstream, name: &str, address: UpstreamAddress) {
    let d = Upstream::new(name, vec![UpstreamServer::new(address)]);
    assert_eq!(upstream.name, d.name);
    assert_eq!(upstream.policy, d.policy);
    assert_eq!(upstream.http2, d.http2);
    assert!(upstream.health_check.is_none());
    assert_eq!(upstream.keepalive.max_idle, d.keepalive.max_idle);
    assert_eq!(upstream.keepalive.idle_timeout, d.keepalive.idle_timeout);
    assert_eq!(upstream.keepalive.max_requests, d.keepalive.max_requests);
    assert_eq!(upstream.timeouts.connect, d.timeouts.connect);
    assert_eq!(
        upstream.timeouts.response_header,
        d.timeouts.response_header
    );
    assert_eq!(upstream.timeouts.idle, d.timeouts.idle);
    assert_eq!(upstream.retry.tries, d.retry.tries);
    assert_eq!(upstream.retry.budget, d.retry.budget);
    let ([server], [default]) = (upstream.servers.as_slice(), d.servers.as_slice()) else {
        panic!("one server in {name}")
    };
    assert_eq!(server.address, default.address);
    assert_eq!(server.weight, default.weight);
    assert_eq!(server.max_fails, default.max_fails);
    assert_eq!(server.fail_timeout, default.fail_timeout);
    assert_eq!((server.backup, server.down), (default.backup, default.down));
}

#[test]
fn an_inline_to_becomes_an_upstream_group_with_defaults() {
    let text = r#"
[[listeners]]
address = "127.0.0.1:8080"
[upstreams.zeta]
servers = ["127.0.0.1:9100"]
[upstreams.app]
servers = ["127.0.0.1:9101"]
[[routes]]
name = "api"
path_prefix = "/api/"
proxy = { to = "127.0.0.1:9001" }
[[routes]]
path_prefix = "/sock/"
[routes.proxy]
to = "unix:/run/app.sock"
host = "upstream"
request_headers = { set = { "x-env" = "prod" } }
response_headers = { remove = "x-powered-by" }
[[routes]]
proxy = { upstream = "zeta" }
"#;
    let config = parse_str(text, Path::new("to.toml")).unwrap_or_else(|d| panic!("{d}"));
    let names: Vec<&str> = config.upstreams.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(
        names,
        ["app", "route:api", "route:route 2", "zeta"],
        "the tables and the inline groups, sorted by name"
    );
    assert_default_group(
        &config.upstreams[1],
        "route:api",
        UpstreamAddress::Tcp("127.0.0.1:9001".into()),
    );
    assert_default_group(
        &config.upstreams[2],
        "route:route 2",
        UpstreamAddress::Unix("/run/app.sock".into()),
    );

    let [api, sock, zeta] = config.routes.as_slice() else {
        panic!("three routes")
    };
    let Action::Proxy(api) = &api.action else {
        panic!("proxy")
    };
    assert_eq!(api.upstream, "route:api");
    assert_eq!(api.host, HostHeader::Pass);
    assert!(api.request_headers.is_empty() && api.response_headers.is_empty());
    let Action::Proxy(sock) = &sock.action else {
        panic!("proxy")
    };
    assert_eq!(
        sock.upstream, "route:route 2",
        "named after the default route name"
    );
    assert_eq!(sock.host, HostHeader::Upstream);
    assert_eq!(sock.request_headers.set[0].0, "x-env");
    assert_eq!(
        sock.response_headers.remove,
        [HeaderName::from_static("x-powered-by")]
    );
    let Action::Proxy(zeta) = &zeta.action else {
        panic!("proxy")
    };
    assert_eq!(zeta.upstream, "zeta");
    for route in &config.routes {
        let Action::Proxy(proxy) = &route.action else {
            panic!("proxy")
        };
        assert!(
            config.upstreams.iter().any(|u| u.name == proxy.upstream),
            "{} names a group in Config::upstreams",
            route.name
        );
    }
}

#[test]
fn path_rewrites_map_to_typed_values() {
    let text = r#"
[[listeners]]
address = "127.0.0.1:8080"
[upstreams.app]
servers = ["127.0.0.1:9001"]
[[routes]]
path_prefix = "/api/"
proxy = { upstream = "app", strip_prefix = "/api" }
[[routes]]
path_prefix = "/v1/"
proxy = { upstream = "app", strip_prefix = "/v1", replace_prefix = "/v2" }
[[routes]]
proxy = { upstream = "app", replace_prefix = "/site%20a" }
"#;
    let config = parse_str(text, Path::new("proxy.toml")).unwrap_or_else(|d| panic!("{d}"));
    let rewrites: Vec<Option<PathRewrite>> = config
        .routes
        .iter()
        .map(|route| match &route.action {
            Action::Proxy(proxy) => proxy.rewrite.clone(),
            _ => panic!("proxy"),
        })
        .collect();
    let rewrite = |strip: Option<&str>, replace: Option<&str>| {
        Some(PathRewrite {
            strip_prefix: strip.map(str::to_owned),
            replace_prefix: replace.map(str::to_owned),
        })
    };
    assert_eq!(
        rewrites,
        [
            rewrite(Some("/api"), None),
            rewrite(Some("/v1"), Some("/v2")),
            rewrite(None, Some("/site%20a")),
        ]
    );
}

#[test]
fn upstream_tls_and_proxy_protocol_map_to_the_model() {
    let text = r#"
[[listeners]]
address = "127.0.0.1:8080"
[upstreams.plain]
servers = ["app:9001"]
[upstreams.public]
servers = ["https://api.example.com", "https://[::1]:8443"]
[upstreams.internal]
servers = ["10.0.0.5:8443"]
send_proxy_protocol = true
tls = { ca = "upstream_tls/ca.pem", server_name = "api.internal", client_cert = "upstream_tls/client.pem", client_key = "upstream_tls/client-key.pem" }
[[routes]]
proxy = { to = "https://10.0.0.9:443" }
"#;
    let dir = Path::new("tests/golden");
    let config = parse_str(text, &dir.join("inline.toml")).unwrap();
    let group = |name: &str| config.upstreams.iter().find(|u| u.name == name).unwrap();
    assert_eq!(group("plain").tls, None);
    assert!(!group("plain").send_proxy_protocol);
    assert_eq!(group("public").tls, Some(UpstreamTls::default()));
    let addresses: Vec<_> = group("public").servers.iter().map(|s| &s.address).collect();
    assert_eq!(
        addresses,
        [
            &UpstreamAddress::Tcp("api.example.com:443".into()),
            &UpstreamAddress::Tcp("[::1]:8443".into())
        ]
    );
    let internal = group("internal");
    assert!(internal.send_proxy_protocol);
    let tls = internal.tls.as_ref().unwrap();
    let absolute = |file: &str| std::path::absolute(dir.join("upstream_tls").join(file)).unwrap();
    assert_eq!(tls.ca, Some(absolute("ca.pem")));
    assert_eq!(tls.server_name.as_deref(), Some("api.internal"));
    assert_eq!(
        tls.client_cert,
        Some(CertFiles {
            cert: absolute("client.pem"),
            key: absolute("client-key.pem"),
        })
    );
    assert!(!tls.insecure_skip_verify);
    let inline = config
        .upstreams
        .iter()
        .find(|u| u.name.starts_with("route:"))
        .unwrap();
    assert_eq!(inline.tls, Some(UpstreamTls::default()));
}
