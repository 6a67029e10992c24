//! Conditional requests in both directions: validating a stored response with the origin
//! (RFC 9111 §4.3, <https://www.rfc-editor.org/rfc/rfc9111#section-4.3>) and answering a
//! client's own conditional request from a stored response (§4.3.2 and RFC 9110 §13,
//! <https://www.rfc-editor.org/rfc/rfc9110#section-13>).
//!
//! Towards the origin: [`revalidation_headers`] carries the stored validators (§4.3.1), and a
//! 304 answer refreshes the stored header fields through [`freshen`] (§3.2, §4.3.4).
//!
//! Towards the client: [`client_not_modified`] evaluates `If-None-Match` (weak comparison), or
//! else `If-Modified-Since`, against the stored response; `If-Match` and `If-Unmodified-Since`
//! "are not applicable to a cache" (§4.3.2) and are left to the origin. A 304 carries the
//! fields of [`not_modified_headers`] (RFC 9110 §15.4.5).

use std::time::SystemTime;

use http::header::{self, HeaderMap, HeaderName};
use http::{HeaderValue, Method};
use sluice_core::etag::{EntityTag, EntityTags, Member};

use super::CDN_CACHE_CONTROL;
use super::freshness::{date_value, http_date, parse_date};
use super::storable::headers_to_store;
use crate::meta::Meta;

/// Precondition fields for a request that validates `meta` (§4.3.1): `If-None-Match` with the
/// stored entity tag and `If-Modified-Since` with the stored `Last-Modified` (RFC 9110
/// §13.1.3: "a cache will typically use the value of the cached message's Last-Modified").
/// The origin gives `If-None-Match` precedence (RFC 9110 §13.2.2).
///
/// These replace the client's own preconditions on the request to the origin, or are merged
/// with them (§4.3.2 allows sending the union of entity tags; a 304 for a tag of the client's
/// that is not the stored one then answers the client, not the cache).
pub fn revalidation_headers(meta: &Meta) -> HeaderMap {
    let mut out = HeaderMap::new();
    if let Some(etag) = meta.headers.get(header::ETAG)
        && EntityTag::parse(etag.as_bytes()).is_some()
    {
        out.insert(header::IF_NONE_MATCH, etag.clone());
    }
    if let Some(last_modified) = meta.headers.get(header::LAST_MODIFIED)
        && parse_date(last_modified).is_some()
    {
        out.insert(header::IF_MODIFIED_SINCE, last_modified.clone());
    }
    out
}

/// Stored fields a 304 does not replace. §3.2: Content-Length ("MUST ... with the following
/// exceptions ... The Content-Length header field"), and fields "that the cache's stored
/// response depends upon": the body's coding and range (the stored bytes do not change), the
/// entity tag (the 304 was selected because it matches; the stored form may be the weak tag
/// sluice gave a compressed variant) and `Vary` (the stored variant's key was computed with
/// it). `Set-Cookie` of a 304 belongs to the client whose request triggered the
/// revalidation, never to the stored response.
const KEPT_ON_FRESHEN: [HeaderName; 7] = [
    header::CONTENT_LENGTH,
    header::CONTENT_ENCODING,
    header::CONTENT_RANGE,
    header::TRANSFER_ENCODING,
    header::ETAG,
    header::VARY,
    header::SET_COOKIE,
];

/// `meta` updated with a 304 received for it (§4.3.4), exchanged between `request_time` and
/// `response_time`, or `None` when the 304 does not select it (then the 304 cannot be used
/// and the zone fetches the resource again without preconditions).
///
/// Selection (§4.3.4), for the one stored response that was revalidated: a 304 with an ETag
/// selects it when the entity tags have the same opaque-tag (a stored weak tag matches a
/// strong one: sluice weakens the origin's tag on the variants it compresses); a 304 with
/// only `Last-Modified` when the dates are equal; a 304 with no validator always.
///
/// The last is a deliberate reading. §4.3.4's rules pick among *several* stored responses the
/// one a 304 is about; sluice's conditional request names exactly one stored response (its
/// `ETag` and `Last-Modified`, nothing of the client's), so a 304 that names nothing can only
/// mean that one matched (RFC 9110 §15.4.5: the condition evaluated false). Refusing it, as an
/// earlier version did for a stored response with an `ETag`, cost a second, unconditional
/// request to the origin for one client request (issue 21: one client request makes at most
/// one upstream request).
///
/// The updated entry should pass [`super::storable`] again: a 304 may carry `no-store` or
/// `private` now.
pub fn freshen(
    meta: &Meta,
    resp_304_headers: &HeaderMap,
    request_time: SystemTime,
    response_time: SystemTime,
) -> Option<Meta> {
    if !selects(meta, resp_304_headers) {
        return None;
    }
    let incoming = headers_to_store(resp_304_headers);
    let mut headers = meta.headers.clone();
    for name in incoming.keys() {
        if KEPT_ON_FRESHEN.contains(name) {
            continue;
        }
        // §3.2: "replacing field values that are already present".
        headers.remove(name);
        for value in incoming.get_all(name) {
            headers.append(name.clone(), value.clone());
        }
    }
    // The age calculation restarts from this exchange (§4.2.3): an `Age` or `Date` of the
    // original response would describe the old one.
    if !incoming.contains_key(header::AGE) {
        headers.remove(header::AGE);
    }
    if !incoming.contains_key(header::DATE) {
        // RFC 9110 §6.6.1: a recipient caching a response without Date records the time it
        // was received.
        let now = httpdate::fmt_http_date(response_time);
        if let Ok(date) = HeaderValue::from_str(&now) {
            headers.insert(header::DATE, date);
        }
    }
    Some(Meta {
        headers,
        request_time,
        response_time,
        ..meta.clone()
    })
}

fn selects(meta: &Meta, resp: &HeaderMap) -> bool {
    let stored_tag = meta
        .headers
        .get(header::ETAG)
        .and_then(|v| EntityTag::parse(v.as_bytes()));
    if let Some(new_tag) = resp.get(header::ETAG) {
        let new_tag = EntityTag::parse(new_tag.as_bytes());
        return matches!((stored_tag, new_tag), (Some(s), Some(n)) if s.opaque == n.opaque);
    }
    if resp.contains_key(header::LAST_MODIFIED) {
        let new = http_date(resp, &header::LAST_MODIFIED);
        let stored = http_date(&meta.headers, &header::LAST_MODIFIED);
        return new.is_some() && new == stored;
    }
    true
}

/// Does a client's conditional GET/HEAD with `req_headers` get a 304 from `meta`?
///
/// RFC 9110 §13.2.2: `If-None-Match` when present (§13.1.2: weak comparison, `*` matches
/// any current representation); otherwise `If-Modified-Since` (§13.1.3: only GET and HEAD,
/// ignored unless one valid HTTP-date) against `Last-Modified`, or the stored `Date`, or the
/// time the response was received (RFC 9111 §4.3.2). Only for a 2xx stored response (§13.2.1:
/// preconditions are ignored when the response would not be 2xx).
pub fn client_not_modified(meta: &Meta, method: &Method, req_headers: &HeaderMap) -> bool {
    if !(method == Method::GET || method == Method::HEAD) || !meta.status.is_success() {
        return false;
    }
    if req_headers.contains_key(header::IF_NONE_MATCH) {
        let stored = meta
            .headers
            .get(header::ETAG)
            .and_then(|v| EntityTag::parse(v.as_bytes()));
        return req_headers
            .get_all(header::IF_NONE_MATCH)
            .iter()
            .flat_map(|line| EntityTags::new(line.as_bytes()))
            .any(|member| match member {
                Member::Any => true,
                Member::Tag(tag) => stored.is_some_and(|s| s.opaque == tag.opaque),
            });
    }
    let mut ims = req_headers.get_all(header::IF_MODIFIED_SINCE).iter();
    let (Some(line), None) = (ims.next(), ims.next()) else {
        return false;
    };
    let Some(since) = parse_date(line) else {
        return false;
    };
    let modified = http_date(&meta.headers, &header::LAST_MODIFIED)
        .unwrap_or_else(|| date_value(&meta.headers, meta.response_time));
    modified <= since
}

/// The fields of a 304 answering a client from `meta` (RFC 9110 §15.4.5: "Content-Location,
/// Date, ETag, and Vary; Cache-Control and Expires", and `Last-Modified` only "if the
/// response does not have an ETag field"), plus `CDN-Cache-Control`, which exists to guide
/// the caches downstream (RFC 9213). The caller adds `Age` as for any stored response.
pub fn not_modified_headers(meta: &Meta) -> HeaderMap {
    let mut out = HeaderMap::new();
    let mut copy = |name: HeaderName| {
        for value in meta.headers.get_all(&name) {
            out.append(name.clone(), value.clone());
        }
    };
    copy(header::CACHE_CONTROL);
    copy(header::CONTENT_LOCATION);
    copy(header::DATE);
    copy(header::ETAG);
    copy(header::EXPIRES);
    copy(header::VARY);
    copy(CDN_CACHE_CONTROL);
    if !meta.headers.contains_key(header::ETAG) {
        copy(header::LAST_MODIFIED);
    }
    out
}
