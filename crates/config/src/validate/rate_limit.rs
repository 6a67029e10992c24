//! A route's `rate_limit` option: `requests` (required), `per` (required), `burst` (default
//! `requests`) and `key` (`"client_ip"`, the default, or `"header:NAME"`). Zero anywhere would
//! either refuse every request or divide by zero, so it is refused here with what to write.

use std::num::NonZeroU32;
use std::time::Duration;

use http::HeaderName;
use toml::Spanned;

use super::Cx;
use crate::model::{OnError, RateLimit, RateLimitKey, SharedRateLimit};
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
    let shared = match &raw.shared {
        Some(url) => shared(cx, path, raw, url).map(Some),
        None => {
            for (name, present) in [
                ("on_error", raw.on_error.is_some()),
                ("fleet_size", raw.fleet_size.is_some()),
                ("deadline", raw.deadline.is_some()),
            ] {
                if present {
                    let message = format!("`{name}` applies to a shared limit only");
                    let hint = r#"add shared = "redis://HOST:6379", or remove it"#;
                    cx.r.error(&path.key(name), None, message, Some(hint.into()));
                }
            }
            Some(None)
        }
    };
    let (requests, per, burst, key, shared) = (requests?, per?, burst?, key?, shared?);
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
        shared,
        ..RateLimit::new(requests, per)
    })
}

/// `shared`, `on_error`, `fleet_size`, `deadline`.
fn shared(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    raw: &RawRateLimit,
    url: &Spanned<String>,
) -> Option<SharedRateLimit> {
    let redis = super::cache::shared::url(cx, &path.key("shared"), url);
    let on_error = match &raw.on_error {
        None => Some(OnError::default()),
        Some(value) => match value.get_ref().trim() {
            "local" => Some(OnError::Local),
            "allow" => Some(OnError::Allow),
            "deny" => Some(OnError::Deny),
            other => {
                let hint = match closest(other, ["local", "allow", "deny"]) {
                    Some(best) => format!(r#"did you mean "{best}"?"#),
                    None => r#"write "local", "allow" or "deny""#.to_owned(),
                };
                let message = format!("unknown `on_error` `{other}`");
                cx.r.error(
                    &path.key("on_error"),
                    Some(value.span()),
                    message,
                    Some(hint),
                );
                None
            }
        },
    };
    let fleet_size = match &raw.fleet_size {
        None => NonZeroU32::MIN,
        Some(value) => positive(
            cx,
            &path.key("fleet_size"),
            value,
            "the instances sharing the limit, e.g. fleet_size = 3",
        )?,
    };
    let deadline = cx.duration(
        &path.key("deadline"),
        raw.deadline.as_ref(),
        std::time::Duration::from_millis(20),
        false,
    );
    Some(SharedRateLimit {
        redis: redis?,
        on_error: on_error?,
        fleet_size,
        deadline,
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
