//! The request body as every front end hands it to the pipeline: sluice's own type, so that
//! the pipeline, its observers and the proxy never name one protocol's body. HTTP/1.1 and
//! HTTP/2 come from hyper (`From<hyper::body::Incoming>`); HTTP/3 from the h3 crate over quinn
//! ([`H3Body`], made by `crate::net::h3`: the only other place that names those crates).
//!
//! An enum, not a boxed trait object: a request pays no allocation for it, and a poll is a
//! match on one variant (monomorphising the whole pipeline per protocol instead would double
//! its code for each front end).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
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
    /// HTTP/3: the request stream's receiving half.
    H3(H3Body),
}

/// The receiving half of an HTTP/3 request stream, as a body: DATA frames, then the trailers
/// (RFC 9114 §4.1). Data arrives as quinn received it, without a copy.
pub struct H3Body {
    stream: h3::server::RequestStream<h3_quinn::RecvStream, Bytes>,
    /// The first chunk, read before the pipeline saw the request (see [`H3Body::new`]).
    first: Option<Bytes>,
    /// The DATA frames are over; trailers (if any) are next.
    data_done: bool,
    /// Everything, trailers included, has been read.
    ended: bool,
    /// `Content-Length` of the request, if it had one.
    length: Option<u64>,
}

impl std::fmt::Debug for H3Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("H3Body")
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl H3Body {
    /// The body of a request whose head came with `length` (its `Content-Length`). What has
    /// already arrived is read now, without waiting: a GET's stream usually ends in the packet
    /// that carried its head, and a body known to be empty is sent upstream as one (no chunked
    /// framing, RFC 9112 §6.3), as hyper does for an h2 stream whose HEADERS end it.
    pub fn new(
        mut stream: h3::server::RequestStream<h3_quinn::RecvStream, Bytes>,
        length: Option<u64>,
    ) -> Self {
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let (first, data_done) = match stream.poll_recv_data(&mut cx) {
            Poll::Ready(Ok(Some(mut buf))) => (Some(buf.copy_to_bytes(buf.remaining())), false),
            Poll::Ready(Ok(None)) => (None, true),
            // An error shows again on the next read, where the pipeline sees it.
            Poll::Ready(Err(_)) | Poll::Pending => (None, false),
        };
        let mut body = Self {
            stream,
            first,
            data_done,
            ended: false,
            length,
        };
        if data_done {
            // Trailers would be here already too if the stream is over.
            if let Poll::Ready(Ok(None)) = body.stream.poll_recv_trailers(&mut cx) {
                body.ended = true;
            }
        }
        body
    }

    /// Tell the client to stop sending a body nobody will read: H3_NO_ERROR, as RFC 9114
    /// §4.1 says for a response complete without the rest of its request.
    pub fn stop_unread(&mut self) {
        if !self.ended {
            self.stream.stop_sending(h3::error::Code::H3_NO_ERROR);
        }
    }

    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if let Some(first) = self.first.take() {
            return Poll::Ready(Some(Ok(Frame::data(first))));
        }
        if self.ended {
            return Poll::Ready(None);
        }
        if !self.data_done {
            match self.stream.poll_recv_data(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(Some(mut buf))) => {
                    let data = buf.copy_to_bytes(buf.remaining());
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Poll::Ready(Ok(None)) => self.data_done = true,
                Poll::Ready(Err(err)) => {
                    self.ended = true;
                    return Poll::Ready(Some(Err(BoxError::from(err))));
                }
            }
        }
        let polled = self.stream.poll_recv_trailers(cx);
        match polled {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(Some(trailers))) => {
                self.ended = true;
                Poll::Ready(Some(Ok(Frame::trailers(trailers))))
            }
            Poll::Ready(Ok(None)) => {
                self.ended = true;
                Poll::Ready(None)
            }
            Poll::Ready(Err(err)) => {
                self.ended = true;
                Poll::Ready(Some(Err(BoxError::from(err))))
            }
        }
    }

    fn size_hint(&self) -> SizeHint {
        match (&self.first, self.ended) {
            (None, true) => SizeHint::with_exact(0),
            (Some(first), true) => SizeHint::with_exact(first.len() as u64),
            _ => self
                .length
                .map_or_else(SizeHint::default, SizeHint::with_exact),
        }
    }
}

impl From<H3Body> for RequestBody {
    fn from(body: H3Body) -> Self {
        Self(Inner::H3(body))
    }
}

impl RequestBody {
    /// Stop the client sending a body the response did not need (HTTP/3 only: hyper does this
    /// itself for HTTP/1.1 and HTTP/2).
    pub fn stop_unread(&mut self) {
        if let Inner::H3(body) = &mut self.0 {
            body.stop_unread();
        }
    }
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
            Inner::H3(body) => body.poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.0 {
            Inner::Hyper(body) => body.is_end_stream(),
            Inner::H3(body) => body.ended && body.first.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.0 {
            Inner::Hyper(body) => body.size_hint(),
            Inner::H3(body) => body.size_hint(),
        }
    }
}
