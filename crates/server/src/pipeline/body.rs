//! The request body as every front end hands it to the pipeline: sluice's own type, so that
//! the pipeline, its observers and the proxy never name one protocol's body. HTTP/1.1 and
//! HTTP/2 come from hyper (`From<hyper::body::Incoming>`); a front end for another protocol
//! (HTTP/3) adds its variant here and nothing else changes.
//!
//! An enum, not a boxed trait object: a request pays no allocation for it, and a poll is a
//! match on one variant (monomorphising the whole pipeline per protocol instead would double
//! its code for each front end).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use sluice_core::BoxError;

/// A request's body, whatever protocol carried it.
#[derive(Debug)]
pub struct RequestBody(Inner);

#[derive(Debug)]
enum Inner {
    /// HTTP/1.1 and HTTP/2, served by hyper.
    Hyper(Incoming),
}

impl From<Incoming> for RequestBody {
    fn from(body: Incoming) -> Self {
        Self(Inner::Hyper(body))
    }
}

impl http_body::Body for RequestBody {
    type Data = Bytes;
    /// The protocol's own error, boxed only when there is one.
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match &mut self.0 {
            Inner::Hyper(body) => Pin::new(body).poll_frame(cx).map_err(BoxError::from),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.0 {
            Inner::Hyper(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.0 {
            Inner::Hyper(body) => body.size_hint(),
        }
    }
}
