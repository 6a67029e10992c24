//! [`Coalesce`]: hands a body's data to the connection in runs, so a streamed response leaves in
//! a few large writes instead of one write per upstream chunk.
//!
//! Why: hyper writes what it has buffered whenever the response body returns `Pending`. A
//! proxied body reaches the client's connection one frame at a time from the upstream
//! connection's task (hyper's body channel holds one frame), so every frame was followed by
//! `Pending` and became its own `writev`, even when the upstream had sent megabytes that sat
//! already read in the proxy's buffer. On the lab's 131 MB chunked stream (16 KiB chunks) that
//! was 8,516 writes where HAProxy, with 64 KiB buffers, made 2,053, and sluice's kernel time
//! was twice HAProxy's.
//!
//! How: after a data frame, [`Coalesce`] asks the inner body for the next at once. If the inner
//! body is not ready, it gives the scheduler a turn (it wakes itself and returns `Pending`,
//! holding what it has, so the connection has nothing new to write) and asks again, up to
//! [`PRODUCER_TURNS`] times: a producer that already has the bytes (the upstream connection's
//! task with a full read buffer) hands over the next frame in those turns. Only when the inner
//! body is still not ready after them — the upstream really paused —, when [`RUN`] bytes are
//! held, or when the run has taken [`RUN_TURNS`] turns in all, are the held frames released,
//! one after another without a `Pending` between them, so hyper writes them in one `writev`.
//! Nothing waits on a timer: a paused stream is delivered two scheduler turns after its last
//! frame. Streams of events (server-sent events, seed 005; gRPC) are not wrapped at all: each
//! message is meant to leave as it comes (`in_runs` in the server's pipeline).

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use http_body::{Body, Frame, SizeHint};

/// Turns of the scheduler a producer on another task gets to hand over its next frame before
/// a body counts as paused. hyper's client connection task, with the next chunks already in
/// its read buffer, hands over one frame per two turns (measured on the lab's 131 MB stream:
/// with one turn no frame was ever gathered, with two every frame was).
pub const PRODUCER_TURNS: u8 = 2;

/// The turns a body has given its producer since the producer's last frame: what tells a
/// producer that is busy handing over (wait, by waking oneself) from one that paused. Shared by
/// [`Coalesce`] and `CompressBody`, which both must not take the first `Pending` for a pause.
#[derive(Debug, Default)]
pub(crate) struct ProducerTurns(u8);

impl ProducerTurns {
    /// On the inner body's `Pending`: `true` when one more turn was given (the caller returns
    /// `Pending`; it is woken again at once), `false` when the producer has had its turns: it
    /// paused. Counting starts again after either a pause or [`Self::frame_arrived`].
    pub(crate) fn another(&mut self, cx: &mut Context<'_>) -> bool {
        if self.0 < PRODUCER_TURNS {
            self.0 += 1;
            cx.waker().wake_by_ref();
            true
        } else {
            self.0 = 0;
            false
        }
    }

    /// The producer handed over a frame.
    pub(crate) fn frame_arrived(&mut self) {
        self.0 = 0;
    }
}

/// Turns of the scheduler a run may take in all, however often frames keep coming: on a busy
/// worker a turn can take milliseconds, and a stream of small frames that arrive a little
/// faster than two turns apart must not be held until [`RUN`] bytes (measured in review: a
/// 98-byte event every 3 ms under load waited 70–500 ms without this bound).
pub const RUN_TURNS: u8 = 8;

/// Bytes held before they are released regardless of the inner body: HAProxy's default buffer
/// size, and about what one `writev` of hyper's (16 buffers) carries in 16 KiB chunks.
pub const RUN: usize = 64 * 1024;

pin_project_lite::pin_project! {
    /// A body yielding `inner`'s frames unchanged and in order, released in runs (see the
    /// module docs).
    pub struct Coalesce<B: Body> {
        #[pin]
        inner: B,
        held: VecDeque<Frame<Bytes>>,
        held_bytes: usize,
        // Held frames are being released: no more are gathered until they are all out.
        releasing: bool,
        // Turns of the scheduler given since the last frame arrived.
        turns: ProducerTurns,
        // Turns given since the run began (its first frame was held).
        run_turns: u8,
        // The inner body ended (its end is delivered after the held frames).
        ended: bool,
        // The inner body failed (the error is delivered after the held frames).
        error: Option<B::Error>,
    }
}

impl<B: Body> Coalesce<B> {
    pub fn new(inner: B) -> Self {
        Coalesce {
            inner,
            held: VecDeque::new(),
            held_bytes: 0,
            releasing: false,
            turns: ProducerTurns::default(),
            run_turns: 0,
            ended: false,
            error: None,
        }
    }
}

impl<B> Body for Coalesce<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let mut this = self.project();
        loop {
            if *this.releasing || *this.ended || this.error.is_some() {
                if let Some(frame) = this.held.pop_front() {
                    if let Some(data) = frame.data_ref() {
                        *this.held_bytes -= data.remaining();
                    }
                    return Poll::Ready(Some(Ok(frame)));
                }
                *this.releasing = false;
                *this.run_turns = 0;
                if let Some(err) = this.error.take() {
                    *this.ended = true;
                    return Poll::Ready(Some(Err(err)));
                }
                if *this.ended {
                    return Poll::Ready(None);
                }
            }
            match this.inner.as_mut().poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    this.turns.frame_arrived();
                    let len = frame.data_ref().map_or(0, Buf::remaining);
                    let last = !frame.is_data() || this.inner.is_end_stream();
                    if this.held.is_empty() && (last || len >= RUN) {
                        // Nothing to gather it with: pass it on as it came.
                        return Poll::Ready(Some(Ok(frame)));
                    }
                    *this.held_bytes += len;
                    this.held.push_back(frame);
                    *this.releasing = last || *this.held_bytes >= RUN;
                }
                Poll::Ready(Some(Err(err))) => *this.error = Some(err),
                Poll::Ready(None) => *this.ended = true,
                Poll::Pending if this.held.is_empty() => return Poll::Pending,
                Poll::Pending => {
                    // Give the producer a turn (the inner body's waker is registered too),
                    // unless the run has had all of its turns.
                    if *this.run_turns < RUN_TURNS && this.turns.another(cx) {
                        *this.run_turns += 1;
                        return Poll::Pending;
                    }
                    // Still nothing after the producer's turns: the inner body paused, so
                    // what is held goes out now.
                    this.turns.frame_arrived();
                    *this.releasing = true;
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.held.is_empty() && self.error.is_none() && (self.ended || self.inner.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        if self.ended {
            return SizeHint::with_exact(self.held_bytes as u64);
        }
        let inner = self.inner.size_hint();
        let held = self.held_bytes as u64;
        let mut hint = SizeHint::new();
        hint.set_lower(inner.lower().saturating_add(held));
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper.saturating_add(held));
        }
        hint
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use futures_util::future::poll_fn;
    use http::HeaderMap;
    use http_body_util::{BodyExt, StreamBody};
    use tokio::sync::mpsc;

    use super::*;

    const PIECE: usize = 16 * 1024;

    fn data(fill: u8, len: usize) -> Frame<Bytes> {
        Frame::data(Bytes::from(vec![fill; len]))
    }

    /// A body fed by a producer task through a channel of one frame, as hyper's upstream body is.
    fn channel_body() -> (
        mpsc::Sender<Result<Frame<Bytes>, &'static str>>,
        impl Body<Data = Bytes, Error = &'static str> + Unpin,
    ) {
        let (tx, rx) = mpsc::channel(1);
        let stream = futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        });
        (tx, StreamBody::new(Box::pin(stream)))
    }

    /// Poll `body` to its end like a connection does, and return the frames in the runs they
    /// came in: a run ends where the body returned `Pending` (where hyper writes).
    async fn runs<B>(mut body: B) -> Vec<Vec<Frame<Bytes>>>
    where
        B: Body<Data = Bytes> + Unpin,
        B::Error: std::fmt::Debug,
    {
        let mut runs = vec![Vec::new()];
        loop {
            let mut pending = false;
            let frame = poll_fn(|cx| {
                let poll = Pin::new(&mut body).poll_frame(cx);
                pending |= poll.is_pending();
                poll
            })
            .await;
            if pending && !runs.last().unwrap().is_empty() {
                runs.push(Vec::new());
            }
            match frame {
                Some(frame) => runs.last_mut().unwrap().push(frame.unwrap()),
                None => return runs,
            }
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn frames_a_producer_already_has_leave_in_runs_of_64_kib_in_order() {
        let (tx, body) = channel_body();
        tokio::spawn(async move {
            for i in 0..16u8 {
                tx.send(Ok(data(i, PIECE))).await.unwrap();
            }
        });
        let runs = runs(Coalesce::new(body)).await;
        let sizes: Vec<usize> = runs.iter().map(Vec::len).collect();
        assert_eq!(sizes, [4, 4, 4, 4], "16 KiB frames, RUN = 64 KiB");
        let fills: Vec<u8> = runs
            .iter()
            .flatten()
            .map(|f| f.data_ref().unwrap()[0])
            .collect();
        assert_eq!(fills, (0..16).collect::<Vec<u8>>());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_run_of_small_frames_ends_after_its_turns_not_at_64_kib() {
        let (tx, body) = channel_body();
        tokio::spawn(async move {
            for i in 0..200u8 {
                tx.send(Ok(data(i, 100))).await.unwrap();
            }
        });
        let runs = runs(Coalesce::new(body)).await;
        let longest = runs.iter().map(Vec::len).max().unwrap();
        // One frame per turn at most, so a run holds at most RUN_TURNS + 1 frames: a fraction
        // of the 656 that 64 KiB of 100-byte frames would be.
        assert!(
            longest <= usize::from(RUN_TURNS) + 1,
            "a run of {longest} frames"
        );
        assert!(longest > 1, "small frames were not gathered at all");
        let fills: Vec<u8> = runs
            .iter()
            .flatten()
            .map(|f| f.data_ref().unwrap()[0])
            .collect();
        assert_eq!(fills, (0..200).collect::<Vec<u8>>());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_frame_before_a_pause_is_released_without_waiting_for_more() {
        let (tx, body) = channel_body();
        let (next_tx, mut next_rx) = mpsc::channel::<()>(1);
        tokio::spawn(async move {
            for i in 0..3u8 {
                tx.send(Ok(data(i, 100))).await.unwrap();
                // The next piece only once the consumer has this one: held back, it never comes.
                if next_rx.recv().await.is_none() {
                    return;
                }
            }
        });
        let mut body = Coalesce::new(body);
        for i in 0..3u8 {
            let frame = tokio::time::timeout(std::time::Duration::from_secs(30), body.frame())
                .await
                .unwrap_or_else(|_| panic!("frame {i} was held back for more"))
                .unwrap()
                .unwrap();
            assert_eq!(frame.data_ref().unwrap()[..], [i; 100]);
            next_tx.send(()).await.unwrap();
        }
        assert!(body.frame().await.is_none());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn held_frames_come_before_the_error_and_trailers_after_data() {
        let (tx, body) = channel_body();
        tokio::spawn(async move {
            tx.send(Ok(data(1, 10))).await.unwrap();
            tx.send(Ok(data(2, 10))).await.unwrap();
            tx.send(Err("upstream reset")).await.unwrap();
        });
        let mut body = Coalesce::new(body);
        assert_eq!(
            body.frame().await.unwrap().unwrap().data_ref().unwrap()[0],
            1
        );
        assert_eq!(
            body.frame().await.unwrap().unwrap().data_ref().unwrap()[0],
            2
        );
        assert_eq!(body.frame().await.unwrap().unwrap_err(), "upstream reset");
        assert!(body.frame().await.is_none());

        let mut trailers = HeaderMap::new();
        trailers.insert("grpc-status", "0".parse().unwrap());
        let frames = vec![
            Ok::<_, Infallible>(data(1, 10)),
            Ok(Frame::trailers(trailers.clone())),
        ];
        let collected = Coalesce::new(StreamBody::new(futures_util::stream::iter(frames)))
            .collect()
            .await
            .unwrap();
        assert_eq!(collected.trailers(), Some(&trailers));
        assert_eq!(collected.to_bytes(), Bytes::from(vec![1; 10]));
    }

    #[test]
    fn the_size_hint_and_end_stay_those_of_the_inner_body() {
        let full = http_body_util::Full::new(Bytes::from_static(b"twelve bytes"));
        let body = Coalesce::new(full);
        assert_eq!(body.size_hint().exact(), Some(12));
        assert!(!body.is_end_stream());
        let empty = Coalesce::new(http_body_util::Empty::<Bytes>::new());
        assert!(empty.is_end_stream());
        assert_eq!(empty.size_hint().exact(), Some(0));
    }
}
