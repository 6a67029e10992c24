//! The response cache as a pipeline feature: a proxy route's `cache` option, compiled once into
//! a [`RouteCache`] over a shared [`Zone`], answering requests from storage or sending them
//! upstream and storing what comes back. `docs/caching.md` describes the behaviour.
//!
//! The decisions are RFC 9111's, made by `sluice_cache::policy`; the storage, index and request
//! collapsing are `sluice_cache`'s. This module orders them for one request:
//!
//! 1. not a cached method → upstream; an unsafe method's success invalidates (§4.4);
//! 2. `bypass` → upstream (BYPASS), stored if storable;
//! 3. a stored response for the keys: fresh → served (HIT); stale and `stale-while-revalidate`
//!    allows → served (STALE, or UPDATING while another request refreshes) and refreshed once in
//!    the background; otherwise revalidated with the origin (304 → REVALIDATED, new response →
//!    EXPIRED, origin failing and stale allowed → STALE);
//! 4. nothing stored: `only-if-cached` → 504 (§5.2.1.7); else one request per key goes upstream
//!    (MISS), the others wait for it and read its body as it arrives.
//!
//! Served responses carry the coding the client negotiated: from the stored source, or from a
//! variant made once per coding and stored beside it (compress once, serve many).

mod conditions;
mod forward;
pub mod purge;
mod range;
mod serve;
mod stale;
mod store;
mod ticket;
mod variant;
pub mod zones;

pub use forward::{Forward, forward_through, unreachable_forward};
use stale::{Failure, stale_on_failure};
pub use ticket::{Failed, Lookup, Outcome, Ticket};
use ticket::{Kind, head_of};

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::request::Parts;
use http::{HeaderName, Request, Response, StatusCode};
use sluice_cache::key::{KeyPart, primary_key, reference_key};
use sluice_cache::lock::{Join, Waited};
use sluice_cache::policy::{self, RequestDirectives, Reuse, Settings};
use sluice_cache::storage::ObjectId;
use sluice_cache::zone::{CacheStatus, Entry, Stats, Zone};
use sluice_config::{RouteCache as RouteCacheConfig, UseStale};
use sluice_core::{Body, ContentCoding, Error};

use crate::features::compress::RouteCompression;
use conditions::Condition;
use serve::FromFlight;

/// A route's cache settings, ready for requests.
pub struct RouteCache {
    zone: Arc<Zone>,
    key: Vec<KeyPart>,
    policy: Settings,
    /// The zone's `use_stale` failures (which upstream failures count as "error").
    use_stale: Vec<UseStale>,
    bypass: Vec<Condition>,
    no_store: Vec<Condition>,
    min_uses: u32,
    uses: quick_cache::sync::Cache<u64, u32>,
    /// Keys whose responses were not storable, until when (see [`RouteCache::passing`]).
    passes: quick_cache::sync::Cache<u64, std::time::Instant>,
    /// `None`: collapsing off.
    lock_timeout: Option<Duration>,
    methods: sluice_config::CacheMethods,
    status_header: Option<HeaderName>,
    /// Level per coding for stored variants, by [`ContentCoding::index`].
    levels: [Option<i32>; ContentCoding::ALL.len()],
    /// The route's compression dictionaries: stored responses are offered as dictionaries
    /// and served as deltas from here (`serve::entry`).
    dictionaries: Option<Arc<crate::features::dictionary::RouteDictionaries>>,
}

/// The host of the cache key: the authority as received (`:authority` or `Host`), port
/// included. The key drops only the scheme's default port: the upstream sees the port too, and
/// a response built from `Host` (absolute links, redirects) must not be served for another.
fn key_authority(parts: &Parts) -> &str {
    parts
        .uri
        .authority()
        .map(http::uri::Authority::as_str)
        .or_else(|| {
            parts
                .headers
                .get(http::header::HOST)
                .and_then(|h| h.to_str().ok())
        })
        .unwrap_or_default()
        .trim()
}

/// Requests for one key that were released by a leader go around once more, then upstream.
const ROUNDS: usize = 2;

impl RouteCache {
    pub fn new(
        config: &RouteCacheConfig,
        zone: Arc<Zone>,
        zone_policy: Settings,
        use_stale: &[UseStale],
    ) -> Self {
        let mut levels = [None; ContentCoding::ALL.len()];
        for (coding, level) in [
            (ContentCoding::Gzip, config.levels.gzip),
            (ContentCoding::Deflate, config.levels.deflate),
            (ContentCoding::Br, config.levels.br),
            (ContentCoding::Zstd, config.levels.zstd),
        ] {
            levels[coding.index()] = level.and_then(|l| i32::try_from(l).ok());
        }
        let mut policy = zone_policy;
        policy.valid = config
            .valid
            .iter()
            .map(|v| {
                let status = match v.status {
                    sluice_config::StatusMatch::Code(code) => policy::StatusMatch::Code(code),
                    sluice_config::StatusMatch::Any => policy::StatusMatch::Any,
                };
                (status, v.lifetime)
            })
            .collect();
        Self {
            zone,
            key: config.key.iter().map(conditions::key_part).collect(),
            policy,
            use_stale: use_stale.to_vec(),
            bypass: config.bypass.iter().map(Condition::from).collect(),
            no_store: config.no_store.iter().map(Condition::from).collect(),
            min_uses: config.min_uses,
            uses: quick_cache::sync::Cache::new(16 * 1024),
            passes: quick_cache::sync::Cache::new(16 * 1024),
            lock_timeout: config.lock_timeout,
            methods: config.methods,
            status_header: config.status_header.clone(),
            levels,
            dictionaries: None,
        }
    }

    /// Offer stored responses as dictionaries and serve deltas of them (a route's
    /// `dictionary`).
    pub fn with_dictionaries(
        mut self,
        dictionaries: Option<Arc<crate::features::dictionary::RouteDictionaries>>,
    ) -> Self {
        self.dictionaries = dictionaries;
        self
    }

    pub fn zone(&self) -> &Arc<Zone> {
        &self.zone
    }

    /// Request phase: answer `req` from the cache, or say how to go upstream. Waits here when
    /// another request is already fetching the same key (collapsing). `forward` is asked for
    /// only when a stale response is served and must be refreshed in the background.
    pub async fn lookup<B>(
        &self,
        req: &Request<B>,
        tls: bool,
        compression: Option<&RouteCompression>,
        forward: impl FnOnce() -> Forward,
    ) -> Lookup {
        let mut parts = head_of(req);
        if self.dictionaries.is_some() {
            // The origin a dictionary is tied to has a scheme; the stored head does not.
            parts
                .extensions
                .insert(crate::features::dictionary::OverTls(tls));
        }
        // If-Match / If-Unmodified-Since are the origin's to evaluate (RFC 9111 §4.3.2: a
        // cache must not evaluate conditions meant for another server): such a request goes
        // upstream as sent, and its answer is not stored.
        let origin_conditions = parts.headers.contains_key(http::header::IF_MATCH)
            || parts
                .headers
                .contains_key(http::header::IF_UNMODIFIED_SINCE);
        if !self.methods.allows(&parts.method) || origin_conditions {
            return Lookup::Upstream(Ticket::uncached(parts, tls));
        }
        let scheme = if tls { "https" } else { "http" };
        let host = key_authority(&parts);
        let primary = primary_key(&self.key, scheme, host, &parts.uri, &parts.headers);
        let directives = RequestDirectives::parse(&parts.headers);
        let may_store =
            !directives.no_store && !self.no_store.iter().any(|c| c.matches(&parts.headers));
        let miss = |leader, may_store, status| {
            Lookup::Upstream(Ticket {
                kind: Kind::Fetch {
                    leader,
                    may_store,
                    status,
                },
                primary: primary.clone(),
                parts: parts.clone(),
                request_time: SystemTime::now(),
                fence: Some(self.zone.fence(&primary)),
            })
        };
        if self.bypass.iter().any(|c| c.matches(&parts.headers)) {
            return miss(
                None,
                may_store && self.used_enough(&primary),
                CacheStatus::Bypass,
            );
        }
        let mut forward = Some(forward);
        for _ in 0..ROUNDS {
            let ae = serve::accept_encoding_key(&parts.headers, compression);
            // A local miss asks the fleet's shared tier (if any), under its deadline.
            let found = match self.zone.find(&primary, &parts.headers, ae) {
                Some(entry) => Some(entry),
                None => self.zone.find_shared(&primary, &parts.headers, ae).await,
            };
            if let Some(entry) = found {
                match self
                    .stored(
                        &parts,
                        &primary,
                        entry,
                        may_store,
                        compression,
                        &mut forward,
                    )
                    .await
                {
                    Some(lookup) => return lookup,
                    // Gone from storage meanwhile, or settled by another request: look again,
                    // once whatever is replacing it is in the index.
                    None => {
                        self.settled(&primary).await;
                        continue;
                    }
                }
            }
            if directives.only_if_cached {
                // RFC 9111 §5.2.1.7: nothing usable stored → 504.
                return Lookup::Answered(self.finish(Outcome::new(
                    crate::shared::error_page(StatusCode::GATEWAY_TIMEOUT, Some("not cached")),
                    Some(CacheStatus::Miss),
                )));
            }
            // min_uses counts misses only: a hit has been stored already.
            let may_store = may_store && self.used_enough(&primary);
            if !may_store || self.passing(&primary) {
                // Nothing will be stored (the request says no-store, min_uses is not reached, or
                // this key's responses were not storable a moment ago): upstream as sent, not
                // collapsed behind other requests.
                return miss(None, false, CacheStatus::Miss);
            }
            let Some(lock_timeout) = self.lock_timeout else {
                // Collapsing off: every miss goes upstream, and each may store.
                return miss(None, may_store, CacheStatus::Miss);
            };
            if directives.needs_its_own_validation() {
                // Issue 21: a waiter joins a response in flight only if it may use it, and a
                // response requested before this request arrived does not satisfy its
                // `no-cache` / `max-age=0` (RFC 9111 §5.2.1): upstream now, stored if
                // nobody else is storing this key.
                return miss(None, may_store, CacheStatus::Miss);
            }
            match self.zone.join(miss_key(&primary)) {
                // Read after write (issue 21): a flight may have committed and ended between
                // the lookup above and this join; a request that leads must not fetch what is
                // stored by now. Looked up again, under the flight it now holds.
                Join::Leader(leader) if self.zone.find(&primary, &parts.headers, ae).is_some() => {
                    drop(leader);
                    continue;
                }
                Join::Leader(leader) => return miss(Some(leader), may_store, CacheStatus::Miss),
                Join::Follower(follower) => {
                    Stats::add(&self.zone.stats().collapsed, 1);
                    match follower.wait(lock_timeout).await {
                        Waited::Ready(shared) => {
                            match serve::from_flight(self, &parts, &shared, compression) {
                                FromFlight::Served(outcome) => {
                                    return Lookup::Answered(self.finish(outcome));
                                }
                                FromFlight::Gone => continue,
                                FromFlight::AfterCommit(shared) => {
                                    shared.settled().await;
                                    continue;
                                }
                                // Another variant of the resource (Vary), or a coding this
                                // client does not take: upstream alone.
                                FromFlight::NotMine => break,
                            }
                        }
                        Waited::Released => continue,
                        Waited::TimedOut => {
                            Stats::add(&self.zone.stats().lock_timeouts, 1);
                            break;
                        }
                    }
                }
            }
        }
        // This request could not use another's response: upstream on its own, not stored
        // (the request that leads this key stores it).
        miss(None, false, CacheStatus::Miss)
    }

    /// A stored response matched: serve it, or say how to revalidate it. `None`: look again (it
    /// vanished from storage meanwhile, or another request's revalidation just settled).
    async fn stored(
        &self,
        parts: &Parts,
        primary: &str,
        entry: Arc<Entry>,
        may_store: bool,
        compression: Option<&RouteCompression>,
        forward: &mut Option<impl FnOnce() -> Forward>,
    ) -> Option<Lookup> {
        let now = SystemTime::now();
        let meta = self.reuse_meta(&entry, now);
        if compression.is_none() && !serve::accepted_as_stored(parts, &meta) {
            // Never sent to this client (a coding it does not take): neither served nor
            // revalidated for it, which would cost a second request once the 304 came back.
            return None;
        }
        let served = |status| serve::entry(self, parts, &entry, status, compression);
        let outcome = match policy::evaluate(&meta, &parts.headers, &self.policy, now).reuse {
            Reuse::Fresh => served(CacheStatus::Hit).await?,
            Reuse::StaleAllowed => served(CacheStatus::Stale).await?,
            Reuse::OnlyIfCached => Outcome::new(
                crate::shared::error_page(StatusCode::GATEWAY_TIMEOUT, Some("not cached")),
                Some(CacheStatus::Miss),
            ),
            Reuse::Revalidate {
                while_revalidate: Some(_),
                ..
            } => {
                let status = match forward.take() {
                    Some(forward) if entry.start_refresh() => {
                        // The refresh this request saw running may have ended since the lookup
                        // (the flag is free again): never a second refresh for one answer.
                        if self.settled_since(parts, primary, &entry, compression) {
                            entry.end_refresh();
                            return None;
                        }
                        Stats::add(&self.zone.stats().refreshes, 1);
                        store::refresh_in_background(
                            self,
                            parts,
                            entry.clone(),
                            compression.is_some(),
                            forward(),
                        );
                        CacheStatus::Stale
                    }
                    _ => CacheStatus::Updating,
                };
                served(status).await?
            }
            Reuse::Revalidate {
                while_revalidate: None,
                if_error,
            } => {
                // One revalidation per key at a time, like a miss: the others wait for its
                // answer (a 304 leaves a fresh entry to look up again; a new response is read
                // as it arrives).
                let own = RequestDirectives::parse(&parts.headers).needs_its_own_validation();
                let leader = match self.lock_timeout {
                    // Collapsing off, or a client whose `no-cache` / `max-age=0` another
                    // request's revalidation (sent before it arrived) does not satisfy
                    // (RFC 9111 §5.2.1; issue 21: a waiter joins only what it may use).
                    None => None,
                    Some(_) if own => None,
                    Some(timeout) => match self.zone.join(miss_key(primary)) {
                        // Another request's revalidation may have ended between the lookup
                        // and this join (a 304 freshens the entry in place, a 200 replaces
                        // it): then this one would be a second conditional request for one
                        // answer (issue 21). Looked up again instead.
                        Join::Leader(leader)
                            if self.settled_since(parts, primary, &entry, compression) =>
                        {
                            drop(leader);
                            return None;
                        }
                        Join::Leader(leader) => Some(leader),
                        Join::Follower(follower) => {
                            Stats::add(&self.zone.stats().collapsed, 1);
                            match follower.wait(timeout).await {
                                Waited::Ready(shared) => {
                                    match serve::from_flight(self, parts, &shared, compression) {
                                        FromFlight::Served(outcome) => {
                                            return Some(Lookup::Answered(self.finish(outcome)));
                                        }
                                        FromFlight::AfterCommit(shared) => {
                                            shared.settled().await;
                                            return None;
                                        }
                                        FromFlight::Gone => return None,
                                        FromFlight::NotMine => None,
                                    }
                                }
                                Waited::Released => return None,
                                Waited::TimedOut => {
                                    Stats::add(&self.zone.stats().lock_timeouts, 1);
                                    None
                                }
                            }
                        }
                    },
                };
                return Some(Lookup::Upstream(Ticket {
                    kind: Kind::Revalidate {
                        entry,
                        if_error,
                        may_store,
                        leader,
                    },
                    primary: primary.to_string(),
                    parts: parts.clone(),
                    request_time: now,
                    fence: Some(self.zone.fence(primary)),
                }));
            }
        };
        Some(Lookup::Answered(self.finish(outcome)))
    }

    /// Wait until the flight storing `primary` (if any) has committed. A fill writes the new
    /// object to storage before it puts it in the index: in between, a lookup finds the old
    /// entry whose body is gone, and looking again at once would find it again and end in an
    /// upstream request of its own (issue 21: read after write). Bounded by the lock timeout.
    async fn settled(&self, primary: &str) {
        let Join::Follower(follower) = self.zone.join(miss_key(primary)) else {
            // Nobody is storing it: the leader taken here is released at once.
            return;
        };
        let bound = self.lock_timeout.unwrap_or(Duration::ZERO);
        let settle = async {
            if let Waited::Ready(shared) = follower.wait(bound).await {
                shared.settled().await;
            }
        };
        let _ = tokio::time::timeout(bound, settle).await;
    }

    /// Whether `entry`, found stale for `parts`, no longer needs this request's revalidation:
    /// it was replaced or removed, or freshened in place by a 304.
    fn settled_since(
        &self,
        parts: &Parts,
        primary: &str,
        entry: &Arc<Entry>,
        compression: Option<&RouteCompression>,
    ) -> bool {
        let ae = serve::accept_encoding_key(&parts.headers, compression);
        let current = self.zone.find(primary, &parts.headers, ae);
        if !current.is_some_and(|current| Arc::ptr_eq(&current, entry)) {
            return true;
        }
        let now = SystemTime::now();
        let reuse = policy::evaluate(
            &self.reuse_meta(entry, now),
            &parts.headers,
            &self.policy,
            now,
        );
        matches!(reuse.reuse, Reuse::Fresh)
    }

    /// The stored headers to judge `entry`'s reuse by: as stored, or, after a soft purge
    /// (`PURGE /cache/ZONE?tag=T&soft=1`), as a response that became stale at that moment,
    /// so its stale windows apply.
    fn reuse_meta(&self, entry: &Entry, now: SystemTime) -> Arc<sluice_cache::meta::Meta> {
        let meta = entry.meta();
        if entry.soft_purged() {
            Arc::new(policy::expire_now(&meta, &self.policy, now))
        } else {
            meta
        }
    }

    /// Response phase: what the cache makes of the upstream's answer to a [`Ticket`]'s request:
    /// stored and served from its flight, a 304 turned into the refreshed stored response, a
    /// failure answered with a stale response where allowed, an unsafe method's success
    /// invalidating what it changed.
    pub async fn complete(
        &self,
        ticket: Ticket,
        result: Result<Response<Body>, Error>,
        compression: Option<&RouteCompression>,
        forward: impl FnOnce() -> Forward,
    ) -> Result<Outcome, Failed> {
        let response_time = SystemTime::now();
        let times = (ticket.request_time, response_time);
        let Ticket {
            kind,
            primary,
            parts,
            fence,
            ..
        } = ticket;
        // Always there for the kinds that store (a fresh one would only be later).
        let fence = fence.unwrap_or_else(|| self.zone.fence(&primary));
        let outcome = match kind {
            Kind::Uncached { tls } => {
                let mut response = result.map_err(|error| Failed {
                    error,
                    status: None,
                })?;
                // RFC 9213 §2.2: consumed here, whatever the method.
                response.headers_mut().remove(&policy::SLUICE_CACHE_CONTROL);
                let targets = policy::invalidation(
                    &parts.method,
                    response.status(),
                    &parts.uri,
                    response.headers(),
                );
                self.invalidate(&parts, tls, targets).await;
                return Ok(Outcome::new(response, None));
            }
            Kind::Fetch {
                leader,
                may_store,
                status,
            } => {
                let response = match result {
                    Ok(response) => response,
                    Err(error) => {
                        drop(leader);
                        return Err(self.failed(error, status));
                    }
                };
                store::response(
                    self,
                    &parts,
                    &primary,
                    leader,
                    may_store,
                    status,
                    response,
                    times,
                    compression,
                    fence,
                )
                .await
            }
            Kind::Revalidate {
                entry,
                if_error,
                may_store,
                leader,
            } => {
                let revalidation = store::Revalidation {
                    entry: &entry,
                    stale_if_error: if_error,
                    may_store,
                    times,
                    fence,
                    leader,
                };
                store::revalidated(
                    self,
                    &parts,
                    &primary,
                    revalidation,
                    result,
                    compression,
                    forward,
                )
                .await
                .map_err(|error| self.failed(error, CacheStatus::Expired))?
            }
        };
        Ok(self.finish(outcome))
    }

    /// A trip upstream failed with nothing to serve instead: counted, and said in the log.
    fn failed(&self, error: Error, status: CacheStatus) -> Failed {
        self.zone.stats().count(status);
        Failed {
            error,
            status: Some(status),
        }
    }

    /// The request to send upstream for `ticket`: the client's own for methods the cache does
    /// not serve; otherwise the cache's GET (see `store::upstream_request`).
    pub fn upstream_request(
        &self,
        ticket: &Ticket,
        client_request: Request<Body>,
        compression: Option<&RouteCompression>,
    ) -> Request<Body> {
        match &ticket.kind {
            Kind::Uncached { .. } => client_request,
            Kind::Fetch { .. } => {
                store::upstream_request(&ticket.parts, compression.is_some(), None)
            }
            Kind::Revalidate { entry, .. } => store::upstream_request(
                &ticket.parts,
                compression.is_some(),
                Some(policy::revalidation_headers(&entry.meta())),
            ),
        }
    }

    /// RFC 9111 §4.4: an unsafe method's non-error response invalidates the stored responses
    /// of its target URI and of a same-origin `Location` / `Content-Location`.
    async fn invalidate(&self, parts: &Parts, tls: bool, targets: Vec<http::Uri>) {
        let scheme = if tls { "https" } else { "http" };
        let host = key_authority(parts).to_string();
        for target in targets {
            if let Some(key) = reference_key(&self.key, scheme, &host, &target, &parts.headers) {
                self.zone.invalidate(&key).await;
            }
        }
    }

    /// `min_uses`: store a key only once it has missed this many times. Counted by a hash of
    /// the key in a bounded map: one-off URLs age out, and a long URL costs 8 bytes.
    fn used_enough(&self, primary: &str) -> bool {
        if self.min_uses <= 1 {
            return true;
        }
        let key = key_hash(primary);
        let uses = self.uses.get(&key).unwrap_or(0).saturating_add(1);
        self.uses.insert(key, uses);
        uses >= self.min_uses
    }

    /// Whether `primary`'s last response was not storable, recently: its requests go upstream
    /// at once instead of queueing behind each other's misses (Varnish's hit-for-miss).
    fn passing(&self, primary: &str) -> bool {
        self.passes
            .get(&key_hash(primary))
            .is_some_and(|until| until > std::time::Instant::now())
    }

    /// Remember that `primary`'s response was not storable, for [`PASS_FOR`].
    pub(crate) fn mark_pass(&self, primary: &str) {
        self.passes
            .insert(key_hash(primary), std::time::Instant::now() + PASS_FOR);
    }

    /// Count the outcome and say it in the status header.
    fn finish(&self, mut outcome: Outcome) -> Outcome {
        // RFC 9213 §2.2: the field targeted at this cache is consumed here, whether the
        // response was stored or not.
        outcome
            .response
            .headers_mut()
            .remove(&policy::SLUICE_CACHE_CONTROL);
        // Surrogate keys are for caches (this one: purge by tag), not for clients, unless the
        // zone says to keep them (a CDN in front that purges by them too).
        if !self.zone.settings().keep_tag_headers {
            for name in sluice_cache::zone::TAG_HEADERS {
                outcome.response.headers_mut().remove(name);
            }
        }
        if let Some(status) = outcome.status {
            self.zone.stats().count(status);
            if let Some(name) = &self.status_header {
                outcome.response.headers_mut().insert(
                    name.clone(),
                    http::HeaderValue::from_static(status.as_str()),
                );
            }
        }
        outcome
    }

    fn level(&self, coding: ContentCoding) -> Option<i32> {
        self.levels[coding.index()]
    }
}

/// How long a key whose response was not storable skips collapsing.
const PASS_FOR: Duration = Duration::from_secs(10);

fn key_hash(primary: &str) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    BuildHasherDefault::<DefaultHasher>::default().hash_one(primary)
}

/// The flight key of a miss on `primary`: before the response arrives its `Vary` is unknown,
/// so misses collapse on the primary key and followers check the secondary key when woken.
fn miss_key(primary: &str) -> ObjectId {
    ObjectId::of(&[primary.as_bytes(), b"miss"])
}
