//! `trusted_proxies` (in `[server]`, replaced per listener) and a proxy's `forward_path`. Part of
//! the `typed` test.

use std::path::Path;

use sluice_config::*;

const TEXT: &str = r#"
[server]
trusted_proxies = ["10.0.0.0/8", "192.0.2.7"]

[[listeners]]
name = "inherits"
address = "127.0.0.1:8080"

[[listeners]]
name = "own"
address = "127.0.0.1:8081"
trusted_proxies = "::1"

[[listeners]]
name = "nobody"
address = "127.0.0.1:8082"
trusted_proxies = []

[upstreams.api]
servers = ["127.0.0.1:9001"]

[[routes]]
path_prefix = "/n/"
proxy = { upstream = "api", forward_path = "normalized" }

[[routes]]
proxy = { upstream = "api" }
"#;

#[test]
fn listeners_take_the_servers_trusted_proxies_unless_they_name_their_own() {
    let config = parse_str(TEXT, Path::new("paths.toml")).unwrap_or_else(|d| panic!("{d}"));
    let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
    let [inherits, own, nobody] = config.listeners.as_slice() else {
        panic!("three listeners")
    };
    assert!(inherits.trusted_proxies.contains(ip("10.1.2.3")));
    assert!(inherits.trusted_proxies.contains(ip("192.0.2.7")));
    assert!(!inherits.trusted_proxies.contains(ip("192.0.2.8")));
    assert!(own.trusted_proxies.contains(ip("::1")));
    assert!(!own.trusted_proxies.contains(ip("10.1.2.3")));
    assert!(nobody.trusted_proxies.is_empty());
    assert_eq!(config.server.trusted_proxies.0.len(), 2);
}

#[test]
fn forward_path_defaults_to_as_received() {
    let config = parse_str(TEXT, Path::new("paths.toml")).unwrap_or_else(|d| panic!("{d}"));
    let forward = |i: usize| match &config.routes[i].action {
        Action::Proxy(proxy) => proxy.forward_path,
        _ => panic!("a proxy"),
    };
    assert_eq!(forward(0), ForwardPath::Normalized);
    assert_eq!(forward(1), ForwardPath::AsReceived);
    assert!(
        Listener::plain("127.0.0.1:1".parse().unwrap())
            .trusted_proxies
            .is_empty()
    );
}
