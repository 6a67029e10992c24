//! Cache directives of responses (RFC 9111 §5.2.2) and requests (§5.2.1), from `Cache-Control`
//! (§5.2) or a targeted field (RFC 9213).
//!
//! `Cache-Control` syntax (§5.2): `#( token [ "=" ( token / quoted-string ) ] )`, names
//! case-insensitive, both argument forms accepted for every directive. Unknown directives are
//! ignored (§5.2.3). Arguments that must be delta-seconds (§1.2.2) and are not (`max-age=abc`,
//! `max-age=-1`, no argument) are invalid freshness information, which §4.2.1 encourages to be
//! treated as stale: they count as 0. A delta-seconds directive given twice with different
//! values is handled the same way (§4.2.1: "either the first occurrence should be used or the
//! response should be considered stale"; stale is the safer choice for a shared cache). Values
//! above 2^31 are clamped to 2^31 (§1.2.2).
//!
//! The field-name forms `no-cache="Set-Cookie"` and `private="Set-Cookie"` (§5.2.2.4,
//! §5.2.2.7) are treated as their unqualified forms: the RFC lets a cache reuse such a response
//! with the named fields removed, but does not require it, and the conservative reading can
//! never send one client's fields to another.
//!
//! Targeted fields (RFC 9213 §2.2): the first field of [`Settings::targeted`] that is present,
//! non-empty and parses as a Structured Fields Dictionary (§2.1) replaces `Cache-Control`
//! *and* `Expires` for this cache's decisions; the same directive names have the same meaning,
//! with Integer arguments. A delta-seconds directive whose value is not a non-negative Integer
//! (`max-age=1.5`, `max-age="60"`) is not consumed as a number (§2.1: "Implementations SHOULD
//! NOT consume values that violate these inferred constraints") and counts as invalid, 0, as
//! in `Cache-Control`. `Cache-Control` still goes downstream untouched.

use std::time::Duration;

use http::header::{self, HeaderMap, HeaderName};

use super::structured::{SfValue, parse_dictionary};
use super::{DELTA_SECONDS_MAX, Settings};

/// Where a response's directives came from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum DirectiveSource {
    /// `Cache-Control` (possibly absent): `Expires` applies too.
    #[default]
    CacheControl,
    /// This targeted field (RFC 9213): `Cache-Control` and `Expires` are ignored.
    Targeted(HeaderName),
}

/// A response's cache directives as this (shared) cache reads them (§5.2.2).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResponseDirectives {
    pub source: DirectiveSource,
    /// §5.2.2.5.
    pub no_store: bool,
    /// §5.2.2.4, with or without field names.
    pub no_cache: bool,
    /// §5.2.2.7, with or without field names.
    pub private: bool,
    /// §5.2.2.9.
    pub public: bool,
    /// §5.2.2.2.
    pub must_revalidate: bool,
    /// §5.2.2.8.
    pub proxy_revalidate: bool,
    /// §5.2.2.3.
    pub must_understand: bool,
    /// §5.2.2.6: the compressor leaves such a response alone.
    pub no_transform: bool,
    /// RFC 8246: advice to clients; sluice's decisions do not change with it.
    pub immutable: bool,
    /// §5.2.2.1.
    pub max_age: Option<Duration>,
    /// §5.2.2.10.
    pub s_maxage: Option<Duration>,
    /// RFC 5861 §3.
    pub stale_while_revalidate: Option<Duration>,
    /// RFC 5861 §4.
    pub stale_if_error: Option<Duration>,
}

/// An argument as found, before it is read as what a directive needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arg {
    None,
    Integer(i64),
    Other,
}

impl ResponseDirectives {
    /// The directives of a response with `headers`, from the first valid targeted field of
    /// `settings`, else from `Cache-Control`.
    pub fn parse(headers: &HeaderMap, settings: &Settings) -> ResponseDirectives {
        for name in &settings.targeted {
            if let Some(members) = targeted_members(headers, name) {
                let mut directives = ResponseDirectives::from_members(members);
                directives.source = DirectiveSource::Targeted(name.clone());
                return directives;
            }
        }
        ResponseDirectives::from_members(cache_control_members(headers))
    }

    fn from_members(members: Vec<(String, Arg)>) -> ResponseDirectives {
        let mut d = ResponseDirectives::default();
        for (name, arg) in members {
            match name.as_str() {
                "no-store" => d.no_store = true,
                "no-cache" => d.no_cache = true,
                "private" => d.private = true,
                "public" => d.public = true,
                "must-revalidate" => d.must_revalidate = true,
                "proxy-revalidate" => d.proxy_revalidate = true,
                "must-understand" => d.must_understand = true,
                "no-transform" => d.no_transform = true,
                "immutable" => d.immutable = true,
                "max-age" => record_delta(&mut d.max_age, arg),
                "s-maxage" => record_delta(&mut d.s_maxage, arg),
                "stale-while-revalidate" => record_delta(&mut d.stale_while_revalidate, arg),
                "stale-if-error" => record_delta(&mut d.stale_if_error, arg),
                _ => {}
            }
        }
        d
    }

    /// The response states an expiration time of its own (§4.2.1's first three cases).
    pub fn has_explicit_expiration(&self, headers: &HeaderMap) -> bool {
        self.s_maxage.is_some()
            || self.max_age.is_some()
            || (self.source == DirectiveSource::CacheControl
                && headers.contains_key(header::EXPIRES))
    }
}

/// Record a delta-seconds directive: the first occurrence wins. §4.2.1: "When there is more
/// than one value present for a given directive ..., either the first occurrence should be
/// used or the response should be considered stale"; sluice takes the first, as Squid, Traffic
/// Server and Apache do (an earlier version took "stale", which made `max-age=1800,
/// max-age=1` a miss every time).
fn record_delta(slot: &mut Option<Duration>, arg: Arg) {
    if slot.is_none() {
        *slot = Some(delta_seconds(arg).unwrap_or(Duration::ZERO));
    }
}

/// §1.2.2 `delta-seconds = 1*DIGIT`, clamped to 2^31; `None` when not a delta-seconds value.
fn delta_seconds(arg: Arg) -> Option<Duration> {
    match arg {
        Arg::Integer(n) => {
            let n = u64::try_from(n).ok()?;
            Some(Duration::from_secs(n.min(DELTA_SECONDS_MAX)))
        }
        Arg::None | Arg::Other => None,
    }
}

/// `max-stale` with or without a value (§5.2.1.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxStale {
    /// No value: a stale response of any age is acceptable.
    Any,
    /// Stale by at most this much.
    Limit(Duration),
}

/// A request's cache directives (§5.2.1).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestDirectives {
    /// §5.2.1.4, or `Pragma: no-cache` without `Cache-Control` (§5.4).
    pub no_cache: bool,
    /// §5.2.1.5: store nothing of this exchange (a stored response may still answer it).
    pub no_store: bool,
    /// §5.2.1.7: answer from the cache or with 504.
    pub only_if_cached: bool,
    /// §5.2.1.1: an invalid value counts as 0 (the client wants a fresh answer).
    pub max_age: Option<Duration>,
    /// §5.2.1.3: an invalid value is ignored.
    pub min_fresh: Option<Duration>,
    /// §5.2.1.2: an invalid value is ignored (no stale response is acceptable).
    pub max_stale: Option<MaxStale>,
    /// RFC 5861 §4 as a request directive: an invalid value is ignored.
    pub stale_if_error: Option<Duration>,
}

impl RequestDirectives {
    /// The request will not take a response whose request was sent before it arrived: with
    /// `no-cache` (§5.2.1.4) or `max-age=0` (§5.2.1.1) it must be validated with the origin for
    /// this request, so it never waits for another request's response in flight.
    pub fn needs_its_own_validation(&self) -> bool {
        self.no_cache || self.max_age == Some(Duration::ZERO)
    }

    pub fn parse(headers: &HeaderMap) -> RequestDirectives {
        let mut d = RequestDirectives::default();
        for (name, arg) in cache_control_members(headers) {
            match name.as_str() {
                "no-cache" => d.no_cache = true,
                "no-store" => d.no_store = true,
                "only-if-cached" => d.only_if_cached = true,
                "max-age" => d.max_age = Some(delta_seconds(arg).unwrap_or(Duration::ZERO)),
                "min-fresh" => d.min_fresh = delta_seconds(arg).or(d.min_fresh),
                "max-stale" => {
                    d.max_stale = match arg {
                        Arg::None => Some(MaxStale::Any),
                        arg => delta_seconds(arg).map(MaxStale::Limit).or(d.max_stale),
                    }
                }
                "stale-if-error" => d.stale_if_error = delta_seconds(arg).or(d.stale_if_error),
                _ => {}
            }
        }
        // §5.4 deprecates Pragma but RFC 7234 §5.4 defined this equivalence and HTTP/1.0
        // clients still send it; it only applies when Cache-Control is absent.
        if !headers.contains_key(header::CACHE_CONTROL) {
            d.no_cache = headers
                .get_all(header::PRAGMA)
                .iter()
                .flat_map(|v| v.as_bytes().split(|&b| b == b','))
                .any(|token| token.trim_ascii().eq_ignore_ascii_case(b"no-cache"));
        }
        d
    }
}

/// The members of targeted field `name`, or `None` when it is absent, empty or invalid
/// (RFC 9213 §2.1: such a field "MUST be ignored by the cache"). Lines are combined first
/// (RFC 8941 §4.2).
fn targeted_members(headers: &HeaderMap, name: &HeaderName) -> Option<Vec<(String, Arg)>> {
    let mut lines = headers.get_all(name).iter().peekable();
    lines.peek()?;
    let mut joined = Vec::new();
    for (i, line) in lines.enumerate() {
        if i > 0 {
            joined.extend_from_slice(b", ");
        }
        joined.extend_from_slice(line.as_bytes());
    }
    let members = parse_dictionary(&joined)?;
    let args = members.into_iter().filter_map(|(key, value)| match value {
        SfValue::Integer(n) => Some((key, Arg::Integer(n))),
        SfValue::Boolean(true) => Some((key, Arg::None)),
        // `no-store=?0` says the directive is off.
        SfValue::Boolean(false) => None,
        SfValue::Other => Some((key, Arg::Other)),
    });
    Some(args.collect())
}

/// Every directive of every `Cache-Control` line, names lowercased, in order. Malformed bits
/// are skipped up to the next comma outside a quoted string.
fn cache_control_members(headers: &HeaderMap) -> Vec<(String, Arg)> {
    let mut out = Vec::new();
    for line in headers.get_all(header::CACHE_CONTROL) {
        let mut rest = line.as_bytes();
        while !rest.is_empty() {
            let (member, after) = split_member(rest);
            rest = after;
            if let Some(parsed) = parse_member(member) {
                out.push(parsed);
            }
        }
    }
    out
}

/// The bytes up to the next comma that is not inside a quoted string, and what follows it.
fn split_member(input: &[u8]) -> (&[u8], &[u8]) {
    let mut in_quotes = false;
    let mut escaped = false;
    for (i, &b) in input.iter().enumerate() {
        if in_quotes {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_quotes = false,
                _ => {}
            }
        } else if b == b'"' {
            in_quotes = true;
        } else if b == b',' {
            return (
                input.get(..i).unwrap_or_default(),
                input.get(i + 1..).unwrap_or_default(),
            );
        }
    }
    (input, &[])
}

/// `token [ "=" ( token / quoted-string ) ]`, surrounding whitespace allowed; `None` for an
/// empty list element or a name that is not a token.
fn parse_member(member: &[u8]) -> Option<(String, Arg)> {
    let member = member.trim_ascii();
    let (name, arg) = match member.iter().position(|&b| b == b'=') {
        Some(eq) => (
            member.get(..eq)?.trim_ascii(),
            Some(member.get(eq + 1..)?.trim_ascii()),
        ),
        None => (member, None),
    };
    if name.is_empty() || !name.iter().all(|&b| is_tchar(b)) {
        return None;
    }
    let name = name
        .iter()
        .map(|&b| char::from(b.to_ascii_lowercase()))
        .collect();
    let arg = match arg {
        None => Arg::None,
        Some(raw) => {
            let unquoted = raw
                .strip_prefix(b"\"")
                .and_then(|r| r.strip_suffix(b"\""))
                .unwrap_or(raw);
            digits_value(unquoted).map_or(Arg::Other, Arg::Integer)
        }
    };
    Some((name, arg))
}

/// `1*DIGIT` as an integer, saturating (any value past 2^31 is clamped later anyway).
fn digits_value(bytes: &[u8]) -> Option<i64> {
    if bytes.is_empty() || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(bytes.iter().fold(0i64, |n, &d| {
        n.saturating_mul(10).saturating_add(i64::from(d - b'0'))
    }))
}

/// RFC 9110 §5.6.2 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}
