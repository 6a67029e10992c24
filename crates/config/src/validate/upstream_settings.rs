//! An upstream group's sub-tables: `keepalive`, `timeouts`, `retry` and `health_check`, and its
//! per-server limit (`max_conns` with its queue). Each key defaults to the model's `Default`,
//! so any table or key may be left out.

use std::ops::RangeInclusive;
use std::time::Duration;

use toml::Spanned;

use super::Cx;
use super::address::Rejection;
use crate::model::{HealthCheck, Keepalive, MaxConns, Retry, UpstreamTimeouts};
use crate::path::KeyPath;
use crate::raw::{
    RawHealthCheck, RawKeepalive, RawRetry, RawUpstream, RawUpstreamTimeouts, Scalar,
};

/// Most attempts a request may get, the first included.
const MAX_TRIES: u64 = 10;

pub(super) fn keepalive(cx: &mut Cx<'_>, path: &KeyPath, raw: Option<RawKeepalive>) -> Keepalive {
    let d = Keepalive::default();
    let Some(raw) = raw else { return d };
    let max_idle = cx.count(
        &path.key("max_idle"),
        raw.max_idle.as_ref(),
        d.max_idle as u64,
        (0, u64::from(u32::MAX)),
        Some("0 turns connection reuse off"),
    );
    let zero = r#"to turn reuse off, set max_idle = 0; otherwise e.g. "60s""#;
    let idle_timeout = cx.duration_or_zero(
        &path.key("idle_timeout"),
        raw.idle_timeout.as_ref(),
        d.idle_timeout,
        Some(zero),
    );
    let max_requests = cx.count(
        &path.key("max_requests"),
        raw.max_requests.as_ref(),
        u64::from(d.max_requests),
        (0, u64::from(u32::MAX)),
        Some("0 means no limit"),
    );
    Keepalive {
        max_idle: usize::try_from(max_idle).unwrap_or(d.max_idle),
        idle_timeout,
        max_requests: u32::try_from(max_requests).unwrap_or(d.max_requests),
    }
}

pub(super) fn timeouts(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    raw: Option<RawUpstreamTimeouts>,
) -> UpstreamTimeouts {
    let d = UpstreamTimeouts::default();
    let Some(raw) = raw else { return d };
    let mut timeout = |key: &str, value: Option<&Spanned<Scalar>>, default: Duration| {
        cx.duration(&path.key(key), value, default, false)
    };
    UpstreamTimeouts {
        connect: timeout("connect", raw.connect.as_ref(), d.connect),
        response_header: timeout(
            "response_header",
            raw.response_header.as_ref(),
            d.response_header,
        ),
        idle: timeout("idle", raw.idle.as_ref(), d.idle),
    }
}

pub(super) fn retry(cx: &mut Cx<'_>, path: &KeyPath, raw: Option<RawRetry>) -> Retry {
    let d = Retry::default();
    let Some(raw) = raw else { return d };
    let tries = cx.count(
        &path.key("tries"),
        raw.tries.as_ref(),
        u64::from(d.tries),
        (1, MAX_TRIES),
        Some("`tries` counts every attempt, the first included: 1 means no retry"),
    );
    let zero = "no retry could ever start: to turn retries off, set tries = 1";
    let budget = cx.duration_or_zero(
        &path.key("budget"),
        raw.budget.as_ref(),
        d.budget,
        Some(zero),
    );
    Retry {
        tries: u32::try_from(tries).unwrap_or(d.tries),
        budget,
    }
}

pub(super) fn health_check(cx: &mut Cx<'_>, path: &KeyPath, raw: RawHealthCheck) -> HealthCheck {
    let d = HealthCheck::default();
    let check_path = match &raw.path {
        None => d.path.clone(),
        Some(value) => match parse_check_path(value.get_ref()) {
            Ok(text) => text,
            Err((message, hint)) => {
                cx.r.error(&path.key("path"), Some(value.span()), message, hint);
                d.path.clone()
            }
        },
    };
    let reported = cx.r.len();
    let interval = cx.duration_or_zero(
        &path.key("interval"),
        raw.interval.as_ref(),
        d.interval,
        Some(r#"servers would be checked without a pause; e.g. "5s""#),
    );
    let timeout = cx.duration(&path.key("timeout"), raw.timeout.as_ref(), d.timeout, false);
    if cx.r.len() == reported && timeout >= interval {
        report_slow_check(cx, path, &raw, timeout, interval);
    }
    let expected_status = match &raw.expected_status {
        None => d.expected_status.clone(),
        Some(value) => match parse_status_range(value.get_ref()) {
            Ok(range) => range,
            Err((message, hint)) => {
                let key = path.key("expected_status");
                cx.r.error(&key, Some(value.span()), message, hint);
                d.expected_status.clone()
            }
        },
    };
    let mut count = |key: &str, value: Option<&Spanned<Scalar>>, default: u32, hint: &str| {
        let n = cx.count(
            &path.key(key),
            value,
            u64::from(default),
            (1, u64::from(u32::MAX)),
            Some(hint),
        );
        u32::try_from(n).unwrap_or(default)
    };
    let rise = count(
        "rise",
        raw.rise.as_ref(),
        d.rise,
        "1 brings a server back after its first good check",
    );
    let fall = count(
        "fall",
        raw.fall.as_ref(),
        d.fall,
        "1 takes a server out after its first failed check",
    );
    HealthCheck {
        path: check_path,
        interval,
        timeout,
        expected_status,
        rise,
        fall,
    }
}

/// A check's timeout is not below its interval: reported at the timeout when it was written,
/// else at the interval that went below the default timeout.
fn report_slow_check(
    cx: &mut Cx<'_>,
    path: &KeyPath,
    raw: &RawHealthCheck,
    timeout: Duration,
    interval: Duration,
) {
    let (key, span) = match (&raw.timeout, &raw.interval) {
        (Some(value), _) => ("timeout", Some(value.span())),
        (None, Some(value)) => ("interval", Some(value.span())),
        (None, None) => ("timeout", None),
    };
    let by_default = if raw.timeout.is_none() {
        " by default"
    } else {
        ""
    };
    let message = format!(
        "the health check timeout ({}{by_default}) must be shorter than its interval ({})",
        humantime::format_duration(timeout),
        humantime::format_duration(interval)
    );
    let hint =
        r#"a check must end before the next one starts, e.g. interval = "5s" with timeout = "2s""#;
    cx.r.error(&path.key(key), span, message, Some(hint.into()));
}

/// The request target of a check: an origin-form path (and query).
fn parse_check_path(text: &str) -> Result<String, Rejection> {
    let bad = |hint: String| Err((format!("invalid health check path `{text}`"), Some(hint)));
    if let Some((_, rest)) = text.split_once("://") {
        let path = rest.find('/').map_or("/", |i| &rest[i..]);
        return bad(format!(
            r#"write only the path, "{path}": checks go to each server's own address"#
        ));
    }
    if !text.starts_with('/') {
        return bad(format!(r#"a path starts with `/`: write "/{text}""#));
    }
    if text.parse::<http::uri::PathAndQuery>().is_err() || text.contains(char::is_whitespace) {
        return bad("use a URL path without spaces, e.g. \"/health\"".into());
    }
    Ok(text.to_owned())
}

/// `200`, `"200"` or `"200-399"`, within 100..=599.
fn parse_status_range(value: &Scalar) -> Result<RangeInclusive<u16>, Rejection> {
    let form = || Some(r#"write a status, 200, or a range, "200-399""#.to_owned());
    let text = match value {
        Scalar::Int(n) => n.to_string(),
        Scalar::Str(s) => s.trim().to_owned(),
        other => {
            let message = format!("expected a status or a range, found {}", other.describe());
            return Err((message, form()));
        }
    };
    let invalid = || format!("invalid expected_status `{text}`");
    // "2xx" is how people say it; the range is what the check compares against.
    if let [class @ b'1'..=b'5', b'x' | b'X', b'x' | b'X'] = text.as_bytes() {
        let class = char::from(*class);
        return Err((invalid(), Some(format!(r#"write "{class}00-{class}99""#))));
    }
    let (low, high) = text.split_once('-').unwrap_or((&text, &text));
    let (Ok(low), Ok(high)) = (low.trim().parse::<u16>(), high.trim().parse::<u16>()) else {
        return Err((invalid(), form()));
    };
    if let Some(outside) = [low, high].into_iter().find(|n| !(100..=599).contains(n)) {
        let message = format!("{outside} is not an HTTP status");
        return Err((message, Some("statuses run from 100 to 599".into())));
    }
    if low > high {
        let message = format!("the status range `{text}` is backwards");
        return Err((message, Some(format!(r#"write "{high}-{low}""#))));
    }
    Ok(low..=high)
}

/// `max_conns` (0: no limit), `queue_size` and `queue_timeout` of a group.
pub(super) fn max_conns(cx: &mut Cx<'_>, path: &KeyPath, raw: &RawUpstream) -> MaxConns {
    let d = MaxConns::default();
    let per_server = cx.count(
        &path.key("max_conns"),
        raw.max_conns.as_ref(),
        0,
        (0, u64::from(u32::MAX >> 3)),
        None,
    );
    let queue_size = cx.count(
        &path.key("queue_size"),
        raw.queue_size.as_ref(),
        u64::from(d.queue_size),
        (0, 1_000_000),
        None,
    );
    let queue_timeout = cx.duration(
        &path.key("queue_timeout"),
        raw.queue_timeout.as_ref(),
        d.queue_timeout,
        false,
    );
    if raw.max_conns.is_none()
        && let Some(value) = raw.queue_size.as_ref().or(raw.queue_timeout.as_ref())
    {
        let key = if raw.queue_size.is_some() {
            "queue_size"
        } else {
            "queue_timeout"
        };
        cx.r.error(
            &path.key(key),
            Some(value.span()),
            format!("`{key}` has no effect without `max_conns`"),
            Some("set max_conns = N (requests per server at once), or remove it".into()),
        );
    }
    MaxConns {
        per_server: u32::try_from(per_server).ok().filter(|n| *n > 0),
        queue_size: u32::try_from(queue_size).unwrap_or(u32::MAX),
        queue_timeout,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(value: Scalar) -> Result<RangeInclusive<u16>, String> {
        parse_status_range(&value).map_err(|(_, hint)| hint.unwrap_or_default())
    }

    #[test]
    fn status_ranges() {
        assert_eq!(range(Scalar::Int(204)), Ok(204..=204));
        assert_eq!(range(Scalar::Str("200".into())), Ok(200..=200));
        assert_eq!(range(Scalar::Str("200-399".into())), Ok(200..=399));
        assert_eq!(range(Scalar::Str(" 200 - 299 ".into())), Ok(200..=299));
    }

    #[test]
    fn status_range_mistakes_get_hints() {
        assert_eq!(
            range(Scalar::Str("2xx".into())).unwrap_err(),
            r#"write "200-299""#
        );
        assert_eq!(
            range(Scalar::Str("399-200".into())).unwrap_err(),
            r#"write "200-399""#
        );
        assert!(range(Scalar::Int(700)).unwrap_err().contains("100 to 599"));
        assert!(
            range(Scalar::Str("ok".into()))
                .unwrap_err()
                .contains("200-399")
        );
        assert!(range(Scalar::Bool(true)).is_err());
    }

    #[test]
    fn check_paths() {
        assert_eq!(
            parse_check_path("/health?full=1").unwrap(),
            "/health?full=1"
        );
        let hint = |text| parse_check_path(text).unwrap_err().1.unwrap();
        assert!(hint("health").contains(r#""/health""#));
        assert!(hint("http://app:9001/healthz").contains(r#""/healthz""#));
        assert!(hint("/a b").contains("without spaces"));
    }
}
