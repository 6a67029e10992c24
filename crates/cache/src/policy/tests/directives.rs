//! §5.2 directive parsing: Cache-Control, targeted fields (RFC 9213), request directives.

use std::time::Duration;

use super::*;
use crate::policy::{
    CDN_CACHE_CONTROL, DirectiveSource, MaxStale, RequestDirectives, ResponseDirectives,
    SLUICE_CACHE_CONTROL, Settings,
};

fn response(pairs: &[(&str, &str)]) -> ResponseDirectives {
    ResponseDirectives::parse(&headers(pairs), &Settings::default())
}

fn request(pairs: &[(&str, &str)]) -> RequestDirectives {
    RequestDirectives::parse(&headers(pairs))
}

#[test]
fn s5_2_names_are_case_insensitive_and_arguments_take_both_forms() {
    let d = response(&[("cache-control", "MAX-AGE=\"60\", Public, S-MaxAge = 7")]);
    assert_eq!(d.max_age, Some(secs(60)));
    assert_eq!(d.s_maxage, Some(secs(7)));
    assert!(d.public);
    assert_eq!(d.source, DirectiveSource::CacheControl);
}

#[test]
fn s5_2_every_line_counts_and_quoted_commas_do_not_split() {
    let d = response(&[
        ("cache-control", "no-cache=\"set-cookie, max-age=1\""),
        ("cache-control", "max-age=5, must-revalidate"),
    ]);
    assert!(d.no_cache);
    assert_eq!(d.max_age, Some(secs(5)));
    assert!(d.must_revalidate);
}

#[test]
fn s5_2_3_unknown_directives_and_empty_elements_are_ignored() {
    let d = response(&[("cache-control", ", foo=bar, ,max-age=10, x, bad name=1,")]);
    assert_eq!(
        d,
        ResponseDirectives {
            max_age: Some(secs(10)),
            ..ResponseDirectives::default()
        }
    );
}

#[test]
fn s5_2_2_every_response_directive_is_read() {
    let d = response(&[(
        "cache-control",
        "no-store, no-cache, private, public, must-revalidate, proxy-revalidate, \
         must-understand, no-transform, immutable, stale-while-revalidate=30, stale-if-error=60",
    )]);
    assert!(d.no_store && d.no_cache && d.private && d.public);
    assert!(d.must_revalidate && d.proxy_revalidate && d.must_understand);
    assert!(d.no_transform && d.immutable);
    assert_eq!(d.stale_while_revalidate, Some(secs(30)));
    assert_eq!(d.stale_if_error, Some(secs(60)));
}

#[test]
fn s4_2_1_invalid_delta_seconds_count_as_stale() {
    for value in [
        "max-age=abc",
        "max-age=-1",
        "max-age",
        "max-age=1.5",
        "max-age=\"\"",
    ] {
        assert_eq!(
            response(&[("cache-control", value)]).max_age,
            Some(Duration::ZERO),
            "{value}"
        );
    }
}

#[test]
fn s4_2_1_of_duplicate_directives_the_first_occurrence_is_used() {
    let same = response(&[
        ("cache-control", "max-age=60"),
        ("cache-control", "max-age=60"),
    ]);
    assert_eq!(same.max_age, Some(secs(60)));
    let conflict = response(&[("cache-control", "max-age=60, max-age=120")]);
    assert_eq!(conflict.max_age, Some(secs(60)));
    let lines = response(&[
        ("cache-control", "max-age=1"),
        ("cache-control", "max-age=1800"),
    ]);
    assert_eq!(lines.max_age, Some(secs(1)));
    let invalid_first = response(&[("cache-control", "max-age=abc, max-age=60")]);
    assert_eq!(invalid_first.max_age, Some(Duration::ZERO));
}

#[test]
fn s1_2_2_delta_seconds_beyond_2_pow_31_are_clamped() {
    let d = response(&[(
        "cache-control",
        "max-age=99999999999999999999999, s-maxage=2147483649",
    )]);
    assert_eq!(d.max_age, Some(secs(2_147_483_648)));
    assert_eq!(d.s_maxage, Some(secs(2_147_483_648)));
}

#[test]
fn s5_2_2_4_and_s5_2_2_7_field_name_forms_are_read_as_unqualified() {
    let d = response(&[("cache-control", "private=\"set-cookie\", no-cache=x-foo")]);
    assert!(d.private);
    assert!(d.no_cache);
}

#[test]
fn rfc9213_s2_2_first_valid_targeted_field_replaces_cache_control() {
    let d = response(&[
        ("cache-control", "private, max-age=10"),
        ("cdn-cache-control", "max-age=600"),
    ]);
    assert_eq!(d.source, DirectiveSource::Targeted(CDN_CACHE_CONTROL));
    assert!(!d.private);
    assert_eq!(d.max_age, Some(secs(600)));
    // sluice's own field comes first in the default target list.
    let d = response(&[
        ("cdn-cache-control", "max-age=600"),
        ("sluice-cache-control", "max-age=5, stale-if-error=9"),
    ]);
    assert_eq!(d.source, DirectiveSource::Targeted(SLUICE_CACHE_CONTROL));
    assert_eq!(d.max_age, Some(secs(5)));
    assert_eq!(d.stale_if_error, Some(secs(9)));
}

#[test]
fn rfc9213_s2_1_empty_or_invalid_targeted_fields_are_ignored() {
    let d = response(&[
        ("cache-control", "max-age=10"),
        ("sluice-cache-control", "Max-Age=5"),
        ("cdn-cache-control", ""),
    ]);
    assert_eq!(d.source, DirectiveSource::CacheControl);
    assert_eq!(d.max_age, Some(secs(10)));
    // Invalid first field: the next one on the list is used.
    let d = response(&[
        ("sluice-cache-control", "max-age=5,"),
        ("cdn-cache-control", "no-store"),
    ]);
    assert_eq!(d.source, DirectiveSource::Targeted(CDN_CACHE_CONTROL));
    assert!(d.no_store);
}

#[test]
fn rfc9213_s2_1_dictionary_values_booleans_and_lines() {
    let d = response(&[
        ("cdn-cache-control", "no-store=?0, max-age=60"),
        ("cdn-cache-control", "stale-while-revalidate=\"30\""),
    ]);
    assert!(!d.no_store);
    assert_eq!(d.max_age, Some(secs(60)));
    // A string is not an integer: invalid, so no stale window.
    assert_eq!(d.stale_while_revalidate, Some(Duration::ZERO));
}

#[test]
fn rfc9213_s2_2_the_target_list_is_configurable() {
    let h = headers(&[
        ("cache-control", "max-age=10"),
        ("cdn-cache-control", "max-age=600"),
    ]);
    let none = Settings {
        targeted: Vec::new(),
        ..Settings::default()
    };
    assert_eq!(ResponseDirectives::parse(&h, &none).max_age, Some(secs(10)));
}

#[test]
fn s5_2_1_request_directives_are_read() {
    let d = request(&[(
        "cache-control",
        "max-age=5, max-stale=7, min-fresh=3, no-cache, no-store, only-if-cached, stale-if-error=9",
    )]);
    assert_eq!(
        d,
        RequestDirectives {
            no_cache: true,
            no_store: true,
            only_if_cached: true,
            max_age: Some(secs(5)),
            min_fresh: Some(secs(3)),
            max_stale: Some(MaxStale::Limit(secs(7))),
            stale_if_error: Some(secs(9)),
        }
    );
}

#[test]
fn s5_2_1_2_max_stale_with_or_without_a_value() {
    assert_eq!(
        request(&[("cache-control", "max-stale")]).max_stale,
        Some(MaxStale::Any)
    );
    assert_eq!(
        request(&[("cache-control", "max-stale=abc")]).max_stale,
        None
    );
}

#[test]
fn s5_2_1_invalid_request_values() {
    // max-age: the client wants a fresh answer; min-fresh: ignored.
    let d = request(&[("cache-control", "max-age=x, min-fresh=-1")]);
    assert_eq!(d.max_age, Some(Duration::ZERO));
    assert_eq!(d.min_fresh, None);
}

#[test]
fn s5_4_pragma_no_cache_only_without_cache_control() {
    assert!(request(&[("pragma", "No-Cache")]).no_cache);
    assert!(request(&[("pragma", "foo, no-cache")]).no_cache);
    assert!(!request(&[("pragma", "no-cache"), ("cache-control", "max-age=5")]).no_cache);
    assert!(!request(&[("pragma", "x-no-cache")]).no_cache);
}
