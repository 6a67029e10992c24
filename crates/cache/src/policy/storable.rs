//! Whether a response may be stored (RFC 9111 §3, §3.5), and which of its fields are stored
//! (§3.1) and served (§4, §5.1).
//!
//! <https://www.rfc-editor.org/rfc/rfc9111#section-3>: "A cache MUST NOT store a response to a
//! request unless" the method is understood, the status final (and understood when it is 206,
//! 304 or `must-understand` is present), there is no `no-store`, no `private` (shared cache),
//! no `Authorization` without a directive that allows it (§3.5), and the response has one of:
//! `public`, `Expires`, `max-age`, `s-maxage`, a cache extension that allows it, or a
//! heuristically cacheable status.
//!
//! sluice's own choices on top, each a "MAY decline to store" the RFC leaves open:
//! - Only GET responses are stored. HEAD is answered from a stored GET response (§4.3.5 and
//!   RFC 9110 §9.3.2: same header fields, no content); a stored HEAD response could never
//!   answer a GET, so storing it is not useful. POST with `Content-Location` is not supported.
//! - 206 is not stored (no range assembly) and a 304 is never stored as a new entry.
//! - `Set-Cookie` responses are not stored unless [`Settings::store_set_cookie`].
//! - `Vary: *` is not stored: it can never match a request (§4.1).
//! - A configured lifetime ([`Settings::valid`]) for the status counts as the cache extension
//!   that allows storing: the operator's out-of-band agreement with the origin.
//! - A response with no explicit freshness, no configured lifetime and no validator is not
//!   stored: it could never be served without an unconditional trip to the origin.

use http::header::{self, HeaderMap, HeaderName};
use http::{Method, StatusCode};

use super::directives::{RequestDirectives, ResponseDirectives};
use super::{SLUICE_CACHE_CONTROL, Settings, heuristically_cacheable};
use crate::vary::VaryRule;

/// Why a response is not stored. [`NotStorable::as_str`] labels logs and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NotStorable {
    /// Not a GET.
    Method,
    /// Not final, 206, 304, or not understood with `must-understand`.
    Status,
    /// `no-store` in the response (§5.2.2.5).
    NoStore,
    /// `no-store` in the request (§5.2.1.5).
    RequestNoStore,
    /// `private` (§5.2.2.7).
    Private,
    /// The request carried `Authorization` and the response does not allow sharing (§3.5).
    Authorization,
    /// `Set-Cookie` without [`Settings::store_set_cookie`].
    SetCookie,
    /// `Vary: *` (§4.1).
    VaryStar,
    /// None of §3's last condition: no `public`, explicit expiration, heuristically
    /// cacheable status or configured lifetime.
    NoFreshness,
    /// No explicit freshness, no configured lifetime and no validator: never reusable.
    NoValidator,
}

impl NotStorable {
    pub fn as_str(self) -> &'static str {
        match self {
            NotStorable::Method => "method",
            NotStorable::Status => "status",
            NotStorable::NoStore => "no_store",
            NotStorable::RequestNoStore => "request_no_store",
            NotStorable::Private => "private",
            NotStorable::Authorization => "authorization",
            NotStorable::SetCookie => "set_cookie",
            NotStorable::VaryStar => "vary_star",
            NotStorable::NoFreshness => "no_freshness",
            NotStorable::NoValidator => "no_validator",
        }
    }
}

impl std::fmt::Display for NotStorable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// May this cache store the response (`status`, `resp_headers`) to a `method` request with
/// `req_headers`? The checks run in §3's order; the first that fails is the reason.
pub fn storable(
    method: &Method,
    req_headers: &HeaderMap,
    status: StatusCode,
    resp_headers: &HeaderMap,
    settings: &Settings,
) -> Result<(), NotStorable> {
    // §3: "the request method is understood by the cache".
    if method != Method::GET {
        return Err(NotStorable::Method);
    }
    // §3: "the response status code is final", and 206/304 understood: neither is stored here.
    if status.is_informational()
        || status == StatusCode::PARTIAL_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        return Err(NotStorable::Status);
    }
    // §5.2.1.5: no-store in the request.
    if RequestDirectives::parse(req_headers).no_store {
        return Err(NotStorable::RequestNoStore);
    }
    let d = ResponseDirectives::parse(resp_headers, settings);
    // §5.2.2.3: with must-understand, store only understood statuses, and then no-store
    // "SHOULD" be ignored (it is there for caches that do not understand must-understand).
    if d.must_understand {
        if !understood(status) {
            return Err(NotStorable::Status);
        }
    } else if d.no_store {
        return Err(NotStorable::NoStore);
    }
    // §3: "if the cache is shared: the private response directive is ... not present".
    if d.private {
        return Err(NotStorable::Private);
    }
    // §3.5: "must-revalidate, public, and s-maxage" allow a shared cache to reuse a response
    // to a request with Authorization.
    if req_headers.contains_key(header::AUTHORIZATION)
        && !(d.public || d.s_maxage.is_some() || d.must_revalidate)
    {
        return Err(NotStorable::Authorization);
    }
    if VaryRule::of(resp_headers) == VaryRule::Star {
        return Err(NotStorable::VaryStar);
    }
    if !settings.store_set_cookie && resp_headers.contains_key(header::SET_COOKIE) {
        return Err(NotStorable::SetCookie);
    }
    let explicit = d.has_explicit_expiration(resp_headers);
    let configured_lifetime = settings.valid_for(status);
    // `valid = { "404" = "0s" }` means "do not store" (nginx's `proxy_cache_valid 404 0`): a
    // response that carries no freshness of its own is then not stored at all.
    if !explicit && configured_lifetime == Some(std::time::Duration::ZERO) {
        return Err(NotStorable::NoFreshness);
    }
    let configured = configured_lifetime.is_some_and(|l| !l.is_zero());
    // §3: "the response contains at least one of: a public response directive; ... an
    // Expires header field; a max-age response directive; ... an s-maxage response directive;
    // a cache extension that allows it to be stored; a status code that is defined as
    // heuristically cacheable".
    if !(d.public || explicit || configured || heuristically_cacheable(status)) {
        return Err(NotStorable::NoFreshness);
    }
    let validator =
        resp_headers.contains_key(header::ETAG) || resp_headers.contains_key(header::LAST_MODIFIED);
    if !(explicit || configured || validator) {
        return Err(NotStorable::NoValidator);
    }
    Ok(())
}

/// Statuses whose caching rules this cache implements (for `must-understand`, §5.2.2.3).
fn understood(status: StatusCode) -> bool {
    matches!(
        status.as_u16(),
        200 | 203 | 204 | 300 | 301 | 302 | 303 | 307 | 308 | 404 | 405 | 410 | 414 | 501
    )
}

/// Fields that belong to one connection or one proxy hop, never stored (§3.1: Connection and
/// the fields it lists, "fields whose semantics require them to be removed before
/// forwarding", and "Proxy-Authenticate, Proxy-Authentication-Info, and Proxy-Authorization").
const NOT_STORED: [HeaderName; 10] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHENTICATE,
    HeaderName::from_static("proxy-authentication-info"),
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    header::TRAILER,
];

/// The fields of a response to store (§3.1: "Caches MUST include all received response header
/// fields — including unrecognized ones — when storing a response", except the hop-by-hop and
/// proxy fields above and whatever `Connection` lists).
pub fn headers_to_store(resp_headers: &HeaderMap) -> HeaderMap {
    let listed: Vec<HeaderName> = resp_headers
        .get_all(header::CONNECTION)
        .iter()
        .flat_map(|v| v.as_bytes().split(|&b| b == b','))
        .filter_map(|name| HeaderName::from_bytes(name.trim_ascii()).ok())
        .collect();
    let mut stored = resp_headers.clone();
    for name in NOT_STORED.iter().chain(&listed) {
        stored.remove(name);
    }
    stored
}

/// Remove the stored fields that must not go downstream as they are: sluice's own targeted
/// field (for this cache only; `CDN-Cache-Control` is forwarded, RFC 9213 §3) and `Age`,
/// which the caller replaces with [`super::age_value`] (§4: "replacing any present").
pub fn strip_not_served(headers: &mut HeaderMap) {
    headers.remove(SLUICE_CACHE_CONTROL);
    headers.remove(header::AGE);
}
