//! §4, §4.2.4, §5.2.1 and RFC 5861: may a stored response answer a request.

use std::time::Duration;

use super::*;
use crate::policy::{Reuse, Settings, UseStale, evaluate};

/// The decision for a response with `cc` stored at t(0), asked at t(at) with request
/// directives `req_cc` (empty for none).
fn reuse_with(cc: &str, req_cc: &str, at: u64, settings: &Settings) -> Reuse {
    let m = meta(&[("cache-control", cc), ("etag", "\"v1\"")]);
    let req = if req_cc.is_empty() {
        HeaderMap::new()
    } else {
        headers(&[("cache-control", req_cc)])
    };
    evaluate(&m, &req, settings, t(at)).reuse
}

fn reuse(cc: &str, req_cc: &str, at: u64) -> Reuse {
    reuse_with(cc, req_cc, at, &Settings::default())
}

fn revalidate(while_revalidate: Option<u64>, if_error: bool) -> Reuse {
    Reuse::Revalidate {
        while_revalidate: while_revalidate.map(secs),
        if_error,
    }
}

/// Configured stale use: both an hour.
fn lenient() -> Settings {
    Settings {
        use_stale: UseStale {
            updating: Some(secs(3600)),
            error: Some(secs(3600)),
        },
        ..Settings::default()
    }
}

#[test]
fn s4_2_fresh_while_lifetime_exceeds_age() {
    assert_eq!(reuse("max-age=60", "", 59), Reuse::Fresh);
    // Equal is stale: response_is_fresh = (freshness_lifetime > current_age).
    assert_eq!(reuse("max-age=60", "", 60), revalidate(None, false));
    let e = evaluate(
        &meta(&[("cache-control", "max-age=60")]),
        &HeaderMap::new(),
        &Settings::default(),
        t(25),
    );
    assert_eq!(
        (e.age, e.lifetime, e.is_fresh()),
        (secs(25), secs(60), true)
    );
}

#[test]
fn s5_2_2_4_no_cache_response_always_revalidates_and_never_serves_stale() {
    assert_eq!(
        reuse("no-cache, max-age=60", "", 1),
        revalidate(None, false)
    );
    assert_eq!(
        reuse_with("no-cache, max-age=60", "max-stale", 100, &lenient()),
        revalidate(None, false)
    );
    assert_eq!(
        reuse(
            "no-cache, stale-while-revalidate=600, stale-if-error=600",
            "",
            1
        ),
        revalidate(None, false)
    );
}

#[test]
fn s5_2_1_4_request_no_cache_revalidates_a_fresh_response() {
    // Still fresh: if the origin fails, the stored response is not stale and may be served.
    assert_eq!(reuse("max-age=60", "no-cache", 1), revalidate(None, true));
    // No stale-while-revalidate for a client that asked for validation.
    assert_eq!(
        reuse("max-age=60, stale-while-revalidate=600", "no-cache", 61),
        revalidate(None, false)
    );
    let pragma = headers(&[("pragma", "no-cache")]);
    let m = meta(&[("cache-control", "max-age=60")]);
    assert_eq!(
        evaluate(&m, &pragma, &Settings::default(), t(1)).reuse,
        revalidate(None, true)
    );
}

#[test]
fn s5_2_1_1_request_max_age_bounds_the_age() {
    assert_eq!(reuse("max-age=60", "max-age=10", 10), Reuse::Fresh);
    assert_eq!(
        reuse("max-age=60", "max-age=10", 11),
        revalidate(None, true)
    );
    assert_eq!(reuse("max-age=60", "max-age=0", 1), revalidate(None, true));
}

#[test]
fn s5_2_1_3_request_min_fresh_needs_that_much_freshness_left() {
    assert_eq!(reuse("max-age=60", "min-fresh=20", 40), Reuse::Fresh);
    assert_eq!(
        reuse("max-age=60", "min-fresh=20", 41),
        revalidate(None, true)
    );
}

#[test]
fn s5_2_1_2_max_stale_serves_stale_within_its_limit() {
    assert_eq!(reuse("max-age=60", "max-stale=30", 90), Reuse::StaleAllowed);
    assert_eq!(
        reuse("max-age=60", "max-stale=30", 91),
        revalidate(None, false)
    );
    assert_eq!(
        reuse("max-age=60", "max-stale", 1_000_000),
        Reuse::StaleAllowed
    );
    // max-stale does not lift max-age.
    assert_eq!(
        reuse("max-age=60", "max-stale, max-age=70", 71),
        revalidate(None, false)
    );
}

#[test]
fn s4_2_4_must_revalidate_forbids_every_stale_use() {
    let cc = "max-age=60, must-revalidate, stale-while-revalidate=600, stale-if-error=600";
    assert_eq!(reuse_with(cc, "", 30, &lenient()), Reuse::Fresh);
    assert_eq!(reuse_with(cc, "", 61, &lenient()), revalidate(None, false));
    assert_eq!(
        reuse_with(cc, "max-stale", 61, &lenient()),
        revalidate(None, false)
    );
    assert_eq!(
        reuse_with(cc, "stale-if-error=600", 61, &lenient()),
        revalidate(None, false)
    );
}

#[test]
fn s5_2_2_8_proxy_revalidate_forbids_stale_in_a_shared_cache() {
    let cc = "max-age=60, proxy-revalidate, stale-while-revalidate=600";
    assert_eq!(
        reuse_with(cc, "max-stale", 61, &lenient()),
        revalidate(None, false)
    );
}

#[test]
fn s5_2_2_10_s_maxage_allows_stale_only_through_the_origins_rfc5861_directives() {
    // Neither the client's max-stale nor the zone's configuration.
    assert_eq!(
        reuse_with("s-maxage=60", "max-stale", 61, &lenient()),
        revalidate(None, false)
    );
    assert_eq!(
        reuse_with(
            "s-maxage=60",
            "stale-if-error=100",
            61,
            &Settings::default()
        ),
        revalidate(None, false)
    );
    // The origin's own stale-while-revalidate / stale-if-error in the same field do.
    assert_eq!(
        reuse(
            "s-maxage=60, stale-while-revalidate=30, stale-if-error=100",
            "",
            70
        ),
        revalidate(Some(20), true)
    );
}

#[test]
fn rfc5861_s3_stale_while_revalidate_window() {
    let cc = "max-age=60, stale-while-revalidate=30";
    assert_eq!(reuse(cc, "", 59), Reuse::Fresh);
    assert_eq!(reuse(cc, "", 61), revalidate(Some(29), false));
    // Past the window: revalidate while the client waits.
    assert_eq!(reuse(cc, "", 90), revalidate(None, false));
    // A client asking for a fresher answer waits for it.
    assert_eq!(reuse(cc, "max-age=5", 61), revalidate(None, false));
}

#[test]
fn rfc5861_s4_stale_if_error_from_response_or_request() {
    let cc = "max-age=60, stale-if-error=100";
    assert_eq!(reuse(cc, "", 160), revalidate(None, true));
    assert_eq!(reuse(cc, "", 161), revalidate(None, false));
    assert_eq!(
        reuse("max-age=60", "stale-if-error=10", 70),
        revalidate(None, true)
    );
    assert_eq!(
        reuse("max-age=60", "stale-if-error=10", 71),
        revalidate(None, false)
    );
}

#[test]
fn s4_2_4_configured_stale_use_is_an_out_of_band_permission() {
    let cfg = Settings {
        use_stale: UseStale {
            updating: Some(secs(10)),
            error: Some(Duration::MAX),
        },
        ..Settings::default()
    };
    assert_eq!(
        reuse_with("max-age=60", "", 65, &cfg),
        revalidate(Some(5), true)
    );
    assert_eq!(
        reuse_with("max-age=60", "", 1_000_000, &cfg),
        revalidate(None, true)
    );
    // The larger of the response's and the configured window.
    let cc = "max-age=60, stale-while-revalidate=100";
    assert_eq!(reuse_with(cc, "", 65, &cfg), revalidate(Some(95), true));
    // Nothing configured, nothing said: no stale use at all.
    assert_eq!(reuse("max-age=60", "", 65), revalidate(None, false));
}

#[test]
fn s5_2_1_7_only_if_cached_is_answered_from_the_cache_or_with_504() {
    assert_eq!(reuse("max-age=60", "only-if-cached", 1), Reuse::Fresh);
    assert_eq!(
        reuse("max-age=60", "only-if-cached", 61),
        Reuse::OnlyIfCached
    );
    assert_eq!(
        reuse("max-age=60", "only-if-cached, max-stale", 61),
        Reuse::StaleAllowed
    );
    // A stale response that may be served while revalidating is served.
    assert_eq!(
        reuse(
            "max-age=60, stale-while-revalidate=30",
            "only-if-cached",
            61
        ),
        revalidate(Some(29), false)
    );
    assert_eq!(reuse("no-cache", "only-if-cached", 0), Reuse::OnlyIfCached);
}

#[test]
fn s4_2_1_configured_lifetime_feeds_the_decision() {
    let cfg = Settings {
        valid: vec![(crate::policy::StatusMatch::Any, secs(30))],
        ..Settings::default()
    };
    let m = meta(&[("etag", "\"v1\"")]);
    assert_eq!(
        evaluate(&m, &HeaderMap::new(), &cfg, t(29)).reuse,
        Reuse::Fresh
    );
    assert_eq!(
        evaluate(&m, &HeaderMap::new(), &cfg, t(30)).reuse,
        revalidate(None, false)
    );
}
