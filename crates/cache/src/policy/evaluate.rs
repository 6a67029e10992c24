//! May a stored response answer this request now? RFC 9111 §4 (reuse), §4.2 (freshness),
//! §4.2.4 (serving stale), §5.2.1 (request directives), RFC 5861 (stale extensions).
//!
//! One call gives the zone the whole decision as a [`Reuse`]:
//!
//! - [`Reuse::Fresh`]: serve it, no origin contact.
//! - [`Reuse::StaleAllowed`]: stale, but the client accepts that (`max-stale`): serve it.
//! - [`Reuse::Revalidate`]: ask the origin (conditionally, [`super::revalidation_headers`]);
//!   meanwhile `while_revalidate` says whether the stale response may be served at once while
//!   that happens in the background, and `if_error` whether it may be served if the origin
//!   fails.
//! - [`Reuse::OnlyIfCached`]: the client sent `only-if-cached` and the stored response cannot
//!   be used without the origin: answer 504 (§5.2.1.7). With nothing stored at all, the zone
//!   answers 504 itself when [`RequestDirectives::only_if_cached`] is set. A stale response
//!   that may be served while revalidating is served: the background request is the cache's
//!   own, not the client's.
//!
//! What forbids serving stale (§4.2.4: "A cache MUST NOT generate a stale response if it is
//! prohibited by an explicit in-protocol directive"): `no-cache` (always revalidate, even when
//! fresh, §5.2.2.4), `must-revalidate` (§5.2.2.2: "In all circumstances a cache MUST NOT ignore
//! the must-revalidate directive") and `proxy-revalidate` (§5.2.2.8). These win over every
//! permission: `max-stale`, RFC 5861 directives and the zone's configured stale use.
//!
//! `s-maxage` "incorporates the semantics of the proxy-revalidate response directive" for a
//! shared cache (§5.2.2.10), so it forbids the client's `max-stale` and the zone's configured
//! stale use. It does **not** forbid `stale-while-revalidate` / `stale-if-error` sent in the
//! same field: the origin that writes `s-maxage=60, stale-while-revalidate=30` addresses
//! shared caches in both, and its explicit permission is what §4.2.4 asks for ("explicitly
//! permitted by ... the origin server (e.g., by ... extension directives such as those defined
//! in RFC 5861)"). This is the reading CDNs apply to that common pair.
//!
//! The client's `no-cache`, `max-age` and `min-fresh` ask for a fresher answer than the stored
//! one: they force a revalidation and rule out serving stale while it runs; if the origin then
//! fails, a stored response that is still fresh may be served (it is not stale, and the
//! client's directives express a preference, §5.2.1), a stale one only within a stale-if-error
//! window.

use std::time::{Duration, SystemTime};

use http::HeaderMap;

use super::Settings;
use super::directives::{MaxStale, RequestDirectives, ResponseDirectives};
use super::freshness::{current_age, lifetime_with};
use crate::meta::Meta;

/// What the zone may do with a stored response for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reuse {
    /// Fresh and acceptable to the client: serve it (`HIT`).
    Fresh,
    /// Stale, and the client's `max-stale` accepts it: serve it without revalidating (`STALE`).
    StaleAllowed,
    /// The origin must be asked before this response is served as fresh.
    Revalidate {
        /// `Some(remaining)`: serve the stale response now and revalidate in the background
        /// (`UPDATING`); `remaining` is how much of the stale-while-revalidate window is left.
        while_revalidate: Option<Duration>,
        /// If the origin fails, serving the stored response instead is allowed (`STALE`).
        if_error: bool,
    },
    /// `only-if-cached` and the stored response needs the origin: answer 504 (§5.2.1.7).
    OnlyIfCached,
}

/// The decision with the numbers behind it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Evaluation {
    pub reuse: Reuse,
    /// §4.2.3 `current_age` (send it as `Age`, see [`super::age_value`]).
    pub age: Duration,
    /// §4.2.1 `freshness_lifetime`.
    pub lifetime: Duration,
}

impl Evaluation {
    /// §4.2: `response_is_fresh = (freshness_lifetime > current_age)`.
    pub fn is_fresh(&self) -> bool {
        self.lifetime > self.age
    }
}

/// Decide how `meta` may answer a request with `req_headers` at `now`.
pub fn evaluate(
    meta: &Meta,
    req_headers: &HeaderMap,
    settings: &Settings,
    now: SystemTime,
) -> Evaluation {
    let d = ResponseDirectives::parse(&meta.headers, settings);
    let req = RequestDirectives::parse(req_headers);
    let lifetime =
        lifetime_with(&d, meta.status, &meta.headers, meta.response_time, settings).duration;
    let age = current_age(meta, now);
    let reuse = decide(&d, &req, settings, lifetime, age);
    Evaluation {
        reuse,
        age,
        lifetime,
    }
}

fn decide(
    d: &ResponseDirectives,
    req: &RequestDirectives,
    settings: &Settings,
    lifetime: Duration,
    age: Duration,
) -> Reuse {
    let fresh = lifetime > age;
    let staleness = age.saturating_sub(lifetime);
    // §4.2.4 / §5.2.2.2 / §5.2.2.8: never stale, whoever permits it.
    let never_stale = d.no_cache || d.must_revalidate || d.proxy_revalidate;
    // §5.2.2.10: s-maxage allows stale only through the origin's own RFC 5861 directives.
    let origin_only = d.s_maxage.is_some();

    // §5.2.1: what the client asks of the response's age and freshness.
    let too_old = req.max_age.is_some_and(|max_age| age > max_age);
    let not_fresh_enough = req
        .min_fresh
        .is_some_and(|min_fresh| lifetime < age.saturating_add(min_fresh));
    let client_wants_fresher = req.no_cache || too_old || not_fresh_enough;

    // §4: no-cache responses are never used without successful validation.
    if !d.no_cache && !client_wants_fresher {
        if fresh {
            return Reuse::Fresh;
        }
        // §5.2.1.2: max-stale, with or without a limit.
        let accepted = match req.max_stale {
            Some(MaxStale::Any) => true,
            Some(MaxStale::Limit(limit)) => staleness <= limit,
            None => false,
        };
        if accepted && !never_stale && !origin_only {
            return Reuse::StaleAllowed;
        }
    }

    let may_be_stale = !never_stale;
    let window = |from_origin: Option<Duration>, configured: Option<Duration>| {
        let configured = if origin_only { None } else { configured };
        from_origin.max(configured).filter(|_| may_be_stale)
    };

    // RFC 5861 §3: serve stale while revalidating, up to the window past expiry. Only when
    // the response's staleness is the reason to revalidate, not the client's demands.
    let while_revalidate = if fresh || client_wants_fresher {
        None
    } else {
        window(d.stale_while_revalidate, settings.use_stale.updating)
            .and_then(|w| w.checked_sub(staleness))
            .filter(|remaining| !remaining.is_zero())
    };

    // RFC 5861 §4: serve stale if the origin fails, within the window (response, request or
    // configured). A fresh response forced to revalidate by the client is not stale.
    let request_window = if origin_only {
        None
    } else {
        req.stale_if_error
    };
    let error_window = window(
        d.stale_if_error.max(request_window),
        settings.use_stale.error,
    );
    let if_error = !d.no_cache && (fresh || error_window.is_some_and(|w| staleness <= w));

    if req.only_if_cached && while_revalidate.is_none() {
        return Reuse::OnlyIfCached;
    }
    Reuse::Revalidate {
        while_revalidate,
        if_error,
    }
}
