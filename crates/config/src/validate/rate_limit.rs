//! A route's `rate_limit` option: `requests` (required), `per` (required), `burst` (default
//! `requests`) and `key` (`"client_ip"`, the default, or `"header:NAME"`). Zero anywhere would
//! either refuse every request or divide by zero, so it is refused here with what to write.

use std::num::NonZeroU32;
use std::time::Duration;

use http::HeaderName;
use toml::Spanned;

use super::Cx;
use crate::model::{RateLimit, RateLimitKey};
use crate::path::KeyPath;
use crate::raw::RawRateLimit;
use crate::schema::closest;

const KEY_KINDS: &str = r#"write "client_ip" or "header:NAME", e.g. "header:x-api-key""#;

/// The route's rate limit; `None` when something was reported (a default would hide it).
pub(super) fn rate_limit(cx: &mut Cx<'_>, path: &KeyPath, raw: &RawRateLimit) -> Option<RateLimit> {
    let requests = match &raw.requests {
        Some(value) => positive(cx, &path.key("requests"), value, "e.g. requests = 10"),
        None => {
            let hint = r#"e.g. rate_limit = { requests = 10, per = "1s" }"#;
            cx.r.missing(path, "requests", Some(hint.into()));
            None
        }
    };
    let per = match &raw.per {
        Some(value) => {
            let zero = Some(r#"the period requests are spread over; e.g. "1s" or "1m""#);
            let per = cx.duration_or_zero(&path.key("per"), Some(value), Duration::ZERO, zero);
            (!per.is_zero()).then_some(per)
        }
        None => {
            let hint = r#"the period `requests` are spread over, e.g. per = "1s""#;
            cx.r.missing(path, "per", Some(hint.into()));
            None
        }
    };
    let burst = match &raw.burst {
        Some(value) => {
            positive(cx, &path.key("burst"), value, "burst = 1 allows no burst").map(Some)
        }
        None => Some(None),
    };
    let key = match &raw.key {
        Some(value) => key(cx, &path.key("key"), value),
        None => Some(RateLimitKey::ClientIp),
    };
    let (requests, per, burst, key) = (requests?, per?, burst?, key?);
    if per.as_nanos() < u128::from(requests.get()) {
        let message = format!(
            "{} requests per {per:?} is more than one per nanosecond",
            requests
        );
        let hint = "that is no limit at all: lower `requests` or lengthen `per`";
        let span = raw.per.as_ref().map(Spanned::span);
        cx.r.error(&path.key("per"), span, message, Some(hint.into()));
        return None;
    }
    Some(RateLimit {
        burst: burst.unwrap_or(requests),
        key,
        ..RateLimit::new(requests, per)
    })
}

/// A count of at least 1 that fits a token bucket (`u32`).
fn positive(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    value: &Spanned<crate::raw::Scalar>,
    hint: &str,
) -> Option<NonZeroU32> {
    let max = u64::from(u32::MAX);
    let n = cx.count(path, Some(value), 0, (1, max), Some(hint));
    u32::try_from(n).ok().and_then(NonZeroU32::new)
}

/// `"client_ip"` or `"header:NAME"`; anything else is reported with the closest kind.
fn key(cx: &mut Cx<'_>, path: &KeyPath, value: &Spanned<String>) -> Option<RateLimitKey> {
    let text = value.get_ref().trim();
    let (kind, name) = match text.split_once(':') {
        Some((kind, name)) => (kind.trim(), Some(name.trim())),
        None => (text, None),
    };
    let problem = match (kind, name) {
        ("client_ip", None) => return Some(RateLimitKey::ClientIp),
        ("header", Some(name)) => match HeaderName::from_bytes(name.as_bytes()) {
            Ok(name) => return Some(RateLimitKey::Header(name)),
            Err(_) if name.is_empty() => (
                "`header:` needs a header name".to_owned(),
                r#"e.g. "header:x-api-key""#.to_owned(),
            ),
            Err(_) => (
                format!("`{name}` is not a valid header name"),
                "header names are letters, digits and `-`, e.g. `x-api-key`".to_owned(),
            ),
        },
        ("header", None) => (
            "`header` needs a header name".to_owned(),
            r#"write "header:NAME", e.g. "header:x-api-key""#.to_owned(),
        ),
        (kind, name) => {
            let hint = match closest(&kind.to_ascii_lowercase(), ["client_ip", "header"]) {
                Some("header") => {
                    format!(r#"did you mean "header:{}"?"#, name.unwrap_or("NAME"))
                }
                Some(best) => format!(r#"did you mean "{best}"?"#),
                None => KEY_KINDS.to_owned(),
            };
            (format!("unknown rate limit key `{text}`"), hint)
        }
    };
    let (message, hint) = problem;
    cx.r.error(path, Some(value.span()), message, Some(hint));
    None
}
