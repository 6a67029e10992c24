//! Reading request bodies: the declared length, and a bounded read for small form bodies.
//!
//! Only `/what-is-my-name` reads a body whole, and it must not let a client make the origin buffer
//! an unbounded amount: the read stops (and the request gets `413`) as soon as the limit is crossed,
//! whether or not the client declared a length. `/reqinfo` never buffers; it streams (see
//! `reqinfo.rs`).

use std::pin::pin;

use bytes::Bytes;
use http::HeaderMap;
use http::header::CONTENT_LENGTH;
use http_body_util::BodyExt;
use sluice_core::BoxError;

/// Why a bounded read stopped.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// More than the limit arrived (or was announced).
    TooLarge,
    /// The body failed mid-way (the client went away, a malformed chunk...).
    Body(BoxError),
}

/// The `Content-Length` header as a number; `None` when absent, repeated with different values, or
/// not a number (hyper rejects those on HTTP/1.1 already; this is only what the handler sees).
pub(crate) fn content_length(headers: &HeaderMap) -> Option<u64> {
    let mut values = headers.get_all(CONTENT_LENGTH).iter();
    let first = values.next()?;
    if values.any(|other| other != first) {
        return None;
    }
    first.to_str().ok()?.trim().parse().ok()
}

/// Read the whole body, failing with [`ReadError::TooLarge`] once more than `limit` bytes arrive.
pub(crate) async fn read_limited<B>(body: B, limit: usize) -> Result<Bytes, ReadError>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let mut body = pin!(body);
    // Forms are small and usually arrive in one frame: keep that frame without copying it.
    let mut first: Option<Bytes> = None;
    let mut rest: Vec<u8> = Vec::new();
    let mut total = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ReadError::Body(e.into()))?;
        let Ok(data) = frame.into_data() else {
            continue;
        }; // trailers carry no form data
        total = total.saturating_add(data.len());
        if total > limit {
            return Err(ReadError::TooLarge);
        }
        match &first {
            None if rest.is_empty() => first = Some(data),
            _ => {
                if let Some(first) = first.take() {
                    rest.extend_from_slice(&first);
                }
                rest.extend_from_slice(&data);
            }
        }
    }
    Ok(first.unwrap_or_else(|| Bytes::from(rest)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::stream;
    use http::HeaderValue;
    use http_body::Frame;
    use http_body_util::StreamBody;

    fn chunks(parts: &[&'static str]) -> StreamBody<impl futures_util::Stream<Item = FrameResult>> {
        let frames: Vec<FrameResult> = parts
            .iter()
            .map(|p| Ok(Frame::data(Bytes::from_static(p.as_bytes()))))
            .collect();
        StreamBody::new(stream::iter(frames))
    }
    type FrameResult = Result<Frame<Bytes>, std::io::Error>;

    #[tokio::test]
    async fn joins_frames_up_to_the_limit() {
        let got = read_limited(chunks(&["name=", "bo", "b"]), 8).await;
        assert_eq!(got.ok(), Some(Bytes::from_static(b"name=bob")));
        let got = read_limited(chunks(&["name=bob"]), 8).await;
        assert_eq!(got.ok(), Some(Bytes::from_static(b"name=bob")));
        let got = read_limited(chunks(&[]), 8).await;
        assert_eq!(got.ok(), Some(Bytes::new()));
    }

    #[tokio::test]
    async fn stops_past_the_limit() {
        let got = read_limited(chunks(&["name=", "bobby"]), 8).await;
        assert!(matches!(got, Err(ReadError::TooLarge)));
    }

    #[test]
    fn content_length_parses_or_gives_up() {
        let mut headers = HeaderMap::new();
        assert_eq!(content_length(&headers), None);
        headers.insert(CONTENT_LENGTH, HeaderValue::from_static("42"));
        assert_eq!(content_length(&headers), Some(42));
        headers.append(CONTENT_LENGTH, HeaderValue::from_static("42"));
        assert_eq!(content_length(&headers), Some(42));
        headers.append(CONTENT_LENGTH, HeaderValue::from_static("43"));
        assert_eq!(content_length(&headers), None);
        headers.insert(CONTENT_LENGTH, HeaderValue::from_static("x"));
        assert_eq!(content_length(&headers), None);
    }
}
