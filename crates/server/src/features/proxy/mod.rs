//! Proxying a request to an upstream group: pick a peer, forward with rewritten headers (and
//! path, see `rewrite`), stream both bodies, retry elsewhere when that is safe, and map failures to 502/504.
//!
//! Retry rules: a request is tried on another peer when the connection failed, or the peer reset
//! it before any response, and nothing of it can have been acted on: either no byte of its body
//! was sent yet (the body waits in a slot that the first attempt to read it empties), or it has
//! no body and the connection never opened or the method is idempotent. Attempts are bounded by
//! `retry.tries` and `retry.budget`; a timeout is not retried (504), and nothing is retried once a
//! response has started. Apart from those tries, an idempotent request without a body that met
//! the keep-alive race (the server closed a pooled connection as the request went out on it) is
//! sent once more to the same server on a new connection, not counted as the server's failure.
//! Which server each attempt goes to, panic routing included, is `sluice_upstream::group`'s.
//!
//! Upgrades (WebSocket and other protocols, HTTP/2 extended CONNECT included) are forwarded as
//! `upgrade.rs` says; once the upstream switches, the exchange becomes a tunnel (`crate::features::tunnel`).
//!
//! Timeouts: `response_header` runs from the end of the request body to the response head, so a
//! slow upload is not mistaken for a silent upstream; while the body is on its way, `idle`
//! bounds every pause: the client's (408) and the upstream's, when it stops reading (504).

mod admit;
mod attempt;
mod body;
mod retry;
mod rewrite;
#[cfg(test)]
mod tests;
mod upgrade;

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::{HeaderValue, Request, Response, header};
use http_body::Body as _;
use hyper::body::Incoming;
use sluice_config::{HostHeader, Proxy, Upstream, UpstreamAddress};
use sluice_core::{Body, Error, ErrorKind, Side};
use sluice_http::decompress;
use sluice_http::headers;
use sluice_upstream::client::{Connection, UpstreamClient, on_reused_connection};
use sluice_upstream::health::active::address_label;
use sluice_upstream::tls::tls_failure;
use sluice_upstream::{Group, InFlight, Peer, PickContext};

use body::{BodyErrorReport, CountedDecode, IdleTimeout, Peeked, Stalled, Upload};
use retry::{Failure, Forward, Ready, Retries};
use upgrade::Prepared;

use crate::features::upstreams::{RunningUpstream, ServerMetricsTable};
use crate::shared::client::Client;
use crate::shared::metrics::{
    DecompressMetrics, DecompressOutcome, TunnelMetrics, UpstreamMetrics, UpstreamOutcome,
};

/// What the proxy measured of one request's trip upstream, kept in the request context.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct UpstreamTiming {
    /// From sending the request to the peer that answered (connecting included, earlier failed
    /// attempts not) to that peer's response head: nginx's `$upstream_header_time`. `None`
    /// when no upstream answered.
    pub response_head: Option<Duration>,
}

/// A proxy route, ready to forward.
pub struct ProxyHandler {
    route: Proxy,
    group: Arc<Group>,
    client: UpstreamClient,
    upstream: Upstream,
    metrics: UpstreamMetrics,
    /// Per peer, by peer number.
    servers: ServerMetricsTable,
    /// Per configured server, its address as a `Host` value (for `host = "upstream"`), built
    /// once; peers discovered by DNS use the name they were found under.
    peer_hosts: Vec<Option<HeaderValue>>,
    /// The route's request-decoding metrics, when it has `decompress_requests`.
    decompress_metrics: Option<DecompressMetrics>,
    /// The route's name and tunnel metrics (see [`Self::with_tunnels`]).
    tunnels: Option<(String, TunnelMetrics)>,
}

impl ProxyHandler {
    pub fn new(
        route: Proxy,
        upstream: &RunningUpstream,
        decompress_metrics: Option<DecompressMetrics>,
    ) -> Self {
        let config = upstream.group.config();
        let peer_hosts = config
            .servers
            .iter()
            .map(|s| match &s.address {
                // RFC 9110 §4.2.2: 443 is https's default port, so the authority omits it
                // (`https://example.com` is sent `Host: example.com`).
                UpstreamAddress::Tcp(a) if config.tls.is_some() => {
                    HeaderValue::from_str(a.strip_suffix(":443").unwrap_or(a)).ok()
                }
                UpstreamAddress::Tcp(a) => HeaderValue::from_str(a).ok(),
                UpstreamAddress::Unix(_) => Some(HeaderValue::from_static("localhost")),
                UpstreamAddress::Dns(_) => None,
            })
            .collect();
        Self {
            route,
            group: upstream.group.clone(),
            client: upstream.client.clone(),
            upstream: config.clone(),
            metrics: upstream.metrics.clone(),
            servers: upstream.server_metrics.clone(),
            peer_hosts,
            decompress_metrics,
            tunnels: None,
        }
    }

    /// Name the route (for tunnel log lines) and count its tunnels in `metrics`.
    pub fn with_tunnels(mut self, route: &str, metrics: TunnelMetrics) -> Self {
        self.tunnels = Some((route.to_owned(), metrics));
        self
    }

    /// Forward `req`, noting in `timing` how long the upstream took; errors are for the pipeline
    /// to turn into 502/504. In named steps: [`Self::prepare`] the request once, then per
    /// attempt pick a server ([`Self::pick`]), send and wait, and either finish with its
    /// response ([`Self::succeeded`]) or classify the failure ([`Self::classify`]) and let the
    /// retry state ([`Retries`]) say whether another attempt follows.
    ///
    /// A plain function around an `async` block rather than an `async fn`: an `async fn` keeps
    /// its arguments in its future for its whole life (264 bytes of request here) beside the
    /// parts taken out of them, and the pipeline's future, which holds this one, is copied
    /// whole when it is created (`docs/performance.md`, "User space per proxied request").
    pub fn handle<'a>(
        &'a self,
        client: Client,
        req: Request<Body>,
        timing: &'a mut UpstreamTiming,
    ) -> impl Future<Output = Result<Response<Body>, Error>> + Send + 'a {
        let (parts, body) = req.into_parts();
        async move {
            // Only a body can make this wait before the first pick; without one, the first
            // attempt's clock reading starts the retry budget too (one reading, not two).
            let started = matches!(body, Body::Stream(_)).then(Instant::now);
            let mut req = match self.prepare(parts, body, &client).await? {
                Ready::Forward(req) => req,
                Ready::Answered(response) => return Ok(response),
            };
            let mut retries = Retries::new(self, &req, started);
            loop {
                // One clock reading per attempt: the balancer's (passive health compares it with
                // failure times), the send time the upstream's timing starts from, and the
                // response timeout's start when there is no body to wait for.
                let mut sent_at = Instant::now();
                let started = retries.started(sent_at);
                let (peer, connection) = match retries.again_on_new.take() {
                    Some(peer) => (peer, Connection::New),
                    None => (
                        self.pick(&client, &req, &mut retries, sent_at)?,
                        Connection::Pooled,
                    ),
                };
                let server_metrics = self.servers.get(peer.index());
                let guard = self.admit(&peer, server_metrics.as_deref()).await?;
                if peer.limit().is_some() {
                    // It may have waited in the server's `max_conns` queue.
                    sent_at = Instant::now();
                }
                let (attempt, upload) = self.attempt(
                    &mut req.parts,
                    retries.last_try(),
                    req.body.as_ref(),
                    &client,
                    &peer,
                    req.host.as_ref(),
                );
                let sent = self
                    .client
                    .send_on(peer.index(), attempt, connection)
                    .map_err(|e| {
                        Error::new(
                            ErrorKind::BadGateway,
                            Side::Internal,
                            "building the upstream request",
                        )
                        .with_source(e)
                    })?;
                let err = match self.await_response(sent, sent_at, upload.as_deref()).await {
                    Ok(Ok(response)) => {
                        return self.succeeded(response, &mut req, &peer, sent_at, guard, timing);
                    }
                    Ok(Err(err)) => err,
                    Err(timeout) => {
                        return Err(self.timed_out(timeout, &peer, server_metrics.as_deref()));
                    }
                };
                match self.classify(err, &req, &peer, retries.race_retry_left) {
                    Failure::ClientBody(error) => return Err(error),
                    Failure::KeepaliveRace => {
                        self.metrics.retry();
                        retries.after_race(peer);
                    }
                    Failure::Server { error, retry_safe } => {
                        retries.after_failure(peer.index(), error, retry_safe, started)?;
                    }
                }
            }
        }
    }

    /// Everything done once per request before the first attempt: the upgrade check (a
    /// refusal answers here), an empty streamed body settled as none, request decoding
    /// (`decompress_requests`; a refusal answers here), a small body read whole, the head
    /// forwarded (hop-by-hop fields, `X-Forwarded-*`, `Via`, edits, the path), and a streamed
    /// body put in a slot that the first attempt to poll it empties (if an attempt fails before
    /// that, the body is still there for the next server).
    async fn prepare(
        &self,
        mut parts: http::request::Parts,
        mut body: Body,
        client: &Client,
    ) -> Result<Ready, Error> {
        let switch = match upgrade::prepare(
            &mut parts,
            &self.route.upgrade.protocols,
            !self.upstream.http2,
        ) {
            Prepared::Ordinary => None,
            Prepared::Switch(switch) => Some(switch),
            Prepared::Refused(response) => return Ok(Ready::Answered(response)),
        };
        if matches!(body, Body::Stream(_)) && body.size_hint().exact().is_none() {
            body = self.settle_empty(&parts.method, body).await?;
        }
        if let Some(limits) = self.route.decompress_requests {
            match self.decompressed(&mut parts.headers, body, limits) {
                Ok(decoded) => body = decoded,
                Err(refusal) => return Ok(Ready::Answered(*refusal)),
            }
        }
        if switch.is_none() {
            body = self.buffered(body).await?;
        }
        let host = client_host(&parts);
        // The balancer hashes the client's URI: kept apart only when the forwarded one
        // differs (no copy otherwise).
        let received_uri = self.forwarded_head(&mut parts, client, host.clone(), switch.as_ref());
        let body = match body {
            Body::Empty => None,
            streamed => Some(Arc::new(Mutex::new(Some(streamed)))),
        };
        Ok(Ready::Forward(Forward {
            parts,
            body,
            host,
            received_uri,
            switch,
        }))
    }

    /// The server for the next attempt (not one already tried); none left is the last
    /// attempt's error, or a 502 saying so. A panic pick (every server out after failures:
    /// the one out the longest) is counted and logged.
    fn pick(
        &self,
        client: &Client,
        req: &Forward,
        retries: &mut Retries,
        now: Instant,
    ) -> Result<Arc<Peer>, Error> {
        let ctx = PickContext {
            client_ip: client.ip,
            uri: req.received_uri.as_ref().unwrap_or(&req.parts.uri),
            headers: &req.parts.headers,
        };
        let Some(picked) = self.group.pick_at(&ctx, &retries.tried, now) else {
            self.metrics.no_peer_available();
            return Err(retries.last_error.take().unwrap_or_else(|| {
                Error::new(
                    ErrorKind::BadGateway,
                    Side::Upstream,
                    format!("upstream `{}`: no server available", self.group.name()),
                )
            }));
        };
        if picked.panic {
            self.metrics.panic_pick();
            let server = address_label(picked.peer.address());
            tracing::warn!(upstream = self.group.name(), %server, "every server is out after failures: trying the one out the longest (panic routing)");
        }
        if !retries.tried.is_empty() {
            self.metrics.retry();
        }
        Ok(picked.peer)
    }

    /// The attempt got a response head: the server's health, timing and outcome noted, then
    /// the response forwarded (or, for a `101`, the tunnel opened).
    fn succeeded(
        &self,
        response: Response<Incoming>,
        req: &mut Forward,
        peer: &Peer,
        sent_at: Instant,
        guard: InFlight,
        timing: &mut UpstreamTiming,
    ) -> Result<Response<Body>, Error> {
        if peer.report_success(sent_at) {
            let server = address_label(peer.address());
            tracing::info!(upstream = self.group.name(), %server, "server back in: it answered a request panic routing sent it");
        }
        let took = sent_at.elapsed();
        timing.response_head = Some(took);
        if let Some(m) = self.servers.get(peer.index()) {
            m.response_time(took);
            m.request(UpstreamOutcome::for_status(response.status()));
        }
        if response.status() == http::StatusCode::SWITCHING_PROTOCOLS {
            return match req.switch.take() {
                Some(switch) => self.switch(switch, response, guard),
                None => Err(Error::new(
                    ErrorKind::BadGateway,
                    Side::Upstream,
                    "the upstream switched protocols, which the request did not ask for",
                )),
            };
        }
        if let Some(switch) = &req.switch {
            upgrade::check_refusal(switch, response.status())?;
        }
        Ok(self.response(response, guard, peer.index()))
    }

    /// What a failed attempt means, with its metrics and log line: the client's body at fault,
    /// the keep-alive race, or the server's failure (told to passive health), and whether the
    /// request may go to another server.
    fn classify(
        &self,
        err: hyper_util::client::legacy::Error,
        req: &Forward,
        peer: &Peer,
        race_retry_left: bool,
    ) -> Failure {
        if let Some(refused) = self.body_refused(&err) {
            // The client's body was a bomb, corrupt, too large, too slow or cut off: its
            // fault, not the server's: no failure counted, no retry.
            return Failure::ClientBody(refused.with_source(err));
        }
        let server_metrics = self.servers.get(peer.index());
        let server = address_label(peer.address());
        if race_retry_left && on_reused_connection(&err) {
            // The keep-alive race: the server closed a pooled connection (at its idle timeout)
            // as the request went out on it. RFC 9112 §9.3.1: an idempotent request may then be
            // retried. Not the server's failure, so passive health is not told and the attempt
            // is counted apart. One more try, on a NEW connection to the same server: the
            // pool's next idle connection has been idle as long and may be dead too.
            if let Some(m) = server_metrics {
                m.request(UpstreamOutcome::KeepaliveClosed);
            }
            tracing::info!(upstream = self.group.name(), %server, "a keep-alive connection closed under the request, retrying on a new connection: {}", error_chain(&err));
            return Failure::KeepaliveRace;
        }
        let tls = tls_failure(&err);
        if let Some(m) = server_metrics {
            m.request(match (tls, err.is_connect()) {
                (Some(_), _) => UpstreamOutcome::TlsError,
                (None, true) => UpstreamOutcome::ConnectError,
                (None, false) => UpstreamOutcome::Reset,
            });
        }
        if peer.report_failure(Instant::now()) {
            tracing::warn!(upstream = self.group.name(), %server, "server taken out after {} failure(s)", peer.config().max_fails);
        }
        // The request can go elsewhere if nothing of it can have been acted on: no byte of its
        // body sent (whatever the method), or no body and either the connection never opened
        // or the method is idempotent.
        let retry_safe = match &req.body {
            Some(slot) => slot.lock().map(|b| b.is_some()).unwrap_or(false),
            None => err.is_connect() || req.parts.method.is_idempotent(),
        };
        match tls {
            // The rustls error by its name (`UnknownIssuer`, `NotValidForName`...), which is
            // what to search for or compare with the server's certificate.
            Some(tls) => {
                tracing::warn!(upstream = self.group.name(), %server, retry = retry_safe, "upstream TLS handshake failed: {tls:?}: {}", error_chain(&err))
            }
            None => {
                tracing::warn!(upstream = self.group.name(), %server, retry = retry_safe, "upstream request failed: {}", error_chain(&err))
            }
        }
        Failure::Server {
            error: self.attempt_error(err),
            retry_safe,
        }
    }

    /// Wait for the upstream's response. The response timeout starts once the request body
    /// has been sent: a slow upload is bounded by the idle timeout (per pause, on either side),
    /// not cut off as if the upstream had not answered. Without a body it starts at `sent_at`
    /// (no clock reading of its own).
    async fn await_response<F, T>(
        &self,
        sent: F,
        sent_at: Instant,
        upload: Option<&Upload>,
    ) -> Result<T, Timeout>
    where
        F: Future<Output = T>,
    {
        let mut sent = std::pin::pin!(sent);
        let limit = self.upstream.timeouts.response_header;
        if let Some(upload) = upload {
            tokio::select! {
                // An upstream may answer before it has read the whole body (a 413, say).
                response = &mut sent => return Ok(response),
                finished = upload.finished(self.upstream.timeouts.idle) => {
                    if !finished {
                        return Err(Timeout::Upload);
                    }
                }
            }
        } else if let Some(deadline) = sent_at.checked_add(limit) {
            return tokio::time::timeout_at(deadline.into(), sent)
                .await
                .map_err(|_| Timeout::Response);
        }
        tokio::time::timeout(limit, sent)
            .await
            .map_err(|_| Timeout::Response)
    }

    /// Why the client's request body made `err` (the error of an upstream attempt, or of
    /// reading the body here), as the response to send: a bomb or corrupt coding (413/400), a
    /// body limit (413/408), a stall (408), a body cut off (400). `None`: not the body's fault.
    fn body_refused(&self, err: &(dyn std::error::Error + 'static)) -> Option<Error> {
        if let Some(kind) = decoding_refused(err) {
            let what = if kind == ErrorKind::PayloadTooLarge {
                "the decoded request body exceeds the route's limits"
            } else {
                "the request body is not valid for its Content-Encoding"
            };
            return Some(Error::downstream(kind, what));
        }
        let kind = client_fault(err)?;
        let what = if let Some(limit) = body_limit(err) {
            limit.to_string()
        } else if kind == ErrorKind::RequestTimeout {
            format!(
                "the request body stalled for more than {:?}",
                self.upstream.timeouts.idle
            )
        } else {
            "the request body broke off before its end".to_string()
        };
        Some(Error::downstream(kind, what))
    }

    /// A request body of known length up to [`BUFFER_BODY_UP_TO`] is read whole before an
    /// upstream is picked, as nginx does by default (`proxy_request_buffering on`): the
    /// upstream request then goes out as one write of head and body, instead of a write per
    /// piece of the body as it arrives (seed 000's 40 KB POST arrived in several reads), and an
    /// upstream connection is not held while a slow client uploads. The limits still apply
    /// while it is read (they sit in the body); a body that stalls for the upstream's idle
    /// timeout gets the same 408 as when it streams. Larger bodies, bodies of unknown length
    /// and decoded bodies stream. Trailers, when an HTTP/2 client sends them, are kept.
    async fn buffered(&self, body: Body) -> Result<Body, Error> {
        use http_body::Body as _;
        let Body::Stream(_) = &body else {
            return Ok(body);
        };
        if !body
            .size_hint()
            .exact()
            .is_some_and(|len| len > 0 && len <= BUFFER_BODY_UP_TO)
        {
            return Ok(body);
        }
        let read = IdleTimeout::new(body, self.upstream.timeouts.idle, Side::Downstream, None);
        match body::read_whole(read).await {
            Ok(whole) => Ok(whole),
            Err(err) => Err(self
                .body_refused(err.as_ref())
                .unwrap_or_else(|| {
                    Error::downstream(
                        ErrorKind::BadRequest,
                        "the request body broke off before its end",
                    )
                })
                .with_source(err)),
        }
    }

    /// A streamed body of unknown length that turns out to be empty goes upstream as no body
    /// (see [`body::peek`]).
    async fn settle_empty(&self, method: &http::Method, body: Body) -> Result<Body, Error> {
        use http::Method;
        let wait = matches!(
            *method,
            Method::GET | Method::HEAD | Method::DELETE | Method::OPTIONS | Method::TRACE
        );
        match body::peek(body, wait, self.upstream.timeouts.idle).await {
            Ok(Peeked::Empty) => Ok(Body::Empty),
            Ok(Peeked::Body(body)) => Ok(body),
            Err(err) => Err(Error::downstream(
                ErrorKind::BadRequest,
                "the request body broke off before its end",
            )
            .with_source(err)),
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
        if matches!(body, Body::Empty) {
            // Nothing to decode, but the upstream is promised decoded bodies: an empty one in a
            // coding we decode goes as empty identity, not as empty "gzip" (which a strict
            // gunzip rejects); its Content-Length (0, if sent) stays true. In an unknown coding
            // it is forwarded as it came: there is nothing to refuse.
            if let Ok(Some(_)) = decompress::plan(headers) {
                headers.remove(header::CONTENT_ENCODING);
            }
            return Ok(body);
        }
        let refuse = |err: &dyn std::fmt::Display| {
            if let Some(metrics) = &self.decompress_metrics {
                metrics.outcome(DecompressOutcome::Unsupported);
            }
            let mut page = crate::shared::error_page(
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
                Ok(match &self.decompress_metrics {
                    Some(metrics) => Body::stream(CountedDecode::new(decoded, metrics.clone())),
                    None => Body::stream(decoded),
                })
            }
            Err(err) => Err(Box::new(refuse(&err))),
        }
    }

    fn set_host(&self, req: &mut Request<Body>, peer: &Peer, client_host: Option<&HeaderValue>) {
        let value = match &self.route.host {
            HostHeader::Set(v) => Some(v.clone()),
            HostHeader::Upstream => match peer.host() {
                // Found by DNS: the name it was found under, as a configured `host:port` is
                // sent.
                Some(host) => HeaderValue::from_str(host).ok(),
                None => self.peer_hosts.get(peer.index()).cloned().flatten(),
            },
            // HTTP/2 clients send :authority instead of Host, and an absolute-form target's
            // authority replaces Host; HTTP/1.1 upstreams need it as Host.
            HostHeader::Pass => client_host.cloned(),
        };
        if let Some(v) = value {
            req.headers_mut().insert(header::HOST, v);
        }
    }

    fn response(
        &self,
        response: Response<Incoming>,
        guard: InFlight,
        peer: usize,
    ) -> Response<Body> {
        let (mut parts, body) = response.into_parts();
        headers::remove_hop_by_hop(&mut parts.headers);
        headers::add_via(&mut parts.headers, parts.version);
        headers::apply_edits(&mut parts.headers, &self.route.response_headers);
        let body = IdleTimeout::new(
            body,
            self.upstream.timeouts.idle,
            Side::Upstream,
            Some(guard),
        )
        .reporting(BodyErrorReport {
            group: self.group.clone(),
            servers: self.servers.clone(),
            peer,
        });
        Response::from_parts(parts, Body::stream(body))
    }
}

/// Which wait for the upstream ran out.
enum Timeout {
    /// The upstream stopped taking the request body.
    Upload,
    /// No response head within `response_header` of the request being sent.
    Response,
}

/// The host as the client wrote it, port included: from the target URI when it has an
/// authority (HTTP/2, absolute-form), which then wins over Host (RFC 9112 §3.2.2). A Host
/// header is reused as is (no copy).
fn client_host(parts: &http::request::Parts) -> Option<HeaderValue> {
    match parts.uri.authority() {
        // Userinfo (`user@`) is not part of the host.
        Some(a) if a.as_str().contains('@') => {
            let host = match a.port() {
                Some(port) => format!("{}:{port}", a.host()),
                None => a.host().to_owned(),
            };
            HeaderValue::from_str(&host).ok()
        }
        Some(a) => HeaderValue::from_str(a.as_str()).ok(),
        None => parts.headers.get(header::HOST).cloned(),
    }
}

/// Request bodies of known length up to this size are read whole before they are forwarded
/// ([`ProxyHandler::buffered`]); HAProxy's buffer size, which holds such a request whole too.
const BUFFER_BODY_UP_TO: u64 = 64 * 1024;

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

/// Whether an I/O timeout is among the causes of `err` (the connector's connect timeout).
fn timed_out(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(err);
    while let Some(e) = cause {
        if e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
        {
            return true;
        }
        cause = e.source();
    }
    false
}

/// The status for a request body that failed to decode (413 bomb, 400 corrupt), if that is why
/// the upstream request failed.
fn decoding_refused(err: &(dyn std::error::Error + 'static)) -> Option<ErrorKind> {
    decompress::error_kind(err)
        .filter(|k| matches!(k, ErrorKind::PayloadTooLarge | ErrorKind::BadRequest))
}

/// The route's body limit that cut the request body off, if that is why the upstream request
/// failed.
fn body_limit(
    err: &(dyn std::error::Error + 'static),
) -> Option<crate::shared::request::BodyLimitError> {
    let mut cause = Some(err);
    while let Some(e) = cause {
        if let Some(limit) = e.downcast_ref::<crate::shared::request::BodyLimitError>() {
            return Some(*limit);
        }
        cause = e.source();
    }
    None
}

/// Whether `err` was caused by the client's request body: it stalled or took longer than
/// `body_timeout` (408), grew past `max_body_size` (413) or broke off (400).
fn client_fault(err: &(dyn std::error::Error + 'static)) -> Option<ErrorKind> {
    let mut cause = Some(err);
    while let Some(e) = cause {
        if let Some(limit) = e.downcast_ref::<crate::shared::request::BodyLimitError>() {
            return Some(limit.kind());
        }
        if e.downcast_ref::<Stalled>()
            .is_some_and(|s| s.side == Side::Downstream)
        {
            return Some(ErrorKind::RequestTimeout);
        }
        if e.is::<crate::shared::request::ClientBodyError>() {
            return Some(ErrorKind::BadRequest);
        }
        cause = e.source();
    }
    None
}
