//! [`CompressBody`]: compresses any `Bytes` body as one stream, flushing when it should.
//!
//! Flush policy, in order of precedence:
//! - `event_stream` or a zero `flush_delay`: flush after every data chunk (server-sent events
//!   must never be held back);
//! - the inner body returns `Pending` with input written since the last flush, and its length
//!   is unknown (a stream), and is still not ready after two turns of the scheduler: the
//!   upstream paused, so the client gets everything received so far now (a body of known length
//!   waits for the delay: its pauses are read boundaries);
//! - `flush_delay` elapsed since the first unflushed input: bounds latency when the upstream
//!   trickles data fast enough never to return `Pending`.
//!
//! Output is emitted as a frame whenever ~16 KiB has accumulated, so a large body is never
//! buffered whole; between flushes the codec decides how much it holds back.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::HeaderMap;
use http_body::{Body, Frame};
use sluice_core::BoxError;
use tokio::time::{Instant, Sleep};

use super::encoder::Encoder;
use crate::coalesce::ProducerTurns;

/// Emit a frame once this much compressed output has accumulated.
const EMIT_AT: usize = 16 * 1024;

/// Inner data frames consumed per `poll_frame` before yielding to the scheduler: an inner body
/// that is always ready must not monopolise the worker thread.
const BUDGET: usize = 32;

/// When [`CompressBody`] flushes, besides whenever the inner body returns `Pending`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompressOptions {
    /// Longest time input may sit unflushed; `Duration::ZERO` flushes after every chunk.
    pub flush_delay: Duration,
    /// Flush after every chunk (`text/event-stream`).
    pub event_stream: bool,
}

impl Default for CompressOptions {
    fn default() -> Self {
        CompressOptions {
            flush_delay: Duration::from_millis(50),
            event_stream: false,
        }
    }
}

enum State {
    Streaming,
    /// The encoder is finished; emit what is buffered, then the trailers, if any.
    Ending(Option<HeaderMap>),
    Done,
}

pin_project_lite::pin_project! {
    #[project = Projection]
    /// A body yielding `inner` compressed by `encoder` as a single stream.
    pub struct CompressBody<B> {
        #[pin]
        inner: B,
        encoder: Encoder,
        buf: BytesMut,
        options: CompressOptions,
        // Input written since the last flush.
        unflushed: bool,
        // Allocated on first use and re-armed afterwards, so one allocation per response.
        timer: Option<Pin<Box<Sleep>>>,
        timer_armed: bool,
        // Turns of the scheduler given to the inner body's producer since its last frame (see
        // the `Pending` arm of `poll_frame`).
        turns: ProducerTurns,
        state: State,
        // Identity bytes fed to the encoder, for metrics.
        bytes_in: u64,
        // Time spent in the encoder (write, flush, finish), for metrics: two clock reads per
        // chunk of up to 16 KiB, nothing next to compressing it.
        encode_time: Duration,
    }
}

impl<B> CompressBody<B> {
    /// Compress `inner` with `encoder` (a fresh one: its stream becomes the whole body).
    pub fn new(inner: B, encoder: Encoder, options: CompressOptions) -> Self {
        CompressBody {
            inner,
            encoder,
            buf: BytesMut::with_capacity(EMIT_AT * 2),
            options,
            unflushed: false,
            timer: None,
            timer_armed: false,
            turns: ProducerTurns::default(),
            state: State::Streaming,
            bytes_in: 0,
            encode_time: Duration::ZERO,
        }
    }

    /// Identity bytes fed to the encoder so far (the compression ratio's numerator).
    pub fn bytes_in(&self) -> u64 {
        self.bytes_in
    }

    /// Time spent in the encoder so far (on the worker thread: compressing is CPU-bound, so
    /// this is the CPU the coding cost).
    pub fn encode_time(&self) -> Duration {
        self.encode_time
    }
}

fn take(buf: &mut BytesMut) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
    Poll::Ready(Some(Ok(Frame::data(buf.split().freeze()))))
}

impl<B> Body for CompressBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let mut this = self.project();
        let mut budget = BUDGET;
        loop {
            match this.state {
                State::Done => return Poll::Ready(None),
                State::Ending(trailers) => {
                    if !this.buf.is_empty() {
                        return take(this.buf);
                    }
                    let trailers = trailers.take();
                    *this.state = State::Done;
                    return Poll::Ready(trailers.map(|t| Ok(Frame::trailers(t))));
                }
                State::Streaming => {}
            }
            if this.buf.len() >= EMIT_AT {
                return take(this.buf);
            }
            let deadline_passed = *this.timer_armed
                && this
                    .timer
                    .as_mut()
                    .is_some_and(|t| t.as_mut().poll(cx).is_ready());
            if deadline_passed {
                *this.timer_armed = false;
                if let Err(e) = timed_flush(&mut this) {
                    *this.state = State::Done;
                    return Poll::Ready(Some(Err(e)));
                }
                if !this.buf.is_empty() {
                    return take(this.buf);
                }
            }
            if budget == 0 {
                // Come back soon without flushing: the inner body is not paused, only busy.
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            budget -= 1;
            let frame = match this.inner.as_mut().poll_frame(cx) {
                Poll::Pending => {
                    // A body of known length (a proxied document with `Content-Length`, a file)
                    // is not a stream of parts: its pauses are read-buffer boundaries, and a
                    // flush at each would cost a block end and header (the proxied date JSON at
                    // gzip 1: 2,239 B against 2,223 whole and nginx's 2,224). It waits for the
                    // `flush_delay` timer (armed, and polled above) instead.
                    let known_length = this.inner.size_hint().exact().is_some();
                    if !*this.unflushed || (known_length && *this.timer_armed) {
                        return Poll::Pending;
                    }
                    // Not yet a pause: a producer on another task (the upstream connection,
                    // with the next chunks already in its read buffer) needs turns of the
                    // scheduler to hand over its next frame. Give them before flushing;
                    // flushing at every 16 KiB chunk cost a block end and a write each (see
                    // `crate::coalesce`).
                    if this.turns.another(cx) {
                        return Poll::Pending;
                    }
                    *this.timer_armed = false;
                    if let Err(e) = timed_flush(&mut this) {
                        *this.state = State::Done;
                        return Poll::Ready(Some(Err(e)));
                    }
                    if this.buf.is_empty() {
                        return Poll::Pending;
                    }
                    return take(this.buf);
                }
                Poll::Ready(Some(Err(e))) => {
                    *this.state = State::Done;
                    return Poll::Ready(Some(Err(e.into())));
                }
                Poll::Ready(Some(Ok(frame))) => {
                    this.turns.frame_arrived();
                    Some(frame)
                }
                Poll::Ready(None) => None,
            };
            let trailers = match frame.map(Frame::into_data) {
                Some(Ok(data)) => match timed_write(&mut this, &data) {
                    Ok(true) if !this.buf.is_empty() => return take(this.buf),
                    Ok(_) => continue,
                    Err(e) => {
                        *this.state = State::Done;
                        return Poll::Ready(Some(Err(e)));
                    }
                },
                // Not data: trailers (or a future frame kind, dropped), which end the body.
                Some(Err(frame)) => frame.into_trailers().ok(),
                None => None,
            };
            *this.timer_armed = false;
            let started = std::time::Instant::now();
            let finished = this.encoder.finish(this.buf);
            *this.encode_time += started.elapsed();
            if let Err(e) = finished {
                *this.state = State::Done;
                return Poll::Ready(Some(Err(e.into())));
            }
            *this.state = State::Ending(trailers);
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.state, State::Done)
    }
    // `size_hint` stays the default: unknown, since the compressed length is.
}

/// [`flush`], its time added to the encoder's.
fn timed_flush<B>(this: &mut Projection<'_, B>) -> Result<(), BoxError> {
    let started = std::time::Instant::now();
    let flushed = flush(this.encoder, this.buf, this.unflushed);
    *this.encode_time += started.elapsed();
    flushed
}

/// [`write`], its time added to the encoder's.
fn timed_write<B>(this: &mut Projection<'_, B>, data: &[u8]) -> Result<bool, BoxError> {
    let started = std::time::Instant::now();
    let written = write(this, data);
    *this.encode_time += started.elapsed();
    written
}

fn flush(encoder: &mut Encoder, buf: &mut BytesMut, unflushed: &mut bool) -> Result<(), BoxError> {
    *unflushed = false;
    encoder.flush(buf)?;
    Ok(())
}

/// Compress one chunk; `Ok(true)` when it was also flushed and should be sent at once.
fn write<B>(this: &mut Projection<'_, B>, data: &[u8]) -> Result<bool, BoxError> {
    if data.is_empty() {
        return Ok(false);
    }
    this.encoder.write(data, this.buf)?;
    *this.bytes_in += data.len() as u64;
    let options = *this.options;
    if options.event_stream || options.flush_delay.is_zero() {
        flush(this.encoder, this.buf, this.unflushed)?;
        return Ok(true);
    }
    if !*this.unflushed {
        *this.unflushed = true;
        let deadline = Instant::now() + options.flush_delay;
        match this.timer {
            Some(timer) => timer.as_mut().reset(deadline),
            None => *this.timer = Some(Box::pin(tokio::time::sleep_until(deadline))),
        }
        *this.timer_armed = true;
    }
    Ok(false)
}
