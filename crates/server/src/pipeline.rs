//! The pipeline: the ONE place that orders the phases of a request.
//!
//! route -> action (static files, fixed response, redirect, proxy) -> compression (when the
//! route has `compress`) -> response headers (`Server`) -> access log. Every failure becomes a response here, through
//! [`sluice_core::Error::status`]; nothing below this function writes an error page itself.
//! `docs/request-lifecycle.md` draws this and must change with it.

use std::sync::Arc;
use std::time::Instant;

use http::{HeaderValue, Request, Response, StatusCode, header};
use hyper::body::Incoming;
use sluice_core::{Body, Error, Side};

use crate::access_log::{AccessLogger, Entry};
use crate::client::Client;
use crate::compress::AcceptEncoding;
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
        let start = Instant::now();
        let mut entry = self.access_log.as_ref().map(|_| {
            Entry::new(
                client.remote,
                start,
                req.method(),
                req.uri(),
                req.version(),
                req.headers(),
            )
        });
        let mut bytes_in = None;

        let (mut response, route_metrics) = match self.router.route(&req) {
            None => (
                responses::error_page(StatusCode::NOT_FOUND, None),
                &self.unmatched,
            ),
            Some(route) => {
                if let Some(entry) = entry.as_mut() {
                    entry.route = Some(route.config.name.clone());
                }
                // Taken before the action, which may consume the request (a proxy does).
                let compression = route.compression.as_ref().map(|compression| {
                    let accept = AcceptEncoding::of(req.headers());
                    (compression, req.method().clone(), accept)
                });
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
                        bytes_in = counter;
                        let (method, uri) = (parts.method.clone(), parts.uri.clone());
                        match proxy.handle(client, Request::from_parts(parts, body)).await {
                            Ok(response) => response,
                            Err(err) => error_response_for(&err, &method, &uri),
                        }
                    }
                };
                if let Some((compression, method, accept)) = compression {
                    let outcome = compression.apply(&method, &accept, &mut response);
                    if let Some(entry) = entry.as_mut() {
                        entry.compress = Some(outcome.decision);
                        entry.encoding = outcome.encoding;
                    }
                }
                (response, &route.metrics)
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
                Some((entry, logger.clone()))
            }
            _ => None,
        };
        let observer = Observer {
            route: route_metrics.clone(),
            start,
            status,
            bytes_in,
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
