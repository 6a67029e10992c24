//! Request paths in their normal form, as routes, the cache key and static files see them.
//!
//! [`normalize`] is RFC 3986 §6.2.2 syntax-based normalisation of an origin-form path
//! (<https://www.rfc-editor.org/rfc/rfc3986#section-6.2.2>), which RFC 9110 §4.2.3 lets an
//! intermediary apply to `http` URIs:
//! - §6.2.2.1: the hex digits of a percent-encoding are uppercase (`%2f` is `%2F`);
//! - §6.2.2.2: an encoded unreserved character (`ALPHA DIGIT - . _ ~`) is decoded (`%61` is
//!   `a`, `%2E` is `.`); nothing else is, so `%2F`, `%5C`, `%00`, `%25` stay encoded and
//!   nothing is ever decoded twice (`%252e` stays `%252E`);
//! - §6.2.2.3 / §5.2.4: dot segments are removed, after decoding (`/x/%2e%2e/a` is `/a`).
//!
//! Two choices beyond the RFC, as nginx makes them: a `..` that would climb above the root
//! (`/../x`) is refused rather than clamped (a client sending it is broken or probing), and so
//! is a `%` not followed by two hex digits. Both become 400s.
//!
//! [`alternate`] answers a different question: how a less careful server behind the proxy might
//! read the same path (an encoded `/` or `\` as a separator, a NUL as its end, `;params` cut off
//! as Tomcat does, `//` merged). The router compares the route of both readings and refuses the
//! request when they differ, so `/public/..%2Fadmin` cannot reach an upstream that would serve
//! `/admin` from it.
//!
//! Written by hand: the `url` crate normalises for browsers (WHATWG), which clamps `..` at the
//! root, decodes differently and needs a base URL; what is needed here is a few dozen lines.

use std::borrow::Cow;
use std::fmt;

/// Why a path cannot be normalised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathError {
    /// A `%` not followed by two hex digits (RFC 3986 §2.1).
    BadEscape,
    /// A `..` segment that climbs above the root.
    AboveRoot,
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PathError::BadEscape => "the request path has a `%` not followed by two hex digits",
            PathError::AboveRoot => "the request path climbs above the root with `..`",
        })
    }
}

impl std::error::Error for PathError {}

/// RFC 3986 §2.3 `unreserved`.
fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// The byte a `%XY` at `bytes[i]` encodes.
fn escape_at(bytes: &[u8], i: usize) -> Result<u8, PathError> {
    match (
        bytes.get(i + 1).copied().and_then(hex),
        bytes.get(i + 2).copied().and_then(hex),
    ) {
        (Some(hi), Some(lo)) => Ok(hi << 4 | lo),
        _ => Err(PathError::BadEscape),
    }
}

const UPPER_HEX: &[u8; 16] = b"0123456789ABCDEF";

/// The normal form of `path` (see the module docs). A path that is already normal comes back
/// borrowed (the common case costs a scan, no allocation). Anything that is not an origin-form
/// path (`*` of `OPTIONS *`, an empty path) is returned as it is.
pub fn normalize(path: &str) -> Result<Cow<'_, str>, PathError> {
    if !path.starts_with('/') {
        return Ok(Cow::Borrowed(path));
    }
    if !path.contains('%') && !has_dot_segment(path) {
        return Ok(Cow::Borrowed(path));
    }
    let decoded = decode_unreserved(path)?;
    let normal = remove_dot_segments(&decoded)?;
    Ok(if normal == path {
        Cow::Borrowed(path)
    } else {
        Cow::Owned(normal)
    })
}

fn has_dot_segment(path: &str) -> bool {
    path.split('/').any(|s| s == "." || s == "..")
}

/// §6.2.2.1 and §6.2.2.2 in one pass: unreserved characters decoded, other escapes kept with
/// uppercase hex. Only ASCII bytes change, so the text stays valid UTF-8.
fn decode_unreserved(path: &str) -> Result<String, PathError> {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b != b'%' {
            out.push(b);
            i += 1;
            continue;
        }
        let value = escape_at(bytes, i)?;
        if unreserved(value) {
            out.push(value);
        } else {
            out.extend_from_slice(&[
                b'%',
                UPPER_HEX[usize::from(value >> 4)],
                UPPER_HEX[usize::from(value & 0xf)],
            ]);
        }
        i += 3;
    }
    String::from_utf8(out).map_err(|_| PathError::BadEscape)
}

/// RFC 3986 §5.2.4 on an absolute path, by segments: `.` goes, `..` removes the segment before
/// it, and a final `.` or `..` leaves a trailing `/` (`/a/b/..` is `/a/`). A `..` with nothing
/// before it is refused (see the module docs) instead of clamped.
fn remove_dot_segments(path: &str) -> Result<String, PathError> {
    let rest = path.strip_prefix('/').unwrap_or(path);
    let segments: Vec<&str> = rest.split('/').collect();
    let last = segments.len().saturating_sub(1);
    let mut out: Vec<&str> = Vec::with_capacity(segments.len());
    for (i, segment) in segments.iter().enumerate() {
        match *segment {
            "." => {}
            ".." => {
                if out.pop().is_none() {
                    return Err(PathError::AboveRoot);
                }
            }
            other => {
                out.push(other);
                continue;
            }
        }
        if i == last {
            out.push("");
        }
    }
    let mut normal = String::with_capacity(path.len());
    normal.push('/');
    normal.push_str(&out.join("/"));
    Ok(normal)
}

/// How a less careful server might read `normal` (a path [`normalize`] returned): `%2F`, `%5C`
/// and `\` as `/`, the path cut at `%00`, each segment's `;params` dropped, empty segments
/// merged, and dot segments then removed again. `None` when `normal` has none of those, so it
/// reads the same everywhere; `Some(Err(_))` when that reading climbs above the root.
pub fn alternate(normal: &str) -> Option<Result<String, PathError>> {
    let bytes = normal.as_bytes();
    let triggers = normal.contains(['\\', ';'])
        || normal.contains("//")
        || ["%2F", "%5C", "%00"].iter().any(|e| normal.contains(e));
    if !normal.starts_with('/') || !triggers {
        return None;
    }
    let mut read = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'\\' => read.push(b'/'),
            b'%' => match escape_at(bytes, i) {
                Ok(b'/' | b'\\') => {
                    read.push(b'/');
                    i += 2;
                }
                Ok(0) => break,
                _ => read.push(b),
            },
            _ => read.push(b),
        }
        i += 1;
    }
    let read = String::from_utf8_lossy(&read);
    let mut merged = String::with_capacity(read.len());
    let segments: Vec<&str> = read.split('/').collect();
    let last = segments.len().saturating_sub(1);
    for (i, segment) in segments.iter().enumerate() {
        let segment = segment.split(';').next().unwrap_or_default();
        // Empty segments merge, but a trailing `/` stays.
        if segment.is_empty() && i != last {
            continue;
        }
        merged.push('/');
        merged.push_str(segment);
    }
    if merged.is_empty() {
        merged.push('/');
    }
    Some(remove_dot_segments(&merged))
}

#[cfg(test)]
#[path = "uri_path_tests.rs"]
mod tests;
