//! The cache's trips upstream: the request it sends, what it stores of the response, and
//! revalidation (in line, or in the background for `stale-while-revalidate`).

use std::sync::Arc;
use std::time::SystemTime;

use http::request::Parts;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body::Body as _;
use sluice_cache::lock::{Join, Leader as FlightLeader};
use sluice_cache::meta::Meta;
use sluice_cache::policy;
use sluice_cache::storage::ObjectId;
use sluice_cache::vary::{VaryRule, vary_key};
use sluice_cache::zone::{CacheStatus, Entry, Fence, Head, Stats, Zone};
use sluice_core::{Body, Error};

use super::{Failure, Forward, Outcome, RouteCache, serve, variant};
use crate::features::compress::RouteCompression;

/// The leader of a collapsed miss.
pub(super) type Leader = FlightLeader<ObjectId, Head>;

/// Request fields that make a response partial or conditional: the cache asks for the whole,
/// current response and answers the client's conditions and ranges itself from it. (A request
/// with If-Match or If-Unmodified-Since never gets here: it goes upstream as sent.)
const CLIENT_CONDITIONS: [header::HeaderName; 4] = [
    header::IF_NONE_MATCH,
    header::IF_MODIFIED_SINCE,
    header::IF_RANGE,
    header::RANGE,
];

/// The request the cache sends upstream for `parts`: GET for HEAD (a stored GET answers both,
/// nginx's `proxy_cache_convert_head`), no client conditions or ranges, and, on a route that
/// compresses, no `Accept-Encoding` (the origin's identity body is the best source for variants
/// made at the cache's levels) but for the dictionary codings of a client with a dictionary. `validators` are the stored response's, for revalidation.
pub(super) fn upstream_request(
    parts: &Parts,
    compressing: bool,
    validators: Option<HeaderMap>,
) -> Request<Body> {
    let mut request = Request::new(Body::Empty);
    *request.method_mut() = Method::GET;
    *request.uri_mut() = parts.uri.clone();
    *request.version_mut() = parts.version;
    let headers = request.headers_mut();
    *headers = parts.headers.clone();
    for name in &CLIENT_CONDITIONS {
        headers.remove(name);
    }
    if compressing {
        // An origin that does RFC 9842 itself still sees the dictionary codings a client with
        // a dictionary lists (its `dcb`/`dcz` pass through, keyed by its `Vary`); nothing else.
        let dictionary_codings = dictionary_codings(headers);
        headers.remove(header::ACCEPT_ENCODING);
        if let Some(codings) = dictionary_codings {
            headers.insert(header::ACCEPT_ENCODING, codings);
        }
    }
    headers.remove(header::CONTENT_LENGTH);
    headers.remove(header::TRANSFER_ENCODING);
    if let Some(validators) = validators {
        headers.extend(validators);
    }
    request
}

/// The dictionary codings (RFC 9842 §6.1) a request with an `Available-Dictionary` lists by
/// name with q > 0, as an `Accept-Encoding` value (`dcz, dcb`); `None` without either.
fn dictionary_codings(headers: &HeaderMap) -> Option<HeaderValue> {
    if !headers.contains_key(&sluice_http::dictionary::AVAILABLE_DICTIONARY) {
        return None;
    }
    let listed: Vec<&str> = sluice_core::DictionaryCoding::ALL
        .iter()
        .filter(|coding| {
            let lines = headers
                .get_all(header::ACCEPT_ENCODING)
                .iter()
                .map(HeaderValue::as_bytes);
            let token = coding.as_str().as_bytes();
            sluice_http::encoding::listed_weight(lines, token).is_some_and(|q| q > 0)
        })
        .map(|coding| coding.as_str())
        .collect();
    if listed.is_empty() {
        return None;
    }
    HeaderValue::from_str(&listed.join(", ")).ok()
}

/// What becomes of an upstream response: stored and served from its flight, or passed on.
#[allow(clippy::too_many_arguments)]
pub(super) async fn response(
    cache: &RouteCache,
    parts: &Parts,
    primary: &str,
    leader: Option<Leader>,
    may_store: bool,
    status: CacheStatus,
    response: Response<Body>,
    times: (SystemTime, SystemTime),
    compression: Option<&RouteCompression>,
    fence: Fence,
) -> Outcome {
    let meta = if may_store {
        storable_meta(cache, parts, primary, &response, times, compression)
    } else {
        None
    };
    let Some(meta) = meta else {
        if may_store && leader.is_some() {
            // Not storable: the next requests for this key go upstream without queueing.
            cache.mark_pass(primary);
        }
        drop(leader);
        return Outcome::new(serve::passed(parts, response), Some(status));
    };
    let leader = match leader {
        Some(leader) => leader,
        None => match cache.zone.join(super::miss_key(primary)) {
            Join::Leader(leader) => leader,
            // Somebody else is fetching this key right now: theirs will be stored.
            Join::Follower(_) => return Outcome::new(serve::passed(parts, response), Some(status)),
        },
    };
    let (head, body) = response.into_parts();
    let meta = Arc::new(meta);
    let publisher = leader.publish(meta.clone());
    let shared = publisher.shared().clone();
    let reader = shared.reader();
    let retain = policy::retention(&meta, &cache.policy, SystemTime::now());
    cache
        .zone
        .store_source_retained(publisher, (*meta).clone(), body, fence, retain);
    if serve::variant_after_commit(parts, &meta, compression) {
        // A small response this client wants in another coding: once stored (moments away:
        // the fill reads the origin as fast as it sends), its variant is made once at the
        // cache's level and served from storage, instead of compressing it on the fly too.
        shared.settled().await;
        let ae = serve::accept_encoding_key(&parts.headers, compression);
        if let Some(entry) = cache.zone.find(primary, &parts.headers, ae)
            && let Some(outcome) = serve::entry(cache, parts, &entry, status, compression).await
        {
            return outcome;
        }
        // Not stored after all: the body is still all there for this reader.
    }
    match reader {
        Some(reader) => Outcome::new(
            serve::from_reader(cache, parts, head, &meta, reader, compression),
            Some(status),
        ),
        // Unreachable in practice: a fresh flight is never detached before its first reader.
        None => Outcome::new(
            crate::shared::error_page(StatusCode::BAD_GATEWAY, None),
            Some(status),
        ),
    }
}

/// The stored form of `response`, or `None` when it may not be stored (RFC 9111 §3).
fn storable_meta(
    cache: &RouteCache,
    parts: &Parts,
    primary: &str,
    response: &Response<Body>,
    (request_time, response_time): (SystemTime, SystemTime),
    compression: Option<&RouteCompression>,
) -> Option<Meta> {
    if let Err(why) = policy::storable(
        &Method::GET,
        &parts.headers,
        response.status(),
        response.headers(),
        &cache.policy,
    ) {
        tracing::trace!(
            zone = cache.zone.name(),
            reason = why.as_str(),
            "response not stored"
        );
        return None;
    }
    let max = cache.zone.settings().max_object_size;
    if response
        .body()
        .size_hint()
        .exact()
        .is_some_and(|len| len > max)
    {
        Stats::add(&cache.zone.stats().too_large, 1);
        return None;
    }
    let rule = VaryRule::of(response.headers());
    let ae = serve::accept_encoding_key(&parts.headers, compression);
    let vary_key = vary_key(&rule, &parts.headers, ae)?;
    let headers = policy::headers_to_store(response.headers());
    let variant = serve::coding_of(&headers)
        .map_or_else(|| "unknown".to_string(), |c| c.as_str().to_string());
    Some(Meta {
        status: response.status(),
        headers,
        request_time,
        response_time,
        primary_key: primary.to_string(),
        vary: rule,
        vary_key,
        variant,
        body_len: 0,
    })
}

/// What a revalidation was about.
pub(super) struct Revalidation<'a> {
    pub(super) entry: &'a Arc<Entry>,
    pub(super) stale_if_error: bool,
    pub(super) may_store: bool,
    /// §4.2.3 request and response times of the conditional request.
    pub(super) times: (SystemTime, SystemTime),
    /// Taken when the request went upstream.
    pub(super) fence: Fence,
    /// Wakes the requests collapsed on this revalidation.
    pub(super) leader: Option<Leader>,
}

/// The origin's answer to a conditional request for a stale entry (RFC 9111 §4.3.3).
pub(super) async fn revalidated(
    cache: &RouteCache,
    parts: &Parts,
    primary: &str,
    revalidation: Revalidation<'_>,
    result: Result<Response<Body>, Error>,
    compression: Option<&RouteCompression>,
    forward: impl FnOnce() -> Forward,
) -> Result<Outcome, Error> {
    let Revalidation {
        entry,
        stale_if_error,
        may_store,
        times: (request_time, response_time),
        fence,
        leader,
    } = revalidation;
    let meta = entry.meta();
    let allowed =
        |failure| stale_if_error && super::stale_on_failure(cache, &meta, &parts.headers, failure);
    let response = match result {
        Ok(response)
            if response.status().is_server_error()
                && allowed(Failure::Status(response.status())) =>
        {
            return stale(cache, parts, entry, compression, Some(response)).await;
        }
        Err(err) if allowed(Failure::Error(err.kind())) => {
            tracing::debug!(
                zone = cache.zone.name(),
                "origin failed, serving stale: {err}"
            );
            return stale(cache, parts, entry, compression, None).await;
        }
        Err(err) => return Err(err),
        Ok(response) => response,
    };
    if response.status() != StatusCode::NOT_MODIFIED {
        return Ok(response_outcome(
            cache,
            parts,
            (primary, leader),
            may_store,
            response,
            (request_time, response_time, fence),
            compression,
        )
        .await);
    }
    // One client request makes at most one request to the origin (issue 21): whatever the
    // 304 says, the client is answered from the stored response it validated, never by a
    // second, unconditional request. The conditional request named this stored response
    // alone, and the origin answered that it is current (RFC 9110 §15.4.5).
    let fresh = policy::freshen(&meta, response.headers(), request_time, response_time);
    let outcome = match fresh {
        Some(fresh) => {
            // §3 again: a 304 may make the response unstorable now (`no-store`, `private`).
            // The client still gets it, with the 304's fields, and then it is removed.
            let storable = policy::storable(
                &Method::GET,
                &parts.headers,
                fresh.status,
                &fresh.headers,
                &cache.policy,
            )
            .is_ok();
            freshen(cache, entry, fresh).await;
            let outcome =
                serve::entry(cache, parts, entry, CacheStatus::Revalidated, compression).await;
            if !storable {
                cache.zone.invalidate(&entry.primary).await;
            }
            outcome
        }
        // §4.3.4 selects nothing (the 304 names another validator): the stored response
        // cannot be updated, and stays as it was (stale: the next request revalidates again).
        None => serve::entry(cache, parts, entry, CacheStatus::Revalidated, compression).await,
    };
    // The entry is settled: the requests waiting on this revalidation look it up.
    drop(leader);
    match outcome {
        Some(outcome) => Ok(outcome),
        // Evicted between the lookup and the 304 (the only case left): fetch it whole, the
        // one retry there is.
        None => {
            refetch(
                cache,
                parts,
                (primary, None),
                may_store,
                compression,
                forward,
            )
            .await
        }
    }
}

/// The whole response again, unconditionally, stored like a miss's (EXPIRED).
async fn refetch(
    cache: &RouteCache,
    parts: &Parts,
    (primary, leader): (&str, Option<Leader>),
    may_store: bool,
    compression: Option<&RouteCompression>,
    forward: impl FnOnce() -> Forward,
) -> Result<Outcome, Error> {
    let request_time = SystemTime::now();
    let fence = cache.zone.fence(primary);
    let request = upstream_request(parts, compression.is_some(), None);
    let response = forward()(request).await?;
    let times = (request_time, SystemTime::now(), fence);
    Ok(response_outcome(
        cache,
        parts,
        (primary, leader),
        may_store,
        response,
        times,
        compression,
    )
    .await)
}

/// Store `fresh` as `entry`'s headers, and its variants' (RFC 9111 §4.3.4: every stored
/// response the 304 selects is updated).
async fn freshen(cache: &RouteCache, entry: &Arc<Entry>, fresh: Meta) {
    cache.zone.freshen(entry, fresh.clone()).await;
    cache
        .zone
        .freshen_variants(entry, |v| variant::meta(&fresh, v.coding))
        .await;
}

/// A new response in place of a stale one (EXPIRED): stored like a miss's.
async fn response_outcome(
    cache: &RouteCache,
    parts: &Parts,
    (primary, leader): (&str, Option<Leader>),
    may_store: bool,
    response: Response<Body>,
    (request_time, response_time, fence): (SystemTime, SystemTime, Fence),
    compression: Option<&RouteCompression>,
) -> Outcome {
    self::response(
        cache,
        parts,
        primary,
        leader,
        may_store,
        CacheStatus::Expired,
        response,
        (request_time, response_time),
        compression,
        fence,
    )
    .await
}

/// Serve `entry` stale because the origin failed; if it vanished, pass the origin's answer on.
async fn stale(
    cache: &RouteCache,
    parts: &Parts,
    entry: &Arc<Entry>,
    compression: Option<&RouteCompression>,
    origin: Option<Response<Body>>,
) -> Result<Outcome, Error> {
    Stats::add(&cache.zone.stats().stale_on_error, 1);
    match serve::entry(cache, parts, entry, CacheStatus::Stale, compression).await {
        Some(outcome) => Ok(outcome),
        None => match origin {
            Some(response) => Ok(Outcome::new(response, Some(CacheStatus::Miss))),
            None => Err(Error::new(
                sluice_core::ErrorKind::BadGateway,
                sluice_core::Side::Upstream,
                "the origin failed and the stale response is gone",
            )),
        },
    }
}

/// `stale-while-revalidate`: refresh `entry` in a task of its own; the client that started it
/// is already being served. The entry's refresh flag is held until the task ends.
pub(super) fn refresh_in_background(
    cache: &RouteCache,
    parts: &Parts,
    entry: Arc<Entry>,
    compressing: bool,
    forward: Forward,
) {
    let zone = cache.zone.clone();
    let meta = entry.meta();
    let request = upstream_request(
        parts,
        compressing,
        Some(policy::revalidation_headers(&meta)),
    );
    let request_headers = parts.headers.clone();
    let policy = cache.policy.clone();
    tokio::spawn(async move {
        let request_time = SystemTime::now();
        let fence = zone.fence(&entry.primary);
        let sent = forward(request).await;
        let response_time = SystemTime::now();
        match sent {
            Ok(response) if response.status() == StatusCode::NOT_MODIFIED => {
                // As in line: a 304 that selects nothing, or now forbids storing, ends the entry.
                let fresh = policy::freshen(&meta, response.headers(), request_time, response_time)
                    .filter(|fresh| {
                        policy::storable(
                            &Method::GET,
                            &request_headers,
                            fresh.status,
                            &fresh.headers,
                            &policy,
                        )
                        .is_ok()
                    });
                match fresh {
                    Some(fresh) => {
                        zone.freshen(&entry, fresh.clone()).await;
                        zone.freshen_variants(&entry, |v| variant::meta(&fresh, v.coding))
                            .await;
                    }
                    None => {
                        zone.invalidate(&entry.primary).await;
                    }
                }
            }
            Ok(response) => {
                store_refreshed(
                    &zone,
                    &policy,
                    &entry,
                    &request_headers,
                    response,
                    (request_time, response_time, fence),
                )
                .await;
            }
            Err(err) => {
                tracing::debug!(
                    zone = zone.name(),
                    "background refresh failed, the stale response stays: {err}"
                );
            }
        }
        entry.end_refresh();
    });
}

/// A new response from a background refresh replaces the entry when storable, under the same
/// keys; when not storable (say the origin now sends `no-store`), the entry is removed.
/// Returns once the entry is settled (replaced, removed or left): the refresh flag is held
/// until then, so a request arriving meanwhile finds the refresh running and starts no second
/// one (issue 21: a background refresh never races into two origin requests).
async fn store_refreshed(
    zone: &Arc<Zone>,
    settings: &policy::Settings,
    entry: &Arc<Entry>,
    request_headers: &HeaderMap,
    response: Response<Body>,
    (request_time, response_time, fence): (SystemTime, SystemTime, Fence),
) {
    if response.status().is_server_error() {
        return;
    }
    let storable = policy::storable(
        &Method::GET,
        request_headers,
        response.status(),
        response.headers(),
        settings,
    )
    .is_ok()
        && VaryRule::of(response.headers()) == VaryRule::of(&entry.meta().headers);
    if !storable {
        zone.invalidate(&entry.primary).await;
        return;
    }
    let Join::Leader(leader) = zone.join(super::miss_key(&entry.primary)) else {
        return;
    };
    let headers = policy::headers_to_store(response.headers());
    let variant = serve::coding_of(&headers)
        .map_or_else(|| "unknown".to_string(), |c| c.as_str().to_string());
    let meta = Meta {
        status: response.status(),
        vary: VaryRule::of(&headers),
        headers,
        request_time,
        response_time,
        primary_key: entry.primary.clone(),
        vary_key: entry.vary_key.clone(),
        variant,
        body_len: 0,
    };
    let publisher = leader.publish(Arc::new(meta.clone()));
    let shared = publisher.shared().clone();
    let retain = policy::retention(&meta, settings, SystemTime::now());
    zone.store_source_retained(publisher, meta, response.into_body(), fence, retain);
    shared.settled().await;
}
