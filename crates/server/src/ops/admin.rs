//! The admin listener: `GET /metrics` for Prometheus, the live status page (`GET /status`,
//! `GET /status.json`, see [`crate::ops::status`]), cache purge (`PURGE` or `DELETE
//! /cache/ZONE?key=...`, see [`crate::features::cache::purge`]) and a short index at `/`.
//!
//! It is a separate, tiny HTTP/1.1 server and deliberately does not go through the request
//! pipeline: scrapes must not show up in the route metrics or the access log, must keep working
//! when the routes are misconfigured, and must not be reachable from the public listeners. Keep
//! it on a private address (`[admin] address`); it has no authentication.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::features::cache::zones::Zones;
use crate::ops::status::{self, SharedStatus};
use crate::shared::metrics::Metrics;

/// What Prometheus asks for (it lists this type in `Accept`), and what [`Metrics::render`] writes.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// For everyone else (curl, browsers, older scrapers): the classic Prometheus text type, which
/// browsers display instead of downloading. Its parsers read OpenMetrics text as well: `# UNIT`
/// and `# EOF` are comments to them, and no `info`/`stateset` types are used.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A client that sends no request headers within this time is dropped.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a connection may take to finish its response after shutdown starts.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

const INDEX: &str = "sluice admin\n\n/metrics  Prometheus metrics (OpenMetrics text)\n\
/status  live status page (HTML)\n/status.json  the same data as JSON (schema sluice-status/1)\n\
/cache/ZONE?key=KEY  PURGE or DELETE: remove a stored response (?prefix=P: every key starting with P)\n";

/// The cache zones purge requests reach: the current config's, replaced by a reload.
pub type SharedZones = Arc<ArcSwap<Zones>>;

/// What the admin endpoints read.
#[derive(Clone)]
pub struct Sources {
    pub metrics: Arc<Metrics>,
    /// The zones purge requests reach.
    pub zones: SharedZones,
    /// The status page's view of the running server.
    pub status: SharedStatus,
}

/// Serve the admin endpoints on `listener` until `shutdown` becomes true (or its sender is
/// dropped). Returns once it stops accepting; open connections finish their current response.
pub async fn serve(listener: TcpListener, sources: Sources, mut shutdown: watch::Receiver<bool>) {
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .keep_alive(true);
    let mut backoff = Duration::from_millis(5);
    while !*shutdown.borrow_and_update() {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.changed() => break,
        };
        match accepted {
            Ok((stream, _)) => {
                backoff = Duration::from_millis(5);
                tokio::spawn(connection(
                    http.clone(),
                    stream,
                    sources.clone(),
                    shutdown.clone(),
                ));
            }
            Err(err) => {
                // Usually EMFILE: back off instead of spinning, but still notice shutdown.
                tracing::warn!("admin: accept failed: {err}; retrying in {backoff:?}");
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = shutdown.changed() => break,
                }
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
        }
    }
    tracing::debug!("admin: stopped accepting");
}

async fn connection(
    http: http1::Builder,
    stream: TcpStream,
    sources: Sources,
    mut shutdown: watch::Receiver<bool>,
) {
    let service = service_fn(move |req: Request<hyper::body::Incoming>| {
        let sources = sources.clone();
        let zones = sources.zones.load_full();
        async move {
            if req.uri().path().starts_with("/cache/") {
                let (status, text) = crate::features::cache::purge::purge(
                    &zones,
                    req.method(),
                    req.uri().path(),
                    req.uri().query(),
                )
                .await;
                let mut response = Response::new(Full::new(Bytes::from(text)));
                *response.status_mut() = status;
                return Ok::<_, Infallible>(response);
            }
            Ok::<_, Infallible>(respond(&sources, &req))
        }
    });
    let conn = http.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let result = tokio::select! {
        result = conn.as_mut() => result,
        _ = shutdown.changed() => {
            conn.as_mut().graceful_shutdown();
            match tokio::time::timeout(SHUTDOWN_GRACE, conn.as_mut()).await {
                Ok(result) => result,
                Err(_) => return,
            }
        }
    };
    if let Err(err) = result {
        tracing::debug!("admin: connection ended: {err}");
    }
}

/// Route one admin request. Everything here is cheap and synchronous.
fn respond<B>(sources: &Sources, req: &Request<B>) -> Response<Full<Bytes>> {
    let metrics = &sources.metrics;
    let path = req.uri().path();
    if !matches!(path, "/" | "/metrics" | "/status" | "/status.json") {
        return plain(StatusCode::NOT_FOUND, "not found\n");
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, "use GET\n");
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    if path == "/" {
        return plain(StatusCode::OK, INDEX);
    }
    if path == "/status" {
        let (html, csp) = status::page();
        let mut response = Response::new(Full::new(Bytes::from_static(html.as_bytes())));
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        );
        if let Ok(csp) = HeaderValue::from_str(csp) {
            headers.insert(header::CONTENT_SECURITY_POLICY, csp);
        }
        headers.insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        return response;
    }
    if path == "/status.json" {
        let json = status::snapshot(metrics, &sources.status).to_string();
        let mut response = Response::new(Full::new(Bytes::from(json)));
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        // A reading at one instant, like a scrape.
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        return response;
    }
    let content_type = if wants_openmetrics(req.headers()) {
        OPENMETRICS_CONTENT_TYPE
    } else {
        TEXT_CONTENT_TYPE
    };
    // hyper leaves the body out of a HEAD response and keeps its Content-Length.
    let mut response = Response::new(Full::new(Bytes::from(metrics.render())));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    // A scrape is a reading at one instant; no cache in between may replay it.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// Whether the client lists the OpenMetrics text format in `Accept` (Prometheus does).
fn wants_openmetrics(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"))
}

fn plain(status: StatusCode, text: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use http_body_util::{BodyExt, Empty};
    use hyper_util::client::legacy::Client;
    use hyper_util::client::legacy::connect::HttpConnector;
    use hyper_util::rt::TokioExecutor;

    use super::*;

    struct Admin {
        base: String,
        stop: watch::Sender<bool>,
        task: tokio::task::JoinHandle<()>,
        metrics: Arc<Metrics>,
    }

    async fn start() -> Admin {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let metrics = Metrics::new();
        let (stop, rx) = watch::channel(false);
        let task = tokio::spawn(serve(
            listener,
            Sources {
                metrics: metrics.clone(),
                zones: Arc::new(ArcSwap::from_pointee(Zones::default())),
                status: crate::ops::status::Status::new(),
            },
            rx,
        ));
        Admin {
            base,
            stop,
            task,
            metrics,
        }
    }

    async fn fetch(req: Request<Empty<Bytes>>) -> (StatusCode, HeaderMap, String) {
        let client = Client::builder(TokioExecutor::new()).build(HttpConnector::new());
        let response = tokio::time::timeout(Duration::from_secs(10), client.request(req))
            .await
            .unwrap()
            .unwrap();
        let (parts, body) = response.into_parts();
        let body = body.collect().await.unwrap().to_bytes();
        (
            parts.status,
            parts.headers,
            String::from_utf8(body.to_vec()).unwrap(),
        )
    }

    fn get(url: String) -> Request<Empty<Bytes>> {
        Request::get(url).body(Empty::new()).unwrap()
    }

    #[tokio::test]
    async fn serves_metrics_index_and_404() {
        let admin = start().await;
        admin
            .metrics
            .route("home")
            .observe(StatusCode::OK, Duration::from_millis(1), 0, 42);

        let (status, headers, body) = fetch(get(format!("{}/metrics", admin.base))).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(headers[header::CONTENT_TYPE], TEXT_CONTENT_TYPE);
        assert!(
            body.contains(r#"sluice_requests_total{route="home",code="2xx"} 1"#),
            "{body}"
        );
        assert!(body.contains(r#"sluice_response_bytes_total{route="home"} 42"#));

        let (status, _, body) = fetch(get(format!("{}/", admin.base))).await;
        assert_eq!(status, StatusCode::OK);
        assert!(body.contains("/metrics"));

        let (status, _, _) = fetch(get(format!("{}/nope", admin.base))).await;
        assert_eq!(status, StatusCode::NOT_FOUND);

        let post = Request::post(format!("{}/metrics", admin.base))
            .body(Empty::new())
            .unwrap();
        let (status, headers, _) = fetch(post).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(headers[header::ALLOW], "GET, HEAD");
    }

    #[tokio::test]
    async fn prometheus_gets_openmetrics() {
        let admin = start().await;
        // What Prometheus 2.x/3.x sends (abridged).
        let req = Request::get(format!("{}/metrics", admin.base))
            .header(
                header::ACCEPT,
                "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3,*/*;q=0.1",
            )
            .body(Empty::new())
            .unwrap();
        let (status, headers, body) = fetch(req).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(headers[header::CONTENT_TYPE], OPENMETRICS_CONTENT_TYPE);
        assert!(body.ends_with("# EOF\n"));
        assert!(body.contains("sluice_build_info{version="));
    }

    #[tokio::test]
    async fn stops_accepting_on_shutdown() {
        let admin = start().await;
        admin.stop.send(true).unwrap();
        tokio::time::timeout(Duration::from_secs(5), admin.task)
            .await
            .unwrap()
            .unwrap();
    }
}
