//! Whether to compress a response, decided from plain values (no body, no I/O), and the header
//! changes that go with it. The streaming encoder lives elsewhere; this is its gate.
//!
//! Left alone (RFC 9110, <https://www.rfc-editor.org/rfc/rfc9110>): `1xx`, `204`, `304` (no
//! content), a `2xx` to `CONNECT` (a tunnel), `206` (the ranges index the identity bytes, §14),
//! responses that already carry a `Content-Encoding`, and `Cache-Control: no-transform`
//! (RFC 9111 §5.2.2.6). Then the MIME allow-list, the minimum length, and negotiation.
//!
//! `HEAD` is decided like `GET` on purpose: its headers must be those a `GET` would get
//! (RFC 9110 §9.3.2), so it says `Content-Encoding` too; the body wrapper has nothing to encode.

use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, StatusCode};

use crate::encoding::{Negotiated, negotiate_fields};
use sluice_core::ContentCoding;

/// What is worth compressing, and in which codings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompressPolicy {
    /// Allowed `Content-Type`s without parameters, compared case-insensitively; an entry ending
    /// in `/` or `/*` (`text/`, `text/*`) allows the whole top-level type.
    pub mime_types: Vec<String>,
    /// Responses with a known `Content-Length` below this are sent as they are.
    pub min_length: u64,
    /// Codings the server produces, most preferred first.
    pub offered: Vec<ContentCoding>,
}

impl Default for CompressPolicy {
    /// Text-like types (images, audio, video and archives are already compressed), 256 bytes,
    /// zstd > br > gzip. nginx's `gzip_min_length` defaults to 20, barely above gzip's 18 bytes
    /// of framing; below a few hundred bytes the response fits one packet either way, so
    /// compressing saves no round trip and still costs an encoder set-up and two headers.
    fn default() -> Self {
        let mime_types = [
            "text/",
            "application/json",
            "application/javascript",
            "application/ecmascript",
            "application/xml",
            "application/xhtml+xml",
            "application/wasm",
            "application/manifest+json",
            "application/ld+json",
            "application/geo+json",
            "application/problem+json",
            "application/rss+xml",
            "application/atom+xml",
            "application/x-javascript",
            "application/x-ndjson",
            "image/svg+xml",
            "image/x-icon",
            "image/vnd.microsoft.icon",
            "font/ttf",
            "font/otf",
        ];
        CompressPolicy {
            mime_types: mime_types.iter().map(|m| (*m).to_owned()).collect(),
            min_length: 256,
            offered: vec![ContentCoding::Zstd, ContentCoding::Br, ContentCoding::Gzip],
        }
    }
}

impl CompressPolicy {
    /// Whether a `Content-Type` (parameters ignored) is in the allow-list. `sluice precompress`
    /// asks this of each file's type, so it writes sidecars for what would be compressed live.
    pub fn allows_type(&self, content_type: &HeaderValue) -> bool {
        type_allowed(&self.mime_types, Some(content_type))
    }
}

/// The verdict for one response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Compress(ContentCoding),
    Skip(SkipReason),
}

/// Why a response was sent as it came (a metric label and a log field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SkipReason {
    /// `1xx`, `204`, `304`, or a successful `CONNECT`: there is no content.
    Status,
    /// `206`: the byte ranges refer to the unencoded representation.
    Range,
    /// A `Content-Encoding` other than identity is already present.
    AlreadyEncoded,
    /// `Cache-Control: no-transform`.
    NoTransform,
    /// The `Content-Type` is missing or not in the allow-list.
    Type,
    /// The known `Content-Length` is below the minimum.
    TooSmall,
    /// Negotiation chose identity (or refused everything).
    NotAccepted,
    /// A precompressed sidecar file was served (its producer marks the response with
    /// [`Precompressed`]); nothing is left to compress.
    Precompressed,
    /// The response would have been compressed, but the process is above the route's CPU
    /// limit (`max_cpu`), so it goes out as identity. Never returned by [`decide`]: the server,
    /// which samples the CPU, decides this after the policy said `Compress`.
    Cpu,
}

/// Response extension set by whoever serves an already-encoded variant on purpose (static
/// files' precompressed sidecars), so logs and metrics say `precompressed` rather than
/// `already_encoded`, which points at an upstream that compresses by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Precompressed(pub ContentCoding);

/// Response extension on a `304` from a producer that knows the representation it stands for
/// (static files): the `Content-Type` and length its `200` would have. A `304` must repeat the
/// `ETag` and `Vary` of that `200` (RFC 9110 §15.4.5), so compression decides for it as if it
/// were the `200`: a weakened tag on the `304` matches the one a cache stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotModifiedOf {
    pub content_type: HeaderValue,
    pub len: u64,
}

/// Response extension from a producer whose `200` body is a whole representation it can
/// identify: equal ids mean equal bytes, and the id changes whenever the bytes may have. Static
/// files set it from the file's device, inode, size, and modification and change times (not
/// from the ETag, which is whole seconds and shared by two files of one size and second). A
/// compressing route may then keep what it made from those bytes, per coding, and serve it again
/// without compressing ("compress once, serve many"); an edited file has a new id, so its old
/// variants are never hit again. Producers must scope ids to one route: the store is per route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ContentId(pub [u64; 7]);

impl SkipReason {
    pub const fn as_str(self) -> &'static str {
        match self {
            SkipReason::Status => "status",
            SkipReason::Range => "range",
            SkipReason::AlreadyEncoded => "already_encoded",
            SkipReason::NoTransform => "no_transform",
            SkipReason::Type => "type",
            SkipReason::TooSmall => "too_small",
            SkipReason::NotAccepted => "not_accepted",
            SkipReason::Precompressed => "precompressed",
            SkipReason::Cpu => "cpu",
        }
    }
}

impl Decision {
    /// Whether the response should carry `Vary: Accept-Encoding`: the type was compressible, so
    /// another request for the same resource could get another coding (too small today may not
    /// be tomorrow; identity for CPU now may be compressed once the load falls). A `304` must repeat the `Vary` of its `200` (RFC 9110 §15.4.5); it has no
    /// type to decide from, so its producer (who knows the resource) calls [`add_vary`] itself.
    pub const fn wants_vary(self) -> bool {
        matches!(
            self,
            Decision::Compress(_)
                | Decision::Skip(SkipReason::TooSmall | SkipReason::NotAccepted | SkipReason::Cpu)
        )
    }
}

/// Decide for one response. Cheap checks first; negotiation, the only one that reads the
/// request, last.
pub fn decide(
    policy: &CompressPolicy,
    req_method: &Method,
    req_headers: &HeaderMap,
    resp_status: StatusCode,
    resp_headers: &HeaderMap,
) -> Decision {
    let accept_encoding = req_headers.get_all(header::ACCEPT_ENCODING).into_iter();
    decide_with(
        policy,
        req_method,
        accept_encoding.map(HeaderValue::as_bytes),
        resp_status,
        resp_headers,
        None,
    )
}

/// [`decide`] for a server that no longer holds the request (a proxy consumed it): the request's
/// `Accept-Encoding` field lines are passed instead of its headers. `body_len` is the body's
/// exact length when known without a `Content-Length` header (a body held in memory), so a tiny
/// fixed response is not compressed either.
pub fn decide_with<'a>(
    policy: &CompressPolicy,
    req_method: &Method,
    accept_encoding: impl IntoIterator<Item = &'a [u8]>,
    resp_status: StatusCode,
    resp_headers: &HeaderMap,
    body_len: Option<u64>,
) -> Decision {
    let tunnel = req_method == Method::CONNECT && resp_status.is_success();
    let no_content = resp_status.is_informational()
        || resp_status == StatusCode::NO_CONTENT
        || resp_status == StatusCode::NOT_MODIFIED;
    if tunnel || no_content {
        return Decision::Skip(SkipReason::Status);
    }
    if resp_status == StatusCode::PARTIAL_CONTENT {
        return Decision::Skip(SkipReason::Range);
    }
    if list_tokens(resp_headers, &header::CONTENT_ENCODING)
        .any(|t| !t.eq_ignore_ascii_case(b"identity"))
    {
        return Decision::Skip(SkipReason::AlreadyEncoded);
    }
    if list_tokens(resp_headers, &header::CACHE_CONTROL)
        .any(|t| t.eq_ignore_ascii_case(b"no-transform"))
    {
        return Decision::Skip(SkipReason::NoTransform);
    }
    decide_representation(
        policy,
        accept_encoding,
        resp_headers.get(header::CONTENT_TYPE),
        content_length(resp_headers).or(body_len),
    )
}

/// The representation's part of [`decide_with`]: type, length and negotiation, for a response
/// that may be compressed at all (also a `304`'s `200`, see [`NotModifiedOf`]).
pub fn decide_representation<'a>(
    policy: &CompressPolicy,
    accept_encoding: impl IntoIterator<Item = &'a [u8]>,
    content_type: Option<&HeaderValue>,
    len: Option<u64>,
) -> Decision {
    if !type_allowed(&policy.mime_types, content_type) {
        return Decision::Skip(SkipReason::Type);
    }
    if len.is_some_and(|len| len < policy.min_length) {
        return Decision::Skip(SkipReason::TooSmall);
    }
    match negotiate_fields(accept_encoding, &policy.offered) {
        Negotiated::Use(ContentCoding::Identity) | Negotiated::NotAcceptable => {
            Decision::Skip(SkipReason::NotAccepted)
        }
        Negotiated::Use(encoding) => Decision::Compress(encoding),
    }
}

/// Turn the headers of a response about to be compressed with `encoding` into those of the
/// encoded response. With [`ContentCoding::Identity`] only `Vary` is added.
pub fn apply_headers(resp_headers: &mut HeaderMap, encoding: ContentCoding) {
    add_vary(resp_headers);
    if encoding == ContentCoding::Identity {
        return;
    }
    resp_headers.insert(
        header::CONTENT_ENCODING,
        HeaderValue::from_static(encoding.as_str()),
    );
    // The length is unknown until the encoder is done, and ranges over encoded bytes that
    // differ per request would be meaningless: the body is streamed, nothing is promised.
    resp_headers.remove(header::CONTENT_LENGTH);
    resp_headers.remove(header::ACCEPT_RANGES);
    // Digests of the bytes as they were would fail any client that checks them; the encoded
    // bytes are not known until sent (RFC 9530 Repr-/Content-Digest, RFC 3230 Digest,
    // RFC 1864 Content-MD5).
    for digest in ["content-md5", "digest", "content-digest", "repr-digest"] {
        resp_headers.remove(digest);
    }
    weaken_etag(resp_headers);
}

/// Add `Accept-Encoding` to `Vary` unless it is listed already or `Vary: *` makes it moot. The
/// token goes on a field line of its own, which RFC 9110 §5.3 makes equal to a merged list and
/// which costs no allocation.
pub fn add_vary(resp_headers: &mut HeaderMap) {
    let listed = list_tokens(resp_headers, &header::VARY)
        .any(|t| t == b"*" || t.eq_ignore_ascii_case(b"accept-encoding"));
    if !listed {
        resp_headers.append(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    }
}

/// Compressed bytes differ from the identity bytes, so a strong validator would lie
/// (RFC 9110 §8.8.1): `"x"` becomes `W/"x"`. A malformed tag cannot be weakened and is
/// dropped, as nginx does.
pub fn weaken_etag(resp_headers: &mut HeaderMap) {
    let Some(etag) = resp_headers.get(header::ETAG) else {
        return;
    };
    let bytes = etag.as_bytes();
    if bytes.starts_with(b"W/") {
        return;
    }
    let weak = bytes
        .starts_with(b"\"")
        .then(|| HeaderValue::from_bytes(&[b"W/", bytes].concat()).ok())
        .flatten();
    match weak {
        Some(weak) => resp_headers.insert(header::ETAG, weak),
        None => resp_headers.remove(header::ETAG),
    };
}

fn type_allowed(allowed: &[String], content_type: Option<&HeaderValue>) -> bool {
    let Some(content_type) = content_type else {
        return false;
    };
    let essence = crate::headers::media_type(content_type);
    allowed.iter().any(|entry| {
        let entry = entry.as_bytes();
        let prefix = entry.strip_suffix(b"*").unwrap_or(entry);
        if prefix.ends_with(b"/") {
            essence.len() > prefix.len() && essence[..prefix.len()].eq_ignore_ascii_case(prefix)
        } else {
            essence.eq_ignore_ascii_case(entry)
        }
    })
}

/// The declared length, if there is exactly one sane value; otherwise unknown, which compresses
/// (the header is replaced anyway).
fn content_length(resp_headers: &HeaderMap) -> Option<u64> {
    let value = resp_headers.get(header::CONTENT_LENGTH)?;
    value.to_str().ok()?.trim().parse().ok()
}

/// Non-empty comma-separated tokens of every line of a list field, parameters cut off.
pub fn list_tokens<'a>(
    headers: &'a HeaderMap,
    name: &header::HeaderName,
) -> impl Iterator<Item = &'a [u8]> {
    headers
        .get_all(name)
        .into_iter()
        .flat_map(|value| value.as_bytes().split(|&b| b == b','))
        .map(|item| {
            item.split(|&b| b == b'=' || b == b';')
                .next()
                .unwrap_or_default()
                .trim_ascii()
        })
        .filter(|token| !token.is_empty())
}

#[cfg(test)]
#[path = "compress_policy_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "compress_policy_proptest.rs"]
mod proptests;
