//! What happens when a response is finished: the route's metrics are updated and the access log
//! line is written, with the bytes actually sent. Both need the end of the body, so one wrapper
//! serves both; a response held in memory with the log off is observed at once, unwrapped.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body::{Body as _, Frame, SizeHint};
use hyper::body::Incoming;
use sluice_core::{Body, BoxError};

use crate::pipeline::access_log::{AccessLogger, Entry};
use crate::shared::metrics::RouteMetrics;
use crate::shared::request::ClientBodyError;

/// Everything to record about one request once its response is done.
pub struct Observer {
    pub route: RouteMetrics,
    pub start: Instant,
    pub status: StatusCode,
    /// Request body bytes read so far, when the request had a body that was forwarded.
    pub bytes_in: Option<Arc<AtomicU64>>,
    pub log: Option<(Box<Entry>, Arc<AccessLogger>)>,
}

impl Observer {
    /// `complete`: the body ended as its framing said; `false` when it failed (an upstream
    /// body cut off) or was dropped first (the client went away).
    fn finish(self, bytes_out: u64, complete: bool) {
        let bytes_in = self.bytes_in.map_or(0, |n| n.load(Ordering::Relaxed));
        self.route
            .observe(self.status, self.start.elapsed(), bytes_in, bytes_out);
        if let Some((entry, logger)) = self.log {
            logger.write(&entry, bytes_out, complete);
        }
    }
}

/// Observe `response` when it ends.
pub fn observe(response: Response<Body>, observer: Observer) -> Response<Body> {
    let in_memory = match response.body() {
        Body::Empty => Some(0),
        Body::Full(bytes) => Some(bytes.as_ref().map_or(0, |b| b.len() as u64)),
        Body::Stream(_) => None,
    };
    match in_memory {
        Some(len) if observer.log.is_none() => {
            observer.finish(len, true);
            response
        }
        _ => response.map(|inner| {
            Body::stream(ObservedBody {
                inner,
                sent: 0,
                observer: Some(observer),
            })
        }),
    }
}

/// A response body that counts what it yields and finishes its [`Observer`] when it ends or is
/// dropped (the client went away).
struct ObservedBody {
    inner: Body,
    sent: u64,
    observer: Option<Observer>,
}

impl ObservedBody {
    fn finish(&mut self, complete: bool) {
        if let Some(observer) = self.observer.take() {
            observer.finish(self.sent, complete);
        }
    }
}

impl http_body::Body for ObservedBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.sent += data.len() as u64;
                }
                if this.inner.is_end_stream() {
                    this.finish(true);
                }
            }
            Poll::Ready(None) => this.finish(true),
            Poll::Ready(Some(Err(_))) => this.finish(false),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for ObservedBody {
    fn drop(&mut self) {
        // A body that had nothing more to send is whole even if never polled to its end.
        let complete = self.inner.is_end_stream();
        self.finish(complete);
    }
}

/// The request body as the proxy forwards it: `Empty` when there is none (so the request can be
/// retried), otherwise a stream that counts its bytes into the returned counter.
pub fn counted_request_body(body: Incoming) -> (Body, Option<Arc<AtomicU64>>) {
    if body.is_end_stream() {
        return (Body::Empty, None);
    }
    let count = Arc::new(AtomicU64::new(0));
    (
        Body::stream(CountingBody {
            inner: body,
            count: count.clone(),
        }),
        Some(count),
    )
}

struct CountingBody {
    inner: Incoming,
    count: Arc<AtomicU64>,
}

impl http_body::Body for CountingBody {
    type Data = Bytes;
    type Error = ClientBodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, ClientBodyError>>> {
        let polled = Pin::new(&mut self.inner)
            .poll_frame(cx)
            .map_err(ClientBodyError);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
        {
            self.count.fetch_add(data.len() as u64, Ordering::Relaxed);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
