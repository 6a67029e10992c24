//! The body wrappers of the proxy: the retry slot, the idle timeout, the upload's progress for
//! the response timeout, the peek that finds out whether a request body is really empty, and
//! the decoded request body's metrics, and the request body read whole before it goes upstream.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body as _, Frame, SizeHint};
use sluice_core::{Body, BoxError, Side};
use sluice_http::decompress::{DecompressBody, DecompressError};
use sluice_upstream::health::active::address_label;
use sluice_upstream::{Group, InFlight};

use crate::shared::metrics::{DecompressMetrics, DecompressOutcome};
use tokio::sync::Notify;

/// The request body as one attempt sees it: taken from the shared slot on first poll, so a
/// failed attempt that never polled it leaves it for the next one.
pub(super) struct SlotBody {
    slot: Arc<Mutex<Option<Body>>>,
    taken: Option<Body>,
}

impl SlotBody {
    pub(super) fn new(slot: Arc<Mutex<Option<Body>>>) -> Self {
        Self { slot, taken: None }
    }

    fn body(&mut self) -> Option<&mut Body> {
        if self.taken.is_none() {
            self.taken = self.slot.lock().ok().and_then(|mut b| b.take());
        }
        self.taken.as_mut()
    }
}

impl http_body::Body for SlotBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut().body() {
            Some(body) => Pin::new(body).poll_frame(cx),
            None => Poll::Ready(Some(Err(
                "the request body was already sent to another server".into(),
            ))),
        }
    }

    fn size_hint(&self) -> SizeHint {
        // hyper reads this before polling, to choose Content-Length or chunked.
        match &self.taken {
            Some(body) => body.size_hint(),
            None => self
                .slot
                .lock()
                .ok()
                .and_then(|b| b.as_ref().map(|b| b.size_hint()))
                .unwrap_or_default(),
        }
    }
}

/// The error of a body on which nothing arrived for too long.
#[derive(Debug)]
pub(super) struct Stalled {
    pub(super) side: Side,
    idle: Duration,
}

impl std::fmt::Display for Stalled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let who = if self.side == Side::Downstream {
            "client request"
        } else {
            "upstream response"
        };
        write!(f, "{who} body stalled for {:?}", self.idle)
    }
}

impl std::error::Error for Stalled {}

/// A body that fails when no frame arrives for `idle`: the upstream's response (cutting the
/// downstream response short, never passing it off as complete) and the client's request body
/// on its way upstream (so a stalled upload cannot pin a pooled connection). Holds the peer's
/// in-flight count, when given, until the body is done.
///
/// The timer is allocated the first time the body waits and then reset in place: a body that
/// streams many frames costs one allocation at most, not one per frame.
pub(super) struct IdleTimeout<B> {
    inner: B,
    idle: Duration,
    /// Which side stalled, for the error.
    side: Side,
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    /// The timer runs for the current wait (it is reset when a wait starts).
    armed: bool,
    _in_flight: Option<InFlight>,
    /// Who to tell when an upstream response body ends in an error (taken on the first one).
    report: Option<BodyErrorReport>,
}

impl<B> IdleTimeout<B> {
    pub(super) fn new(inner: B, idle: Duration, side: Side, in_flight: Option<InFlight>) -> Self {
        Self {
            inner,
            idle,
            side,
            timer: None,
            armed: false,
            _in_flight: in_flight,
            report: None,
        }
    }

    /// Report the body's error, if it ends in one, as an upstream response body cut off.
    pub(super) fn reporting(mut self, report: BodyErrorReport) -> Self {
        self.report = Some(report);
        self
    }

    fn report(&mut self, err: &BoxError) {
        if let Some(report) = self.report.take() {
            report.send(err);
        }
    }
}

/// The upstream response body broke off (reset, closed short of its length or last chunk) or
/// stalled: hyper then cuts the client's response off too (RFC 9112 §8: the connection closes
/// before the framing is complete; RFC 9113 §8.1: RST_STREAM), and this says so in the log and
/// the metrics, since the client side alone cannot tell an upstream fault from a slow client.
pub(super) struct BodyErrorReport {
    pub(super) group: Arc<Group>,
    pub(super) servers: crate::features::upstreams::ServerMetricsTable,
    pub(super) peer: usize,
}

impl BodyErrorReport {
    fn send(self, err: &BoxError) {
        let stalled = err.downcast_ref::<Stalled>().is_some();
        if let Some(metrics) = self.servers.get(self.peer) {
            metrics.body_error(stalled);
        }
        let server = self
            .group
            .peers()
            .get(self.peer)
            .map(|p| address_label(p.address()))
            .unwrap_or_default();
        tracing::warn!(upstream = self.group.name(), %server, "upstream response cut off: {err}");
    }
}

impl<B> http_body::Body for IdleTimeout<B>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                this.armed = false;
                let frame = frame.map(|f| f.map_err(Into::into));
                if let Some(Err(err)) = &frame {
                    this.report(err);
                }
                Poll::Ready(frame)
            }
            Poll::Pending => {
                let idle = this.idle;
                let timer = match &mut this.timer {
                    Some(timer) => {
                        if !this.armed {
                            timer.as_mut().reset(tokio::time::Instant::now() + idle);
                        }
                        timer
                    }
                    None => this.timer.insert(Box::pin(tokio::time::sleep(idle))),
                };
                this.armed = true;
                match timer.as_mut().poll(cx) {
                    Poll::Ready(()) => {
                        let err: BoxError = Box::new(Stalled {
                            side: this.side,
                            idle,
                        });
                        this.report(&err);
                        Poll::Ready(Some(Err(err)))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// How far a request body has got on its way upstream, shared between the body (which hyper
/// polls on the connection's side) and the proxy waiting for the response.
#[derive(Default)]
pub(super) struct Upload {
    /// Frames handed to the upstream connection so far.
    frames: AtomicU64,
    /// The body is waiting for the client (a stall there is the idle timeout's to judge).
    waiting_for_client: AtomicBool,
    /// The body ended, failed, or was dropped: the response timeout may start.
    done: AtomicBool,
    finished: Notify,
}

impl Upload {
    /// Wait until the upload is over. Returns `false` if the upstream stopped taking the body:
    /// no frame moved for `idle` although the client had more to give. Progress is checked
    /// once per `idle`, so a stall is found between one and two idle periods after it began;
    /// nothing is done per frame beyond two relaxed atomic stores.
    pub(super) async fn finished(&self, idle: Duration) -> bool {
        let mut seen = self.frames.load(Ordering::Relaxed);
        loop {
            // Registered before the check, so a finish in between is not missed.
            let finished = self.finished.notified();
            if self.done.load(Ordering::Acquire) {
                return true;
            }
            if tokio::time::timeout(idle, finished).await.is_ok() {
                continue;
            }
            let now = self.frames.load(Ordering::Relaxed);
            if now == seen && !self.waiting_for_client.load(Ordering::Relaxed) {
                return false;
            }
            seen = now;
        }
    }

    fn finish(&self) {
        if !self.done.swap(true, Ordering::AcqRel) {
            self.finished.notify_waiters();
        }
    }
}

/// A request body that reports its progress into an [`Upload`].
pub(super) struct UploadProgress<B> {
    inner: B,
    upload: Arc<Upload>,
}

impl<B> UploadProgress<B> {
    pub(super) fn new(inner: B, upload: Arc<Upload>) -> Self {
        Self { inner, upload }
    }
}

impl<B> http_body::Body for UploadProgress<B>
where
    B: http_body::Body<Data = Bytes, Error = BoxError> + Unpin,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        let upload = &self.upload;
        match &polled {
            Poll::Pending => upload.waiting_for_client.store(true, Ordering::Relaxed),
            Poll::Ready(Some(Ok(_))) => {
                upload.waiting_for_client.store(false, Ordering::Relaxed);
                upload.frames.fetch_add(1, Ordering::Relaxed);
                if self.inner.is_end_stream() {
                    self.upload.finish();
                }
            }
            Poll::Ready(_) => upload.finish(),
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

impl<B> Drop for UploadProgress<B> {
    fn drop(&mut self) {
        self.upload.finish();
    }
}

/// What a first look at a request body found.
pub(super) enum Peeked {
    /// The body is over: it had no bytes at all.
    Empty,
    /// The body goes on (its first frame, if one was read, is put back in front).
    Body(Body),
}

/// Look at a streamed request body whose length is unknown, to send a body that turns out to
/// be empty as no body at all (no `Transfer-Encoding: chunked` with only a last chunk). An
/// HTTP/2 client may end a request with an empty DATA frame carrying END_STREAM instead of on
/// its HEADERS, and an HTTP/1.1 client may send a chunked body of only the last chunk.
///
/// With `wait`, the first frame is awaited (at most `idle`): for methods whose requests rarely
/// carry content, where the client has just not sent the END_STREAM yet. Otherwise only what
/// has already arrived is looked at, so a streaming upload is never held back.
pub(super) async fn peek(mut body: Body, wait: bool, idle: Duration) -> Result<Peeked, BoxError> {
    let first = std::future::poll_fn(|cx| {
        loop {
            match Pin::new(&mut body).poll_frame(cx) {
                // An empty DATA frame says nothing; the next one may be the end.
                Poll::Ready(Some(Ok(f))) if f.data_ref().is_some_and(Bytes::is_empty) => {}
                Poll::Ready(ready) => return Poll::Ready(Some(ready)),
                Poll::Pending if wait => return Poll::Pending,
                Poll::Pending => return Poll::Ready(None),
            }
        }
    });
    let first = if wait {
        tokio::time::timeout(idle, first).await.unwrap_or(None)
    } else {
        first.await
    };
    Ok(match first {
        Some(None) => Peeked::Empty,
        Some(Some(Ok(frame))) => Peeked::Body(Body::stream(Prefixed {
            first: Some(frame),
            rest: body,
        })),
        Some(Some(Err(err))) => return Err(err),
        None => Peeked::Body(body),
    })
}

/// A body with its first frame put back.
struct Prefixed {
    first: Option<Frame<Bytes>>,
    rest: Body,
}

impl http_body::Body for Prefixed {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.first.take() {
            Some(frame) => Poll::Ready(Some(Ok(frame))),
            None => Pin::new(&mut self.rest).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.first.is_none() && self.rest.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let first = self
            .first
            .as_ref()
            .and_then(Frame::data_ref)
            .map_or(0, |d| d.len() as u64);
        let rest = self.rest.size_hint();
        let mut hint = SizeHint::new();
        hint.set_lower(rest.lower() + first);
        if let Some(upper) = rest.upper() {
            hint.set_upper(upper + first);
        }
        hint
    }
}

use std::future::Future as _;

/// A request body being decoded (`decompress_requests`), counted in the route's metrics: its
/// outcome as soon as it ends or fails, and the bytes it read and wrote when it is dropped (a
/// body the upstream stopped reading still counts what it decoded).
pub(super) struct CountedDecode<B> {
    inner: DecompressBody<B>,
    metrics: DecompressMetrics,
    counted: bool,
}

impl<B> CountedDecode<B> {
    pub(super) fn new(inner: DecompressBody<B>, metrics: DecompressMetrics) -> Self {
        Self {
            inner,
            metrics,
            counted: false,
        }
    }
}

impl<B> http_body::Body for CountedDecode<B>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<BoxError>,
    DecompressBody<B>: Unpin,
{
    type Data = Bytes;
    type Error = DecompressError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, DecompressError>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        let outcome = match &polled {
            Poll::Ready(None) => Some(DecompressOutcome::Decoded),
            // A client whose upload broke off has no decoding outcome: that is its own error.
            Poll::Ready(Some(Err(err))) => match err.kind() {
                Some(sluice_core::ErrorKind::PayloadTooLarge) => Some(DecompressOutcome::TooLarge),
                Some(sluice_core::ErrorKind::BadRequest) => Some(DecompressOutcome::Corrupt),
                _ => None,
            },
            _ => None,
        };
        if let Some(outcome) = outcome
            && !self.counted
        {
            self.counted = true;
            self.metrics.outcome(outcome);
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

impl<B> Drop for CountedDecode<B> {
    fn drop(&mut self) {
        self.metrics
            .bytes(self.inner.encoded_bytes(), self.inner.decoded_bytes());
    }
}

/// A request body read whole before it goes upstream (`ProxyHandler::buffered`), kept in the
/// pieces it arrived in: hyper's client writes them with the head in one `writev`, where joining
/// them first would copy every byte once more (1.4 µs of a 51 KB POST's 54 µs, measured).
pub(super) struct Whole {
    chunks: VecDeque<Bytes>,
    remaining: u64,
    trailers: Option<http::HeaderMap>,
}

/// Read `body` to its end; one piece and no trailers becomes [`Body::Full`], anything else a
/// [`Whole`].
pub(super) async fn read_whole<B>(mut body: B) -> Result<Body, BoxError>
where
    B: http_body::Body<Data = Bytes, Error = BoxError> + Unpin,
{
    use http_body_util::BodyExt;
    let mut chunks = VecDeque::new();
    let mut trailers = None;
    let mut remaining = 0u64;
    while let Some(frame) = body.frame().await {
        match frame?.into_data() {
            Ok(data) if data.is_empty() => {}
            Ok(data) => {
                remaining += data.len() as u64;
                chunks.push_back(data);
            }
            Err(frame) => {
                if let Ok(more) = frame.into_trailers() {
                    trailers
                        .get_or_insert_with(http::HeaderMap::new)
                        .extend(more);
                }
            }
        }
    }
    if trailers.is_none() && chunks.len() <= 1 {
        return Ok(chunks.pop_front().map_or(Body::Empty, Body::full));
    }
    Ok(Body::stream(Whole {
        chunks,
        remaining,
        trailers,
    }))
}

impl http_body::Body for Whole {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Some(data) = self.chunks.pop_front() {
            self.remaining -= data.len() as u64;
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        Poll::Ready(self.trailers.take().map(|t| Ok(Frame::trailers(t))))
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.is_empty() && self.trailers.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, StreamBody};

    type Frames = futures_util::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, BoxError>>>;

    /// A body that yields `frames` in order, as a client's upload arriving in several reads.
    fn arriving(frames: Vec<Frame<Bytes>>) -> StreamBody<Frames> {
        let frames: Vec<Result<Frame<Bytes>, BoxError>> = frames.into_iter().map(Ok).collect();
        StreamBody::new(futures_util::stream::iter(frames))
    }

    #[tokio::test]
    async fn a_body_read_whole_keeps_its_pieces_in_order_without_joining_them() {
        let pieces = ["first ", "", "second ", "third"];
        let body = arriving(
            pieces
                .iter()
                .map(|p| Frame::data(Bytes::from(*p)))
                .collect(),
        );
        let whole = read_whole(body).await.unwrap();
        assert!(matches!(whole, Body::Stream(_)));
        assert_eq!(whole.size_hint().exact(), Some(18));
        let mut frames = Vec::new();
        let mut whole = whole;
        while let Some(frame) = whole.frame().await {
            frames.push(frame.unwrap().into_data().unwrap());
        }
        // The empty piece is dropped; the others go on as they came, one frame each.
        assert_eq!(frames, ["first ", "second ", "third"]);
    }

    #[tokio::test]
    async fn one_piece_becomes_a_full_body_and_trailers_are_kept() {
        let one = read_whole(arriving(vec![Frame::data(Bytes::from("all of it"))]))
            .await
            .unwrap();
        assert!(matches!(&one, Body::Full(Some(b)) if b == "all of it"));

        let mut trailers = http::HeaderMap::new();
        trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
        let body = arriving(vec![
            Frame::data(Bytes::from("data")),
            Frame::trailers(trailers.clone()),
        ]);
        let collected = read_whole(body).await.unwrap().collect().await.unwrap();
        assert_eq!(collected.trailers(), Some(&trailers));
        assert_eq!(collected.to_bytes(), "data");
    }

    #[tokio::test]
    async fn a_body_that_breaks_off_is_an_error() {
        let frames: Vec<Result<Frame<Bytes>, BoxError>> =
            vec![Ok(Frame::data(Bytes::from("part"))), Err("reset".into())];
        let body = StreamBody::new(futures_util::stream::iter(frames));
        assert!(read_whole(body).await.is_err());
    }
}
