//! `Range` requests answered from a stored full response (RFC 9110 §14, RFC 9111 §3.4's
//! converse): the stored 200 is cut to the requested bytes, 206 with `Content-Range`, or 416
//! when the range cannot be satisfied. The decision (one range, suffixes, `If-Range`) is the
//! static files' own (`sluice_http::static_files::range`), so files and cached responses answer
//! alike; multiple ranges get the whole response.

use std::pin::Pin;
use std::str::FromStr;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::request::Parts;
use http::{HeaderMap, HeaderValue, Method, Response, StatusCode, header};
use http_body::{Frame, SizeHint};
use httpdate::HttpDate;
use sluice_core::{Body, BoxError};
use sluice_http::static_files::if_range_allows_with;
use sluice_http::static_files::range::{RangeDecision, decide, header_value};

/// What a request's `Range` asks of a stored 200 of `len` bytes described by `headers`.
pub(super) fn decision(
    parts: &Parts,
    status: StatusCode,
    headers: &HeaderMap,
    len: u64,
) -> RangeDecision {
    if parts.method != Method::GET
        || status != StatusCode::OK
        || !parts.headers.contains_key(header::RANGE)
    {
        return RangeDecision::Whole;
    }
    let etag = headers.get(header::ETAG).and_then(|v| v.to_str().ok());
    let last_modified = headers
        .get(header::LAST_MODIFIED)
        .and_then(|v| v.to_str().ok())
        .and_then(|s| HttpDate::from_str(s.trim()).ok());
    if !if_range_allows_with(&parts.headers, etag, last_modified) {
        return RangeDecision::Whole;
    }
    decide(header_value(&parts.headers), len)
}

/// Turn `response` (a stored 200 of `len` bytes, body attached) into the 206 or 416 that
/// `decision` says.
pub(super) fn apply(response: &mut Response<Body>, decision: RangeDecision, len: u64) {
    match decision {
        RangeDecision::Whole => {}
        RangeDecision::Unsatisfiable => {
            *response.status_mut() = StatusCode::RANGE_NOT_SATISFIABLE;
            let headers = response.headers_mut();
            if let Ok(value) = HeaderValue::from_str(&format!("bytes */{len}")) {
                headers.insert(header::CONTENT_RANGE, value);
            }
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from(0u64));
            *response.body_mut() = Body::Empty;
        }
        RangeDecision::Partial { start, end } => {
            *response.status_mut() = StatusCode::PARTIAL_CONTENT;
            let count = end - start + 1;
            let headers = response.headers_mut();
            if let Ok(value) = HeaderValue::from_str(&format!("bytes {start}-{end}/{len}")) {
                headers.insert(header::CONTENT_RANGE, value);
            }
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from(count));
            let body = std::mem::take(response.body_mut());
            *response.body_mut() = slice(body, start, count);
        }
    }
}

/// `count` bytes of `body` from `start`: a slice of a buffer in memory (no copy), or a stream
/// that skips and stops.
fn slice(body: Body, start: u64, count: u64) -> Body {
    if let Body::Full(Some(bytes)) = &body {
        let range = usize::try_from(start)
            .ok()
            .zip(usize::try_from(start + count).ok())
            .filter(|&(from, to)| from <= to && to <= bytes.len());
        if let Some((from, to)) = range {
            return Body::full(bytes.slice(from..to));
        }
    }
    Body::stream(Window {
        inner: body,
        skip: start,
        left: count,
    })
}

/// A body that drops its first `skip` bytes and ends after `left` more.
struct Window {
    inner: Body,
    skip: u64,
    left: u64,
}

impl http_body::Body for Window {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        loop {
            if this.left == 0 {
                return Poll::Ready(None);
            }
            let frame = match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => frame,
                other => return other,
            };
            let Ok(mut data) = frame.into_data() else {
                continue;
            };
            let len = data.len() as u64;
            if this.skip >= len {
                this.skip -= len;
                continue;
            }
            let from = usize::try_from(this.skip)
                .unwrap_or(usize::MAX)
                .min(data.len());
            data = data.slice(from..);
            this.skip = 0;
            let take = usize::try_from(this.left)
                .unwrap_or(usize::MAX)
                .min(data.len());
            data.truncate(take);
            this.left -= take as u64;
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.left)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn a_streamed_window_is_exact_across_chunks() {
        let chunks: Vec<Result<Frame<Bytes>, BoxError>> = (0u8..10)
            .map(|i| Ok(Frame::data(Bytes::from(vec![i; 10]))))
            .collect();
        let inner = Body::stream(http_body_util::StreamBody::new(futures_util::stream::iter(
            chunks,
        )));
        let body = slice(inner, 15, 30);
        let bytes = body.collect().await.unwrap().to_bytes();
        let expected: Vec<u8> = (0u8..10)
            .flat_map(|i| vec![i; 10])
            .skip(15)
            .take(30)
            .collect();
        assert_eq!(&bytes[..], &expected[..]);
        let full = slice(Body::full(Bytes::from_static(b"0123456789")), 2, 3);
        assert_eq!(&full.collect().await.unwrap().to_bytes()[..], b"234");
    }
}

#[cfg(test)]
#[path = "range_proptest.rs"]
mod proptests;
