//! `forward_auth`: before the action, ask an auth service whether the request may go on
//! (nginx's `auth_request`, Caddy's `forward_auth`, Traefik's ForwardAuth).
//!
//! The subrequest is a GET of the request's own target (or the configured `uri`) with the
//! client's headers (cookies, `Authorization`) and no body, plus `X-Forwarded-Method` and
//! `X-Forwarded-Uri` saying what the client asked for (the names Traefik and Caddy use). It
//! goes through the auth upstream group like any proxied request: pooled connections, TLS,
//! health, balancing, `X-Forwarded-For`.
//!
//! - 2xx: the request goes on, with the `copy_headers` of the answer set on it (replacing any
//!   the client sent, so a client cannot forge `X-User`).
//! - 401 / 403: that answer, head and body, goes to the client (a login page, a challenge).
//! - Anything else, no answer, or no answer within `timeout`: 500, and a warning in the log
//!   that says which (the client is not told more).

use std::sync::Arc;
use std::time::Duration;

use http::{HeaderName, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::BodyExt as _;
use prometheus_client::metrics::counter::Counter;
use sluice_config::ForwardAuth;
use sluice_core::Body;

use crate::features::proxy::{ProxyHandler, UpstreamTiming};
use crate::shared::client::Client;

const X_FORWARDED_METHOD: HeaderName = HeaderName::from_static("x-forwarded-method");
const X_FORWARDED_URI: HeaderName = HeaderName::from_static("x-forwarded-uri");
/// Request headers the subrequest does not carry: it has no body (its framing headers would
/// lie, and `Expect` would wait for one), and it is its own exchange, never an upgrade or a
/// tunnel (the connection-specific fields of RFC 9110 §7.6.1 are the client's hop's).
const NOT_COPIED: [HeaderName; 8] = [
    http::header::CONTENT_LENGTH,
    http::header::TRANSFER_ENCODING,
    http::header::EXPECT,
    http::header::CONNECTION,
    http::header::UPGRADE,
    http::header::TE,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
];
/// Most bytes of a 2xx answer's body read (to give its connection back to the pool); a longer
/// one is dropped with its connection.
const DRAIN_LIMIT: usize = 64 * 1024;

/// Indexes into the outcome counters.
const ALLOWED: usize = 0;
const DENIED: usize = 1;
const ERROR: usize = 2;
const TIMEOUT: usize = 3;

pub enum Outcome {
    Allowed,
    /// The auth service's 401 or 403, as it sent it.
    Denied(Response<Body>),
    /// 500: the auth service failed.
    Failed(Response<Body>),
}

pub struct ForwardAuthCheck {
    proxy: Arc<ProxyHandler>,
    uri: Option<String>,
    copy_headers: Vec<HeaderName>,
    timeout: Duration,
}

impl ForwardAuthCheck {
    pub fn new(config: &ForwardAuth, proxy: Arc<ProxyHandler>) -> Self {
        Self {
            proxy,
            uri: config.uri.clone(),
            copy_headers: config.copy_headers.clone(),
            timeout: config.timeout,
        }
    }

    pub async fn check<B>(
        &self,
        client: Client,
        req: &mut Request<B>,
        counters: &[Counter; 4],
    ) -> Outcome {
        let target = req
            .uri()
            .path_and_query()
            .map_or("/", |pq| pq.as_str())
            .to_owned();
        let mut sub = Request::new(Body::Empty);
        *sub.method_mut() = Method::GET;
        *sub.uri_mut() = match self.uri.as_deref().unwrap_or(&target).parse() {
            Ok(uri) => uri,
            Err(_) => return failed(counters, ERROR, "the subrequest's target does not parse"),
        };
        *sub.version_mut() = req.version();
        let headers = sub.headers_mut();
        for (name, value) in req.headers() {
            if !NOT_COPIED.contains(name) {
                headers.append(name.clone(), value.clone());
            }
        }
        headers.insert(
            X_FORWARDED_METHOD,
            HeaderValue::from_str(req.method().as_str()).unwrap_or(HeaderValue::from_static("GET")),
        );
        if let Ok(uri) = HeaderValue::from_str(&target) {
            headers.insert(X_FORWARDED_URI, uri);
        }
        let mut timing = UpstreamTiming::default();
        let answer =
            tokio::time::timeout(self.timeout, self.proxy.handle(client, sub, &mut timing));
        let response = match answer.await {
            Err(_) => {
                let why = format!("forward_auth: no answer within {:?}", self.timeout);
                return failed(counters, TIMEOUT, &why);
            }
            Ok(Err(err)) => return failed(counters, ERROR, &format!("forward_auth: {err}")),
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if status.is_success() {
            counters[ALLOWED].inc();
            let (parts, body) = response.into_parts();
            for name in &self.copy_headers {
                req.headers_mut().remove(name);
                for value in parts.headers.get_all(name) {
                    req.headers_mut().append(name.clone(), value.clone());
                }
            }
            // Read the (short) body so the connection goes back to the pool.
            let _ = http_body_util::Limited::new(body, DRAIN_LIMIT)
                .collect()
                .await;
            return Outcome::Allowed;
        }
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            counters[DENIED].inc();
            tracing::debug!(%status, "forward_auth: denied");
            return Outcome::Denied(response);
        }
        failed(
            counters,
            ERROR,
            &format!("forward_auth: the auth service answered {status}, neither 2xx nor 401/403"),
        )
    }
}

fn failed(counters: &[Counter; 4], which: usize, why: &str) -> Outcome {
    counters[which].inc();
    tracing::warn!("{why}");
    Outcome::Failed(crate::shared::error_page(
        StatusCode::INTERNAL_SERVER_ERROR,
        None,
    ))
}
