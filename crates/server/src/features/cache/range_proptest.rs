//! Property tests of ranges answered from a stored response: for any stored body (in memory or
//! streamed in any chunking) and any `Range` value, the 206 carries exactly the bytes its
//! `Content-Range` names and a `Content-Length` that counts them (RFC 9110 §14.4, §15.3.7), a 416
//! says `bytes */len` with no body (§15.5.17), and anything else leaves the 200 untouched.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body::{Body as _, Frame};
use proptest::prelude::*;
use proptest::test_runner::Config;
use sluice_core::{Body, BoxError};

use super::{apply, decision};

/// proptest's configuration with `default_cases` unless `PROPTEST_CASES` is set (docs/testing.md).
fn cases(default_cases: u32) -> Config {
    let mut config = Config::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = default_cases;
    }
    config
}

/// The stored body: one buffer, or a stream cut into chunks whose sizes cycle through `sizes`.
fn stored_body(data: &[u8], streamed: bool, sizes: &[usize]) -> Body {
    if !streamed {
        return Body::full(Bytes::copy_from_slice(data));
    }
    let mut chunks: Vec<Result<Frame<Bytes>, BoxError>> = Vec::new();
    let (mut rest, mut i) = (data, 0);
    while !rest.is_empty() {
        let n = sizes[i % sizes.len()].clamp(1, rest.len());
        chunks.push(Ok(Frame::data(Bytes::copy_from_slice(&rest[..n]))));
        rest = &rest[n..];
        i += 1;
    }
    Body::stream(http_body_util::StreamBody::new(futures_util::stream::iter(
        chunks,
    )))
}

/// Every byte of an always-ready body.
fn collect(mut body: Body) -> Vec<u8> {
    let mut cx = Context::from_waker(Waker::noop());
    let mut out = Vec::new();
    loop {
        match Pin::new(&mut body).poll_frame(&mut cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    out.extend_from_slice(&data);
                }
            }
            Poll::Ready(None) => return out,
            Poll::Ready(Some(Err(err))) => panic!("body failed: {err}"),
            Poll::Pending => panic!("an always-ready body pended"),
        }
    }
}

fn range_value() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u64..2100, 0u64..2100).prop_map(|(a, b)| format!("bytes={a}-{b}")),
        (0u64..2100).prop_map(|a| format!("bytes={a}-")),
        (0u64..2100).prop_map(|n| format!("bytes=-{n}")),
        "(bytes|BYTES|items)=[0-9,\\- ]{0,12}",
        "\\PC{0,16}",
    ]
}

proptest! {
    #![proptest_config(cases(1000))]

    #[test]
    fn a_range_of_a_stored_response_is_exactly_its_bytes(
        data in proptest::collection::vec(any::<u8>(), 0..2000),
        streamed in any::<bool>(),
        sizes in proptest::collection::vec(1usize..300, 1..4),
        range in range_value(),
    ) {
        let Ok(value) = HeaderValue::from_str(&range) else {
            return Ok(());
        };
        let (parts, ()) = Request::builder()
            .method(Method::GET)
            .header(header::RANGE, value)
            .body(())
            .unwrap()
            .into_parts();
        let len = data.len() as u64;
        let decision = decision(&parts, StatusCode::OK, &HeaderMap::new(), len);
        let mut response = Response::new(stored_body(&data, streamed, &sizes));
        response
            .headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from(len));
        apply(&mut response, decision, len);

        let status = response.status();
        let headers = response.headers().clone();
        let body = collect(std::mem::take(response.body_mut()));
        let text = |name| headers.get(name).map(|v: &HeaderValue| v.to_str().unwrap().to_owned());
        match status {
            StatusCode::OK => {
                prop_assert_eq!(body, data);
                prop_assert_eq!(text(header::CONTENT_RANGE), None);
            }
            StatusCode::PARTIAL_CONTENT => {
                let content_range = text(header::CONTENT_RANGE).unwrap();
                let (span, total) = content_range
                    .strip_prefix("bytes ")
                    .and_then(|r| r.split_once('/'))
                    .unwrap();
                let (first, last) = span.split_once('-').unwrap();
                let (first, last): (usize, usize) = (first.parse().unwrap(), last.parse().unwrap());
                prop_assert_eq!(total.parse::<u64>().unwrap(), len);
                prop_assert!(first <= last && last < data.len(), "{content_range}");
                prop_assert_eq!(&body[..], &data[first..=last]);
                prop_assert_eq!(text(header::CONTENT_LENGTH), Some(body.len().to_string()));
            }
            StatusCode::RANGE_NOT_SATISFIABLE => {
                prop_assert_eq!(text(header::CONTENT_RANGE), Some(format!("bytes */{len}")));
                prop_assert!(body.is_empty());
                prop_assert_eq!(text(header::CONTENT_LENGTH), Some("0".to_owned()));
            }
            other => return Err(TestCaseError::fail(format!("status {other}"))),
        }
    }
}
