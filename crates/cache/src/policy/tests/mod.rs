//! Tests of the RFC 9111 rules, one file per area, each test named after the section it
//! checks (`s4_2_1_...` is RFC 9111 §4.2.1; other RFCs are named in full).

mod conditional;
mod directives;
mod evaluate;
mod freshness;
mod invalidate;
mod proptest;
mod storable;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};

use crate::meta::Meta;
use crate::vary::{VaryKey, VaryRule};

/// A point in time `secs` seconds after a fixed base (whole seconds, as HTTP dates are).
fn t(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_700_000_000 + secs)
}

/// `t(secs)` as an HTTP-date.
fn date(secs: u64) -> String {
    httpdate::fmt_http_date(t(secs))
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    map
}

/// A stored 200 response with `pairs`, requested at t(0) and received at t(0).
fn meta(pairs: &[(&str, &str)]) -> Meta {
    meta_status(200, pairs)
}

fn meta_status(status: u16, pairs: &[(&str, &str)]) -> Meta {
    Meta {
        status: StatusCode::from_u16(status).unwrap(),
        headers: headers(pairs),
        request_time: t(0),
        response_time: t(0),
        primary_key: "http://example.com/".into(),
        vary: VaryRule::None,
        vary_key: VaryKey::empty(),
        variant: "identity".into(),
        body_len: 0,
    }
}
