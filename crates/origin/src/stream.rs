//! `GET /stream?chunks=N&size=S[&delay_ms=D]`: a JSON array of N elements sent chunked, one body
//! frame per element, optionally D milliseconds apart.
//!
//! This is the streaming workload of seed 004: a response of unknown length (no `Content-Length`,
//! so HTTP/1.1 sends it chunked) whose frames a proxy must pass on (or compress and flush) as they
//! come. Each element is exactly S bytes of JSON, `{"i":17,"data":"..."}`, padded with filler text
//! (see `padding.rs`); the `[`, the commas and the `]` ride in the element frames, so the body is
//! `N*S + N + 1` bytes in N frames. Generating an element is one allocation and one `memcpy` from
//! the pre-rendered template, so the origin produces well over 1 GB/s and never limits a benchmark.
//!
//! Unknown query parameters are ignored (benchmarks add cache-busters); known ones out of bounds
//! get a `400` that states the bound.

use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{Method, Response, StatusCode};
use http_body::{Frame, SizeHint};
use sluice_core::Body;
use tokio::time::{Instant, Sleep};

use crate::padding;
use crate::respond;

const MAX_CHUNKS: u64 = 1_000_000;
const MIN_SIZE: usize = 32;
const MAX_SIZE: usize = 1024 * 1024;
const MAX_DELAY_MS: u64 = 10_000;
/// `{"i":` + `,"data":"` + `"}`: an element's bytes besides the index digits and the padding.
const FIXED_OVERHEAD: usize = 5 + 9 + 2;

/// The validated query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Params {
    chunks: u64,
    size: usize,
    delay: Duration,
}

impl Default for Params {
    fn default() -> Self {
        Self {
            chunks: 10,
            size: 1024,
            delay: Duration::ZERO,
        }
    }
}

/// Parse `chunks`, `size` and `delay_ms` from the query string, each within its bound.
pub(crate) fn parse(query: Option<&str>) -> Result<Params, &'static str> {
    let mut params = Params::default();
    for (key, value) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        match &*key {
            "chunks" => {
                params.chunks = within(&value, 1, MAX_CHUNKS)
                    .ok_or("`chunks` must be an integer from 1 to 1000000")?;
            }
            "size" => {
                params.size = within(&value, MIN_SIZE as u64, MAX_SIZE as u64)
                    .ok_or("`size` must be an integer from 32 to 1048576 (bytes per element)")?
                    as usize;
            }
            "delay_ms" => {
                let ms = within(&value, 0, MAX_DELAY_MS)
                    .ok_or("`delay_ms` must be an integer from 0 to 10000")?;
                params.delay = Duration::from_millis(ms);
            }
            _ => {}
        }
    }
    Ok(params)
}

fn within(value: &str, min: u64, max: u64) -> Option<u64> {
    value.parse().ok().filter(|v| (min..=max).contains(v))
}

/// Answer `/stream` (GET or HEAD; the caller checked the method).
pub(crate) fn respond(method: &Method, query: Option<&str>) -> Response<Body> {
    let params = match parse(query) {
        Ok(params) => params,
        Err(message) => return respond::error(StatusCode::BAD_REQUEST, message),
    };
    let body = if method == Method::HEAD {
        Body::Empty
    } else {
        Body::stream(Elements::new(params))
    };
    let mut resp = Response::new(body);
    resp.headers_mut()
        .insert(CONTENT_TYPE, respond::APPLICATION_JSON);
    resp
}

/// The streaming body: produces element `next` on each poll, after the delay if there is one.
struct Elements {
    params: Params,
    next: u64,
    template: &'static [u8],
    /// Armed after each element when there is a delay; `None` before the first element.
    timer: Option<Pin<Box<Sleep>>>,
}

impl Elements {
    fn new(params: Params) -> Self {
        Self {
            params,
            next: 0,
            template: padding::template(),
            timer: None,
        }
    }

    fn arm_timer(&mut self) {
        let deadline = Instant::now() + self.params.delay;
        match &mut self.timer {
            Some(timer) => timer.as_mut().reset(deadline),
            None => self.timer = Some(Box::pin(tokio::time::sleep_until(deadline))),
        }
    }
}

impl http_body::Body for Elements {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        if this.next >= this.params.chunks {
            return Poll::Ready(None);
        }
        if let Some(timer) = &mut this.timer {
            ready!(timer.as_mut().poll(cx));
        }
        let index = this.next;
        let last = index + 1 == this.params.chunks;
        let frame = element(index, this.params.size, last, this.template);
        this.next += 1;
        if !this.params.delay.is_zero() && !last {
            this.arm_timer();
        }
        Poll::Ready(Some(Ok(Frame::data(frame))))
    }

    fn is_end_stream(&self) -> bool {
        self.next >= self.params.chunks
    }

    fn size_hint(&self) -> SizeHint {
        // A lower bound only: an exact hint would make hyper send Content-Length, and this
        // endpoint exists to be chunked.
        let mut hint = SizeHint::new();
        let left = self.params.chunks - self.next.min(self.params.chunks);
        hint.set_lower(left * (self.params.size as u64 + 1) + u64::from(left > 0));
        hint
    }
}

/// One frame: the separator (`[` first, `,` after), the element of exactly `size` bytes, and `]`
/// after the last one.
fn element(index: u64, size: usize, last: bool, template: &[u8]) -> Bytes {
    let mut digits = [0u8; 20];
    let digits = decimal(index, &mut digits);
    // `size >= MIN_SIZE (32) > FIXED_OVERHEAD + 7 digits`, so this never saturates in practice.
    let pad = size.saturating_sub(FIXED_OVERHEAD + digits.len());
    let from = padding::offset(index, pad);
    let mut out = Vec::with_capacity(size + 2);
    out.push(if index == 0 { b'[' } else { b',' });
    out.extend_from_slice(br#"{"i":"#);
    out.extend_from_slice(digits);
    out.extend_from_slice(br#","data":""#);
    out.extend_from_slice(&template[from..from + pad]);
    out.extend_from_slice(br#""}"#);
    if last {
        out.push(b']');
    }
    Bytes::from(out)
}

/// `n` in decimal, written at the end of `buf`, without going through `fmt`.
fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut start = buf.len();
    loop {
        start -= 1;
        buf[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[start..];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_bounds() {
        assert_eq!(parse(None), Ok(Params::default()));
        let p = parse(Some("chunks=3&size=32&delay_ms=7&cachebust=1")).unwrap_or_default();
        assert_eq!(
            p,
            Params {
                chunks: 3,
                size: 32,
                delay: Duration::from_millis(7)
            }
        );
        let p = parse(Some("chunks=1000000&size=1048576&delay_ms=10000")).unwrap_or_default();
        assert_eq!((p.chunks, p.size), (1_000_000, 1 << 20));
        for bad in [
            "chunks=0",
            "chunks=1000001",
            "chunks=x",
            "chunks=-1",
            "size=31",
            "size=1048577",
        ] {
            assert!(parse(Some(bad)).is_err(), "{bad}");
        }
        assert!(parse(Some("delay_ms=10001")).is_err_and(|m| m.contains("10000")));
    }

    #[test]
    fn decimal_matches_display() {
        let mut buf = [0u8; 20];
        for n in [0, 7, 10, 999_999, u64::MAX] {
            assert_eq!(decimal(n, &mut buf), n.to_string().as_bytes());
        }
    }

    #[test]
    fn elements_have_the_exact_size_and_framing() {
        let t = padding::template();
        for (index, size) in [(0, 32), (999_999, 32), (5, 1024), (12, MAX_SIZE)] {
            let first = index == 0;
            let e = element(index, size, true, t);
            assert_eq!(e.len(), size + 2, "separator + element + ]");
            assert_eq!(e[0], if first { b'[' } else { b',' });
            assert_eq!(e.last(), Some(&b']'));
            let v: serde_json::Value =
                serde_json::from_slice(&e[1..e.len() - 1]).unwrap_or_default();
            assert_eq!(v["i"], index);
        }
        assert_ne!(
            element(1, 200, false, t)[20..],
            element(2, 200, false, t)[20..]
        );
    }
}
