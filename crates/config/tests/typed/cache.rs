//! The response cache: `[caches.NAME]` zones and a route's `cache` option map to the typed
//! values, everything left out gets the model's defaults (the same values the quick command's
//! constructors give), and a file without them has none. Part of the `typed` test.

use std::fs;
use std::path::Path;
use std::time::Duration;

use http::{HeaderName, Method, StatusCode};
use sluice_config::*;

const FULL: &str = r#"
[[listeners]]
address = "127.0.0.1:8080"

[upstreams.app]
servers = ["127.0.0.1:9001"]

[caches.pages]

[caches.api]
memory = "256MiB"
max_object_size = "512MiB"
disk = { path = "spool/api", size = "10GiB" }
use_stale = ["updating", "error", "http_503"]
store_set_cookie = true
heuristic = "12h"

[caches.small]
memory = "1MiB"
heuristic = true

[caches.unused]
memory = "4MiB"
max_object_size = "64KiB"
disk = { path = "existing", size = "1GiB" }
heuristic = false

[[routes]]
path_prefix = "/api/"
proxy = { upstream = "app" }
compress = {}
[routes.cache]
zone = "api"
key = ["method", "host", "path", "header:Accept-Language", "cookie:Lang"]
valid = { any = "10s", "404" = "1m", 200 = "5m", "500" = "0s" }
bypass = ["header:X-No-Cache", "cookie:nocache"]
no_store = "header:Authorization"
min_uses = 3
lock_timeout = "0s"
methods = "GET"
status_header = "X-Cache"
levels = { gzip = 9, zstd = 19 }

[[routes]]
path = "/what-date-is-it"
proxy = { upstream = "app" }
cache = { zone = "small", key = ["host"], lock_timeout = "250ms", status_header = false }

[[routes]]
path_prefix = "/"
proxy = { upstream = "app" }
cache = { zone = "pages", status_header = true }
"#;

#[test]
fn a_full_cache_config_maps_to_typed_values() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("spool")).unwrap();
    fs::create_dir_all(dir.path().join("existing")).unwrap();
    let file = dir.path().join("sluice.toml");
    fs::write(&file, FULL).unwrap();
    let config = load(&file).unwrap_or_else(|d| panic!("{d}"));

    let names: Vec<&str> = config.caches.iter().map(|z| z.name.as_str()).collect();
    assert_eq!(names, ["api", "pages", "small", "unused"], "sorted by name");
    let [api, pages, small, unused] = config.caches.as_slice() else {
        panic!("four zones")
    };
    assert_eq!(api.memory, 256 << 20);
    assert_eq!(
        api.max_object_size,
        512 << 20,
        "beyond memory is fine with a disk tier"
    );
    let disk = api.disk.as_ref().unwrap();
    assert_eq!(
        disk.path,
        dir.path().join("spool/api"),
        "missing, created at start-up"
    );
    assert!(disk.path.is_absolute());
    assert_eq!(disk.size, 10 << 30);
    assert_eq!(
        api.use_stale,
        [UseStale::Updating, UseStale::Error, UseStale::Http503]
    );
    assert!(api.store_set_cookie);
    assert_eq!(api.heuristic, Some(Duration::from_secs(12 * 3600)));

    assert_eq!(pages, &CacheZone::new("pages"), "every default");
    assert_eq!(
        (small.memory, small.max_object_size),
        (1 << 20, 1 << 20),
        "left out, max_object_size shrinks to fit the memory"
    );
    assert_eq!(small.heuristic, Some(Duration::from_secs(24 * 3600)));
    assert_eq!(
        unused.disk.as_ref().unwrap().path,
        dir.path().join("existing")
    );
    assert_eq!(unused.max_object_size, 64 << 10);
    assert_eq!(unused.heuristic, None);

    let [api_route, dates, site] = config.routes.as_slice() else {
        panic!("three routes")
    };
    check_full_route(api_route.cache.as_ref().unwrap());

    let dates = dates.cache.as_ref().unwrap();
    assert_eq!(dates.zone, "small");
    assert_eq!(
        dates.key,
        [CacheKeyPart::Host],
        "an exact path needs no path in its key"
    );
    assert_eq!(dates.lock_timeout, Some(Duration::from_millis(250)));
    assert_eq!(dates.status_header, None);

    let site = site.cache.as_ref().unwrap();
    assert_eq!(
        site,
        &RouteCache::new("pages"),
        "`true` is the default name"
    );
}

fn check_full_route(cache: &RouteCache) {
    assert_eq!(cache.zone, "api");
    assert_eq!(
        cache.key,
        [
            CacheKeyPart::Method,
            CacheKeyPart::Host,
            CacheKeyPart::Path,
            CacheKeyPart::Header(HeaderName::from_static("accept-language")),
            CacheKeyPart::Cookie("Lang".into()),
        ]
    );
    let code = |n| StatusMatch::Code(StatusCode::from_u16(n).unwrap());
    let valid: Vec<(StatusMatch, Duration)> =
        cache.valid.iter().map(|v| (v.status, v.lifetime)).collect();
    assert_eq!(
        valid,
        [
            (code(200), Duration::from_secs(300)),
            (code(404), Duration::from_secs(60)),
            (code(500), Duration::ZERO),
            (StatusMatch::Any, Duration::from_secs(10)),
        ],
        "statuses in order, `any` last"
    );
    assert_eq!(
        cache.bypass,
        [
            RequestCondition::Header(HeaderName::from_static("x-no-cache")),
            RequestCondition::Cookie("nocache".into()),
        ]
    );
    assert_eq!(
        cache.no_store,
        [RequestCondition::Header(HeaderName::from_static(
            "authorization"
        ))]
    );
    assert_eq!(cache.min_uses, 3);
    assert_eq!(cache.lock_timeout, None, "0s turns collapsing off");
    assert_eq!(cache.methods, CacheMethods::Get);
    assert_eq!(
        cache.status_header,
        Some(HeaderName::from_static("x-cache"))
    );
    assert_eq!(
        cache.levels,
        CompressLevels {
            gzip: Some(9),
            deflate: Some(6),
            br: Some(9),
            zstd: Some(19),
        },
        "the levels not written are the defaults"
    );
}

#[test]
fn a_route_cache_of_only_a_zone_gets_the_documented_defaults() {
    let text = r#"
[[listeners]]
address = "127.0.0.1:8080"
[caches.api]
[[routes]]
proxy = { to = "127.0.0.1:9001" }
cache = { zone = "api" }
"#;
    let config = parse_str(text, Path::new("cache.toml")).unwrap_or_else(|d| panic!("{d}"));
    let zone = &config.caches[0];
    assert_eq!(zone.memory, 64 << 20);
    assert_eq!(zone.max_object_size, 8 << 20);
    assert_eq!(zone.disk, None);
    assert!(zone.use_stale.is_empty() && !zone.store_set_cookie);
    assert_eq!(zone.heuristic, None);

    let cache = config.routes[0].cache.as_ref().unwrap();
    assert_eq!(
        cache.key,
        [
            CacheKeyPart::Scheme,
            CacheKeyPart::Host,
            CacheKeyPart::Path,
            CacheKeyPart::Query
        ]
    );
    assert!(cache.valid.is_empty() && cache.bypass.is_empty() && cache.no_store.is_empty());
    assert_eq!(cache.min_uses, 1);
    assert_eq!(cache.lock_timeout, Some(Duration::from_secs(5)));
    assert_eq!(cache.methods, CacheMethods::GetAndHead);
    assert_eq!(cache.status_header.as_ref().unwrap(), "x-cache-status");
    assert_eq!(
        cache.levels,
        CompressLevels {
            gzip: Some(6),
            deflate: Some(6),
            br: Some(9),
            zstd: Some(12),
        }
    );
    assert_eq!(cache, &RouteCache::new("api"));
}

#[test]
fn a_file_without_caches_has_none() {
    let text = "[[listeners]]\naddress = \"127.0.0.1:8080\"\n[[routes]]\nproxy = { to = \"127.0.0.1:9001\" }\n";
    let config = parse_str(text, Path::new("x.toml")).unwrap();
    assert!(config.caches.is_empty());
    assert_eq!(config.routes[0].cache, None);
}

#[test]
fn the_quick_command_constructors_keep_the_invariants() {
    let zone = CacheZone::memory_only("quick", 256 << 20);
    assert_eq!((zone.memory, zone.max_object_size), (256 << 20, 8 << 20));
    let tiny = CacheZone::memory_only("tiny", 1 << 20);
    assert_eq!(
        tiny.max_object_size,
        1 << 20,
        "what is admitted always fits"
    );
    assert_eq!(CacheZone::new("z"), CacheZone::memory_only("z", 64 << 20));
    let route = RouteCache::new("quick");
    assert_eq!(route.zone, "quick");
    assert_eq!(route.levels, RouteCache::DEFAULT_LEVELS);
}

#[test]
fn fallback_lifetimes_and_methods_answer_lookups() {
    let mut cache = RouteCache::new("api");
    assert_eq!(cache.fallback_lifetime(StatusCode::OK), None);
    cache.valid = vec![
        FallbackLifetime {
            status: StatusMatch::Code(StatusCode::OK),
            lifetime: Duration::from_secs(300),
        },
        FallbackLifetime {
            status: StatusMatch::Any,
            lifetime: Duration::from_secs(10),
        },
    ];
    assert_eq!(
        cache.fallback_lifetime(StatusCode::OK),
        Some(Duration::from_secs(300))
    );
    assert_eq!(
        cache.fallback_lifetime(StatusCode::NOT_FOUND),
        Some(Duration::from_secs(10))
    );
    assert!(CacheMethods::GetAndHead.allows(&Method::HEAD));
    assert!(CacheMethods::Get.allows(&Method::GET));
    assert!(!CacheMethods::Get.allows(&Method::HEAD));
    assert!(!CacheMethods::GetAndHead.allows(&Method::POST));
    assert_eq!(UseStale::Http502.status(), Some(StatusCode::BAD_GATEWAY));
    assert_eq!(UseStale::Updating.status(), None);
    let tokens: Vec<&str> = UseStale::ALL.iter().map(|u| u.token()).collect();
    assert_eq!(
        tokens,
        [
            "error", "timeout", "http_500", "http_502", "http_503", "http_504", "updating"
        ]
    );
}
