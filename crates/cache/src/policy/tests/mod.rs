//! Tests of the RFC 9111 rules, one file per area, each test named after the section it
//! checks (`s4_2_1_...` is RFC 9111 §4.2.1; other RFCs are named in full).

#![allow(clippy::unwrap_used, clippy::panic)]

mod directives;

use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue};

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
