//! The response body every sluice handler returns.
//!
//! An enum rather than a boxed trait object so the common cases (no body, one buffer in memory) cost
//! no allocation and report an exact size hint, which lets hyper send `Content-Length` by itself.
//! Streams (files, upstream bodies, compressors) use the boxed variant.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;

use crate::error::BoxError;

/// A response (or forwarded request) body.
#[derive(Default)]
pub enum Body {
    /// No bytes at all.
    #[default]
    Empty,
    /// One buffer, sent as is; `None` once it has been yielded.
    Full(Option<Bytes>),
    /// Anything that streams.
    Stream(UnsyncBoxBody<Bytes, BoxError>),
}

impl Body {
    /// A body of one buffer.
    pub fn full(bytes: impl Into<Bytes>) -> Self {
        let bytes = bytes.into();
        if bytes.is_empty() {
            Body::Empty
        } else {
            Body::Full(Some(bytes))
        }
    }

    /// Wrap any body whose error converts to [`BoxError`].
    pub fn stream<B>(body: B) -> Self
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        Body::Stream(body.map_err(Into::into).boxed_unsync())
    }
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Body::Empty => f.write_str("Body::Empty"),
            Body::Full(b) => write!(f, "Body::Full({} bytes)", b.as_ref().map_or(0, Bytes::len)),
            Body::Stream(_) => f.write_str("Body::Stream"),
        }
    }
}

impl From<Bytes> for Body {
    fn from(bytes: Bytes) -> Self {
        Body::full(bytes)
    }
}

impl From<&'static str> for Body {
    fn from(s: &'static str) -> Self {
        Body::full(Bytes::from_static(s.as_bytes()))
    }
}

impl From<String> for Body {
    fn from(s: String) -> Self {
        Body::full(s)
    }
}

impl From<Vec<u8>> for Body {
    fn from(v: Vec<u8>) -> Self {
        Body::full(v)
    }
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            Body::Empty => Poll::Ready(None),
            Body::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Body::Stream(body) => Pin::new(body).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Body::Empty => true,
            Body::Full(bytes) => bytes.is_none(),
            Body::Stream(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Body::Empty => SizeHint::with_exact(0),
            Body::Full(bytes) => SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64)),
            Body::Stream(body) => body.size_hint(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body::Body as _;

    #[tokio::test]
    async fn full_body_yields_once_with_exact_size() {
        let body = Body::full("hello");
        assert_eq!(body.size_hint().exact(), Some(5));
        let collected = body.collect().await.map(|c| c.to_bytes());
        assert_eq!(collected.ok(), Some(Bytes::from_static(b"hello")));
        assert!(Body::full("").is_end_stream());
    }
}
