//! A request body nobody read (the action was a static file, a fixed response, a redirect or an
//! error page, or the cache answered), on HTTP/2: read to its end and discarded before the
//! response ends the stream.
//!
//! Why: RFC 9113 §8.1 lets a server send a complete response before the request is complete,
//! and h2 then resets the stream with `NO_ERROR` right after the response's `END_STREAM`
//! (h2 `proto/streams/streams.rs`, `maybe_cancel`). Frames the client sends after that reset are
//! ignored, as RFC 9113 §5.4.2 allows (h2 `recv_headers`/`recv_data`: "locally reset streams
//! must ignore frames"). So whether a broken rest of the request is answered with the error the
//! RFC asks for depended on a race between the response and the client:
//! - trailers without `END_STREAM`: malformed, a stream error `PROTOCOL_ERROR` (§8.1, §8.1.1);
//! - a `content-length` that the `DATA` frames do not add up to: `PROTOCOL_ERROR` (§8.1.1);
//! - `DATA` after the client's own `RST_STREAM`: `STREAM_CLOSED` (§5.1);
//! - a `WINDOW_UPDATE` overflowing the stream's window: `FLOW_CONTROL_ERROR` (§6.9.1; h2 skips
//!   the check once the server's side of the stream is closed, `prioritize.rs`
//!   `recv_stream_window_update`).
//!
//! (h2spec 8.1/1, 8.1.2.6/2, 5.1/8 and /9, 6.9.1/3 failed or passed by that race; h2spec issue
//! 68 discusses the same.) With the rest of the request read first, the stream stays open until
//! the client has finished, and h2 judges every frame of the request.
//!
//! The response is not held back: its bytes go out as they come, and the request body is read
//! alongside (so the client's flow-control window keeps moving); only the end of the stream waits
//! for the request's end. Bounded: past [`READ_LIMIT`] bytes, or [`READ_TIME`] after the response
//! is done, the response ends anyway and h2 resets the stream with `NO_ERROR` as before, which
//! §8.1 says the client must not take as a reason to discard the response.
//!
//! HTTP/1.1 needs none of this: hyper reads an unread body itself before the next request on the
//! connection, or closes it.

use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Response, Version};
use http_body::{Body as _, Frame, SizeHint};
use sluice_core::{Body, BoxError};
use tokio::time::Sleep;

use crate::pipeline::body::RequestBody;

/// The most request body bytes read and thrown away: one default HTTP/2 stream window of hyper's,
/// about what a client may have in flight before it hears back anyway.
pub const READ_LIMIT: usize = 1024 * 1024;

/// How long the end of the response waits for the end of the request, once the response is done.
pub const READ_TIME: Duration = Duration::from_secs(1);

/// `response`, made to read `unread` to its end before its own end, when that matters: on
/// HTTP/2 with a request body still open.
pub fn read_before_end(
    response: Response<Body>,
    version: Version,
    mut unread: RequestBody,
) -> Response<Body> {
    if version != Version::HTTP_2 || unread.is_end_stream() {
        // HTTP/3: the server "MAY abort reading the request stream, send a complete response,
        // and cleanly close the sending part of the stream" with H3_NO_ERROR (RFC 9114 §4.1).
        // (A no-op for HTTP/1.1, whose connection hyper keeps in step itself.)
        unread.stop_unread();
        return response;
    }
    response.map(|inner| {
        Body::stream(ReadBeforeEnd {
            inner,
            inner_done: false,
            trailers: None,
            request: Some(unread),
            read: 0,
            deadline: None,
        })
    })
}

struct ReadBeforeEnd {
    inner: Body,
    /// The response's last frame has been yielded (or held: its trailers).
    inner_done: bool,
    /// The response's trailers, held back: they end the stream.
    trailers: Option<HeaderMap>,
    /// The request body, until it ended, failed or was given up on.
    request: Option<RequestBody>,
    read: usize,
    /// Started when the response is done.
    deadline: Option<Pin<Box<Sleep>>>,
}

impl ReadBeforeEnd {
    /// Read (and drop) what the request body has ready; `Ready` once it is over, one way or
    /// another.
    fn poll_request(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Some(request) = self.request.as_mut() else {
            return Poll::Ready(());
        };
        loop {
            match Pin::new(&mut *request).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    self.read += frame.data_ref().map_or(0, Bytes::len);
                    if self.read > READ_LIMIT {
                        tracing::debug!("unread request body over {READ_LIMIT} bytes: not waiting");
                        break;
                    }
                }
                // Failed: the client reset the stream, or h2 found the rest malformed and reset
                // it with the error the RFC asks for. Either way there is nothing to wait for.
                Poll::Ready(Some(Err(_)) | None) => break,
                Poll::Pending => return Poll::Pending,
            }
        }
        self.request = None;
        Poll::Ready(())
    }

    /// Wait for the request's end, up to [`READ_TIME`].
    fn poll_request_end(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.poll_request(cx).is_ready() {
            return Poll::Ready(());
        }
        let deadline = self
            .deadline
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(READ_TIME)));
        ready!(deadline.as_mut().poll(cx));
        tracing::debug!("request body still open {READ_TIME:?} after the response: not waiting");
        self.request = None;
        Poll::Ready(())
    }
}

impl http_body::Body for ReadBeforeEnd {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if !this.inner_done {
            // Keep the request moving while the response streams; its end is awaited below.
            let _ = this.poll_request(cx);
            match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_trailers() {
                    Ok(trailers) => this.trailers = Some(trailers),
                    Err(frame) => return Poll::Ready(Some(Ok(frame))),
                },
                // hyper resets the stream: the request's rest no longer matters.
                Some(Err(err)) => return Poll::Ready(Some(Err(err))),
                None => {}
            }
            this.inner_done = true;
        }
        ready!(this.poll_request_end(cx));
        Poll::Ready(
            this.trailers
                .take()
                .map(|trailers| Ok(Frame::trailers(trailers))),
        )
    }

    fn is_end_stream(&self) -> bool {
        // Once the request is over, the response's last data frame may carry END_STREAM itself.
        self.request.is_none()
            && self.trailers.is_none()
            && (self.inner_done || self.inner.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        // An exact 0 would make hyper add `content-length: 0`, wrong for a HEAD response.
        match self.inner.size_hint().exact() {
            Some(0) => SizeHint::default(),
            _ => self.inner.size_hint(),
        }
    }
}
