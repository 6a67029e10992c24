//! §3 storability, §3.1 stored fields and the fields not served.

use http::{Method, header};

use super::*;
use crate::policy::{
    NotStorable, Settings, StatusMatch, headers_to_store, storable, strip_not_served,
};

fn check(status: u16, resp: &[(&str, &str)]) -> Result<(), NotStorable> {
    check_with(&Method::GET, &[], status, resp, &Settings::default())
}

fn check_with(
    method: &Method,
    req: &[(&str, &str)],
    status: u16,
    resp: &[(&str, &str)],
    settings: &Settings,
) -> Result<(), NotStorable> {
    storable(
        method,
        &headers(req),
        StatusCode::from_u16(status).unwrap(),
        &headers(resp),
        settings,
    )
}

const FRESH: (&str, &str) = ("cache-control", "max-age=60");

#[test]
fn s3_only_get_responses_are_stored() {
    let settings = Settings::default();
    assert_eq!(check(200, &[FRESH]), Ok(()));
    for method in [Method::HEAD, Method::POST, Method::PUT, Method::OPTIONS] {
        assert_eq!(
            check_with(&method, &[], 200, &[FRESH], &settings),
            Err(NotStorable::Method),
            "{method}"
        );
    }
}

#[test]
fn s3_status_must_be_final_and_206_304_are_not_stored() {
    for status in [100, 103, 206, 304] {
        assert_eq!(
            check(status, &[FRESH]),
            Err(NotStorable::Status),
            "{status}"
        );
    }
    for status in [200, 203, 204, 301, 302, 404, 500, 503] {
        assert_eq!(check(status, &[FRESH]), Ok(()), "{status}");
    }
}

#[test]
fn s3_no_store_in_the_response_or_s5_2_1_5_in_the_request() {
    assert_eq!(
        check(200, &[("cache-control", "max-age=60, no-store")]),
        Err(NotStorable::NoStore)
    );
    let req = [("cache-control", "no-store")];
    assert_eq!(
        check_with(&Method::GET, &req, 200, &[FRESH], &Settings::default()),
        Err(NotStorable::RequestNoStore)
    );
}

#[test]
fn s5_2_2_3_must_understand_overrides_no_store_for_understood_statuses_only() {
    let resp = [("cache-control", "must-understand, no-store, max-age=60")];
    assert_eq!(check(200, &resp), Ok(()));
    assert_eq!(check(299, &resp), Err(NotStorable::Status));
}

#[test]
fn s3_private_is_not_stored_by_a_shared_cache() {
    assert_eq!(
        check(200, &[("cache-control", "private, max-age=60")]),
        Err(NotStorable::Private)
    );
    assert_eq!(
        check(
            200,
            &[("cache-control", "private=\"set-cookie\", max-age=60")]
        ),
        Err(NotStorable::Private)
    );
}

#[test]
fn s3_5_authorization_only_with_public_or_s_maxage_or_must_revalidate() {
    let req = [("authorization", "Bearer x")];
    let settings = Settings::default();
    let with = |cc: &str| check_with(&Method::GET, &req, 200, &[("cache-control", cc)], &settings);
    assert_eq!(with("max-age=60"), Err(NotStorable::Authorization));
    assert_eq!(with("public, max-age=60"), Ok(()));
    assert_eq!(with("s-maxage=60"), Ok(()));
    assert_eq!(with("must-revalidate, max-age=60"), Ok(()));
}

#[test]
fn s4_1_vary_star_is_not_stored() {
    assert_eq!(
        check(200, &[FRESH, ("vary", "accept, *")]),
        Err(NotStorable::VaryStar)
    );
    assert_eq!(check(200, &[FRESH, ("vary", "accept")]), Ok(()));
}

#[test]
fn set_cookie_is_not_stored_unless_configured() {
    let resp = [FRESH, ("set-cookie", "sid=1")];
    assert_eq!(check(200, &resp), Err(NotStorable::SetCookie));
    let settings = Settings {
        store_set_cookie: true,
        ..Settings::default()
    };
    assert_eq!(check_with(&Method::GET, &[], 200, &resp, &settings), Ok(()));
}

#[test]
fn s3_needs_public_explicit_expiration_or_a_heuristically_cacheable_status() {
    // 302 is not heuristically cacheable (RFC 9110 §15.1).
    assert_eq!(
        check(302, &[("etag", "\"a\"")]),
        Err(NotStorable::NoFreshness)
    );
    assert_eq!(check(302, &[("cache-control", "max-age=5")]), Ok(()));
    assert_eq!(check(302, &[("expires", &date(60))]), Ok(()));
    assert_eq!(
        check(302, &[("cache-control", "public"), ("etag", "\"a\"")]),
        Ok(())
    );
    for status in [200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501] {
        assert_eq!(check(status, &[("etag", "\"a\"")]), Ok(()), "{status}");
    }
    // A configured lifetime is the operator's agreement with the origin.
    let settings = Settings {
        valid: vec![(StatusMatch::Code(StatusCode::FOUND), secs(600))],
        ..Settings::default()
    };
    assert_eq!(check_with(&Method::GET, &[], 302, &[], &settings), Ok(()));
    assert_eq!(
        check_with(&Method::GET, &[], 500, &[], &settings),
        Err(NotStorable::NoFreshness)
    );
    // A zero lifetime is "do not store" (nginx's `proxy_cache_valid 404 0`) for responses
    // without freshness of their own, even with a validator; explicit freshness still counts.
    let zero = Settings {
        valid: vec![(StatusMatch::Code(StatusCode::NOT_FOUND), secs(0))],
        ..Settings::default()
    };
    assert_eq!(
        check_with(&Method::GET, &[], 404, &[("etag", "\"a\"")], &zero),
        Err(NotStorable::NoFreshness)
    );
    assert_eq!(
        check_with(
            &Method::GET,
            &[],
            404,
            &[("cache-control", "max-age=5")],
            &zero
        ),
        Ok(())
    );
}

#[test]
fn s3_a_response_that_could_never_be_reused_is_not_stored() {
    assert_eq!(check(200, &[]), Err(NotStorable::NoValidator));
    assert_eq!(
        check(200, &[("cache-control", "no-cache")]),
        Err(NotStorable::NoValidator)
    );
    assert_eq!(check(200, &[("last-modified", &date(0))]), Ok(()));
    // Explicitly stale at once but with a stale-if-error window: worth keeping.
    assert_eq!(
        check(200, &[("cache-control", "max-age=0, stale-if-error=60")]),
        Ok(())
    );
}

#[test]
fn rfc9213_s2_2_the_targeted_field_decides_storability() {
    let cdn_allows = [
        ("cache-control", "private, no-store"),
        ("cdn-cache-control", "max-age=60"),
    ];
    assert_eq!(check(200, &cdn_allows), Ok(()));
    let cdn_forbids = [FRESH, ("cdn-cache-control", "no-store")];
    assert_eq!(check(200, &cdn_forbids), Err(NotStorable::NoStore));
    // RFC 9213 §3.1's example: every cache but CDNs is kept from storing; `none` is no
    // directive, only a non-empty value, so the CDN field is selected and allows storing.
    let cdn_only = [
        ("cache-control", "no-store"),
        ("cdn-cache-control", "none"),
        ("etag", "\"a\""),
    ];
    assert_eq!(check(200, &cdn_only), Ok(()));
    // Expires is ignored with the targeted field: no explicit expiration left.
    let expires_only = [("cdn-cache-control", "public"), ("expires", &date(60))];
    assert_eq!(check(302, &expires_only), Err(NotStorable::NoValidator));
}

#[test]
fn not_storable_reasons_have_stable_labels() {
    let all = [
        (NotStorable::Method, "method"),
        (NotStorable::Status, "status"),
        (NotStorable::NoStore, "no_store"),
        (NotStorable::RequestNoStore, "request_no_store"),
        (NotStorable::Private, "private"),
        (NotStorable::Authorization, "authorization"),
        (NotStorable::SetCookie, "set_cookie"),
        (NotStorable::VaryStar, "vary_star"),
        (NotStorable::NoFreshness, "no_freshness"),
        (NotStorable::NoValidator, "no_validator"),
    ];
    for (reason, label) in all {
        assert_eq!(reason.as_str(), label);
        assert_eq!(reason.to_string(), label);
    }
}

#[test]
fn s3_1_hop_by_hop_and_proxy_fields_are_not_stored() {
    let received = headers(&[
        ("connection", "close, x-hop"),
        ("x-hop", "1"),
        ("keep-alive", "timeout=5"),
        ("proxy-authenticate", "Basic"),
        ("proxy-authentication-info", "x"),
        ("transfer-encoding", "chunked"),
        ("trailer", "x-digest"),
        ("upgrade", "h2c"),
        ("te", "trailers"),
        ("content-type", "text/plain"),
        ("x-unknown", "kept"),
        ("set-cookie", "a=1"),
        ("set-cookie", "b=2"),
    ]);
    let stored = headers_to_store(&received);
    let mut names: Vec<&str> = stored.keys().map(|n| n.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["content-type", "set-cookie", "x-unknown"]);
    assert_eq!(stored.get_all(header::SET_COOKIE).iter().count(), 2);
}

#[test]
fn s4_and_rfc9213_s3_sluice_field_and_old_age_are_not_served() {
    let mut served = headers(&[
        ("sluice-cache-control", "max-age=600"),
        ("cdn-cache-control", "max-age=60"),
        ("cache-control", "max-age=10"),
        ("age", "5"),
    ]);
    strip_not_served(&mut served);
    let mut names: Vec<&str> = served.keys().map(|n| n.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["cache-control", "cdn-cache-control"]);
}
