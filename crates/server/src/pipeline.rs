//! The pipeline: the ONE place that orders the phases of a request.
//!
//! ```text
//! request phase   route (later: limits; cache lookup, which may answer here)
//! action          static files | fixed response | redirect | proxy
//! response phase  (later: cache store) -> compression -> response headers (`Server`)
//! observe         access log + metrics, when the body ends
//! ```
//!
//! [`Pipeline::handle`] reads like that list; each phase is a method below, in that order, and
//! they share one [`RequestContext`]. Every failure becomes a response in the action, through
//! [`sluice_core::Error::status`]; nothing below this module writes an error page itself.
//! `docs/request-lifecycle.md` draws this and must change with it.

use std::sync::Arc;

use http::{HeaderValue, Request, Response, StatusCode, header};
use hyper::body::Incoming;
use sluice_core::{Body, Error, Side};

use crate::access_log::{AccessLogger, Entry};
use crate::client::Client;
use crate::compress::AcceptEncoding;
use crate::context::RequestContext;
use crate::metrics::RouteMetrics;
use crate::observe::{self, Observer};
use crate::responses;
use crate::router::{CompiledRoute, Handler, Router, request_host};

/// Per-listener request handling state, shared by its connections.
pub struct Pipeline {
    pub router: Router,
    pub server_header: Option<HeaderValue>,
    pub access_log: Option<Arc<AccessLogger>>,
    /// Metrics of requests that match no route.
    pub unmatched: RouteMetrics,
}

/// What the request phase decided.
enum Next<'r> {
    /// Go on to the route's action.
    Action(&'r CompiledRoute),
    /// A response is already here (no route matched; later: a cache hit); the action is
    /// skipped, the response phase and observe still run.
    Answered(Response<Body>),
}

impl Pipeline {
    /// Handle one request. Never fails: errors are responses.
    pub async fn handle(&self, client: Client, req: Request<Incoming>) -> Response<Body> {
        let mut ctx = RequestContext::new(client, &req);
        let entry = self.log_entry(&ctx, &req);
        let response = match self.request_phase(&mut ctx, &req) {
            Next::Action(route) => self.action(&mut ctx, route, req).await,
            Next::Answered(response) => response,
        };
        let response = self.response_phase(&mut ctx, response);
        self.observe(ctx, entry, response)
    }

    /// Request phase: everything decided from the request alone, before the action runs. Today
    /// that is routing (no route: 404). Takes from the request what later phases need once the
    /// action has consumed it (`Accept-Encoding`, only on routes that compress).
    ///
    /// Coming here, in this order: limits, then the cache lookup (issue 10), which sets
    /// `ctx.cache` and, on a hit, returns [`Next::Answered`] with the stored response.
    fn request_phase<'r>(
        &'r self,
        ctx: &mut RequestContext<'r>,
        req: &Request<Incoming>,
    ) -> Next<'r> {
        let Some(route) = self.router.route(req).map(Arc::as_ref) else {
            return Next::Answered(responses::error_page(StatusCode::NOT_FOUND, None));
        };
        ctx.route = Some(route);
        if route.compression.is_some() {
            ctx.accept = AcceptEncoding::of(req.headers());
        }
        // cache lookup (coming: issue 10): here, on routes with a cache.
        Next::Action(route)
    }

    /// Action: the route's handler makes the response. An `Err` becomes its error page here;
    /// a proxy also notes the request body's byte counter and the upstream's timing in `ctx`.
    async fn action(
        &self,
        ctx: &mut RequestContext<'_>,
        route: &CompiledRoute,
        req: Request<Incoming>,
    ) -> Response<Body> {
        match &route.handler {
            Handler::Static(files) => {
                match files.serve(req.method(), req.uri(), req.headers()).await {
                    Ok(response) => response,
                    Err(err) => error_response(&err, &ctx.method, req.uri()),
                }
            }
            Handler::Respond(fixed) => responses::fixed(fixed),
            Handler::Redirect(redirect) => {
                responses::redirect(redirect, req.uri(), request_host(&req).as_deref())
            }
            Handler::Proxy(proxy) => {
                let (parts, body) = req.into_parts();
                let (body, counter) = observe::counted_request_body(body);
                ctx.bytes_in = counter;
                // Kept for the error's log line: the proxy consumes the request.
                let uri = parts.uri.clone();
                let req = Request::from_parts(parts, body);
                match proxy.handle(ctx.client, req, &mut ctx.upstream).await {
                    Ok(response) => response,
                    Err(err) => error_response(&err, &ctx.method, &uri),
                }
            }
        }
    }

    /// Response phase: what every response goes through, whoever made it (action, 404, later
    /// the cache): compression on routes that compress, then the response headers (`Server`).
    ///
    /// The cache store (issue 10) goes first, before compression: the cache keeps the
    /// response as the action made it, and a hit comes back through compression like any other
    /// response, negotiated for the request that gets it.
    fn response_phase(
        &self,
        ctx: &mut RequestContext<'_>,
        mut response: Response<Body>,
    ) -> Response<Body> {
        // cache store (coming: issue 10): here, before compression.
        if let Some(compression) = ctx.route.and_then(|route| route.compression.as_ref()) {
            ctx.compression = Some(compression.apply(&ctx.method, &ctx.accept, &mut response));
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
    fn log_entry(&self, ctx: &RequestContext<'_>, req: &Request<Incoming>) -> Option<Entry> {
        self.access_log.as_ref()?;
        Some(Entry::new(
            ctx.client.remote,
            ctx.start,
            req.method(),
            req.uri(),
            req.version(),
            req.headers(),
        ))
    }

    /// Observe: the route's metrics and the access-log line, written when the response body
    /// ends (or the client goes away), from what the context gathered. Always runs, errors
    /// included.
    fn observe(
        &self,
        ctx: RequestContext<'_>,
        entry: Option<Entry>,
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

/// Turn an error into its response, logging what the client does not see.
fn error_response(err: &Error, method: &http::Method, uri: &http::Uri) -> Response<Body> {
    let status = err.status();
    match err.side() {
        Side::Downstream => tracing::debug!(%status, %method, %uri, "client error: {err}"),
        _ if status.is_server_error() => tracing::warn!(%status, %method, %uri, "{err}"),
        _ => tracing::debug!(%status, %method, %uri, "{err}"),
    }
    responses::error_page(status, Some(err.message()))
}
