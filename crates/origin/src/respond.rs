//! Response builders shared by every endpoint: JSON bodies, JSON errors, `405` with `Allow`, and
//! HEAD handling.
//!
//! Kept in one place so every endpoint answers errors in the same shape (`{"error":"..."}`) and so
//! the hot path uses only static header values: building a response allocates nothing beyond what
//! `http::Response` itself needs.

use bytes::Bytes;
use http::header::{ALLOW, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE};
use http::{HeaderValue, Method, Response, StatusCode};
use sluice_core::Body;

/// `Content-Type` of every JSON answer (success and error alike).
pub(crate) const APPLICATION_JSON: HeaderValue = HeaderValue::from_static("application/json");
/// `Content-Type` of `/hello`.
pub(crate) const TEXT_PLAIN: HeaderValue = HeaderValue::from_static("text/plain; charset=utf-8");
/// Errors must never be cached by a proxy in front of the origin.
const NO_STORE: HeaderValue = HeaderValue::from_static("no-store");

/// A `200` with a body already in memory. A HEAD request gets the same headers, including the
/// `Content-Length` a GET would carry, and no body: hyper does not send a body for HEAD anyway, but
/// an empty body keeps HTTP/2 from being handed DATA it must not send.
pub(crate) fn full(method: &Method, content_type: HeaderValue, bytes: Bytes) -> Response<Body> {
    let len = bytes.len();
    let mut resp = if method == Method::HEAD {
        let mut resp = Response::new(Body::Empty);
        resp.headers_mut()
            .insert(CONTENT_LENGTH, HeaderValue::from(len));
        resp
    } else {
        Response::new(Body::full(bytes))
    };
    resp.headers_mut().insert(CONTENT_TYPE, content_type);
    resp
}

/// Like [`full`], with a `Cache-Control` value (the date endpoint's `max-age=5`).
pub(crate) fn full_cacheable(
    method: &Method,
    content_type: HeaderValue,
    cache_control: HeaderValue,
    bytes: Bytes,
) -> Response<Body> {
    let mut resp = full(method, content_type, bytes);
    resp.headers_mut().insert(CACHE_CONTROL, cache_control);
    resp
}

/// A JSON error: `{"error": message}` with the given status.
pub(crate) fn error(status: StatusCode, message: &str) -> Response<Body> {
    // Serialising a `&str` cannot fail; the fallback only keeps the lints honest.
    let body = serde_json::to_vec(&serde_json::json!({ "error": message }))
        .unwrap_or_else(|_| br#"{"error":"unknown"}"#.to_vec());
    let mut resp = Response::new(Body::full(body));
    *resp.status_mut() = status;
    resp.headers_mut().insert(CONTENT_TYPE, APPLICATION_JSON);
    resp.headers_mut().insert(CACHE_CONTROL, NO_STORE);
    resp
}

/// `404` for any path the origin does not know.
pub(crate) fn not_found() -> Response<Body> {
    error(StatusCode::NOT_FOUND, "no such endpoint")
}

/// `405` for a known path asked with a method it does not take; `allow` lists the ones it does.
pub(crate) fn method_not_allowed(allow: &'static str) -> Response<Body> {
    let mut resp = error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed");
    resp.headers_mut()
        .insert(ALLOW, HeaderValue::from_static(allow));
    resp
}

/// Whether `method` is GET or HEAD, the read-only endpoints' pair.
pub(crate) fn is_get_or_head(method: &Method) -> bool {
    method == Method::GET || method == Method::HEAD
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body::Body as _;

    #[test]
    fn head_keeps_length_and_drops_body() {
        let resp = full(
            &Method::HEAD,
            APPLICATION_JSON,
            Bytes::from_static(b"[1,2]"),
        );
        assert_eq!(resp.headers()[CONTENT_LENGTH], "5");
        assert!(resp.body().is_end_stream());
        let resp = full(&Method::GET, APPLICATION_JSON, Bytes::from_static(b"[1,2]"));
        assert_eq!(resp.body().size_hint().exact(), Some(5));
    }

    #[test]
    fn error_is_json_with_escaping() {
        let resp = error(StatusCode::BAD_REQUEST, "bad \"x\"");
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
        let bytes = match resp.body() {
            Body::Full(Some(bytes)) => bytes.clone(),
            other => Bytes::from(format!("{other:?}")),
        };
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
        assert_eq!(v["error"], "bad \"x\"");
        let resp = method_not_allowed("GET, HEAD");
        assert_eq!(resp.headers()[ALLOW], "GET, HEAD");
    }
}
