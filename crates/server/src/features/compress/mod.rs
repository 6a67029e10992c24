//! Response compression, a step of the pipeline's response phase: a route's `compress` option,
//! compiled once at start-up into a [`RouteCompression`], applied to whatever response reached
//! that phase (static file, fixed response, proxied response).
//!
//! The decision and the header edits are `sluice_http::compress_policy`'s, the streaming encoder
//! is `sluice_http::compress`'s; this module joins them to the server: [`AcceptEncoding`] is how
//! the request context keeps the request's `Accept-Encoding` past the action (a proxy consumes
//! the request); [`RouteCompression::apply`] wraps the body, counts decisions and bytes, and
//! returns what the context keeps for the log. `docs/compression.md` describes the behaviour.
//!
//! On static routes the compressed forms of small files are kept (`variants.rs`): a response
//! marked with a [`ContentId`](sluice_http::compress_policy::ContentId) is compressed once per
//! coding and then served from memory, decided exactly as on the fly; only how the bytes are
//! produced differs.

mod adaptive;
mod variants;

use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Response, StatusCode};
use http_body::{Body as _, Frame, SizeHint};
use http_body_util::combinators::UnsyncBoxBody;
use prometheus_client::metrics::gauge::Gauge;
use sluice_config::{Compress, CpuShare};
use sluice_core::{Body, BoxError, Compression, ContentCoding};
use sluice_http::compress::{CompressBody, CompressOptions, Encoder};
use sluice_http::compress_policy::{
    self, CompressPolicy, Decision, NotModifiedOf, Precompressed, SkipReason, add_vary,
    apply_headers, weaken_etag,
};

use crate::shared::cpu::{CpuLoad, CpuWatcher};
use crate::shared::metrics::{CompressBytes, CompressMetrics};
pub use adaptive::CALM_SAMPLES;
use adaptive::{Adaptive, Step};
pub use variants::STORE_BYTES as VARIANT_STORE_BYTES;
use variants::Variants;

/// A route's compression settings, ready for requests: nothing here is built per request.
pub struct RouteCompression {
    policy: CompressPolicy,
    /// Level per coding, indexed by [`Compression::index`]; `None` is the algorithm's default.
    levels: [Option<i32>; Compression::ALL.len()],
    flush_delay: Duration,
    metrics: CompressMetrics,
    /// Variants of static files kept in memory; `None` on other routes.
    variants: Option<Variants>,
    /// The CPU-adaptive controller, on routes with `max_cpu`.
    adaptive: Option<Arc<Adaptive>>,
}

/// [`Outcome::decision`] of a response compressed on the fly.
pub const COMPRESSED: &str = "compressed";

/// What the access log says about compression for one response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// `compressed` or a [`SkipReason`] string.
    pub decision: &'static str,
    /// The response's content coding as sent, when it has one sluice knows.
    pub encoding: Option<&'static str>,
}

impl RouteCompression {
    pub fn new(config: &Compress, metrics: CompressMetrics) -> Self {
        let mut policy = CompressPolicy {
            offered: config.algorithms.iter().map(|&a| a.coding()).collect(),
            min_length: config.min_length,
            ..CompressPolicy::default()
        };
        if let Some(types) = &config.types {
            policy.mime_types.clone_from(types);
        }
        let levels = Compression::ALL.map(|algorithm| {
            config
                .levels
                .get(algorithm)
                .and_then(|l| i32::try_from(l).ok())
        });
        Self {
            policy,
            levels,
            flush_delay: config.flush_delay,
            metrics,
            variants: None,
            adaptive: None,
        }
    }

    /// Adapt on-the-fly compression to the process's CPU share sampled by `cpu` (`max_cpu`,
    /// `adaptive.rs`); `gauge` gives the level gauge of an algorithm.
    pub fn adapt_to_cpu(
        mut self,
        max_cpu: CpuShare,
        cpu: &CpuLoad,
        gauge: impl Fn(Compression) -> Gauge,
    ) -> Self {
        let algorithms: Vec<Compression> = self
            .policy
            .offered
            .iter()
            .filter_map(|&coding| Compression::new(coding))
            .collect();
        let adaptive = Arc::new(Adaptive::new(max_cpu, &algorithms, &self.levels, gauge));
        let watcher: Weak<dyn CpuWatcher> = Arc::downgrade(&adaptive) as Weak<dyn CpuWatcher>;
        cpu.watch(watcher);
        self.adaptive = Some(adaptive);
        self
    }

    /// Keep up to `max_bytes` of compressed variants of responses marked with a
    /// [`ContentId`](sluice_http::compress_policy::ContentId) (a static route's files); 0
    /// keeps none.
    pub fn keep_variants(mut self, max_bytes: u64) -> Self {
        self.variants = Variants::new(max_bytes);
        self
    }

    /// Decide for `response`, edit its headers and wrap its body accordingly (or answer it from
    /// a stored variant, which may mean making that variant first); count and return the
    /// outcome. `method` and `accept` are the request's.
    pub async fn apply(
        &self,
        method: &Method,
        accept: &AcceptEncoding,
        response: &mut Response<Body>,
    ) -> Outcome {
        let decision = self.decide(method, accept, response);
        let decision = match decision {
            Decision::Compress(encoding) => self.compress(method, encoding, response).await,
            Decision::Skip(SkipReason::Status) if response.status() == StatusCode::NOT_MODIFIED => {
                self.not_modified(accept, response);
                decision
            }
            Decision::Skip(_) => {
                if decision.wants_vary() || decision == Decision::Skip(SkipReason::Precompressed) {
                    add_vary(response.headers_mut());
                }
                decision
            }
        };
        self.metrics.decided(decision);
        Outcome {
            decision: decision_str(decision),
            encoding: sent_encoding(response.headers()),
        }
    }

    /// The coding a stored response is served in to a request with `req_headers` (the cache's
    /// compress-once variants): the stored coding itself when the client accepts it, else what
    /// this route would compress the identity representation to, else identity. The same
    /// rules as on the fly (type, `min_length`, negotiation, server preference on ties), so a
    /// route answers alike with and without a cache.
    pub fn choose_stored(
        &self,
        req_headers: &HeaderMap,
        status: StatusCode,
        headers: &HeaderMap,
        len: u64,
        stored: ContentCoding,
    ) -> ContentCoding {
        let accept = || {
            req_headers
                .get_all(header::ACCEPT_ENCODING)
                .iter()
                .map(HeaderValue::as_bytes)
        };
        if stored != ContentCoding::Identity && accepts(req_headers, stored) {
            return stored;
        }
        let transformable = status == StatusCode::OK
            && !compress_policy::list_tokens(headers, &header::CACHE_CONTROL)
                .any(|t| t.eq_ignore_ascii_case(b"no-transform"));
        if !transformable {
            return stored;
        }
        match compress_policy::decide_representation(
            &self.policy,
            accept(),
            headers.get(header::CONTENT_TYPE),
            Some(len),
        ) {
            Decision::Compress(coding) => coding,
            Decision::Skip(_) => ContentCoding::Identity,
        }
    }

    /// For dictionary compression (`features::dictionary`), which runs just before this one:
    /// `None` when this route would not compress `response` for any client (status, range,
    /// an encoding already, `no-transform`, type, size); otherwise the algorithm this request
    /// would get without a dictionary (`Some(None)`: identity, the client accepts none).
    pub fn normal_coding(
        &self,
        method: &Method,
        accept: &AcceptEncoding,
        response: &Response<Body>,
    ) -> Option<Option<Compression>> {
        let headers = response.headers();
        let len = response.body().size_hint().exact();
        if !self.compressible_with(method, response.status(), headers, len) {
            return None;
        }
        let this = compress_policy::decide_with(
            &self.policy,
            method,
            accept.lines(),
            response.status(),
            headers,
            len,
        );
        Some(match this {
            Decision::Compress(coding) => Compression::new(coding),
            Decision::Skip(_) => None,
        })
    }

    /// Whether this route compresses a GET's response with `status`, `headers` and `len` for
    /// some client (status, range, an encoding already, `no-transform`, type, size).
    pub fn compressible(&self, status: StatusCode, headers: &HeaderMap, len: u64) -> bool {
        self.compressible_with(&Method::GET, status, headers, Some(len))
    }

    fn compressible_with(
        &self,
        method: &Method,
        status: StatusCode,
        headers: &HeaderMap,
        len: Option<u64>,
    ) -> bool {
        const ANY: [&[u8]; 1] = [b"zstd, br, gzip, deflate"];
        let any = compress_policy::decide_with(&self.policy, method, ANY, status, headers, len);
        matches!(any, Decision::Compress(_))
    }

    /// The route's level for `algorithm` (`None`: the algorithm's default).
    pub fn level(&self, algorithm: Compression) -> Option<i32> {
        self.levels[algorithm.index()]
    }

    /// A 304 repeats the `ETag` and `Vary` its 200 had (RFC 9110 §15.4.5): decide for that 200
    /// from what its producer left on the 304 (static files), else from the 304's own
    /// `Content-Type`. Knowing neither, only `Vary` is added: on a compress route the 200 may
    /// well have been compressed, and an extra `Vary` costs a cache a miss, not a wrong answer.
    fn not_modified(&self, accept: &AcceptEncoding, response: &mut Response<Body>) {
        let of = response.extensions().get::<NotModifiedOf>();
        let content_type = of
            .map(|of| &of.content_type)
            .or_else(|| response.headers().get(header::CONTENT_TYPE));
        let Some(content_type) = content_type else {
            add_vary(response.headers_mut());
            return;
        };
        let len = of.map(|of| of.len);
        let as_200 = compress_policy::decide_representation(
            &self.policy,
            accept.lines(),
            Some(content_type),
            len,
        );
        if as_200.wants_vary() {
            add_vary(response.headers_mut());
        }
        if matches!(as_200, Decision::Compress(_)) {
            weaken_etag(response.headers_mut());
        }
    }

    fn decide(
        &self,
        method: &Method,
        accept: &AcceptEncoding,
        response: &Response<Body>,
    ) -> Decision {
        if response.extensions().get::<Precompressed>().is_some() {
            return Decision::Skip(SkipReason::Precompressed);
        }
        // A body held in memory has a length even without `Content-Length`. A fixed response
        // or an error page is the same buffer for GET and HEAD (hyper drops it from a HEAD), so
        // it decides alike for both; only an empty HEAD body says nothing about the GET's.
        let body_len = match response.body() {
            Body::Full(_) => response.body().size_hint().exact(),
            Body::Empty if method != Method::HEAD => Some(0),
            _ => None,
        };
        compress_policy::decide_with(
            &self.policy,
            method,
            accept.lines(),
            response.status(),
            response.headers(),
            body_len,
        )
    }

    /// Compress the response's body with `encoding`, from a stored variant when it qualifies;
    /// HEAD gets the headers only (RFC 9110 §9.3.2). Returns the decision as carried out.
    async fn compress(
        &self,
        method: &Method,
        encoding: ContentCoding,
        response: &mut Response<Body>,
    ) -> Decision {
        let Some(algorithm) = Compression::new(encoding) else {
            // Negotiation never picks identity for `Compress`; stay correct if it ever did.
            add_vary(response.headers_mut());
            return Decision::Skip(SkipReason::NotAccepted);
        };
        // Read once: this response keeps its level however the CPU moves while it streams.
        let step = self
            .adaptive
            .as_ref()
            .map_or(Step::Configured, |adaptive| adaptive.step());
        let make = step != Step::Identity;
        match self.stored(method, algorithm, response, make).await {
            Some(Ok(())) => return Decision::Compress(encoding),
            Some(Err(err)) => {
                // As when no encoder can be made: identity is always acceptable.
                tracing::warn!("compressing a {} variant failed: {err}", encoding.as_str());
                add_vary(response.headers_mut());
                return Decision::Skip(SkipReason::NotAccepted);
            }
            None => {}
        }
        if step == Step::Identity {
            // Identity for now, the coding again once the load falls: the choice still depends
            // on `Accept-Encoding`, so caches must keep the variants apart (RFC 9110 §12.5.5).
            add_vary(response.headers_mut());
            return Decision::Skip(SkipReason::Cpu);
        }
        if method == Method::HEAD {
            apply_headers(response.headers_mut(), encoding);
            // hyper derives a HEAD's `Content-Length` from an in-memory body: that would be
            // the identity length, while the GET is sent without one (RFC 9110 §9.3.2).
            *response.body_mut() = Body::Empty;
            return Decision::Compress(encoding);
        }
        let level = match step {
            Step::Fastest => Some(adaptive::fastest_level(algorithm)),
            Step::Configured | Step::Identity => self.levels[algorithm.index()],
        };
        let encoder = match Encoder::new(algorithm, level) {
            Ok(encoder) => encoder,
            Err(err) => {
                // Only a zstd context that cannot be allocated gets here; identity is always
                // acceptable, so the client still gets its response.
                tracing::warn!("creating a {} encoder failed: {err}", encoding.as_str());
                add_vary(response.headers_mut());
                return Decision::Skip(SkipReason::NotAccepted);
            }
        };
        apply_headers(response.headers_mut(), encoding);
        let options = CompressOptions {
            flush_delay: self.flush_delay,
            // Server-sent events are flushed per event, whatever the flush delay.
            event_stream: sluice_http::headers::is_event_stream(response.headers()),
        };
        let inner = std::mem::take(response.body_mut());
        let metered = Metered {
            body: CompressBody::new(inner, encoder, options),
            sent: 0,
            bytes: Some(self.metrics.bytes(algorithm)),
        };
        // `Body::Stream` directly: `Body::stream` would add an error-mapping layer for nothing.
        *response.body_mut() = Body::Stream(UnsyncBoxBody::new(metered));
        Decision::Compress(encoding)
    }
}

/// Whether a request with `req_headers` takes a body already in `coding` (negotiated as if
/// `coding` were the only one on offer).
pub fn accepts(req_headers: &HeaderMap, coding: ContentCoding) -> bool {
    let lines = req_headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .map(HeaderValue::as_bytes);
    sluice_http::encoding::negotiate_fields(lines, &[coding])
        == sluice_http::encoding::Negotiated::Use(coding)
}

/// The request's `Accept-Encoding` lines, kept in the request context for the response phase.
/// Cloning a `HeaderValue` shares its bytes, so the usual single line costs no allocation.
#[derive(Debug, Default)]
pub enum AcceptEncoding {
    #[default]
    Absent,
    One(HeaderValue),
    /// Several lines form one list (RFC 9110 §5.3); rare.
    Many(Vec<HeaderValue>),
}

impl AcceptEncoding {
    pub fn of(headers: &HeaderMap) -> Self {
        let mut lines = headers.get_all(header::ACCEPT_ENCODING).iter();
        match (lines.next(), lines.next()) {
            (None, _) => AcceptEncoding::Absent,
            (Some(one), None) => AcceptEncoding::One(one.clone()),
            _ => AcceptEncoding::Many(
                headers
                    .get_all(header::ACCEPT_ENCODING)
                    .iter()
                    .cloned()
                    .collect(),
            ),
        }
    }

    pub fn lines(&self) -> impl Iterator<Item = &[u8]> {
        let lines: &[HeaderValue] = match self {
            AcceptEncoding::Absent => &[],
            AcceptEncoding::One(one) => std::slice::from_ref(one),
            AcceptEncoding::Many(many) => many,
        };
        lines.iter().map(HeaderValue::as_bytes)
    }
}

fn decision_str(decision: Decision) -> &'static str {
    match decision {
        Decision::Compress(_) => COMPRESSED,
        Decision::Skip(reason) => reason.as_str(),
    }
}

/// The single content coding of the response as sent, if sluice knows its token.
fn sent_encoding(headers: &HeaderMap) -> Option<&'static str> {
    let token = headers
        .get(header::CONTENT_ENCODING)?
        .as_bytes()
        .trim_ascii();
    ContentCoding::from_token_bytes(token)
        .map(ContentCoding::as_str)
        .or_else(|| sluice_core::DictionaryCoding::from_token_bytes(token).map(|c| c.as_str()))
}

/// A compressed body that adds its bytes in and out and its encoder time to the algorithm's
/// counters once, when it ends or is dropped (the client went away): three atomic adds per
/// response, none per frame.
struct Metered {
    body: CompressBody<Body>,
    sent: u64,
    bytes: Option<CompressBytes>,
}

impl Metered {
    fn finish(&mut self) {
        if let Some(bytes) = self.bytes.take() {
            bytes.add(self.body.bytes_in(), self.sent, self.body.encode_time());
        }
    }
}

impl http_body::Body for Metered {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.body).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.sent += data.len() as u64;
                }
            }
            Poll::Ready(None | Some(Err(_))) => this.finish(),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Metered {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    fn route() -> RouteCompression {
        RouteCompression::new(
            &Compress::default(),
            crate::shared::metrics::Metrics::new().compress("r"),
        )
    }

    fn text_response(body: impl Into<Body>) -> Response<Body> {
        let mut response = Response::new(body.into());
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        response
    }

    fn accept(value: &'static str) -> AcceptEncoding {
        let mut headers = HeaderMap::new();
        headers.append(header::ACCEPT_ENCODING, HeaderValue::from_static(value));
        AcceptEncoding::of(&headers)
    }

    #[tokio::test]
    async fn a_large_body_is_compressed_and_decodes() {
        let text = "hello compression ".repeat(100);
        let mut response = text_response(text.clone());
        let outcome = route()
            .apply(&Method::GET, &accept("gzip"), &mut response)
            .await;
        assert_eq!(
            outcome,
            Outcome {
                decision: "compressed",
                encoding: Some("gzip")
            }
        );
        assert_eq!(response.headers()[header::VARY], "Accept-Encoding");
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let mut decoded = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&body[..]), &mut decoded)
            .unwrap();
        assert_eq!(decoded, text);
    }

    #[tokio::test]
    async fn a_tiny_body_in_memory_is_too_small_even_without_content_length() {
        let mut response = text_response("tiny");
        let outcome = route()
            .apply(&Method::GET, &accept("gzip"), &mut response)
            .await;
        assert_eq!(outcome.decision, "too_small");
        assert_eq!(outcome.encoding, None);
        assert_eq!(response.headers()[header::VARY], "Accept-Encoding");
    }

    #[tokio::test]
    async fn head_gets_the_headers_of_get_without_an_encoder() {
        let mut response = Response::new(Body::Empty);
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("5000"));
        let outcome = route()
            .apply(&Method::HEAD, &accept("br"), &mut response)
            .await;
        assert_eq!(outcome.decision, "compressed");
        assert_eq!(response.headers()[header::CONTENT_ENCODING], "br");
        assert!(!response.headers().contains_key(header::CONTENT_LENGTH));
        assert!(matches!(response.body(), Body::Empty));
    }

    #[tokio::test]
    async fn a_304_gets_vary_and_several_accept_encoding_lines_count() {
        let mut response = Response::new(Body::Empty);
        *response.status_mut() = StatusCode::NOT_MODIFIED;
        let outcome = route()
            .apply(&Method::GET, &AcceptEncoding::Absent, &mut response)
            .await;
        assert_eq!(outcome.decision, "status");
        assert_eq!(response.headers()[header::VARY], "Accept-Encoding");

        let mut headers = HeaderMap::new();
        headers.append(
            header::ACCEPT_ENCODING,
            HeaderValue::from_static("gzip;q=0.1"),
        );
        headers.append(header::ACCEPT_ENCODING, HeaderValue::from_static("zstd"));
        let accept = AcceptEncoding::of(&headers);
        assert!(matches!(accept, AcceptEncoding::Many(_)));
        let mut response = text_response("x");
        response
            .headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from_static("5000"));
        let outcome = route().apply(&Method::GET, &accept, &mut response).await;
        assert_eq!(outcome.encoding, Some("zstd"));
    }

    #[tokio::test]
    async fn a_304_with_a_type_gets_the_etag_and_vary_of_its_200() {
        async fn not_modified(content_type: &'static str) -> Response<Body> {
            let mut response = Response::new(Body::Empty);
            *response.status_mut() = StatusCode::NOT_MODIFIED;
            let headers = response.headers_mut();
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
            headers.insert(header::ETAG, HeaderValue::from_static("\"v1\""));
            route()
                .apply(&Method::GET, &accept("gzip"), &mut response)
                .await;
            response
        }
        let text = not_modified("text/plain").await;
        assert_eq!(text.headers()[header::ETAG], "W/\"v1\"");
        assert_eq!(text.headers()[header::VARY], "Accept-Encoding");
        let image = not_modified("image/png").await;
        assert_eq!(image.headers()[header::ETAG], "\"v1\"");
        assert!(!image.headers().contains_key(header::VARY));
    }
}
