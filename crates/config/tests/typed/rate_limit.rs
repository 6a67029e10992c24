//! A route's `rate_limit` option: the defaults (`burst` = `requests`, by client IP), every key
//! mapped to its typed value, and a route without it has none. Part of the `typed` test.

use std::num::NonZeroU32;
use std::path::Path;
use std::time::Duration;

use http::HeaderName;
use sluice_config::*;

const TEXT: &str = r#"
[[listeners]]
address = "127.0.0.1:8080"

[[routes]]
path = "/off"
respond = {}

[[routes]]
path = "/defaults"
respond = {}
rate_limit = { requests = 10, per = "1s" }

[[routes]]
path_prefix = "/"
respond = {}
rate_limit = { requests = 100, per = "1m", burst = 5, key = "header:X-Api-Key" }
"#;

fn n(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap()
}

#[test]
fn rate_limit_maps_to_typed_values_and_defaults() {
    let config = parse_str(TEXT, Path::new("rate_limit.toml")).unwrap_or_else(|d| panic!("{d}"));
    let [off, defaults, full] = config.routes.as_slice() else {
        panic!("three routes")
    };
    assert_eq!(off.rate_limit, None);
    let defaults = defaults.rate_limit.as_ref().unwrap();
    assert_eq!(
        *defaults,
        RateLimit {
            requests: n(10),
            per: Duration::from_secs(1),
            burst: n(10),
            key: RateLimitKey::ClientIp,
            shared: None,
        }
    );
    assert_eq!(defaults.interval(), Duration::from_millis(100));
    let full = full.rate_limit.as_ref().unwrap();
    assert_eq!(
        *full,
        RateLimit {
            requests: n(100),
            per: Duration::from_secs(60),
            burst: n(5),
            key: RateLimitKey::Header(HeaderName::from_static("x-api-key")),
            shared: None,
        }
    );
    assert_eq!(full.interval(), Duration::from_millis(600));
}
