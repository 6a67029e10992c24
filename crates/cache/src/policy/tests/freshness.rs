//! §4.2.1–§4.2.3 freshness lifetime and age, §5.1 Age.

use std::time::Duration;

use super::*;
use crate::policy::{
    Heuristic, LifetimeSource, Settings, StatusMatch, age_value, current_age, freshness_lifetime,
    lifetime_of,
};

fn lifetime(pairs: &[(&str, &str)]) -> Duration {
    freshness_lifetime(&meta(pairs), &Settings::default())
}

#[test]
fn s4_2_1_s_maxage_wins_over_max_age_and_expires() {
    let d = date(0);
    let e = date(1000);
    let l = lifetime(&[
        ("date", &d),
        ("expires", &e),
        ("cache-control", "max-age=100, s-maxage=10"),
    ]);
    assert_eq!(l, secs(10));
}

#[test]
fn s4_2_1_max_age_wins_over_expires() {
    let (d, e) = (date(0), date(1000));
    let l = lifetime(&[
        ("date", &d),
        ("expires", &e),
        ("cache-control", "max-age=100"),
    ]);
    assert_eq!(l, secs(100));
}

#[test]
fn s4_2_1_expires_minus_date_on_the_origins_clock() {
    // The origin's clock is an hour behind ours: only the difference counts.
    let (d, e) = (date(0), date(300));
    let mut m = meta(&[("date", &d), ("expires", &e)]);
    m.response_time = t(3600);
    assert_eq!(freshness_lifetime(&m, &Settings::default()), secs(300));
    // Without Date, the time the response was received stands in (RFC 9110 §6.6.1).
    let e = date(3900);
    let mut m = meta(&[("expires", &e)]);
    m.response_time = t(3600);
    assert_eq!(freshness_lifetime(&m, &Settings::default()), secs(300));
    // Expires before Date: already stale.
    let (d, e) = (date(100), date(0));
    assert_eq!(lifetime(&[("date", &d), ("expires", &e)]), Duration::ZERO);
}

#[test]
fn s5_3_invalid_expires_means_already_expired() {
    let l = lifetime_of(
        StatusCode::OK,
        &headers(&[("expires", "0")]),
        t(0),
        &Settings::default(),
    );
    assert_eq!(l.duration, Duration::ZERO);
    assert_eq!(l.source, LifetimeSource::Explicit);
}

#[test]
fn s4_2_1_expires_sent_twice_with_different_values_is_stale() {
    let (d, e1, e2) = (date(0), date(100), date(200));
    assert_eq!(
        lifetime(&[("date", &d), ("expires", &e1), ("expires", &e2)]),
        Duration::ZERO
    );
    assert_eq!(
        lifetime(&[("date", &d), ("expires", &e1), ("expires", &e1)]),
        secs(100)
    );
}

#[test]
fn rfc9213_s2_2_a_targeted_field_ignores_expires() {
    let (d, e) = (date(0), date(1000));
    let settings = Settings {
        valid: vec![(StatusMatch::Any, secs(7))],
        ..Settings::default()
    };
    let m = meta(&[
        ("date", &d),
        ("expires", &e),
        ("cdn-cache-control", "public"),
    ]);
    assert_eq!(freshness_lifetime(&m, &settings), secs(7));
}

#[test]
fn configured_lifetime_applies_only_without_explicit_expiration() {
    let settings = Settings {
        valid: vec![
            (StatusMatch::Any, secs(60)),
            (StatusMatch::Code(StatusCode::OK), secs(600)),
        ],
        ..Settings::default()
    };
    let of = |status: u16, pairs: &[(&str, &str)]| {
        lifetime_of(
            StatusCode::from_u16(status).unwrap(),
            &headers(pairs),
            t(0),
            &settings,
        )
    };
    // The exact status wins over `any`, whatever their order.
    assert_eq!(of(200, &[]).duration, secs(600));
    assert_eq!(of(200, &[]).source, LifetimeSource::Configured);
    assert_eq!(of(404, &[]).duration, secs(60));
    assert_eq!(of(200, &[("cache-control", "max-age=5")]).duration, secs(5));
    assert_eq!(
        of(200, &[("cache-control", "max-age=0")]).duration,
        Duration::ZERO
    );
}

#[test]
fn s4_2_2_heuristic_is_a_capped_fraction_of_date_minus_last_modified() {
    let settings = Settings {
        heuristic: Some(Heuristic {
            fraction: 0.1,
            max: secs(86_400),
        }),
        ..Settings::default()
    };
    let of = |status: u16, pairs: &[(&str, &str)]| {
        lifetime_of(
            StatusCode::from_u16(status).unwrap(),
            &headers(pairs),
            t(0),
            &settings,
        )
    };
    let (lm, d) = (date(0), date(100_000));
    let l = of(200, &[("last-modified", &lm), ("date", &d)]);
    assert_eq!(
        (l.duration, l.source),
        (secs(10_000), LifetimeSource::Heuristic)
    );
    // Capped.
    let d = date(10_000_000);
    assert_eq!(
        of(200, &[("last-modified", &lm), ("date", &d)]).duration,
        secs(86_400)
    );
    // Not for a status that is not heuristically cacheable, unless `public`.
    let d = date(100_000);
    assert_eq!(
        of(302, &[("last-modified", &lm), ("date", &d)]).source,
        LifetimeSource::None
    );
    let public = [
        ("last-modified", lm.as_str()),
        ("date", &d),
        ("cache-control", "public"),
    ];
    assert_eq!(of(302, &public).duration, secs(10_000));
    // Never when an explicit expiration time is present.
    let explicit = [
        ("last-modified", lm.as_str()),
        ("date", &d),
        ("cache-control", "max-age=3"),
    ];
    assert_eq!(of(200, &explicit).duration, secs(3));
    // Last-Modified after Date: no age to take a fraction of.
    let (lm, d) = (date(100), date(0));
    assert_eq!(
        of(200, &[("last-modified", &lm), ("date", &d)]).duration,
        Duration::ZERO
    );
    // Off by default.
    let (lm, d) = (date(0), date(100_000));
    let off = lifetime_of(
        StatusCode::OK,
        &headers(&[("last-modified", &lm), ("date", &d)]),
        t(0),
        &Settings::default(),
    );
    assert_eq!(off.source, LifetimeSource::None);
}

#[test]
fn s4_2_2_a_bad_heuristic_fraction_gives_no_lifetime_not_a_panic() {
    let (lm, d) = (date(0), date(100_000));
    for fraction in [f64::NAN, -1.0, f64::INFINITY] {
        let settings = Settings {
            heuristic: Some(Heuristic {
                fraction,
                max: Duration::MAX,
            }),
            ..Settings::default()
        };
        let l = lifetime_of(
            StatusCode::OK,
            &headers(&[("last-modified", &lm), ("date", &d)]),
            t(0),
            &settings,
        );
        assert_eq!(l.duration, Duration::ZERO, "{fraction}");
    }
}

#[test]
fn s4_2_3_current_age_follows_the_formula() {
    // Sent at 0, received at 2; the origin stamped Date 1 and an upstream cache said Age 10.
    let d = date(1);
    let mut m = meta(&[("date", &d), ("age", "10")]);
    m.request_time = t(0);
    m.response_time = t(2);
    // apparent_age = 1, corrected_age_value = 10 + 2, corrected_initial_age = 12,
    // resident_time = 30.
    assert_eq!(current_age(&m, t(32)), secs(42));
}

#[test]
fn s4_2_3_apparent_age_wins_when_larger() {
    // An origin clock 100 s behind, no Age: the apparent age counts.
    let d = date(0);
    let mut m = meta(&[("date", &d)]);
    m.request_time = t(99);
    m.response_time = t(100);
    assert_eq!(current_age(&m, t(100)), secs(100));
}

#[test]
fn s4_2_3_negative_differences_count_as_zero() {
    // Date in the future, and "now" before the response arrived.
    let d = date(500);
    let mut m = meta(&[("date", &d)]);
    m.request_time = t(10);
    m.response_time = t(5);
    assert_eq!(current_age(&m, t(0)), Duration::ZERO);
}

#[test]
fn s5_1_age_uses_the_first_member_and_ignores_invalid_values() {
    let age = |value: &str| current_age(&meta(&[("age", value)]), t(0));
    assert_eq!(age("30, 40"), secs(30));
    assert_eq!(age("abc"), Duration::ZERO);
    assert_eq!(age("-5"), Duration::ZERO);
    assert_eq!(age("99999999999999999999"), secs(2_147_483_648));
}

#[test]
fn s5_1_age_value_is_whole_seconds_clamped_to_2_pow_31() {
    let m = meta(&[]);
    assert_eq!(age_value(&m, t(0) + Duration::from_millis(61_900)), "61");
    let old = meta(&[("age", "2147483648")]);
    assert_eq!(age_value(&old, t(100)), "2147483648");
}

#[test]
fn rfc9110_s5_6_7_obsolete_date_formats_and_s4_2_case_insensitive_dates() {
    let d = "Sun, 06 Nov 1994 08:49:37 GMT";
    // 1994-11-06T09:49:37Z, an hour after Date, in every form a cache must accept.
    for expires in [
        "Sun, 06 Nov 1994 09:49:37 GMT",
        "Sunday, 06-Nov-94 09:49:37 GMT",
        "Sun Nov  6 09:49:37 1994",
        "SUN, 06 NOV 1994 09:49:37 gmt",
        "sun nov  6 09:49:37 1994",
        "SUNDAY, 06-nov-94 09:49:37 Gmt",
        // A wrong day of the week: the date is in the other fields.
        "Mon, 06 Nov 1994 09:49:37 GMT",
        "Thu Nov  6 09:49:37 1994",
    ] {
        assert_eq!(
            lifetime(&[("date", d), ("expires", expires)]),
            secs(3600),
            "{expires}"
        );
    }
    // Not dates: already expired (§5.3), never a panic.
    for bad in [
        "Sun, 32 Nov 1994 09:49:37 GMT",
        "Sun, 06 Nov 1994 25:49:37 GMT",
        "Sun, 06 Nov 1994 09:49:37 PST",
        "Sun Xyz  6 09:49:37 1994",
        "Sun, 06 Nov 99999 09:49:37 GMT",
        "Sun, 06 Nov 1994 09:49 GMT",
        "Sun, 06 Nov 1994 09:49:37:00 GMT",
        "",
        "-",
        // What cache-tests calls invalid, rightly: RFC 9110 §5.6.7's grammar is exact.
        "Sun, 06 Nov 1994 9:49:37 GMT",
        "Sun, 06 Nov 94 09:49:37 GMT",
        "Sun, 06-Nov-1994 09:49:37 GMT",
        "Sun,  06 Nov 1994 09:49:37 GMT",
        "Sun 06 Nov 1994 09:49:37 GMT",
        "sun nov 6 09:49:37 1994",
        "Sun, 06-Nov-94 09:49:37 GMT",
        "Sunday, 06 Nov 1994 09:49:37 GMT",
        "Sunday, 06-Nov-94 09:49:37",
        "é, 06 Nov 1994 09:49:37 GMT",
        "Sunday,, 06-Nov-94 09:49:37 GMT",
    ] {
        assert_eq!(
            lifetime(&[("date", d), ("expires", bad)]),
            Duration::ZERO,
            "{bad}"
        );
    }
}
