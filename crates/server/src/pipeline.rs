//! The pipeline: the ONE place that orders the phases of a request.
//!
//! route -> action (static files, fixed response, redirect, proxy) -> compression (when the
//! route has `compress`) -> response headers (`Server`) -> access log. Every failure becomes a response here, through
//! [`sluice_core::Error::status`]; nothing below this function writes an error page itself.
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
use crate::router::{Handler, Router, request_host};

/// Per-listener request handling state, shared by its connections.
pub struct Pipeline {
    pub router: Router,
    pub server_header: Option<HeaderValue>,
    pub access_log: Option<Arc<AccessLogger>>,
    /// Metrics of requests that match no route.
    pub unmatched: RouteMetrics,
}

impl Pipeline {
    /// Handle one request. Never fails: errors are responses.
    pub async fn handle(&self, client: Client, req: Request<Incoming>) -> Response<Body> {
        let mut ctx = RequestContext::new(client, &req);
        let entry = self.access_log.as_ref().map(|_| {
            Entry::new(
                client.remote,
                ctx.start,
                req.method(),
                req.uri(),
                req.version(),
                req.headers(),
            )
        });

        ctx.route = self.router.route(&req).map(Arc::as_ref);
        let mut response = match ctx.route {
            None => responses::error_page(StatusCode::NOT_FOUND, None),
            Some(route) => {
                // Taken before the action, which may consume the request (a proxy does).
                if route.compression.is_some() {
                    ctx.accept = AcceptEncoding::of(req.headers());
                }
                let mut response = match &route.handler {
                    Handler::Static(files) => {
                        match files.serve(req.method(), req.uri(), req.headers()).await {
                            Ok(response) => response,
                            Err(err) => error_response(&err, &req),
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
                        let uri = parts.uri.clone();
                        let req = Request::from_parts(parts, body);
                        match proxy.handle(client, req, &mut ctx.upstream).await {
                            Ok(response) => response,
                            Err(err) => error_response_for(&err, &ctx.method, &uri),
                        }
                    }
                };
                if let Some(compression) = &route.compression {
                    let outcome = compression.apply(&ctx.method, &ctx.accept, &mut response);
                    ctx.compression = Some(outcome);
                }
                response
            }
        };

        if let Some(server) = &self.server_header {
            response
                .headers_mut()
                .insert(header::SERVER, server.clone());
        }
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
fn error_response<B>(err: &Error, req: &Request<B>) -> Response<Body> {
    error_response_for(err, req.method(), req.uri())
}

fn error_response_for(err: &Error, method: &http::Method, uri: &http::Uri) -> Response<Body> {
    let status = err.status();
    match err.side() {
        Side::Downstream => tracing::debug!(%status, %method, %uri, "client error: {err}"),
        _ if status.is_server_error() => tracing::warn!(%status, %method, %uri, "{err}"),
        _ => tracing::debug!(%status, %method, %uri, "{err}"),
    }
    responses::error_page(status, Some(err.message()))
}
