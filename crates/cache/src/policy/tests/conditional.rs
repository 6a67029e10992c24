//! §4.3 validation with the origin, RFC 9110 §13 conditional requests from clients.

use http::{Method, header};

use super::*;
use crate::policy::{client_not_modified, freshen, not_modified_headers, revalidation_headers};

/// The field names of `map`, sorted (a `HeaderMap` does not keep insertion order).
fn names(map: &HeaderMap) -> Vec<&str> {
    let mut names: Vec<&str> = map.keys().map(|n| n.as_str()).collect();
    names.sort_unstable();
    names
}

#[test]
fn s4_3_1_revalidation_sends_the_stored_validators() {
    let lm = date(0);
    let m = meta(&[("etag", "W/\"v1\""), ("last-modified", &lm)]);
    let out = revalidation_headers(&m);
    assert_eq!(out.get(header::IF_NONE_MATCH).unwrap(), "W/\"v1\"");
    assert_eq!(out.get(header::IF_MODIFIED_SINCE).unwrap(), lm.as_str());
    // Malformed validators are not sent.
    let m = meta(&[("etag", "v1"), ("last-modified", "yesterday")]);
    assert!(revalidation_headers(&m).is_empty());
    assert!(revalidation_headers(&meta(&[])).is_empty());
}

#[test]
fn s4_3_4_a_matching_304_refreshes_the_headers_but_not_those_of_the_body() {
    let d0 = date(0);
    let m = Meta {
        variant: "gzip".into(),
        ..meta(&[
            ("cache-control", "max-age=60"),
            ("date", &d0),
            ("age", "7"),
            ("etag", "W/\"v1\""),
            ("content-length", "100"),
            ("content-encoding", "gzip"),
            ("vary", "accept-encoding"),
            ("x-old", "kept"),
        ])
    };
    let d100 = date(100);
    let not_modified = headers(&[
        ("cache-control", "max-age=600"),
        ("date", &d100),
        ("etag", "\"v1\""),
        ("content-length", "0"),
        ("content-encoding", "identity"),
        ("vary", "accept-encoding, accept-language"),
        ("x-new", "a"),
        ("x-new", "b"),
        ("set-cookie", "sid=1"),
        ("connection", "close"),
    ]);
    let fresh = freshen(&m, &not_modified, t(99), t(100)).unwrap();
    let h = &fresh.headers;
    assert_eq!(h.get(header::CACHE_CONTROL).unwrap(), "max-age=600");
    assert_eq!(h.get(header::DATE).unwrap(), d100.as_str());
    assert_eq!(h.get(header::ETAG).unwrap(), "W/\"v1\"");
    assert_eq!(h.get(header::CONTENT_LENGTH).unwrap(), "100");
    assert_eq!(h.get(header::CONTENT_ENCODING).unwrap(), "gzip");
    assert_eq!(h.get(header::VARY).unwrap(), "accept-encoding");
    assert_eq!(h.get_all("x-new").iter().count(), 2);
    assert_eq!(h.get("x-old").unwrap(), "kept");
    // The old exchange's Age is gone; hop-by-hop fields and cookies of the 304 never arrive.
    assert!(!h.contains_key(header::AGE));
    assert!(!h.contains_key(header::SET_COOKIE));
    assert!(!h.contains_key(header::CONNECTION));
    assert_eq!((fresh.request_time, fresh.response_time), (t(99), t(100)));
    assert_eq!(
        (fresh.variant.as_str(), fresh.body_len),
        ("gzip", m.body_len)
    );
    // Aged from the 304's exchange: 1 s response delay, 30 s resident.
    assert_eq!(
        crate::policy::current_age(&fresh, t(130)),
        Duration::from_secs(31)
    );
}

#[test]
fn s4_3_4_selection_by_entity_tag_then_last_modified() {
    let lm = date(0);
    let tagged = meta(&[("etag", "\"v1\""), ("last-modified", &lm)]);
    let at = |pairs: &[(&str, &str)], m: &Meta| freshen(m, &headers(pairs), t(1), t(1)).is_some();
    assert!(at(&[("etag", "\"v1\"")], &tagged));
    assert!(at(&[("etag", "W/\"v1\"")], &tagged));
    assert!(!at(&[("etag", "\"v2\"")], &tagged));
    assert!(!at(&[("etag", "\"v2\""), ("last-modified", &lm)], &tagged));
    // An entity tag in the 304 and none stored: a different representation.
    let dated = meta(&[("last-modified", &lm)]);
    assert!(!at(&[("etag", "\"v1\"")], &dated));
    // Last-Modified alone decides when the 304 has no entity tag.
    let other = date(5);
    assert!(at(&[("last-modified", &lm)], &dated));
    assert!(!at(&[("last-modified", &other)], &dated));
    assert!(!at(&[("last-modified", "garbage")], &dated));
}

#[test]
fn s4_3_4_a_304_without_validators_selects_the_one_response_that_was_revalidated() {
    let lm = date(0);
    let d = date(9);
    let no_validators = headers(&[("date", &d)]);
    // RFC 9110 §15.4.5 does not require Last-Modified in a 304.
    assert!(freshen(&meta(&[("last-modified", &lm)]), &no_validators, t(9), t(9)).is_some());
    assert!(freshen(&meta(&[]), &no_validators, t(9), t(9)).is_some());
    // Nor, in practice, do origins always repeat the ETag: the conditional request named this
    // stored response alone, so the 304 is about it (a refusal would cost a second request).
    let fresh = freshen(&meta(&[("etag", "\"v1\"")]), &no_validators, t(9), t(9)).unwrap();
    assert_eq!(fresh.headers.get(header::ETAG).unwrap(), "\"v1\"");
    // A validator that names another response still selects nothing.
    let other = headers(&[("date", &d), ("etag", "\"v2\"")]);
    assert!(freshen(&meta(&[("etag", "\"v1\"")]), &other, t(9), t(9)).is_none());
}

#[test]
fn rfc9110_s6_6_1_a_304_without_date_is_dated_when_received() {
    let d0 = date(0);
    let m = meta(&[("etag", "\"v1\""), ("date", &d0)]);
    let fresh = freshen(&m, &headers(&[("etag", "\"v1\"")]), t(50), t(50)).unwrap();
    assert_eq!(fresh.headers.get(header::DATE).unwrap(), date(50).as_str());
}

fn not_modified(m: &Meta, method: Method, req: &[(&str, &str)]) -> bool {
    client_not_modified(m, &method, &headers(req))
}

#[test]
fn rfc9110_s13_1_2_if_none_match_uses_weak_comparison_and_star() {
    let m = meta(&[("etag", "\"v1\"")]);
    assert!(not_modified(
        &m,
        Method::GET,
        &[("if-none-match", "\"v1\"")]
    ));
    assert!(not_modified(
        &m,
        Method::HEAD,
        &[("if-none-match", "W/\"v1\"")]
    ));
    assert!(not_modified(
        &m,
        Method::GET,
        &[("if-none-match", "\"a\", \"v1\"")]
    ));
    assert!(not_modified(
        &m,
        Method::GET,
        &[("if-none-match", "\"a\""), ("if-none-match", "\"v1\"")]
    ));
    assert!(not_modified(&m, Method::GET, &[("if-none-match", "*")]));
    assert!(!not_modified(
        &m,
        Method::GET,
        &[("if-none-match", "\"v2\"")]
    ));
    assert!(!not_modified(&m, Method::GET, &[("if-none-match", "v1")]));
    // A comma inside an entity tag is part of it.
    let m = meta(&[("etag", "\"a,b\"")]);
    assert!(not_modified(
        &m,
        Method::GET,
        &[("if-none-match", "\"a,b\"")]
    ));
    assert!(!not_modified(
        &m,
        Method::GET,
        &[("if-none-match", "\"a\"")]
    ));
}

#[test]
fn rfc9110_s13_2_2_if_none_match_takes_precedence_over_if_modified_since() {
    let lm = date(0);
    let later = date(100);
    let m = meta(&[("etag", "\"v1\""), ("last-modified", &lm)]);
    let req = [
        ("if-none-match", "\"v2\""),
        ("if-modified-since", later.as_str()),
    ];
    assert!(!not_modified(&m, Method::GET, &req));
}

#[test]
fn rfc9110_s13_1_3_if_modified_since_for_get_and_head_with_one_valid_date() {
    let (lm, before, after) = (date(100), date(99), date(100));
    let m = meta(&[("last-modified", &lm)]);
    assert!(not_modified(
        &m,
        Method::GET,
        &[("if-modified-since", &after)]
    ));
    assert!(not_modified(
        &m,
        Method::HEAD,
        &[("if-modified-since", &after)]
    ));
    assert!(!not_modified(
        &m,
        Method::GET,
        &[("if-modified-since", &before)]
    ));
    assert!(!not_modified(
        &m,
        Method::POST,
        &[("if-modified-since", &after)]
    ));
    assert!(!not_modified(
        &m,
        Method::GET,
        &[("if-modified-since", "soon")]
    ));
    let two = [
        ("if-modified-since", after.as_str()),
        ("if-modified-since", after.as_str()),
    ];
    assert!(!not_modified(&m, Method::GET, &two));
}

#[test]
fn s4_3_2_if_modified_since_uses_date_or_receive_time_without_last_modified() {
    let d = date(50);
    let m = meta(&[("date", &d)]);
    assert!(not_modified(
        &m,
        Method::GET,
        &[("if-modified-since", &date(50))]
    ));
    assert!(!not_modified(
        &m,
        Method::GET,
        &[("if-modified-since", &date(49))]
    ));
    let undated = meta(&[]);
    assert!(not_modified(
        &undated,
        Method::GET,
        &[("if-modified-since", &date(0))]
    ));
}

#[test]
fn rfc9110_s13_2_1_preconditions_only_apply_to_a_2xx_response() {
    let m = meta_status(404, &[("etag", "\"v1\"")]);
    assert!(!not_modified(
        &m,
        Method::GET,
        &[("if-none-match", "\"v1\"")]
    ));
    // If-Match and If-Unmodified-Since are not the cache's to evaluate (§4.3.2).
    let m = meta(&[("etag", "\"v1\"")]);
    assert!(!not_modified(&m, Method::GET, &[("if-match", "\"v1\"")]));
}

#[test]
fn rfc9110_s15_4_5_a_304_carries_the_listed_fields() {
    let (d, lm) = (date(0), date(0));
    let m = meta(&[
        ("cache-control", "max-age=60"),
        ("cdn-cache-control", "max-age=600"),
        ("content-location", "/a.en"),
        ("content-type", "text/html"),
        ("content-length", "5"),
        ("date", &d),
        ("etag", "\"v1\""),
        ("expires", &d),
        ("vary", "accept-language"),
        ("last-modified", &lm),
        ("x-other", "1"),
    ]);
    let out = not_modified_headers(&m);
    assert_eq!(
        names(&out),
        [
            "cache-control",
            "cdn-cache-control",
            "content-location",
            "date",
            "etag",
            "expires",
            "vary"
        ]
    );
    // Last-Modified only when there is no ETag.
    let m = meta(&[("last-modified", &lm)]);
    assert_eq!(names(&not_modified_headers(&m)), ["last-modified"]);
}
