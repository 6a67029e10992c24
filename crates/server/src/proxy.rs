//! Proxying a request to an upstream group: pick a peer, forward with rewritten headers, stream
//! both bodies, retry elsewhere when that is safe, and map failures to 502/504.
//!
//! Retry rules: a request is tried on another peer when the connection failed, or the peer reset
//! it before any response, and nothing of it can have been acted on: either no byte of its body
//! was sent yet (the body waits in a slot that the first attempt to read it empties), or it has
//! no body and the connection never opened or the method is idempotent. Attempts are bounded by `retry.tries` and `retry.budget`;
//! a timeout is not retried (504), and nothing is retried once a response has started.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderValue, Request, Response, header};
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use sluice_config::{HostHeader, Proxy, Upstream, UpstreamAddress};
use sluice_core::{Body, BoxError, Error, ErrorKind, Side};
use sluice_http::decompress;
use sluice_http::headers::{self, Hop};
use sluice_upstream::client::UpstreamClient;
use sluice_upstream::health::active::address_label;
use sluice_upstream::{Group, InFlight, PickContext};

use crate::metrics::{UpstreamMetrics, UpstreamOutcome, UpstreamServerMetrics};
use crate::pipeline::Client;
use crate::server::RunningUpstream;

/// A proxy route, ready to forward.
pub struct ProxyHandler {
    route: Proxy,
    group: Arc<Group>,
    client: UpstreamClient,
    upstream: Upstream,
    metrics: UpstreamMetrics,
    /// Per peer, in peer order.
    servers: Arc<[UpstreamServerMetrics]>,
}

impl ProxyHandler {
    pub fn new(route: Proxy, upstream: &RunningUpstream) -> Self {
        Self {
            route,
            group: upstream.group.clone(),
            client: upstream.client.clone(),
            upstream: upstream.group.config().clone(),
            metrics: upstream.metrics.clone(),
            servers: upstream.server_metrics.clone(),
        }
    }

    /// Forward `req`; errors are for the pipeline to turn into 502/504.
    pub async fn handle(
        &self,
        client: Client,
        req: Request<Body>,
    ) -> Result<Response<Body>, Error> {
        let started = Instant::now();
        let (mut parts, mut body) = req.into_parts();
        if let Some(limits) = self.route.decompress_requests
            && !matches!(body, Body::Empty)
        {
            match self.decompressed(&mut parts.headers, body, limits) {
                Ok(decoded) => body = decoded,
                Err(refusal) => return Ok(*refusal),
            }
        }
        // The host as the client wrote it, port included: from the target URI when it has an
        // authority (HTTP/2, absolute-form), which then wins over Host (RFC 9112 §3.2.2).
        let host = match parts.uri.authority() {
            Some(a) => Some(
                a.port()
                    .map_or_else(|| a.host().to_owned(), |p| format!("{}:{p}", a.host())),
            ),
            None => parts
                .headers
                .get(header::HOST)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
        };
        let pick_uri = parts.uri.clone();

        if parts.version == http::Version::HTTP_2 {
            headers::merge_cookies(&mut parts.headers);
        }
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

        // A streamed body goes into a slot that the first attempt to poll it empties: if an
        // attempt fails before that, the body is still there for the next peer.
        let body = match body {
            Body::Empty => None,
            streamed => Some(Arc::new(Mutex::new(Some(streamed)))),
        };
        let idempotent = parts.method.is_idempotent();

        let mut tried: Vec<usize> = Vec::new();
        let mut last_error = None;
        loop {
            let ctx = PickContext {
                client_ip: client.remote.ip(),
                uri: &pick_uri,
                headers: &parts.headers,
            };
            let Some(peer) = self.group.pick(&ctx, &tried) else {
                self.metrics.no_peer_available();
                return Err(last_error.unwrap_or_else(|| {
                    Error::new(
                        ErrorKind::BadGateway,
                        Side::Upstream,
                        format!("upstream `{}`: no server available", self.group.name()),
                    )
                }));
            };
            if !tried.is_empty() {
                self.metrics.retry();
            }
            let server_metrics = self.servers.get(peer.index());
            let guard = peer.start();
            // A retry needs the head again; the last possible attempt can have it moved.
            let last_try = tried.len() as u32 + 1 >= self.upstream.retry.tries;
            let head = if last_try {
                std::mem::replace(&mut parts, empty_parts())
            } else {
                parts.clone()
            };
            let attempt_body = match &body {
                None => Body::Empty,
                Some(slot) => {
                    let body = SlotBody {
                        slot: slot.clone(),
                        taken: None,
                    };
                    Body::stream(IdleTimeout::new(
                        body,
                        self.upstream.timeouts.idle,
                        Side::Downstream,
                        None,
                    ))
                }
            };
            let mut attempt = Request::from_parts(head, attempt_body);
            self.set_host(&mut attempt, peer.address(), host.as_deref());

            let sent_at = Instant::now();
            let sent = self.client.send(peer.index(), attempt).map_err(|e| {
                Error::new(
                    ErrorKind::BadGateway,
                    Side::Internal,
                    "building the upstream request",
                )
                .with_source(e)
            })?;
            let outcome = tokio::time::timeout(self.upstream.timeouts.response_header, sent).await;
            match outcome {
                Ok(Ok(response)) => {
                    peer.report_success();
                    if let Some(m) = server_metrics {
                        m.response_time(sent_at.elapsed());
                        m.request(UpstreamOutcome::for_status(response.status()));
                    }
                    return Ok(self.response(response, guard));
                }
                Ok(Err(err)) if decoding_refused(&err).is_some() => {
                    // The client's body was a bomb or corrupt: its fault, no failure counted.
                    let kind = decoding_refused(&err).unwrap_or(ErrorKind::BadRequest);
                    let what = if kind == ErrorKind::PayloadTooLarge {
                        "the decoded request body exceeds the route's limits"
                    } else {
                        "the request body is not valid for its Content-Encoding"
                    };
                    return Err(Error::downstream(kind, what).with_source(err));
                }
                Ok(Err(err)) if client_fault(&err).is_some() => {
                    // The client's fault, not the server's: no failure counted, no retry.
                    let kind = client_fault(&err).unwrap_or(ErrorKind::BadRequest);
                    let what = if kind == ErrorKind::RequestTimeout {
                        format!(
                            "the request body stalled for more than {:?}",
                            self.upstream.timeouts.idle
                        )
                    } else {
                        "the request body broke off before its end".to_string()
                    };
                    return Err(Error::downstream(kind, what).with_source(err));
                }
                Ok(Err(err)) => {
                    let server = address_label(peer.address());
                    if let Some(m) = server_metrics {
                        m.request(if err.is_connect() {
                            UpstreamOutcome::ConnectError
                        } else {
                            UpstreamOutcome::Reset
                        });
                    }
                    if peer.report_failure(Instant::now()) {
                        tracing::warn!(upstream = self.group.name(), %server, "server taken out after {} failure(s)", peer.config().max_fails);
                    }
                    // The request can go elsewhere if nothing of it can have been acted on: no
                    // byte of its body sent (whatever the method), or no body and either the
                    // connection never opened or the method is idempotent.
                    let safe = match &body {
                        Some(slot) => slot.lock().map(|b| b.is_some()).unwrap_or(false),
                        None => err.is_connect() || idempotent,
                    };
                    tracing::warn!(upstream = self.group.name(), %server, retry = safe, "upstream request failed: {}", error_chain(&err));
                    let error = Error::new(
                        ErrorKind::BadGateway,
                        Side::Upstream,
                        format!("upstream `{}` failed", self.group.name()),
                    )
                    .with_source(err);
                    tried.push(peer.index());
                    let within_budget = started.elapsed() < self.upstream.retry.budget;
                    if !(safe && within_budget && (tried.len() as u32) < self.upstream.retry.tries)
                    {
                        return Err(error);
                    }
                    last_error = Some(error);
                }
                Err(_) => {
                    if let Some(m) = server_metrics {
                        m.request(UpstreamOutcome::Timeout);
                    }
                    peer.report_failure(Instant::now());
                    tracing::warn!(upstream = self.group.name(), server = %address_label(peer.address()), "no response within {:?}", self.upstream.timeouts.response_header);
                    return Err(Error::new(
                        ErrorKind::GatewayTimeout,
                        Side::Upstream,
                        format!("upstream `{}` did not answer in time", self.group.name()),
                    ));
                }
            }
        }
    }

    /// Decode the request body as it streams (seed 000): `Content-Encoding` and `Content-Length`
    /// go, the limits apply. An unknown coding is refused here with 415 and the codings we
    /// accept (RFC 7694); bombs and corrupt data fail the body later (see `decoding_refused`).
    fn decompressed(
        &self,
        headers: &mut http::HeaderMap,
        body: Body,
        limits: sluice_config::DecompressRequests,
    ) -> Result<Body, Box<Response<Body>>> {
        let refuse = |err: &dyn std::fmt::Display| {
            let mut page = crate::responses::error_page(
                http::StatusCode::UNSUPPORTED_MEDIA_TYPE,
                Some(&err.to_string()),
            );
            page.headers_mut().insert(
                header::ACCEPT_ENCODING,
                HeaderValue::from_static(decompress::ACCEPTED),
            );
            page
        };
        let codings = match decompress::plan(headers) {
            Ok(Some(codings)) => codings,
            Ok(None) => return Ok(body),
            Err(err) => return Err(Box::new(refuse(&err))),
        };
        let limits = decompress::DecompressLimits {
            max_size: limits.max_size,
            max_ratio: limits.max_ratio,
        };
        match decompress::DecompressBody::new(body, &codings, limits) {
            Ok(decoded) => {
                decompress::rewrite_headers(headers);
                Ok(Body::stream(decoded))
            }
            Err(err) => Err(Box::new(refuse(&err))),
        }
    }

    fn set_host(&self, req: &mut Request<Body>, peer: &UpstreamAddress, client_host: Option<&str>) {
        let value = match &self.route.host {
            HostHeader::Set(v) => Some(v.clone()),
            HostHeader::Upstream => match peer {
                UpstreamAddress::Tcp(a) => HeaderValue::from_str(a).ok(),
                UpstreamAddress::Unix(_) => Some(HeaderValue::from_static("localhost")),
            },
            // HTTP/2 clients send :authority instead of Host, and an absolute-form target's
            // authority replaces Host; HTTP/1.1 upstreams need it as Host.
            HostHeader::Pass => client_host.and_then(|h| HeaderValue::from_str(h).ok()),
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
        let body = IdleTimeout::new(
            body,
            self.upstream.timeouts.idle,
            Side::Upstream,
            Some(guard),
        );
        Response::from_parts(parts, Body::stream(body))
    }
}

/// The request body as one attempt sees it: taken from the shared slot on first poll, so a
/// failed attempt that never polled it leaves it for the next one.
struct SlotBody {
    slot: Arc<Mutex<Option<Body>>>,
    taken: Option<Body>,
}

impl SlotBody {
    fn body(&mut self) -> Option<&mut Body> {
        if self.taken.is_none() {
            self.taken = self.slot.lock().ok().and_then(|mut b| b.take());
        }
        self.taken.as_mut()
    }
}

impl http_body::Body for SlotBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut().body() {
            Some(body) => Pin::new(body).poll_frame(cx),
            None => Poll::Ready(Some(Err(
                "the request body was already sent to another server".into(),
            ))),
        }
    }

    fn size_hint(&self) -> SizeHint {
        // hyper reads this before polling, to choose Content-Length or chunked.
        match &self.taken {
            Some(body) => body.size_hint(),
            None => self
                .slot
                .lock()
                .ok()
                .and_then(|b| b.as_ref().map(|b| b.size_hint()))
                .unwrap_or_default(),
        }
    }
}

/// A placeholder head left behind when the real one has been moved into the only attempt.
fn empty_parts() -> http::request::Parts {
    Request::new(()).into_parts().0
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

/// The error of a body on which nothing arrived for too long.
#[derive(Debug)]
struct Stalled {
    side: Side,
    idle: Duration,
}

impl std::fmt::Display for Stalled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let who = if self.side == Side::Downstream {
            "client request"
        } else {
            "upstream response"
        };
        write!(f, "{who} body stalled for {:?}", self.idle)
    }
}

impl std::error::Error for Stalled {}

/// The status for a request body that failed to decode (413 bomb, 400 corrupt), if that is why
/// the upstream request failed.
fn decoding_refused(err: &(dyn std::error::Error + 'static)) -> Option<ErrorKind> {
    decompress::error_kind(err)
        .filter(|k| matches!(k, ErrorKind::PayloadTooLarge | ErrorKind::BadRequest))
}

/// Whether `err` was caused by the client's request body: it stalled (408) or broke off (400).
fn client_fault(err: &(dyn std::error::Error + 'static)) -> Option<ErrorKind> {
    let mut cause = Some(err);
    while let Some(e) = cause {
        if e.downcast_ref::<Stalled>()
            .is_some_and(|s| s.side == Side::Downstream)
        {
            return Some(ErrorKind::RequestTimeout);
        }
        if e.is::<crate::observe::ClientBodyError>() {
            return Some(ErrorKind::BadRequest);
        }
        cause = e.source();
    }
    None
}

/// A body that fails when no frame arrives for `idle`: the upstream's response (cutting the
/// downstream response short, never passing it off as complete) and the client's request body
/// on its way upstream (so a stalled upload cannot pin a pooled connection). Holds the peer's
/// in-flight count, when given, until the body is done.
struct IdleTimeout<B> {
    inner: B,
    idle: Duration,
    /// Which side stalled, for the error.
    side: Side,
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    _in_flight: Option<InFlight>,
}

impl<B> IdleTimeout<B> {
    fn new(inner: B, idle: Duration, side: Side, in_flight: Option<InFlight>) -> Self {
        Self {
            inner,
            idle,
            side,
            timer: None,
            _in_flight: in_flight,
        }
    }
}

impl<B> http_body::Body for IdleTimeout<B>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
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
                    Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(Stalled {
                        side: this.side,
                        idle,
                    })))),
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
