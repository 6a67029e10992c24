//! The primary cache key: what identifies a stored response before `Vary` is consulted.
//!
//! RFC 9111 §2 (<https://www.rfc-editor.org/rfc/rfc9111#section-2>): "The primary cache key
//! consists of the request method and target URI". Only GET responses are stored and HEAD is
//! answered from them (see [`crate::policy::storable`]), so the method is left out: GET and HEAD
//! share a key. The target URI is rendered from the parts a route configures (`"scheme"`,
//! `"host"`, `"path"`, `"query"` by default, giving `http://example.com/a/b?x=1`), plus optional
//! request headers and cookies for sites that vary on them without saying so in `Vary`.
//!
//! The key is a readable string (logs, the purge endpoint) that is also unambiguous: URI parts
//! are always rendered in URI order whatever the configured order (so `host` then `path` can
//! never run together into a different host), and header or cookie values are percent-encoded so
//! the space that separates them cannot be forged by a value. The host is normalised as RFC 9110
//! §4.2.3 allows: lowercase, default port removed.
//!
//! [`resolve_reference`] and [`reference_key`] turn `Location` / `Content-Location` values into
//! keys for invalidation (RFC 9111 §4.4), refusing other origins.

use std::fmt;
use std::str::FromStr;

use http::{HeaderMap, HeaderName, Uri, header};

/// One part of the primary key, as named in the config.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum KeyPart {
    /// `"scheme"`: `http` or `https`.
    Scheme,
    /// `"host"`: the request's host, lowercase, default port removed.
    Host,
    /// `"path"`: the request's path as the pipeline hands it over: in normal form (RFC 3986
    /// §6.2.2, `sluice_core::uri_path`), so `/%61` and `/a` are one key; nothing further is
    /// decoded here.
    Path,
    /// `"query"`: the query as received, `?` included when present.
    Query,
    /// `"header:NAME"`: the field's value (lines joined by `", "`), absent distinct from empty.
    Header(HeaderName),
    /// `"cookie:NAME"`: the named cookie's value from `Cookie`, absent distinct from empty.
    Cookie(String),
    /// `"method"`: the method of the stored response, which is always GET (a HEAD is answered
    /// from a stored GET), so it adds ` method:GET`; kept for keys shared with other caches'
    /// conventions (nginx users write `$request_method`).
    Method,
}

/// The parts used when a route configures none: the target URI.
pub const DEFAULT_PARTS: [KeyPart; 4] = [
    KeyPart::Scheme,
    KeyPart::Host,
    KeyPart::Path,
    KeyPart::Query,
];

/// A key part in the config that is not one of the known forms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyPartError {
    /// Not `scheme`, `host`, `path`, `query`, `header:NAME` or `cookie:NAME`.
    Unknown(String),
    /// `header:NAME` whose NAME is not a valid field name.
    BadHeaderName(String),
    /// `cookie:NAME` whose NAME is empty or not a token (RFC 6265 §4.1.1 `cookie-name`).
    BadCookieName(String),
}

impl fmt::Display for KeyPartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyPartError::Unknown(part) => write!(
                f,
                "unknown cache key part {part:?}: expected scheme, host, path, query, \
                 header:NAME or cookie:NAME"
            ),
            KeyPartError::BadHeaderName(name) => {
                write!(f, "cache key part header:{name}: not a valid header name")
            }
            KeyPartError::BadCookieName(name) => {
                write!(f, "cache key part cookie:{name}: not a valid cookie name")
            }
        }
    }
}

impl std::error::Error for KeyPartError {}

impl FromStr for KeyPart {
    type Err = KeyPartError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Some(name) = s.strip_prefix("header:") {
            return HeaderName::from_bytes(name.as_bytes())
                .map(KeyPart::Header)
                .map_err(|_| KeyPartError::BadHeaderName(name.to_owned()));
        }
        if let Some(name) = s.strip_prefix("cookie:") {
            if name.is_empty() || !name.bytes().all(is_tchar) {
                return Err(KeyPartError::BadCookieName(name.to_owned()));
            }
            return Ok(KeyPart::Cookie(name.to_owned()));
        }
        match s {
            "scheme" => Ok(KeyPart::Scheme),
            "host" => Ok(KeyPart::Host),
            "path" => Ok(KeyPart::Path),
            "query" => Ok(KeyPart::Query),
            "method" => Ok(KeyPart::Method),
            other => Err(KeyPartError::Unknown(other.to_owned())),
        }
    }
}

impl fmt::Display for KeyPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyPart::Scheme => f.write_str("scheme"),
            KeyPart::Host => f.write_str("host"),
            KeyPart::Path => f.write_str("path"),
            KeyPart::Query => f.write_str("query"),
            KeyPart::Method => f.write_str("method"),
            KeyPart::Header(name) => write!(f, "header:{name}"),
            KeyPart::Cookie(name) => write!(f, "cookie:{name}"),
        }
    }
}

/// The primary key of a request for `uri` on `host` over `scheme`, from `parts`.
///
/// URI parts come first, in URI order (`scheme://host/path?query`), then headers and cookies
/// in configured order, each as ` header:NAME=VALUE` / ` cookie:NAME=VALUE` (` header:NAME`
/// when absent), the value percent-encoded.
pub fn primary_key(
    parts: &[KeyPart],
    scheme: &str,
    host: &str,
    uri: &Uri,
    headers: &HeaderMap,
) -> String {
    let has = |part: &KeyPart| parts.contains(part);
    let mut key = String::with_capacity(64);
    if has(&KeyPart::Scheme) {
        key.push_str(&scheme.to_ascii_lowercase());
        key.push_str("://");
    }
    if has(&KeyPart::Host) {
        key.push_str(&normalise_host(host, scheme));
    }
    if has(&KeyPart::Path) {
        key.push_str(uri.path());
    }
    if has(&KeyPart::Query)
        && let Some(query) = uri.query()
    {
        key.push('?');
        key.push_str(query);
    }
    for part in parts {
        match part {
            KeyPart::Header(name) => {
                key.push_str(" header:");
                key.push_str(name.as_str());
                if let Some(value) = joined_field(headers, name) {
                    key.push('=');
                    push_escaped(&mut key, &value);
                }
            }
            KeyPart::Cookie(name) => {
                key.push_str(" cookie:");
                key.push_str(name);
                if let Some(value) = cookie(headers, name) {
                    key.push('=');
                    push_escaped(&mut key, value);
                }
            }
            KeyPart::Method => key.push_str(" method:GET"),
            KeyPart::Scheme | KeyPart::Host | KeyPart::Path | KeyPart::Query => {}
        }
    }
    key
}

/// Resolve a URI reference (a `Location` or `Content-Location` value) against the request's
/// target, RFC 3986 §5.2 (<https://www.rfc-editor.org/rfc/rfc3986#section-5.2>). The result
/// keeps the reference's scheme and authority when it has them (so the caller can compare
/// origins) and is origin-form (`/path?query`) otherwise. The fragment is dropped (it is never
/// part of a target URI). `None` when the result is not a valid URI.
pub fn resolve_reference(base: &Uri, reference: &str) -> Option<Uri> {
    let reference = reference.trim();
    let reference = reference.split_once('#').map_or(reference, |(r, _)| r);
    let (scheme, rest) = match split_scheme(reference) {
        Some((scheme, rest)) => (Some(scheme), rest),
        None => (None, reference),
    };
    let (authority, path_query) = match rest.strip_prefix("//") {
        Some(after) => {
            let end = after.find(['/', '?']).unwrap_or(after.len());
            let (authority, path_query) = after.split_at(end);
            (Some(authority), path_query)
        }
        None => (None, rest),
    };
    let (path, query) = match path_query.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (path_query, None),
    };
    let (path, query) = if scheme.is_some() || authority.is_some() || path.starts_with('/') {
        (remove_dot_segments(path), query)
    } else if path.is_empty() {
        (base.path().to_owned(), query.or(base.query()))
    } else {
        (remove_dot_segments(&merge(base.path(), path)), query)
    };
    let path = if path.is_empty() {
        "/".to_owned()
    } else {
        path
    };
    // RFC 3986 §5.2.2: an absolute reference keeps its own authority (or has none), a
    // network-path reference takes the base's scheme, anything else both of the base's.
    let (scheme, authority) = match (scheme, authority) {
        (Some(scheme), authority) => (Some(scheme), authority),
        (None, Some(authority)) => (base.scheme_str(), Some(authority)),
        (None, None) => (base.scheme_str(), base.authority().map(|a| a.as_str())),
    };
    let mut out = String::new();
    match (scheme, authority) {
        (Some(scheme), Some(authority)) => {
            out.push_str(scheme);
            out.push_str("://");
            out.push_str(authority);
        }
        (None, None) => {}
        // A scheme without an authority (`mailto:`) or a network-path reference against an
        // origin-form base: neither can be shown to name a resource of this origin.
        _ => return None,
    }
    out.push_str(&path);
    if let Some(query) = query {
        out.push('?');
        out.push_str(query);
    }
    out.parse().ok()
}

/// The primary key of `target` (from [`resolve_reference`]) as if requested on `scheme` and
/// `host` with `headers`, or `None` when `target` names another origin (RFC 9111 §4.4: "a cache
/// MUST NOT trigger an invalidation ... if the origin ... of the URI to be invalidated differs
/// from that of the target URI"). Its path is put in normal form first, as requests' paths are
/// before their keys are made, so `Location: /%61` invalidates what `/a` stored; a path with
/// no normal form names nothing stored (`None`).
pub fn reference_key(
    parts: &[KeyPart],
    scheme: &str,
    host: &str,
    target: &Uri,
    headers: &HeaderMap,
) -> Option<String> {
    if let Some(target_scheme) = target.scheme_str()
        && !target_scheme.eq_ignore_ascii_case(scheme)
    {
        return None;
    }
    if let Some(authority) = target.authority() {
        let target_host = match authority.port() {
            Some(port) => format!("{}:{}", authority.host(), port.as_str()),
            None => authority.host().to_owned(),
        };
        if normalise_host(&target_host, scheme) != normalise_host(host, scheme) {
            return None;
        }
    }
    let normal = match sluice_core::uri_path::normalize(target.path()).ok()? {
        std::borrow::Cow::Borrowed(_) => None,
        std::borrow::Cow::Owned(path) => {
            let mut uri = target.clone().into_parts();
            let query = target.query().map_or(String::new(), |q| format!("?{q}"));
            uri.path_and_query = Some(format!("{path}{query}").parse().ok()?);
            Some(Uri::from_parts(uri).ok()?)
        }
    };
    Some(primary_key(
        parts,
        scheme,
        host,
        normal.as_ref().unwrap_or(target),
        headers,
    ))
}

/// Lowercase, without the scheme's default port (RFC 9110 §4.2.3: `example.com:80` and
/// `example.com` are the same origin over http).
fn normalise_host(host: &str, scheme: &str) -> String {
    let host = host.to_ascii_lowercase();
    let default = if scheme.eq_ignore_ascii_case("https") {
        "443"
    } else {
        "80"
    };
    if let Some((name, port)) = host.rsplit_once(':')
        && port == default
        // `name` must be a whole host: a bracketed IPv6 literal or a name without colons.
        && (name.ends_with(']') || !name.contains(':'))
    {
        return name.to_owned();
    }
    host
}

/// Every line of `name` joined by `", "` (RFC 9110 §5.3), or `None` when absent.
fn joined_field(headers: &HeaderMap, name: &HeaderName) -> Option<Vec<u8>> {
    let mut lines = headers.get_all(name).iter();
    let mut joined = lines.next()?.as_bytes().to_vec();
    for line in lines {
        joined.extend_from_slice(b", ");
        joined.extend_from_slice(line.as_bytes());
    }
    Some(joined)
}

/// The value of cookie `name` (RFC 6265 §5.4 `cookie-string`: `a=1; b=2`), the first if sent
/// twice. HTTP/2 may split `Cookie` into several lines (RFC 9113 §8.2.3): all are searched.
pub fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h [u8]> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .flat_map(|line| line.as_bytes().split(|&b| b == b';'))
        .find_map(|pair| {
            let pair = pair.trim_ascii();
            let eq = pair.iter().position(|&b| b == b'=')?;
            let (key, value) = (pair.get(..eq)?, pair.get(eq + 1..)?);
            (key.trim_ascii() == name.as_bytes()).then(|| value.trim_ascii())
        })
}

/// Append `value` with `%`, space and every byte outside visible ASCII percent-encoded, so a
/// value can never contain the separator of the next part.
pub(crate) fn push_escaped(out: &mut String, value: &[u8]) {
    for &b in value {
        if b.is_ascii_graphic() && b != b'%' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
}

/// RFC 9110 §5.6.2 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// `scheme ":" rest` when `reference` starts with an RFC 3986 §3.1 scheme.
fn split_scheme(reference: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = reference.split_once(':')?;
    let mut chars = scheme.chars();
    let first_alpha = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    let valid = first_alpha && chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    valid.then_some((scheme, rest))
}

/// RFC 3986 §5.2.3: the base path up to its last `/`, then the reference.
fn merge(base_path: &str, reference: &str) -> String {
    match base_path.rfind('/') {
        Some(slash) => format!("{}{}", base_path.get(..=slash).unwrap_or("/"), reference),
        None => format!("/{reference}"),
    }
}

/// RFC 3986 §5.2.4, on whole segments.
fn remove_dot_segments(path: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    let segments: Vec<&str> = path.split('/').collect();
    let last = segments.len().saturating_sub(1);
    for (i, segment) in segments.iter().enumerate() {
        match *segment {
            "." => {
                // A trailing `.` still names the directory: keep the slash.
                if i == last {
                    out.push("");
                }
            }
            ".." => {
                // Never above the root: the leading empty segment stays.
                if out.len() > 1 {
                    out.pop();
                }
                if i == last {
                    out.push("");
                }
            }
            other => out.push(other),
        }
    }
    out.join("/")
}

#[cfg(test)]
#[path = "key_tests.rs"]
mod tests;
