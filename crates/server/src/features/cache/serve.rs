//! Responses from the cache: a stored entry in the coding the client negotiated (a HIT is a
//! hash probe, a header copy and a `Bytes` clone for the memory tier), a body still arriving
//! from its flight, and the client's own conditions and `HEAD` answered from stored metadata.

use std::sync::Arc;
use std::time::SystemTime;

use http::request::Parts;
use http::response::Parts as ResponseParts;
use http::{HeaderMap, HeaderValue, Method, Response, StatusCode, header};
use sluice_cache::lock::{Join, Reader, Shared, Waited};
use sluice_cache::meta::Meta;
use sluice_cache::policy;
use sluice_cache::vary::{AcceptEncodingKey, VaryRule, vary_key};
use sluice_cache::zone::{CacheStatus, Entry, Head, Stats};
use sluice_core::{Body, ContentCoding};
use sluice_http::compress_policy::{Precompressed, add_vary};
use sluice_http::static_files::range::RangeDecision;

use super::{Outcome, RouteCache, variant};
use crate::features::compress::RouteCompression;

/// Field names never sent from a stored response: our own targeted field (RFC 9213 §2.2: a
/// cache that consumed it does not forward it) and a received `Age` (recomputed, §5.1).
const NOT_FORWARDED: &str = "sluice-cache-control";

/// How long a request waits for another to make the variant it needs.
const VARIANT_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// How `Accept-Encoding` enters the secondary key: a route that compresses serves every coding
/// from one entry, so it is left out; otherwise the set of codings the client accepts.
pub(super) fn accept_encoding_key<'a>(
    headers: &'a HeaderMap,
    compression: Option<&RouteCompression>,
) -> AcceptEncodingKey<'a> {
    match compression {
        Some(_) => AcceptEncodingKey::Drop,
        None => AcceptEncodingKey::Accepted(headers),
    }
}

/// The single content coding of a stored response (`None`: one sluice does not know, or
/// several stacked: served as stored, never transformed).
pub(super) fn coding_of(headers: &HeaderMap) -> Option<ContentCoding> {
    let mut values = headers.get_all(header::CONTENT_ENCODING).iter();
    let Some(value) = values.next() else {
        return Some(ContentCoding::Identity);
    };
    if values.next().is_some() {
        return None;
    }
    ContentCoding::from_token_bytes(value.as_bytes().trim_ascii())
}

/// A response the cache did not store, passed on as the origin sent it (a HEAD that went
/// upstream as a GET loses its body).
pub(super) fn passed(parts: &Parts, mut response: Response<Body>) -> Response<Body> {
    if parts.method == Method::HEAD {
        *response.body_mut() = Body::Empty;
    }
    response
}

/// Serve a stored entry with `status`. `None` when its object vanished from storage.
///
/// On a route with dictionaries (RFC 9842), a stored `200` in identity is offered as a
/// dictionary and served as a delta to a client holding one that covers it (the decision is
/// `features::dictionary`'s, the same as for static files); otherwise it is served as below.
pub(super) async fn entry(
    cache: &RouteCache,
    parts: &Parts,
    entry: &Arc<Entry>,
    status: CacheStatus,
    compression: Option<&RouteCompression>,
) -> Option<Outcome> {
    use crate::features::dictionary::{OverTls, add_vary_available, delta_headers};
    let (Some(dictionaries), Some(compressing)) = (&cache.dictionaries, compression) else {
        return coded(cache, parts, entry, status, compression).await;
    };
    let (source, source_blob) = entry.meta_and_blob();
    if source.status != StatusCode::OK
        || coding_of(&source.headers) != Some(ContentCoding::Identity)
    {
        return coded(cache, parts, entry, status, compression).await;
    }
    let tls = parts.extensions.get::<OverTls>().is_some_and(|t| t.0);
    let read = async {
        let (_, body) = cache.zone.body(entry.id, &source_blob).await?;
        let collected = http_body_util::BodyExt::collect(body).await.ok()?;
        Some(collected.to_bytes())
    };
    let decided = dictionaries
        .for_stored(
            parts,
            tls,
            version_id(entry, &source),
            compressing,
            &source.headers,
            entry.body_len,
            read,
        )
        .await;
    if let Some((coding, bytes)) = decided.delta {
        let mut response = head_of(&source, &source, true);
        delta_headers(response.headers_mut(), coding, bytes.len());
        if let Some(offer) = decided.offer {
            response
                .headers_mut()
                .insert(sluice_http::dictionary::USE_AS_DICTIONARY.clone(), offer);
        }
        if parts.method != Method::HEAD {
            Stats::add(&cache.zone.stats().bytes_served, bytes.len() as u64);
            *response.body_mut() = Body::full(bytes);
        }
        return Some(Outcome::new(response, Some(status)));
    }
    let mut outcome = coded(cache, parts, entry, status, compression).await?;
    let headers = outcome.response.headers_mut();
    if decided.varies {
        add_vary_available(headers);
    }
    if let Some(offer) = decided.offer {
        headers.insert(sluice_http::dictionary::USE_AS_DICTIONARY.clone(), offer);
    }
    Some(outcome)
}

/// The identity of a stored response's version, for the dictionary store: its object and when
/// it was received (a refreshed entry is a new version), and its length.
fn version_id(entry: &Entry, meta: &Meta) -> sluice_http::compress_policy::ContentId {
    let id = entry.id.0;
    let word = |i: usize| u64::from_le_bytes(id[i..i + 8].try_into().unwrap_or([0; 8]));
    let received = meta
        .response_time
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    sluice_http::compress_policy::ContentId([
        // A tag of its own, so no static file's id (device, inode, ...) can equal it.
        u64::from_le_bytes(*b"cached\0\0"),
        word(0),
        word(8),
        entry.body_len,
        received.as_secs(),
        u64::from(received.subsec_nanos()),
        0,
    ])
}

/// [`entry`] without dictionaries: the stored response in the coding the client negotiated.
async fn coded(
    cache: &RouteCache,
    parts: &Parts,
    entry: &Arc<Entry>,
    status: CacheStatus,
    compression: Option<&RouteCompression>,
) -> Option<Outcome> {
    let (source, source_blob) = entry.meta_and_blob();
    // A route that compresses can decode a stored coding it knows and serve another; one it
    // does not know (an origin's own `dcz`, RFC 9842) or stacked codings are served only as
    // stored, so only to a client that accepts them.
    let transformable = compression.is_some() && coding_of(&source.headers).is_some();
    if !transformable && !accepted_as_stored(parts, &source) {
        // An encoded response stored without `Vary: Accept-Encoding` (the origin's mistake),
        // or in a coding this client does not list, is not sent to a client that cannot decode
        // it: it goes upstream on its own.
        return None;
    }
    let target = target_coding(parts, &source, compression);
    let (meta, blob, body_len, id) = match target {
        None => (source.clone(), source_blob, entry.body_len, entry.id),
        Some(coding) => match entry.variant(coding) {
            Some(variant) => (variant.meta, variant.blob, variant.body_len, variant.id),
            None => {
                let made = made(
                    cache,
                    parts,
                    entry,
                    (&source, &source_blob),
                    coding,
                    compression,
                );
                return made
                    .await
                    .map(|response| Outcome::new(response, Some(status)));
            }
        },
    };
    let mut response = head_of(&meta, &source, compression.is_some());
    if let Some(not_modified) = conditional(parts, &meta, &response) {
        return Some(Outcome::new(not_modified, Some(status)));
    }
    // RFC 9110 §8.6: never on a 204 (nor a 1xx or 304, which are not stored).
    if meta.status != StatusCode::NO_CONTENT {
        set_length(response.headers_mut(), body_len);
    }
    if parts.method == Method::HEAD {
        return Some(Outcome::new(response, Some(status)));
    }
    let range = super::range::decision(parts, meta.status, &meta.headers, body_len);
    let (_, body) = cache.zone.body(id, &blob).await?;
    let sent = match range {
        RangeDecision::Whole => body_len,
        RangeDecision::Partial { start, end } => end - start + 1,
        RangeDecision::Unsatisfiable => 0,
    };
    Stats::add(&cache.zone.stats().bytes_served, sent);
    *response.body_mut() = body;
    super::range::apply(&mut response, range, body_len);
    Some(Outcome::new(response, Some(status)))
}

/// The `Content-Length` a stored or arriving response declares, if one sane value.
fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Whether the client accepts the stored response's content coding (identity always counts:
/// RFC 9110 §12.5.3 lets a server send it whatever `Accept-Encoding` says).
pub(super) fn accepted_as_stored(parts: &Parts, source: &Meta) -> bool {
    match coding_of(&source.headers) {
        Some(ContentCoding::Identity) => true,
        Some(coding) => crate::features::compress::accepts(&parts.headers, coding),
        // Stacked or unknown codings (an origin's `dcb`/`dcz`, RFC 9842): only as stored, and
        // only to a client that lists every one of them by name with q > 0 (`*` does not
        // count: it says nothing about codings that need a dictionary).
        None => every_coding_listed(&parts.headers, &source.headers),
    }
}

fn every_coding_listed(request: &HeaderMap, stored: &HeaderMap) -> bool {
    let mut tokens = sluice_http::compress_policy::list_tokens(stored, &header::CONTENT_ENCODING)
        .filter(|t| !t.eq_ignore_ascii_case(b"identity"))
        .peekable();
    if tokens.peek().is_none() {
        return false;
    }
    tokens.all(|token| {
        let lines = request
            .get_all(header::ACCEPT_ENCODING)
            .iter()
            .map(HeaderValue::as_bytes);
        sluice_http::encoding::listed_weight(lines, token).is_some_and(|q| q > 0)
    })
}

/// The coding to serve from `source`, `None` meaning the source as stored.
fn target_coding(
    parts: &Parts,
    source: &Meta,
    compression: Option<&RouteCompression>,
) -> Option<ContentCoding> {
    let compression = compression?;
    let stored = coding_of(&source.headers)?;
    let chosen = compression.choose_stored(
        &parts.headers,
        source.status,
        &source.headers,
        source.body_len,
        stored,
    );
    (chosen != stored).then_some(chosen)
}

/// No variant in `coding` yet: make it (once for every request that wants it now) and serve it
/// as it is produced.
async fn made(
    cache: &RouteCache,
    parts: &Parts,
    entry: &Arc<Entry>,
    (source, source_blob): (&Arc<Meta>, &bytes::Bytes),
    coding: ContentCoding,
    compression: Option<&RouteCompression>,
) -> Option<Response<Body>> {
    let id = sluice_cache::zone::Zone::variant_id(&entry.primary, entry.vary_key.as_str(), coding);
    let shared = match cache.zone.join(id) {
        Join::Leader(leader) => {
            let (_, source_body) = cache.zone.body(entry.id, source_blob).await?;
            let stored = coding_of(&source.headers)?;
            let body = variant::transform(source_body, stored, coding, cache.level(coding));
            let meta = variant::meta(source, coding);
            let publisher = leader.publish(Arc::new(meta.clone()));
            let shared = publisher.shared().clone();
            cache
                .zone
                .store_variant(publisher, entry.clone(), coding, meta, body);
            shared
        }
        Join::Follower(follower) => match follower.wait(VARIANT_WAIT).await {
            Waited::Ready(shared) => shared,
            Waited::Released | Waited::TimedOut => return None,
        },
    };
    let reader = shared.reader()?;
    let mut response = head_of(&shared.head, source, compression.is_some());
    if let Some(not_modified) = conditional(parts, &shared.head, &response) {
        return Some(not_modified);
    }
    if parts.method != Method::HEAD {
        *response.body_mut() = Body::stream(reader);
    }
    Some(response)
}

/// The head of a response from stored `meta` (a variant's or the source's); `Age` is the
/// source's (§4.2.3: a variant is the same response).
fn head_of(meta: &Meta, source: &Meta, compressing: bool) -> Response<Body> {
    let mut response = Response::new(Body::Empty);
    *response.status_mut() = meta.status;
    let headers = response.headers_mut();
    headers.clone_from(&meta.headers);
    headers.remove(NOT_FORWARDED);
    headers.insert(header::AGE, policy::age_value(source, SystemTime::now()));
    if compressing {
        add_vary(headers);
    }
    // The compression phase leaves it alone: it is already in the negotiated coding.
    response
        .extensions_mut()
        .insert(Precompressed(ContentCoding::Identity));
    response
}

fn set_length(headers: &mut HeaderMap, len: u64) {
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
}

/// RFC 9110 §13.1.2 / §13.1.3: the client's conditions, evaluated against what would be sent.
fn conditional(parts: &Parts, meta: &Meta, response: &Response<Body>) -> Option<Response<Body>> {
    if !policy::client_not_modified(meta, &parts.method, &parts.headers) {
        return None;
    }
    let mut not_modified = Response::new(Body::Empty);
    *not_modified.status_mut() = StatusCode::NOT_MODIFIED;
    *not_modified.headers_mut() = policy::not_modified_headers(meta);
    if let Some(age) = response.headers().get(header::AGE) {
        not_modified.headers_mut().insert(header::AGE, age.clone());
    }
    not_modified
        .extensions_mut()
        .insert(Precompressed(ContentCoding::Identity));
    Some(not_modified)
}

/// RFC 9111 §4.2.3 and §5.1: a response being stored carries its age like one served from
/// storage, so a response the origin took seconds to produce says so (`Age: 5` after a 5 s
/// response delay). Under a second it is left out, as the origin sent it.
fn add_age(headers: &mut HeaderMap, meta: &Meta) {
    let age = policy::age_value(meta, SystemTime::now());
    if age.as_bytes() != b"0" {
        headers.insert(header::AGE, age);
    }
}

/// Serve the response a leader is storing, to the leader's own client: the body as it arrives.
pub(super) fn from_reader(
    _cache: &RouteCache,
    parts: &Parts,
    mut head: ResponseParts,
    meta: &Meta,
    reader: Reader<Head>,
    _compression: Option<&RouteCompression>,
) -> Response<Body> {
    add_age(&mut head.headers, meta);
    let len = content_length(&head.headers);
    let body = if parts.method == Method::HEAD {
        Body::Empty
    } else {
        Body::stream(reader.with_len(len))
    };
    Response::from_parts(head, body)
}

/// What a follower of a miss makes of the leader's response.
pub(super) enum FromFlight {
    Served(Outcome),
    /// Its body can no longer be read from the start (it is stored by now, or too large to
    /// hold): look the key up again.
    Gone,
    /// Not for this request (another `Vary` variant, or a coding it does not accept): go
    /// upstream alone.
    NotMine,
    /// Wanted in another coding and small: look it up again once it is stored (see
    /// [`variant_after_commit`]).
    AfterCommit(Arc<Shared<Head>>),
}

/// Responses up to this size are stored before a client that wants them in another coding is
/// answered, so the variant is made once, from storage, at the cache's level.
const WAIT_FOR_VARIANT: u64 = 1024 * 1024;

/// Whether a client that caused (or joined) a miss should get the variant made from the
/// stored response rather than one compressed on the fly: the route compresses, the client's
/// coding differs from the response's, and the response is a 200 small enough, of a known
/// length (a stream of unknown length might never end: it is compressed on the fly).
pub(super) fn variant_after_commit(
    parts: &Parts,
    meta: &Meta,
    compression: Option<&RouteCompression>,
) -> bool {
    let Some(compression) = compression else {
        return false;
    };
    let len = content_length(&meta.headers);
    let (Some(len), Some(stored)) = (len, coding_of(&meta.headers)) else {
        return false;
    };
    parts.method == Method::GET
        && meta.status == StatusCode::OK
        && len <= WAIT_FOR_VARIANT
        && compression.choose_stored(&parts.headers, meta.status, &meta.headers, len, stored)
            != stored
}

/// A follower of a miss: serve the leader's response if this request may use it, reading its
/// body as it arrives.
///
/// A response in flight is reused like a stored one (RFC 9111 §4), so a waiter joins it only
/// if it would be answered by it from storage: the method (GET or HEAD, both answered from the
/// GET), the `Vary`ing fields (§4.1), the coding, and the freshness the request asks for
/// (§4.2, §5.2.1: a request's `no-cache`, `max-age=0` or `min-fresh`, or a response that is
/// stale or `no-cache` at once, must be validated for this request, and the leader's request
/// was sent before this one arrived). Otherwise it goes upstream on its own. The client's own
/// conditions are answered from the response's head (§4.3.2): a matching `If-None-Match` gets
/// a 304, as from storage.
pub(super) fn from_flight(
    cache: &RouteCache,
    parts: &Parts,
    shared: &Arc<Shared<Head>>,
    compression: Option<&RouteCompression>,
) -> FromFlight {
    let meta = &shared.head;
    if !accepted_as_stored(parts, meta) {
        return FromFlight::NotMine;
    }
    let rule = VaryRule::of(&meta.headers);
    let ae = accept_encoding_key(&parts.headers, compression);
    if vary_key(&rule, &parts.headers, ae).is_none_or(|key| key != meta.vary_key) {
        return FromFlight::NotMine;
    }
    let now = SystemTime::now();
    if !matches!(
        policy::evaluate(meta, &parts.headers, &cache.policy, now).reuse,
        policy::Reuse::Fresh
    ) {
        return FromFlight::NotMine;
    }
    if variant_after_commit(parts, meta, compression) {
        return FromFlight::AfterCommit(shared.clone());
    }
    let mut response = Response::new(Body::Empty);
    *response.status_mut() = meta.status;
    *response.headers_mut() = meta.headers.clone();
    response.headers_mut().remove(NOT_FORWARDED);
    add_age(response.headers_mut(), meta);
    if let Some(not_modified) = conditional(parts, meta, &response) {
        return FromFlight::Served(Outcome::new(not_modified, Some(CacheStatus::Hit)));
    }
    let Some(reader) = shared.reader() else {
        return FromFlight::Gone;
    };
    let len = content_length(&meta.headers);
    if parts.method != Method::HEAD {
        *response.body_mut() = Body::stream(reader.with_len(len));
    }
    FromFlight::Served(Outcome::new(response, Some(CacheStatus::Hit)))
}
