//! Compression dictionaries (RFC 9842) as a pipeline feature: a route's `dictionary` option,
//! compiled once into a [`RouteDictionaries`], run in the response phase just before
//! compression (the one negotiation: a dictionary coding is chosen only where compression would
//! compress the response at all, and only for a client that lists the coding by name).
//! `docs/compression.md` ("Dictionaries") describes the behaviour; the protocol pieces are
//! `sluice_http::dictionary`'s.
//!
//! For a `200` whose whole representation sluice holds (a static file, marked with its
//! [`ContentId`]):
//! 1. **Offer**: when the route's `match` pattern (managed) or a recognised version in the path
//!    (auto) covers the request, the response carries `Use-As-Dictionary` and its body is kept
//!    in the route's [`store`] under its SHA-256, with the origin it was served from.
//! 2. **Delta**: when the request names a kept dictionary (`Available-Dictionary`), lists
//!    `dcz` or `dcb`, may read the result (RFC 9842 §9.3.2), and the dictionary is from the
//!    same origin and covers the URL (its pattern and `match-dest`), the response is sent as a
//!    delta: made once per (response, coding, dictionary), every later request served from the
//!    stored bytes with a `Content-Length`.
//! 3. **Vary**: every response that could have been a delta says `Vary: Accept-Encoding,
//!    Available-Dictionary` (RFC 9842 §6.2), so no cache hands a delta to a client without the
//!    dictionary.
//!
//! Anything else (a response an origin encoded itself, a `206`, a type the route does not
//! compress, a body over `max_size`) is left to compression as before. Responses of an origin
//! that does RFC 9842 itself are never touched: they carry a `Content-Encoding`.

mod store;

use std::future::Future;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt as _;
use sluice_config::{Dictionaries, DictionaryMode};
use sluice_core::{Body, DictionaryCoding};
use sluice_http::compress_policy::{ContentId, add_vary, weaken_etag};
use sluice_http::dictionary::readable::{self, Readability};
use sluice_http::dictionary::{
    AVAILABLE_DICTIONARY, DictionaryHash, MatchPattern, USE_AS_DICTIONARY, versioned,
};

use crate::features::compress::{AcceptEncoding, RouteCompression};
use crate::shared::metrics::dictionary::DictionaryMetrics;
use store::{DeltaKey, Store};
pub use store::{Kept, Tie};

/// The access log's and metrics' `compress` decision for a response sent as a delta.
pub const DECISION: &str = "dictionary";

/// `Sec-Fetch-Dest` (fetch metadata), matched against a dictionary's `match-dest`.
const SEC_FETCH_DEST: &str = "sec-fetch-dest";

/// A route's dictionary settings and store, ready for requests.
pub struct RouteDictionaries {
    mode: Mode,
    codings: Vec<DictionaryCoding>,
    /// Level per coding, by [`DictionaryCoding::index`].
    levels: [i32; 2],
    max_size: u64,
    store: Store,
    metrics: DictionaryMetrics,
}

enum Mode {
    Managed {
        pattern: MatchPattern,
        match_dest: Vec<String>,
        /// The `Use-As-Dictionary` value, made once.
        header: HeaderValue,
    },
    Auto,
}

/// What the request phase keeps of a request on a dictionary route for the response phase (a
/// proxy consumes the request). Boxed in the request context: only these routes pay for it.
#[derive(Debug)]
pub struct DictionaryRequest {
    /// The normal-form path and the query, as the route matched them.
    path: String,
    query: Option<String>,
    /// `http://host:port` or `https://...`: the origin a dictionary is tied to (§2.2.2).
    origin: String,
    /// The dictionary the client holds, when it names one well-formed hash.
    available: Option<DictionaryHash>,
    /// The dictionary coding the client lists, by sluice's preference.
    coding: Option<DictionaryCoding>,
    dest: Option<HeaderValue>,
    readability: Readability,
    origin_header: Option<HeaderValue>,
}

impl RouteDictionaries {
    pub fn new(config: &Dictionaries, metrics: DictionaryMetrics) -> Self {
        let mode = match &config.mode {
            DictionaryMode::Managed {
                pattern,
                match_dest,
                id,
            } => {
                let value = pattern.header_value(match_dest, id.as_deref());
                Mode::Managed {
                    pattern: pattern.clone(),
                    match_dest: match_dest.clone(),
                    // Made of an sf-string of visible ASCII (validated): always a valid value.
                    header: HeaderValue::from_str(&value)
                        .unwrap_or_else(|_| HeaderValue::from_static("match=\"/\"")),
                }
            }
            DictionaryMode::Auto => Mode::Auto,
        };
        let mut levels = [0; 2];
        levels[DictionaryCoding::Dcz.index()] = i32::try_from(config.dcz_level).unwrap_or(19);
        levels[DictionaryCoding::Dcb.index()] = i32::try_from(config.dcb_level).unwrap_or(11);
        Self {
            mode,
            codings: config.codings.clone(),
            levels,
            max_size: config.max_size,
            store: Store::new(config.memory, config.deltas_per_response, metrics.clone()),
            metrics,
        }
    }

    /// What the response phase needs of `req` (arrived over TLS or not).
    pub fn request<B>(&self, req: &Request<B>, tls: bool) -> DictionaryRequest {
        self.request_of(req.uri(), req.headers(), tls)
    }

    fn request_of(&self, uri: &http::Uri, headers: &HeaderMap, tls: bool) -> DictionaryRequest {
        let scheme = if tls { "https" } else { "http" };
        // The authority with its port: origins differ by port (RFC 6454 §4).
        let authority = uri
            .authority()
            .map(http::uri::Authority::as_str)
            .or_else(|| headers.get(header::HOST).and_then(|h| h.to_str().ok()))
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        DictionaryRequest {
            path: uri.path().to_owned(),
            query: uri.query().map(str::to_owned),
            origin: format!("{scheme}://{authority}"),
            available: headers
                .get(&AVAILABLE_DICTIONARY)
                .and_then(DictionaryHash::from_available),
            coding: sluice_http::dictionary::choose(headers, &self.codings),
            dest: headers.get(SEC_FETCH_DEST).cloned(),
            readability: readable::of_request(headers),
            origin_header: headers.get(header::ORIGIN).cloned(),
        }
    }

    /// Offer the response as a dictionary, or answer with a delta; `Some(coding)` when the
    /// response is now a `coding` delta (compression must leave it alone). For responses whose
    /// producer marked them with a [`ContentId`] (static files). See the module docs.
    pub async fn apply(
        &self,
        req: &DictionaryRequest,
        compression: &RouteCompression,
        method: &Method,
        accept: &AcceptEncoding,
        response: &mut Response<Body>,
    ) -> Option<DictionaryCoding> {
        if response.status() != StatusCode::OK || !matches!(*method, Method::GET | Method::HEAD) {
            return None;
        }
        let id = *response.extensions().get::<ContentId>()?;
        // The coding the client gets without a dictionary; `None`: not a response this route
        // compresses (type, size, already encoded, `no-transform`).
        let normal = compression.normal_coding(method, accept, response)?;
        add_vary_available(response.headers_mut());
        let readable = self.readable(req, response.headers());
        let head = *method == Method::HEAD;
        let max_size = self.max_size;
        let decided = {
            let read = body_within_limit(max_size, response);
            self.decide(req, id, head, readable, normal, compression, read)
                .await
        };
        if let Some(offer) = decided.offer {
            response
                .headers_mut()
                .insert(USE_AS_DICTIONARY.clone(), offer);
        }
        let (coding, bytes) = decided.delta?;
        delta_headers(response.headers_mut(), coding, bytes.len());
        *response.body_mut() = if head { Body::Empty } else { Body::full(bytes) };
        Some(coding)
    }

    /// [`Self::apply`] for a response served from a cached proxy route's storage: `id` is the
    /// stored version's identity, `headers` and `len` its stored head and length, `read` reads
    /// its identity body (a future, polled once, when needed). The cache builds the response from what comes
    /// back: `offer` goes on whatever it serves, a `delta` replaces the body.
    #[allow(clippy::too_many_arguments)]
    pub async fn for_stored<Fut>(
        &self,
        parts: &http::request::Parts,
        tls: bool,
        id: ContentId,
        compression: &RouteCompression,
        headers: &HeaderMap,
        len: u64,
        read: Fut,
    ) -> Decided
    where
        Fut: Future<Output = Option<Bytes>>,
    {
        let ok = matches!(parts.method, Method::GET | Method::HEAD);
        if !ok || len > self.max_size || !compression.compressible(StatusCode::OK, headers, len) {
            return Decided::default();
        }
        let req = self.request_of(&parts.uri, &parts.headers, tls);
        let normal = sluice_core::Compression::new(compression.choose_stored(
            &parts.headers,
            StatusCode::OK,
            headers,
            len,
            sluice_core::ContentCoding::Identity,
        ));
        let readable = self.readable(&req, headers);
        let head = parts.method == Method::HEAD;
        self.decide(&req, id, head, readable, normal, compression, read)
            .await
    }

    /// The one decision of both paths: offer (and keep) the response as a dictionary when the
    /// mode covers the request, and make or find the delta the request can use.
    #[allow(clippy::too_many_arguments)]
    async fn decide<Fut>(
        &self,
        req: &DictionaryRequest,
        id: ContentId,
        head: bool,
        readable: bool,
        normal: Option<sluice_core::Compression>,
        compression: &RouteCompression,
        read: Fut,
    ) -> Decided
    where
        Fut: Future<Output = Option<Bytes>>,
    {
        let mut decided = Decided {
            varies: true,
            ..Decided::default()
        };
        if !readable {
            return decided;
        }
        let mut source = Source::new(read);
        decided.offer = self.offer(req, id, &mut source).await;
        let (Some(coding), Some(hash)) = (req.coding, req.available) else {
            return decided;
        };
        let Some(kept) = self.store.dictionary(&hash) else {
            return decided;
        };
        let covered = kept.covers(
            &req.origin,
            &req.path,
            req.query.as_deref(),
            req.dest.as_ref(),
        );
        if !covered {
            return decided;
        }
        let key = DeltaKey { id, coding, hash };
        let delta = if head {
            self.store.peek_delta(&key)
        } else {
            let Some(body) = source.get().await else {
                return decided;
            };
            let level = self.levels[coding.index()];
            let made = self
                .store
                .delta(key, kept, body, level, normal, compression)
                .await;
            made.map_err(|err| tracing::warn!("making a {coding} delta failed: {err}"))
                .ok()
        };
        if let Some(delta) = delta {
            self.metrics.hit(coding);
            self.metrics.saved.inc_by(delta.saved);
            decided.delta = Some((coding, delta.bytes));
        }
        decided
    }

    /// RFC 9842 §9.3.2 for this request and response.
    fn readable(&self, req: &DictionaryRequest, response: &HeaderMap) -> bool {
        readable::allowed_for(req.readability, req.origin_header.as_ref(), response)
    }

    /// Step 1: the `Use-As-Dictionary` value for this response, when the mode covers the
    /// request; its body is kept (read through `source`) unless it is already.
    async fn offer<Fut>(
        &self,
        req: &DictionaryRequest,
        id: ContentId,
        source: &mut Source<Fut>,
    ) -> Option<HeaderValue>
    where
        Fut: Future<Output = Option<Bytes>>,
    {
        let (pattern, match_dest, header) = match &self.mode {
            Mode::Managed {
                pattern,
                match_dest,
                header,
            } => {
                if !pattern.matches(&req.path, req.query.as_deref()) {
                    return None;
                }
                (pattern.clone(), match_dest.clone(), header.clone())
            }
            Mode::Auto => {
                let pattern = versioned::series(&req.path, req.query.as_deref())?;
                let header = HeaderValue::from_str(&pattern.header_value(&[], None)).ok()?;
                (pattern, Vec::new(), header)
            }
        };
        let tie = Tie::new(req.origin.clone(), pattern, match_dest);
        if let Some(tie) = self.store.tie(&id, tie) {
            // Not kept yet (or evicted): keep it, with this tie.
            let body = source.get().await?;
            self.store.keep(id, body, tie).await;
        }
        self.metrics.offered.inc();
        Some(header)
    }
}

/// On a cached request's head: whether it came over TLS (the scheme of the origin a
/// dictionary is tied to).
#[derive(Debug, Clone, Copy)]
pub struct OverTls(pub bool);

/// What [`RouteDictionaries::for_stored`] decided.
#[derive(Debug, Default)]
pub struct Decided {
    /// The `Use-As-Dictionary` value to send, when the response is offered as a dictionary.
    pub offer: Option<HeaderValue>,
    /// The delta to send instead of the body (a HEAD gets its coding and length only).
    pub delta: Option<(DictionaryCoding, Bytes)>,
    /// The response could have been a delta: it must say `Vary: Available-Dictionary`.
    pub varies: bool,
}

/// A body read at most once, when first needed: `read` is a future not yet polled.
struct Source<Fut> {
    read: Option<Fut>,
    body: Option<Bytes>,
}

impl<Fut> Source<Fut>
where
    Fut: Future<Output = Option<Bytes>>,
{
    fn new(read: Fut) -> Self {
        Self {
            read: Some(read),
            body: None,
        }
    }

    async fn get(&mut self) -> Option<Bytes> {
        if let Some(read) = self.read.take() {
            self.body = read.await;
        }
        self.body.clone()
    }
}

/// The response's whole body, when it is at most `max_size`: a body in memory as it is; a
/// streamed one (a file over the memory cache's 256 KiB) read here and put back as a buffer.
/// `None` (the body untouched, or put back) when larger or unreadable.
async fn body_within_limit(max_size: u64, response: &mut Response<Body>) -> Option<Bytes> {
    use http_body::Body as _;
    if let Body::Full(Some(bytes)) = response.body() {
        return (bytes.len() as u64 <= max_size).then(|| bytes.clone());
    }
    let len = response.body().size_hint().exact()?;
    if len > max_size || !matches!(response.body(), Body::Stream(_)) {
        return None;
    }
    let body = std::mem::take(response.body_mut());
    match body.collect().await {
        Ok(collected) => {
            let bytes = collected.to_bytes();
            *response.body_mut() = Body::full(bytes.clone());
            Some(bytes)
        }
        Err(err) => {
            tracing::warn!("reading a response to keep as a dictionary failed: {err}");
            *response.body_mut() = Body::Empty;
            None
        }
    }
}

/// The headers of a delta: its coding and length; `Vary` names both fields it depends on
/// (RFC 9842 §6.2); the `ETag` is weakened (the bytes are not the representation's); no
/// ranges of an encoding made per dictionary.
pub fn delta_headers(headers: &mut HeaderMap, coding: DictionaryCoding, len: usize) {
    headers.insert(
        header::CONTENT_ENCODING,
        HeaderValue::from_static(coding.as_str()),
    );
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    headers.remove(header::ACCEPT_RANGES);
    weaken_etag(headers);
    add_vary(headers);
    add_vary_available(headers);
}

/// Add `Available-Dictionary` to `Vary` unless it (or `*`) is there.
pub fn add_vary_available(headers: &mut HeaderMap) {
    let listed = sluice_http::compress_policy::list_tokens(headers, &header::VARY)
        .any(|t| t == b"*" || t.eq_ignore_ascii_case(b"available-dictionary"));
    if !listed {
        headers.append(
            header::VARY,
            HeaderValue::from_static("Available-Dictionary"),
        );
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
