//! [`DecompressBody`]: the stacked decoders as a streaming `http_body::Body`.
//!
//! Each poll fills at most one [`FRAME`] of output. Between two codings sits one buffer of the
//! same size, so a stage only decodes as much as the next can take: memory never follows the
//! compression ratio. Limits are checked on every stage's cumulative output before anything is
//! yielded, so the body fails instead of yielding a byte past `max_size`.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, Bytes};
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use sluice_core::{BoxError, Compression, ErrorKind};

use super::DecompressLimits;
use super::codec::{Corrupt, Decoder};

/// Largest decoded frame the body yields, and the size of each buffer between two codings.
pub const FRAME: usize = 64 * 1024;

/// Why a decoded body stopped. Always an error, never a silent end: hyper then aborts the
/// upstream request instead of finishing it as if the body were complete.
#[derive(Debug)]
pub struct DecompressError {
    kind: Option<ErrorKind>,
    message: String,
    source: Option<BoxError>,
}

impl DecompressError {
    fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        let message = message.into();
        Self {
            kind: Some(kind),
            message,
            source: None,
        }
    }

    /// `PayloadTooLarge` (limits), `BadRequest` (corrupt or truncated), or `None` when the
    /// incoming body itself failed: then the kind, if any, is in [`source`](std::error::Error::source).
    pub fn kind(&self) -> Option<ErrorKind> {
        self.kind
    }
}

impl fmt::Display for DecompressError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DecompressError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl From<Corrupt> for DecompressError {
    fn from(c: Corrupt) -> Self {
        Self::new(ErrorKind::BadRequest, c.0)
    }
}

/// A buffer between two codings: `buf[start..end]` is decoded but not yet consumed.
struct Mid {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
}

impl Mid {
    /// Room to write into, after moving unread bytes to the front when the tail is full.
    fn room(&mut self) -> &mut [u8] {
        if self.start == self.end {
            (self.start, self.end) = (0, 0);
        } else if self.end == self.buf.len() && self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            (self.start, self.end) = (0, self.end - self.start);
        }
        &mut self.buf[self.end..]
    }
}

/// A request body decoded on the fly; see the [module docs](super).
pub struct DecompressBody<B> {
    // Boxed so `B` need not be `Unpin`; one allocation per decoded request.
    inner: Pin<Box<B>>,
    inner_done: bool,
    trailers: Option<HeaderMap>,
    /// The current undecoded chunk from `inner`.
    input: Bytes,
    /// Decoders in decoding order: `stages[0]` reads `input`.
    stages: Vec<Decoder>,
    /// `mids[i]` is the output of `stages[i]` and input of `stages[i + 1]`.
    mids: Vec<Mid>,
    /// Bytes `stages[0]` consumed: the encoded size the ratio is measured against.
    encoded: u64,
    /// Cumulative output of each stage, including the frame being filled.
    produced: Vec<u64>,
    limits: DecompressLimits,
    /// Set once the body ended or failed; a failure repeats so no caller can mistake it for an end.
    state: State,
}

impl<B> DecompressBody<B> {
    /// Encoded bytes consumed so far.
    pub fn encoded_bytes(&self) -> u64 {
        self.encoded
    }

    /// Decoded bytes produced so far (the last stage's output).
    pub fn decoded_bytes(&self) -> u64 {
        self.produced.last().copied().unwrap_or(0)
    }
}

#[derive(Clone, Copy)]
enum State {
    Running,
    Ended,
    Failed(ErrorKind),
}

impl<B> DecompressBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    /// Decode `inner` with `codings` in decoding order (as [`plan`](super::plan) returns them;
    /// never empty: without codings there is nothing to wrap).
    pub fn new(
        inner: B,
        codings: &[Compression],
        limits: DecompressLimits,
    ) -> Result<Self, DecompressError> {
        let stages = codings
            .iter()
            .map(|&c| Decoder::new(c))
            .collect::<Result<Vec<_>, _>>()?;
        let mids = (1..stages.len())
            .map(|_| Mid {
                buf: vec![0; FRAME].into_boxed_slice(),
                start: 0,
                end: 0,
            })
            .collect();
        Ok(Self {
            inner: Box::pin(inner),
            inner_done: false,
            trailers: None,
            input: Bytes::new(),
            produced: vec![0; stages.len()],
            stages,
            mids,
            encoded: 0,
            limits,
            state: State::Running,
        })
    }

    /// Run every stage once, in order, writing the last stage's output into `out[*len..]`.
    /// Returns whether anything moved.
    fn pump(&mut self, out: &mut [u8], len: &mut usize) -> Result<bool, DecompressError> {
        let mut moved = false;
        let last = self.stages.len().saturating_sub(1);
        for (i, stage) in self.stages.iter_mut().enumerate() {
            let (before, after) = self.mids.split_at_mut(i);
            let input: &[u8] = match i.checked_sub(1) {
                None => &self.input,
                Some(p) => &before[p].buf[before[p].start..before[p].end],
            };
            let output: &mut [u8] = if i == last {
                &mut out[*len..]
            } else {
                after[0].room()
            };
            let step = stage.step(input, output)?;
            match i.checked_sub(1) {
                None => {
                    self.input.advance(step.consumed);
                    self.encoded += step.consumed as u64;
                }
                Some(p) => before[p].start += step.consumed,
            }
            if i == last {
                *len += step.produced;
            } else {
                after[0].end += step.produced;
            }
            self.produced[i] += step.produced as u64;
            moved |= step.consumed > 0 || step.produced > 0;
        }
        self.check_limits()?;
        Ok(moved)
    }

    /// Every stage's output counts, not just the last: a stack whose inner coding turns a huge
    /// intermediate stream into nothing would otherwise burn CPU without ever tripping a limit.
    fn check_limits(&self) -> Result<(), DecompressError> {
        let DecompressLimits {
            max_size,
            max_ratio,
        } = self.limits;
        let allowed_by_ratio = self.encoded.saturating_mul(max_ratio);
        for &produced in &self.produced {
            if produced > max_size {
                return Err(DecompressError::new(
                    ErrorKind::PayloadTooLarge,
                    format!("decoded request body exceeds {max_size} bytes"),
                ));
            }
            if produced > FRAME as u64 && produced > allowed_by_ratio {
                return Err(DecompressError::new(
                    ErrorKind::PayloadTooLarge,
                    format!("request body expands more than {max_ratio} times"),
                ));
            }
        }
        Ok(())
    }

    /// The inner body ended: every coding must have reached its end, or the body was cut off.
    fn check_complete(&self) -> Result<(), DecompressError> {
        let drained = self.input.is_empty() && self.mids.iter().all(|m| m.start == m.end);
        if drained && self.stages.iter().all(Decoder::is_complete) {
            Ok(())
        } else {
            Err(DecompressError::new(
                ErrorKind::BadRequest,
                "truncated request body",
            ))
        }
    }

    fn fill(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, DecompressError>>> {
        let mut out = vec![0; FRAME];
        let mut len = 0;
        loop {
            let moved = self.pump(&mut out, &mut len)?;
            if len == FRAME {
                break;
            }
            if moved {
                continue;
            }
            if !self.input.is_empty() {
                // Room everywhere and input left, yet no decoder moved: never loop on it.
                return Poll::Ready(Some(Err(DecompressError::new(
                    ErrorKind::BadRequest,
                    "decoder stalled",
                ))));
            }
            if self.inner_done {
                if len > 0 {
                    break;
                }
                self.check_complete()?;
                self.state = State::Ended;
                return Poll::Ready(self.trailers.take().map(|t| Ok(Frame::trailers(t))));
            }
            match self.inner.as_mut().poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => self.input = data,
                    Err(frame) => self.trailers = frame.into_trailers().ok(),
                },
                Poll::Ready(Some(Err(err))) => {
                    return Poll::Ready(Some(Err(DecompressError {
                        kind: None,
                        message: "reading the request body failed".into(),
                        source: Some(err.into()),
                    })));
                }
                Poll::Ready(None) => self.inner_done = true,
                // Decoded bytes are not held back while the client is slow.
                Poll::Pending if len > 0 => break,
                Poll::Pending => return Poll::Pending,
            }
        }
        out.truncate(len);
        Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))))
    }
}

impl<B> Body for DecompressBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = DecompressError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, DecompressError>>> {
        let this = self.get_mut();
        match this.state {
            State::Running => {}
            State::Ended => return Poll::Ready(None),
            State::Failed(kind) => {
                return Poll::Ready(Some(Err(DecompressError::new(
                    kind,
                    "request body already failed",
                ))));
            }
        }
        let result = ready!(this.fill(cx));
        if let Some(Err(err)) = &result {
            this.state = State::Failed(err.kind.unwrap_or(ErrorKind::BadRequest));
        }
        Poll::Ready(result)
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.state, State::Ended)
    }

    /// Unknown: the decoded length is only known at the end, so hyper sends the body chunked.
    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}
