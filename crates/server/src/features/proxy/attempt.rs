//! One attempt of a proxied request, outside the `async` block of `ProxyHandler::handle` so that
//! what they build is not kept in its future: the head as the upstream gets it, each attempt's
//! request (the head moved or cloned, the body from the retry slot), and the errors of an
//! attempt that failed or timed out.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use http::{HeaderValue, Request};
use sluice_core::{Body, Error, ErrorKind, Side};
use sluice_http::headers::{self, Hop};
use sluice_upstream::Peer;
use sluice_upstream::health::active::address_label;
use sluice_upstream::proxy_protocol::ClientAddresses;

use super::body::{IdleTimeout, SlotBody, Upload, UploadProgress};
use super::{ProxyHandler, Timeout, empty_parts, rewrite, timed_out, upgrade};
use crate::shared::client::Client;
use crate::shared::metrics::{UpstreamOutcome, UpstreamServerMetrics};

impl ProxyHandler {
    /// The request head as the upstream gets it: origin-form target (rewritten when the route
    /// says so), cookies merged from HTTP/2, hop-by-hop headers out, `Forwarded` /
    /// `X-Forwarded-*` in, the route's edits, the upgrade's headers, HTTP/1.1. Returns the
    /// client's URI when the target was rewritten (`None`: `parts.uri` is still the client's).
    pub(super) fn forwarded_head(
        &self,
        parts: &mut http::request::Parts,
        client: &Client,
        host: Option<HeaderValue>,
        switch: Option<&upgrade::Switch>,
    ) -> Option<http::Uri> {
        // After the client's host was read from the target: only the forwarded request
        // changes, and the client's URI goes back to the caller for the balancer's pick. The
        // upstream client keeps just the path and query of the URI, so origin-form loses
        // nothing.
        let captures = parts
            .extensions
            .get::<crate::shared::request::PathCaptures>()
            .cloned();
        let target = match &captures {
            Some(captures) => rewrite::captured_target(parts, &self.route, captures),
            None => None,
        }
        .or_else(|| rewrite::forwarded_target(parts, &self.route));
        let received =
            target.map(|target| std::mem::replace(&mut parts.uri, http::Uri::from(target)));
        if parts.version == http::Version::HTTP_2 {
            headers::merge_cookies(&mut parts.headers);
        }
        let trailers = headers::accepts_trailers(&parts.headers);
        headers::remove_hop_by_hop(&mut parts.headers);
        if trailers {
            headers::forward_te_trailers(&mut parts.headers, !self.upstream.http2);
        }
        let hop = Hop {
            peer_ip: client.remote.ip(),
            trusted: client.trusted_peer,
            tls: client.tls,
            host,
            version: parts.version,
        };
        headers::add_forwarded(&mut parts.headers, hop);
        headers::apply_edits(&mut parts.headers, &self.route.request_headers);
        if let Some(captures) = &captures {
            rewrite::captured_headers(&mut parts.headers, &self.route, captures);
        }
        if let Some(switch) = switch {
            upgrade::forward_headers(switch, &mut parts.headers);
        }
        parts.version = http::Version::HTTP_11;
        received
    }

    /// One attempt's request to `peer`: the head moved out of `parts` on the last try (cloned
    /// otherwise, for the next one), the body read from the retry slot, and the upload's
    /// progress when there is a body. Built outside the `async` block, so the request is not
    /// kept in its future while the upstream answers.
    pub(super) fn attempt(
        &self,
        parts: &mut http::request::Parts,
        last_try: bool,
        body: Option<&Arc<Mutex<Option<Body>>>>,
        client: &Client,
        peer: &Peer,
        host: Option<&HeaderValue>,
    ) -> (Request<Body>, Option<Arc<Upload>>) {
        let head = if last_try {
            std::mem::replace(parts, empty_parts())
        } else {
            parts.clone()
        };
        let (attempt_body, upload) = match body {
            None => (Body::Empty, None),
            Some(slot) => {
                let upload = Arc::new(Upload::default());
                let body = IdleTimeout::new(
                    SlotBody::new(slot.clone()),
                    self.upstream.timeouts.idle,
                    Side::Downstream,
                    None,
                );
                let body = UploadProgress::new(body, upload.clone());
                (Body::stream(body), Some(upload))
            }
        };
        let mut attempt = Request::from_parts(head, attempt_body);
        if self.upstream.send_proxy_protocol {
            // The connector names this client in its PROXY header (and pools per client).
            attempt.extensions_mut().insert(ClientAddresses {
                source: client.remote,
                destination: client.local,
            });
        }
        self.set_host(&mut attempt, peer, host);
        (attempt, upload)
    }

    /// The error of an attempt that failed before a response: 504 for the connect timeout
    /// (nginx's and RFC 9110 §15.6.5's), 502 otherwise.
    pub(super) fn attempt_error(&self, err: hyper_util::client::legacy::Error) -> Error {
        if err.is_connect() && timed_out(&err) {
            Error::new(
                ErrorKind::GatewayTimeout,
                Side::Upstream,
                format!(
                    "upstream `{}`: no connection within {:?}",
                    self.group.name(),
                    self.upstream.timeouts.connect
                ),
            )
        } else {
            Error::new(
                ErrorKind::BadGateway,
                Side::Upstream,
                format!("upstream `{}` failed", self.group.name()),
            )
        }
        .with_source(err)
    }

    /// An attempt whose upstream did not answer in time: counted, logged, a 504 (not retried).
    pub(super) fn timed_out(
        &self,
        timeout: Timeout,
        peer: &Peer,
        server_metrics: Option<&UpstreamServerMetrics>,
    ) -> Error {
        if let Some(m) = server_metrics {
            m.request(UpstreamOutcome::Timeout);
        }
        peer.report_failure(Instant::now());
        let server = address_label(peer.address());
        let what = match timeout {
            Timeout::Upload => format!(
                "stopped reading the request body for {:?}",
                self.upstream.timeouts.idle
            ),
            Timeout::Response => format!(
                "no response within {:?} of the request",
                self.upstream.timeouts.response_header
            ),
        };
        tracing::warn!(upstream = self.group.name(), %server, "{what}");
        Error::new(
            ErrorKind::GatewayTimeout,
            Side::Upstream,
            format!("upstream `{}` did not answer in time", self.group.name()),
        )
    }
}
