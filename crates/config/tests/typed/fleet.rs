//! The fleet's settings (docs/fleet.md): `[caches.NAME.shared]`, a rate limit's `shared`,
//! `on_error`, `fleet_size` and `deadline`, with their defaults; and the URLs `sluice check`
//! refuses without connecting. Part of the `typed` test.

use std::num::NonZeroU32;
use std::path::Path;
use std::time::Duration;

use sluice_config::*;

const TEXT: &str = r#"
[[listeners]]
address = "127.0.0.1:8080"

[caches.defaults.shared]
redis = "redis://10.0.0.5:6379/0"

[caches.full]
keep_tag_headers = true
[caches.full.shared]
redis = "redis+unix:///run/redis.sock"
deadline = "50ms"
max_object_size = "256KiB"
max_ttl = "1h"

[[routes]]
path = "/a"
respond = {}
rate_limit = { requests = 10, per = "1s", shared = "redis://r:6379" }

[[routes]]
path = "/b"
respond = {}
rate_limit = { requests = 10, per = "1s", shared = "redis://r:6379", on_error = "deny", fleet_size = 3, deadline = "5ms" }
"#;

#[test]
fn fleet_settings_map_to_typed_values_and_defaults() {
    let config = parse_str(TEXT, Path::new("fleet.toml")).unwrap_or_else(|d| panic!("{d}"));
    let zone = |name: &str| config.caches.iter().find(|z| z.name == name).unwrap();
    assert_eq!(
        zone("defaults").shared,
        Some(CacheShared {
            redis: "redis://10.0.0.5:6379/0".into(),
            deadline: Duration::from_millis(20),
            max_object_size: 1024 * 1024,
            max_ttl: Duration::from_secs(86_400),
        })
    );
    assert!(!zone("defaults").keep_tag_headers);
    assert_eq!(
        zone("full").shared,
        Some(CacheShared {
            redis: "redis+unix:///run/redis.sock".into(),
            deadline: Duration::from_millis(50),
            max_object_size: 256 * 1024,
            max_ttl: Duration::from_secs(3600),
        })
    );
    assert!(zone("full").keep_tag_headers);
    let shared = |i: usize| config.routes[i].rate_limit.as_ref().unwrap().shared.clone();
    assert_eq!(
        shared(0),
        Some(SharedRateLimit {
            redis: "redis://r:6379".into(),
            on_error: OnError::Local,
            fleet_size: NonZeroU32::MIN,
            deadline: Duration::from_millis(20),
        })
    );
    assert_eq!(
        shared(1),
        Some(SharedRateLimit {
            redis: "redis://r:6379".into(),
            on_error: OnError::Deny,
            fleet_size: NonZeroU32::new(3).unwrap(),
            deadline: Duration::from_millis(5),
        })
    );
}

#[test]
fn urls_and_words_that_cannot_work_are_refused_with_a_hint() {
    for (text, says) in [
        (
            "[caches.z.shared]\nredis = \"rediss://r:6379\"",
            "not supported yet",
        ),
        ("[caches.z.shared]\nredis = \"http://r:6379\"", "redis://"),
        ("[caches.z.shared]\nredis = \"redis://:6379\"", "no host"),
        ("[caches.z.shared]\nredis = \"redis://r:99999\"", "port"),
        (
            "[caches.z.shared]\nredis = \"redis+cluster://a:7000,:7001\"",
            "no host",
        ),
        (
            "[caches.z.shared]\nredis = \"redis+cluster://a:7000,b:x\"",
            "port",
        ),
        (
            "[caches.z.shared]\nredis = \"redis+cluster://a:7000/2\"",
            "one database",
        ),
        (
            "[[routes]]\npath = \"/\"\nrespond = {}\nrate_limit = { requests = 1, per = \"1s\", shared = \"redis+cluster://\" }",
            "no host",
        ),
        ("[caches.z.shared]\ndeadline = \"1s\"", "redis"),
        (
            "[[routes]]\npath = \"/\"\nrespond = {}\nrate_limit = { requests = 1, per = \"1s\", on_error = \"deny\" }",
            "shared limit only",
        ),
        (
            "[[routes]]\npath = \"/\"\nrespond = {}\nrate_limit = { requests = 1, per = \"1s\", shared = \"redis://r\", on_error = \"alow\" }",
            "did you mean \"allow\"",
        ),
    ] {
        let text = format!("[[listeners]]\naddress = \"127.0.0.1:8080\"\n{text}\n");
        let err = parse_str(&text, Path::new("fleet.toml")).expect_err(&text);
        let shown = err.to_string();
        assert!(shown.contains(says), "{text}\n---\n{shown}");
    }
}

#[test]
fn cluster_urls_name_seed_nodes() {
    for url in [
        "redis+cluster://10.0.0.1:6379,10.0.0.2:6379",
        "redis+cluster://user:secret@a:7000, b:7001/",
        "redis+cluster://[::1]:7000",
    ] {
        let text = format!(
            "[[listeners]]\naddress = \"127.0.0.1:8080\"\n[caches.z.shared]\nredis = \"{url}\"\n\
             [[routes]]\npath = \"/\"\nrespond = {{}}\n\
             rate_limit = {{ requests = 1, per = \"1s\", shared = \"{url}\" }}\n"
        );
        let config = parse_str(&text, Path::new("fleet.toml")).expect(&text);
        let limit = config.routes[0].rate_limit.as_ref().unwrap();
        assert_eq!(limit.shared.as_ref().unwrap().redis, url);
        let zone = config.caches.iter().find(|z| z.name == "z").unwrap();
        assert_eq!(zone.shared.as_ref().unwrap().redis, url);
    }
}
