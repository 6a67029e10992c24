//! Proxying a request to an upstream group: pick a peer, forward with rewritten headers, stream
//! both bodies, retry elsewhere when that is safe, and map failures to 502/504.
//!
//! Retry rules: a request is tried on another peer when the connection failed, or the peer reset
//! it before any response, and the request can be replayed: its body is empty (every GET, HEAD,
//! OPTIONS...; a body already streamed to a peer cannot be sent again) and, for a reset after
//! sending, its method is idempotent. Attempts are bounded by `retry.tries` and `retry.budget`;
//! a timeout is not retried (504), and nothing is retried once a response has started.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderValue, Request, Response, header};
use http_body::{Body as _, Frame, SizeHint};
use hyper::body::Incoming;
use sluice_config::{HostHeader, Proxy, Upstream, UpstreamAddress};
use sluice_core::{Body, BoxError, Error, ErrorKind, Side};
use sluice_http::headers::{self, Hop};
use sluice_upstream::client::UpstreamClient;
use sluice_upstream::{Group, InFlight, PickContext};

use crate::pipeline::Client;

/// A proxy route, ready to forward.
pub struct ProxyHandler {
    route: Proxy,
    group: Arc<Group>,
    client: UpstreamClient,
    upstream: Upstream,
}

impl ProxyHandler {
    pub fn new(route: Proxy, group: Arc<Group>, client: UpstreamClient) -> Self {
        let upstream = group.config().clone();
        Self {
            route,
            group,
            client,
            upstream,
        }
    }

    /// Forward `req`; errors are for the pipeline to turn into 502/504.
    pub async fn handle(
        &self,
        client: Client,
        req: Request<Incoming>,
    ) -> Result<Response<Body>, Error> {
        let started = Instant::now();
        let (mut parts, body) = req.into_parts();
        let host = crate::router::request_host_parts(&parts).map(|h| h.into_owned());
        let pick_ctx_uri = parts.uri.clone();

        headers::remove_hop_by_hop(&mut parts.headers);
        let hop = Hop {
            client_ip: client.remote.ip(),
            tls: client.tls,
            host: host.as_deref(),
            version: headers::via_version(parts.version),
        };
        headers::add_forwarded(&mut parts.headers, &hop);
        headers::apply_edits(&mut parts.headers, &self.route.request_headers);
        parts.version = http::Version::HTTP_11;

        // An empty body can be sent again; a streamed one only once.
        let mut body = if body.is_end_stream() {
            None
        } else {
            Some(Body::stream(body))
        };
        let replayable = body.is_none();
        let idempotent = parts.method.is_idempotent();

        let mut tried: Vec<usize> = Vec::new();
        let mut last_error = None;
        loop {
            let ctx = PickContext {
                client_ip: client.remote.ip(),
                uri: &pick_ctx_uri,
                headers: &parts.headers,
            };
            let Some(peer) = self.group.pick(&ctx, &tried) else {
                return Err(last_error.unwrap_or_else(|| {
                    Error::new(
                        ErrorKind::BadGateway,
                        Side::Upstream,
                        format!("upstream `{}`: no server available", self.group.name()),
                    )
                }));
            };
            let guard = peer.start();
            let mut attempt = Request::from_parts(parts.clone(), body.take().unwrap_or_default());
            self.set_host(&mut attempt, peer.address(), host.as_deref());

            let sent = self.client.send(peer.index(), attempt).map_err(|e| {
                Error::new(
                    ErrorKind::BadGateway,
                    Side::Internal,
                    "building the upstream request",
                )
                .with_source(e)
            })?;
            let outcome = tokio::time::timeout(self.upstream.timeouts.response_header, sent).await;
            let server = sluice_upstream::health::active::address_label(peer.address());
            match outcome {
                Ok(Ok(response)) => {
                    peer.report_success();
                    return Ok(self.response(response, guard));
                }
                Ok(Err(err)) => {
                    if peer.report_failure(Instant::now()) {
                        tracing::warn!(upstream = self.group.name(), %server, "server taken out after {} failure(s)", peer.config().max_fails);
                    }
                    let safe = replayable && (err.is_connect() || idempotent);
                    tracing::warn!(upstream = self.group.name(), %server, retry = safe, "upstream request failed: {}", error_chain(&err));
                    last_error = Some(
                        Error::new(
                            ErrorKind::BadGateway,
                            Side::Upstream,
                            format!("upstream `{}` failed", self.group.name()),
                        )
                        .with_source(err),
                    );
                    tried.push(peer.index());
                    let within_budget = started.elapsed() < self.upstream.retry.budget;
                    if !(safe && within_budget && (tried.len() as u32) < self.upstream.retry.tries)
                    {
                        return Err(last_error.unwrap_or_else(|| {
                            Error::new(ErrorKind::BadGateway, Side::Upstream, "upstream failed")
                        }));
                    }
                }
                Err(_) => {
                    peer.report_failure(Instant::now());
                    tracing::warn!(upstream = self.group.name(), %server, "no response within {:?}", self.upstream.timeouts.response_header);
                    return Err(Error::new(
                        ErrorKind::GatewayTimeout,
                        Side::Upstream,
                        format!("upstream `{}` did not answer in time", self.group.name()),
                    ));
                }
            }
        }
    }

    fn set_host(&self, req: &mut Request<Body>, peer: &UpstreamAddress, client_host: Option<&str>) {
        let value = match &self.route.host {
            HostHeader::Set(v) => Some(v.clone()),
            HostHeader::Upstream => match peer {
                UpstreamAddress::Tcp(a) => HeaderValue::from_str(a).ok(),
                UpstreamAddress::Unix(_) => Some(HeaderValue::from_static("localhost")),
            },
            // HTTP/2 clients send :authority instead of Host; HTTP/1.1 upstreams need Host.
            HostHeader::Pass => match req.headers().get(header::HOST) {
                Some(_) => None,
                None => client_host.and_then(|h| HeaderValue::from_str(h).ok()),
            },
        };
        if let Some(v) = value {
            req.headers_mut().insert(header::HOST, v);
        }
    }

    fn response(&self, response: Response<Incoming>, guard: InFlight) -> Response<Body> {
        let (mut parts, body) = response.into_parts();
        headers::remove_hop_by_hop(&mut parts.headers);
        headers::add_via(&mut parts.headers, headers::via_version(parts.version));
        headers::apply_edits(&mut parts.headers, &self.route.response_headers);
        let body = UpstreamBody {
            inner: body,
            _in_flight: guard,
            idle: self.upstream.timeouts.idle,
            timer: None,
        };
        Response::from_parts(parts, Body::stream(body))
    }
}

fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// The upstream's response body on its way downstream: keeps the peer's in-flight count until
/// it ends, and fails (cutting the downstream response short, never passing it off as complete)
/// when the upstream stalls longer than the idle timeout.
struct UpstreamBody {
    inner: Incoming,
    _in_flight: InFlight,
    idle: Duration,
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl http_body::Body for UpstreamBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                this.timer = None;
                Poll::Ready(frame.map(|f| f.map_err(Into::into)))
            }
            Poll::Pending => {
                let idle = this.idle;
                let timer = this
                    .timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(idle)));
                match timer.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Some(Err(format!(
                        "upstream body stalled for {idle:?}"
                    )
                    .into()))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

use std::future::Future as _;
