//! The pipeline: the ONE place that orders the phases of a request.
//!
//! ```text
//! request phase   limits (414, 415) -> Host (400: missing, several, or not a host) ->
//!                 ACME on listeners without TLS (HTTP-01 answers; the redirect to HTTPS) ->
//!                 normal-form path (may answer 400) -> route (404 for none; 400 when the path
//!                 reads as another route's) -> body size (413 on Content-Length) -> rate limit
//!                 (may answer 429) -> access control (allow/deny 403, basic auth 401/429,
//!                 forward auth: the auth service's 401/403, or 500) -> extended CONNECT on a route that is no proxy (501) ->
//!                 cache lookup (cached proxy routes; may answer here)
//! action          static files | fixed response | redirect | proxy
//! response phase  cache store -> error page -> dictionary delta (RFC 9842; routes with
//!                 `dictionary`) -> compression (max_cpu may step it down) -> streamed bodies
//!                 in runs -> the route's response_headers / max_age -> `Server`
//! observe         access log + metrics, when the body ends
//! ```
//!
//! Before any of it, the client is resolved against the listener's `trusted_proxies`
//! ([`Client::resolve`]): the address logs, rate limits and hash balancing use.
//! On HTTP/2, a request body the action did not read is read to its end before the response
//! ends its stream ([`unread_body`]), so h2 judges the whole request (RFC 9113 §8.1).
//!
//! [`Pipeline::handle`] reads like that list; each phase is a method below, in that order, and
//! they share one [`RequestContext`]. The action hands the response phase a `Result`: the cache
//! store sees failures too (a stale response may answer for a failing origin), then every
//! remaining failure becomes its error page there, through [`sluice_core::Error::status`].
//! Every error page has one form (`crate::shared::error_page`). Besides the request phase
//! above, a few places answer with a page of their own, each because the answer carries more
//! than a status or is decided where no `Result` reaches this module: the request limits (414,
//! 415, 413 with `Connection: close`), the cache (504 for `only-if-cached` with its
//! `X-Cache-Status`; a 502 for a fill that cannot happen), the proxy (415 with the
//! `Accept-Encoding` it decodes, RFC 9110 §15.5.16) and its upgrade check (501 for a protocol
//! the route does not forward).
//! `docs/request-lifecycle.md` draws this and must change with it.

pub mod access_log;
pub mod acme;
pub mod body;
pub mod context;
pub mod host;
pub mod limits;
pub mod observe;
pub mod responses;
pub mod route_index;
pub mod router;
pub mod target;
pub mod unread_body;

use std::future::Future;
use std::sync::Arc;

use futures_util::FutureExt as _;
use futures_util::future::Either;
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body::Body as _;
use http_body_util::combinators::UnsyncBoxBody;
use sluice_config::TrustedProxies;
use sluice_core::{Body, Error, Side};
use sluice_http::coalesce::Coalesce;
use sluice_http::headers;

use crate::features::cache::Lookup;
use crate::features::compress::AcceptEncoding;
use crate::pipeline::access_log::{AccessLogger, Entry};
use crate::pipeline::body::RequestBody;
use crate::pipeline::context::RequestContext;
use crate::pipeline::limits::RequestLimits;
use crate::pipeline::observe::Observer;
use crate::pipeline::router::{CompiledRoute, Handler, Router, request_host};
use crate::shared::client::Client;
use crate::shared::metrics::RouteMetrics;

/// Per-listener request handling state, shared by its connections.
pub struct Pipeline {
    pub router: Router,
    pub server_header: Option<HeaderValue>,
    pub access_log: Option<Arc<AccessLogger>>,
    /// Metrics of requests that match no route.
    pub unmatched: RouteMetrics,
    /// The listener's `trusted_proxies`: peers whose `X-Forwarded-*` are believed.
    pub trusted_proxies: TrustedProxies,
    /// The listener's request limits (target length, stacked codings) and their metrics.
    pub limits: RequestLimits,
    /// A listener without TLS beside ACME listeners: HTTP-01 answers and the redirect to
    /// HTTPS, before routing ([`acme::AcmeFront`]).
    pub acme: Option<acme::AcmeFront>,
}

/// What the request phase decided.
enum Next<'r> {
    /// Go on to the route's action.
    Action(&'r CompiledRoute),
    /// A response is already here (no route matched, or a cache hit); the action is
    /// skipped, the response phase and observe still run.
    Answered(Response<Body>),
}

/// What the action made: a response, or a failure for the response phase to turn into one
/// (after the cache had its say), with the URI for the log line.
type Acted = Result<Response<Body>, (Error, http::Uri)>;

impl Pipeline {
    /// Handle one request. Never fails: errors are responses.
    ///
    /// A plain function around an `async` block rather than an `async fn`: an `async fn` keeps
    /// its arguments in its future for its whole life beside the locals moved out of them, and
    /// this future is copied whole where the connection boxes it (`docs/performance.md`, "User
    /// space per proxied request").
    pub fn handle(
        &self,
        client: Client,
        mut req: Request<RequestBody>,
    ) -> impl Future<Output = Response<Body>> + Send + '_ {
        let client = client.resolve(&self.trusted_proxies, req.headers());
        let mut ctx = RequestContext::new(client, &req);
        let entry = self.log_entry(&ctx, &req);
        let version = req.version();
        async move {
            let (acted, unread) = match self.request_phase(&mut ctx, &mut req).await {
                Next::Action(route) => self.action(&mut ctx, route, req).await,
                Next::Answered(response) => (Ok(response), Some(req.into_body())),
            };
            let response = self.response_phase(&mut ctx, acted).await;
            let response = self.observe(ctx, entry, response);
            // After observe: the log and the metrics time the response, not the client's upload.
            match unread {
                Some(body) => unread_body::read_before_end(response, version, body),
                None => response,
            }
        }
    }

    /// Request phase: everything decided from the request alone, before the action runs:
    /// the listener's limits (target length 414, stacked codings 415), the path put in normal
    /// form (`crate::pipeline::target`; a path that cannot be, or that another server could read as
    /// another route's: 400), routing (no route: 404), the route's `max_body_size` against a
    /// declared `Content-Length` (413), the route's rate limit (no token: 429, counted, not
    /// forwarded), then, on a proxy route with a cache, the lookup, which may
    /// answer (a hit: [`Next::Answered`]) or leave a ticket in `ctx` saying how to go upstream
    /// and what to store. Takes from the request what later phases need once the action has
    /// consumed it (`Accept-Encoding`, only on routes that compress).
    async fn request_phase<'r>(
        &'r self,
        ctx: &mut RequestContext<'r>,
        req: &mut Request<RequestBody>,
    ) -> Next<'r> {
        if let Some(refused) = self.limits.check_head(req) {
            return Next::Answered(refused);
        }
        if let Some(why) = crate::pipeline::router::invalid_host(req) {
            return Next::Answered(crate::shared::error_page(
                StatusCode::BAD_REQUEST,
                Some(why),
            ));
        }
        if let Some(acme) = &self.acme
            && let Some(answer) = acme.answer(req)
        {
            return Next::Answered(answer);
        }
        if let Err(err) = crate::pipeline::target::normalize(req) {
            return Next::Answered(bad_path(&err));
        }
        let route = match self.router.route_checked(req, ctx.client.ip) {
            Ok(route) => route,
            Err(err) => return Next::Answered(bad_path(&err)),
        };
        let Some(route) = route.map(Arc::as_ref) else {
            return Next::Answered(crate::shared::error_page(StatusCode::NOT_FOUND, None));
        };
        if let Some(re) = &route.config.matchers.must.path_regex
            && re.capture_names().flatten().next().is_some()
        {
            let path = req.uri().path();
            let captures = crate::shared::request::PathCaptures {
                values: sluice_config::path_captures(re, path),
                end: re.find(path).filter(|m| m.start() == 0).map(|m| m.end()),
            };
            req.extensions_mut().insert(captures);
        }
        ctx.route = Some(route);
        if let Some(refused) = self.limits.check_length(req, &route.config.body) {
            return Next::Answered(refused);
        }
        if let Some(limit) = &route.rate_limit
            && let Err(wait) = limit.check_request(ctx.client.ip, req.headers()).await
        {
            return Next::Answered(rate_limited(wait));
        }
        // Access control after the rate limit (a flood does not reach the password hashes or
        // the auth service) and before the cache (a stored response is no way around it).
        if let Some(access) = &route.access
            && let Err(refused) = Box::pin(access.check(ctx.client, req)).await
        {
            ctx.deny = Some(refused.reason);
            return Next::Answered(refused.response);
        }
        let req = &*req;
        // An HTTP/2 extended CONNECT (RFC 8441) asks for a tunnel, which only a proxy route can
        // open; any other action would answer a CONNECT with a page, and a 2xx would even tell
        // the client a tunnel is open (RFC 9110 §9.3.6).
        if req.method() == http::Method::CONNECT
            && !matches!(route.handler, Handler::Proxy(_))
            && crate::shared::upgrade::requested(req)
        {
            let why = "this route does not open tunnels";
            return Next::Answered(crate::shared::error_page(
                StatusCode::NOT_IMPLEMENTED,
                Some(why),
            ));
        }
        if route.compression.is_some() {
            ctx.accept = AcceptEncoding::of(req.headers());
        }
        if let Some(dictionaries) = &route.dictionaries {
            ctx.dictionary = Some(Box::new(dictionaries.request(req, ctx.tls())));
        }
        // An upgrade (WebSocket) is no cacheable exchange: it goes upstream as it came.
        if let (Some(cache), Handler::Proxy(proxy), false) = (
            &route.cache,
            &route.handler,
            crate::shared::upgrade::requested(req),
        ) {
            let forward = || crate::features::cache::forward_through(proxy.clone(), ctx.client);
            // Boxed: the cache's futures are large, and only cached routes should pay for them
            // in the size of every request's future.
            let lookup =
                Box::pin(cache.lookup(req, ctx.tls(), route.compression.as_ref(), forward));
            match lookup.await {
                Lookup::Answered(outcome) => {
                    ctx.cache = outcome.status;
                    return Next::Answered(outcome.response);
                }
                // Boxed: a ticket is 320 bytes, which every request's future would carry.
                Lookup::Upstream(ticket) => ctx.ticket = Some(Box::new(ticket)),
            }
        }
        Next::Action(route)
    }

    /// Action: the route's handler makes the response; a proxy also notes the request body's
    /// byte counter and the upstream's timing in `ctx`, and sends what the cache's ticket says
    /// (its own GET for a miss or a revalidation) instead of the client's request. Hands back
    /// the request body when the handler did not read it (all but the proxy), for
    /// [`unread_body`].
    ///
    /// Not an `async fn`, for the proxy's sake: its request is prepared here and handed to the
    /// proxy's future at once, so this future holds that one and the URI, not the request a
    /// second time beside it (`docs/performance.md`, "User space per proxied request").
    fn action<'a>(
        &'a self,
        ctx: &'a mut RequestContext<'_>,
        route: &'a CompiledRoute,
        req: Request<RequestBody>,
    ) -> impl Future<Output = (Acted, Option<RequestBody>)> + Send + 'a {
        let Handler::Proxy(proxy) = &route.handler else {
            return Either::Right(Self::serve(route, req));
        };
        let (parts, body) = req.into_parts();
        let (body, counter) = observe::counted_request_body(body);
        ctx.bytes_in = counter;
        let body = crate::pipeline::limits::limit_body(
            body,
            &route.config.body,
            ctx.start,
            &self.limits.metrics,
        );
        // Kept for the error's log line: the proxy consumes the request.
        let uri = parts.uri.clone();
        let mut req = Request::from_parts(parts, body);
        if let (Some(ticket), Some(cache)) = (&ctx.ticket, &route.cache) {
            req = cache.upstream_request(ticket, req, route.compression.as_ref());
        }
        // Not boxed: a box of this size takes mimalloc's slow aligned path, which cost more
        // instructions than the copies it saves (`docs/performance.md`, "User space per
        // proxied request").
        let proxied = proxy.handle(ctx.client, req, &mut ctx.upstream);
        Either::Left(proxied.map(move |acted| (acted.map_err(|err| (err, uri)), None)))
    }

    /// The actions that answer from the server itself: static files, a fixed response, a
    /// redirect. The request's body stays unread.
    async fn serve(
        route: &CompiledRoute,
        req: Request<RequestBody>,
    ) -> (Acted, Option<RequestBody>) {
        let acted = match &route.handler {
            Handler::Static(files) => files
                .serve(req.method(), req.uri(), req.headers())
                .await
                .map_err(|err| (err, req.uri().clone())),
            Handler::Respond(fixed) => Ok(responses::fixed(fixed)),
            Handler::Redirect(redirect) => Ok(responses::redirect(
                redirect,
                req.uri(),
                request_host(&req).as_deref(),
            )),
            // (`action` sends proxy routes to the proxy, never here.)
            Handler::Proxy(_) => Err((
                Error::new(
                    sluice_core::ErrorKind::Io,
                    Side::Internal,
                    "a proxy route reached the server's own actions",
                ),
                req.uri().clone(),
            )),
        };
        (acted, Some(req.into_body()))
    }

    /// Response phase: what every response goes through, whoever made it (action, 404, the
    /// cache): the cache store, error pages, compression on routes that compress, then the
    /// response headers (`Server`).
    ///
    /// The cache store goes first, before compression: the cache keeps the response as the
    /// upstream sent it (or answers a failure with a stale response), and serves stored
    /// responses already in the coding negotiated for the request, which compression then
    /// leaves alone; a response streamed from a miss is compressed on the fly like any other.
    async fn response_phase(&self, ctx: &mut RequestContext<'_>, acted: Acted) -> Response<Body> {
        let acted = match (ctx.ticket.take(), ctx.route.and_then(|r| r.cache.as_ref())) {
            (Some(ticket), Some(cache)) => {
                let compression = ctx.route.and_then(|r| r.compression.as_ref());
                let uri = ticket.uri().clone();
                let client = ctx.client;
                let proxy = ctx.route.and_then(|r| match &r.handler {
                    Handler::Proxy(proxy) => Some(proxy.clone()),
                    _ => None,
                });
                let forward = move || match proxy {
                    Some(proxy) => crate::features::cache::forward_through(proxy, client),
                    None => crate::features::cache::unreachable_forward(),
                };
                let completed = Box::pin(cache.complete(
                    *ticket,
                    acted.map_err(|(err, _)| err),
                    compression,
                    forward,
                ));
                match completed.await {
                    Ok(outcome) => {
                        ctx.cache = outcome.status;
                        Ok(outcome.response)
                    }
                    Err(failed) => {
                        ctx.cache = failed.status;
                        Err((failed.error, uri))
                    }
                }
            }
            _ => acted,
        };
        let mut response = match acted {
            Ok(response) => response,
            Err((err, uri)) => error_response(&err, &ctx.method, &uri),
        };
        let mut compressed = false;
        let dictionary = match (
            ctx.route.and_then(|route| route.dictionaries.as_ref()),
            ctx.route.and_then(|route| route.compression.as_ref()),
            ctx.dictionary.as_deref(),
        ) {
            (Some(dictionaries), Some(compression), Some(request)) => {
                let applied = dictionaries.apply(
                    request,
                    compression,
                    &ctx.method,
                    &ctx.accept,
                    &mut response,
                );
                Box::pin(applied).await
            }
            _ => None,
        };
        if let Some(coding) = dictionary {
            // A delta is in the coding negotiated for the request already: compression has
            // nothing left to decide.
            ctx.compression = Some(crate::features::compress::Outcome {
                decision: crate::features::dictionary::DECISION,
                encoding: Some(coding.as_str()),
            });
        } else if let Some(compression) = ctx.route.and_then(|route| route.compression.as_ref()) {
            let outcome = compression
                .apply(&ctx.method, &ctx.accept, &mut response)
                .await;
            compressed = outcome.decision == crate::features::compress::COMPRESSED;
            ctx.compression = Some(outcome);
        }
        if !compressed && !headers::is_message_stream(response.headers()) {
            // A compressed body gathers its own input (`CompressBody` waits for a real pause).
            in_runs(response.body_mut());
        }
        if let Some(edits) = ctx.route.and_then(|route| route.response_headers.as_ref()) {
            edits.apply(response.status(), response.headers_mut());
        }
        if let Some(server) = &self.server_header {
            response
                .headers_mut()
                .insert(header::SERVER, server.clone());
        }
        response
    }

    /// The access-log entry, started when the request arrives (its time is the arrival's);
    /// `None` when the log is off, so nothing of it is built.
    /// Boxed: an entry is 344 bytes, which every request's future would carry with the log off.
    fn log_entry(
        &self,
        ctx: &RequestContext<'_>,
        req: &Request<RequestBody>,
    ) -> Option<Box<Entry>> {
        self.access_log.as_ref()?;
        Some(Box::new(Entry::new(
            std::net::SocketAddr::new(ctx.client.ip, ctx.client.remote.port()),
            ctx.start,
            req.method(),
            req.uri(),
            req.version(),
            req.headers(),
        )))
    }

    /// Observe: the route's metrics and the access-log line, written when the response body
    /// ends (or the client goes away), from what the context gathered. Always runs, errors
    /// included.
    fn observe(
        &self,
        ctx: RequestContext<'_>,
        entry: Option<Box<Entry>>,
        response: Response<Body>,
    ) -> Response<Body> {
        let status = response.status();
        let log = match (entry, &self.access_log) {
            (Some(mut entry), Some(logger)) => {
                entry.status = status;
                entry.route = ctx.route.map(|route| route.config.name.clone());
                if let Some(outcome) = ctx.compression {
                    entry.compress = Some(outcome.decision);
                    entry.encoding = outcome.encoding;
                }
                entry.cache = ctx.cache.map(|status| status.as_str());
                entry.upstream_ms = ctx.upstream.response_head.map(|d| d.as_secs_f64() * 1000.0);
                entry.deny = ctx.deny;
                Some((entry, logger.clone()))
            }
            _ => None,
        };
        let route_metrics = ctx.route.map_or(&self.unmatched, |route| &route.metrics);
        let observer = Observer {
            route: route_metrics.clone(),
            start: ctx.start,
            status,
            bytes_in: ctx.bytes_in,
            log,
        };
        observe::observe(response, observer)
    }
}

/// Hand a streamed body to the connection in runs ([`Coalesce`]): a write per upstream chunk
/// made the kernel's part of a proxied stream twice HAProxy's. Bodies in memory, and streams
/// short enough to arrive in one piece, go as they are.
fn in_runs(body: &mut Body) {
    if let Body::Stream(stream) = body {
        let short = stream
            .size_hint()
            .exact()
            .is_some_and(|n| n <= IN_ONE_PIECE);
        if !short && !stream.is_end_stream() {
            let stream = std::mem::take(stream);
            *body = Body::Stream(UnsyncBoxBody::new(Coalesce::new(stream)));
        }
    }
}

/// A streamed body of at most this many bytes is not gathered: it comes in one read.
const IN_ONE_PIECE: u64 = 16 * 1024;

/// The 429 for a request its route's rate limit refused: like any error, it is made here and
/// goes through the response phase and observe; debug level, because a client over its limit
/// is expected traffic, and one line per refusal at a higher level would flood the log.
fn rate_limited(wait: std::time::Duration) -> Response<Body> {
    let secs = crate::features::rate_limit::retry_after_secs(wait);
    let err = Error::downstream(
        sluice_core::ErrorKind::TooManyRequests,
        format!("rate limit reached; retry in {secs}s"),
    );
    tracing::debug!("{err}");
    responses::too_many_requests(&err, secs)
}

/// The 400 for a path that has no normal form or reads as two routes': the client's mistake
/// (or probe), so at debug level like other bad requests.
fn bad_path(err: &dyn std::fmt::Display) -> Response<Body> {
    let err = Error::downstream(sluice_core::ErrorKind::BadRequest, err.to_string());
    tracing::debug!("{err}");
    crate::shared::error_page(err.status(), Some(err.message()))
}

/// Turn an error into its response, logging what the client does not see.
fn error_response(err: &Error, method: &http::Method, uri: &http::Uri) -> Response<Body> {
    let status = err.status();
    match err.side() {
        Side::Downstream => tracing::debug!(%status, %method, %uri, "client error: {err}"),
        _ if status.is_server_error() => tracing::warn!(%status, %method, %uri, "{err}"),
        _ => tracing::debug!(%status, %method, %uri, "{err}"),
    }
    crate::shared::error_page(status, Some(err.message()))
}
