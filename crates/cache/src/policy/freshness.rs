//! Freshness lifetime (RFC 9111 §4.2.1, §4.2.2), age (§4.2.3) and the `Age` field (§5.1).
//!
//! <https://www.rfc-editor.org/rfc/rfc9111#section-4.2>. A stored response is fresh while its
//! freshness lifetime exceeds its current age. The lifetime is the first that applies of:
//! `s-maxage` (shared cache), `max-age`, `Expires − Date` (not when a targeted field was
//! selected, RFC 9213 §2.2), then the zone's configured lifetime for the status (nginx's
//! `proxy_cache_valid`, which only ever applies when the response has no explicit expiration
//! time), then the heuristic of §4.2.2 when enabled.
//!
//! Times from the origin's clock (`Date`, `Expires`, `Last-Modified`) are compared with each
//! other, never with ours, except through the §4.2.3 age calculation, which is built to absorb
//! clock skew. A missing or invalid `Date` is the time the response was received (RFC 9110
//! §6.6.1).

use std::time::{Duration, SystemTime};

use http::header::{self, HeaderMap};
use http::{HeaderValue, StatusCode};

use super::directives::{DirectiveSource, ResponseDirectives};
use super::{DELTA_SECONDS_MAX, Settings, heuristically_cacheable};
use crate::meta::Meta;

/// Where a freshness lifetime came from (for logs and for [`super::storable`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LifetimeSource {
    /// `s-maxage`, `max-age` or `Expires`.
    Explicit,
    /// [`Settings::valid`].
    Configured,
    /// [`Settings::heuristic`].
    Heuristic,
    /// Nothing applies: the response is stale on arrival.
    None,
}

/// A freshness lifetime and its source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifetime {
    pub duration: Duration,
    pub source: LifetimeSource,
}

/// §4.2.1 `freshness_lifetime` of a stored response.
pub fn freshness_lifetime(meta: &Meta, settings: &Settings) -> Duration {
    lifetime_of(meta.status, &meta.headers, meta.response_time, settings).duration
}

/// §4.2.1 for a response not yet stored: `status` and `headers` received at `response_time`.
pub fn lifetime_of(
    status: StatusCode,
    headers: &HeaderMap,
    response_time: SystemTime,
    settings: &Settings,
) -> Lifetime {
    let directives = ResponseDirectives::parse(headers, settings);
    lifetime_with(&directives, status, headers, response_time, settings)
}

pub(crate) fn lifetime_with(
    d: &ResponseDirectives,
    status: StatusCode,
    headers: &HeaderMap,
    response_time: SystemTime,
    settings: &Settings,
) -> Lifetime {
    let explicit = |duration| Lifetime {
        duration,
        source: LifetimeSource::Explicit,
    };
    // §4.2.1: "If the cache is shared and the s-maxage response directive is present, use its
    // value, or If the max-age response directive is present, use its value, or If the Expires
    // response header field is present, use its value minus the value of the Date response
    // header field".
    if let Some(s_maxage) = d.s_maxage {
        return explicit(s_maxage);
    }
    if let Some(max_age) = d.max_age {
        return explicit(max_age);
    }
    if d.source == DirectiveSource::CacheControl
        && let Some(expires) = expires_lifetime(headers, response_time)
    {
        return explicit(expires);
    }
    if let Some(duration) = settings.valid_for(status) {
        return Lifetime {
            duration,
            source: LifetimeSource::Configured,
        };
    }
    // §4.2.2: heuristics only for heuristically cacheable statuses, or responses marked
    // cacheable with `public` (§5.2.2.9: "If a response with the public directive has no
    // explicit freshness information, it is heuristically cacheable").
    if let Some(heuristic) = settings.heuristic
        && (heuristically_cacheable(status) || d.public)
        && let Some(last_modified) = http_date(headers, &header::LAST_MODIFIED)
    {
        let date = date_value(headers, response_time);
        let since = date.duration_since(last_modified).unwrap_or(Duration::ZERO);
        let secs = since.as_secs_f64() * heuristic.fraction;
        let secs = secs.min(heuristic.max.as_secs_f64());
        // Not finite or negative (a bad fraction) gives no heuristic rather than a panic.
        let duration = Duration::try_from_secs_f64(secs).unwrap_or(Duration::ZERO);
        return Lifetime {
            duration,
            source: LifetimeSource::Heuristic,
        };
    }
    Lifetime {
        duration: Duration::ZERO,
        source: LifetimeSource::None,
    }
}

/// `Expires − Date`, `Some(0)` when `Expires` is invalid (§5.3: "MUST interpret invalid date
/// formats, especially the value "0", as representing a time in the past") or sent twice
/// with different values (§4.2.1), `None` when absent.
fn expires_lifetime(headers: &HeaderMap, response_time: SystemTime) -> Option<Duration> {
    let mut lines = headers.get_all(header::EXPIRES).iter();
    let first = lines.next()?;
    if lines.any(|other| other != first) {
        return Some(Duration::ZERO);
    }
    let Some(expires) = parse_date(first) else {
        return Some(Duration::ZERO);
    };
    let date = date_value(headers, response_time);
    Some(expires.duration_since(date).unwrap_or(Duration::ZERO))
}

/// §4.2.3 `date_value`: `Date`, or the time the response was received when it is absent or
/// invalid (RFC 9110 §6.6.1).
pub(crate) fn date_value(headers: &HeaderMap, response_time: SystemTime) -> SystemTime {
    http_date(headers, &header::DATE).unwrap_or(response_time)
}

/// The first line of a date field, parsed (IMF-fixdate and the two obsolete formats RFC 9110
/// §5.6.7 requires recipients to accept).
pub(crate) fn http_date(headers: &HeaderMap, name: &header::HeaderName) -> Option<SystemTime> {
    headers.get(name).and_then(parse_date)
}

/// An HTTP-date in any of the three formats of RFC 9110 §5.6.7 (IMF-fixdate, and the obsolete
/// RFC 850 and ANSI C `asctime` forms, which "recipients ... MUST accept"), matched
/// case-insensitively as RFC 9111 §4.2 asks of caches, and without checking the day of the
/// week (it adds nothing a recipient needs: the date is in the other fields).
pub(crate) fn parse_date(value: &HeaderValue) -> Option<SystemTime> {
    let text = value.to_str().ok()?.trim();
    httpdate::parse_http_date(text)
        .ok()
        .or_else(|| lenient_http_date(text))
}

/// The slow path of [`parse_date`], for what `httpdate` (exact case, checked weekday) refuses:
/// the grammar of RFC 9110 §5.6.7, position by position, with names in any case and any day of
/// the week. Nothing looser (one-digit hours, two-digit years outside RFC 850, missing commas,
/// extra spaces are invalid dates, and an invalid `Expires` means already expired, §5.3).
/// Written here because no maintained crate parses HTTP-dates case-insensitively.
fn lenient_http_date(text: &str) -> Option<SystemTime> {
    const DAYS: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
    const LONG_DAYS: [&str; 7] = [
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
    ];
    const MONTHS: [&str; 12] = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    let b = text.as_bytes();
    let name = |s: &[u8], names: &[&str]| {
        names
            .iter()
            .position(|n| n.as_bytes().eq_ignore_ascii_case(s))
    };
    let digits = |s: &[u8]| -> Option<u64> {
        s.iter().try_fold(0u64, |n, &d| {
            d.is_ascii_digit().then(|| n * 10 + u64::from(d - b'0'))
        })
    };
    let month = |s: &[u8]| name(s, &MONTHS).map(|i| i as u64 + 1);
    let gmt = |s: &[u8]| s.eq_ignore_ascii_case(b"GMT");
    // `hh:mm:ss`
    let clock = |s: &[u8]| -> Option<(u64, u64, u64)> {
        (s.len() == 8 && s[2] == b':' && s[5] == b':')
            .then(|| Some((digits(&s[0..2])?, digits(&s[3..5])?, digits(&s[6..8])?)))
            .flatten()
    };
    let (year, month, day, (h, m, sec)) = if b.len() == 29 && b[3] == b',' {
        // IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`
        name(&b[0..3], &DAYS)?;
        let spaces = [4, 7, 11, 16, 25].iter().all(|&i| b[i] == b' ');
        if !spaces || !gmt(&b[26..29]) {
            return None;
        }
        (
            digits(&b[12..16])?,
            month(&b[8..11])?,
            digits(&b[5..7])?,
            clock(&b[17..25])?,
        )
    } else if b.len() == 24 && b[3] == b' ' {
        // asctime: `Sun Nov  6 08:49:37 1994` (the day is 2DIGIT or SP DIGIT)
        name(&b[0..3], &DAYS)?;
        let spaces = [7, 10, 19].iter().all(|&i| b[i] == b' ');
        let day = match b[8] {
            b' ' => digits(&b[9..10])?,
            _ => digits(&b[8..10])?,
        };
        if !spaces {
            return None;
        }
        (
            digits(&b[20..24])?,
            month(&b[4..7])?,
            day,
            clock(&b[11..19])?,
        )
    } else {
        // RFC 850: `Sunday, 06-Nov-94 08:49:37 GMT`
        let comma = text.find(',')?;
        name(&b[..comma], &LONG_DAYS)?;
        let rest = &b[comma..];
        let shape = rest.len() == 24
            && rest[1] == b' '
            && rest[4] == b'-'
            && rest[8] == b'-'
            && rest[11] == b' '
            && rest[20] == b' ';
        if !shape || !gmt(&rest[21..24]) {
            return None;
        }
        // A two-digit year more than 50 years in the future is in the past century
        // (RFC 9110 §5.6.7); simplified to the pivot 1970.
        let yy = digits(&rest[9..11])?;
        let year = if yy < 70 { 2000 + yy } else { 1900 + yy };
        (
            year,
            month(&rest[5..8])?,
            digits(&rest[2..4])?,
            clock(&rest[12..20])?,
        )
    };
    if !(1..=31).contains(&day) || !(1970..=9999).contains(&year) || h > 23 || m > 59 || sec > 60 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + h * 3600 + m * 60 + sec;
    SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(secs))
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (Howard Hinnant's
/// `days_from_civil`), for years from 1970.
fn days_from_civil(year: u64, month: u64, day: u64) -> u64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// §5.1 `Age` as received: the first member of the first line (a list-valued Age "SHOULD use
/// the first member"), 0 when invalid ("a cache SHOULD ignore the field"), clamped to 2^31.
fn age_header(headers: &HeaderMap) -> Duration {
    let first = headers
        .get(header::AGE)
        .and_then(|v| v.as_bytes().split(|&b| b == b',').next())
        .map(<[u8]>::trim_ascii)
        .unwrap_or_default();
    if first.is_empty() || !first.iter().all(u8::is_ascii_digit) {
        return Duration::ZERO;
    }
    let secs = first.iter().fold(0u64, |n, &d| {
        n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    });
    Duration::from_secs(secs.min(DELTA_SECONDS_MAX))
}

/// §4.2.3 `current_age`, exactly:
///
/// ```text
/// apparent_age = max(0, response_time - date_value);
/// response_delay = response_time - request_time;
/// corrected_age_value = age_value + response_delay;
/// corrected_initial_age = max(apparent_age, corrected_age_value);
/// resident_time = now - response_time;
/// current_age = corrected_initial_age + resident_time;
/// ```
///
/// Differences that would be negative (clocks going backwards) count as 0.
pub fn current_age(meta: &Meta, now: SystemTime) -> Duration {
    let since = |later: SystemTime, earlier: SystemTime| {
        later.duration_since(earlier).unwrap_or(Duration::ZERO)
    };
    let date = date_value(&meta.headers, meta.response_time);
    let apparent_age = since(meta.response_time, date);
    let response_delay = since(meta.response_time, meta.request_time);
    let corrected_age_value = age_header(&meta.headers).saturating_add(response_delay);
    let corrected_initial_age = apparent_age.max(corrected_age_value);
    let resident_time = since(now, meta.response_time);
    corrected_initial_age.saturating_add(resident_time)
}

/// The `Age` field to send with `meta` at `now` (§5.1, §4: "a cache MUST generate an Age
/// header field ... replacing any present in the response"): whole seconds, at most 2^31
/// (§1.2.2: on overflow "the cache MUST consider the value to be 2147483648").
pub fn age_value(meta: &Meta, now: SystemTime) -> HeaderValue {
    HeaderValue::from(current_age(meta, now).as_secs().min(DELTA_SECONDS_MAX))
}
