//! The request body's limits while it streams: `max_body_size` counted byte by byte (a body
//! without `Content-Length`, or one longer than it declared, cannot slip past the up-front
//! check) and `body_timeout`, the whole body's time from the request head on.
//!
//! Past either, the body fails with a [`BodyLimitError`]; the proxy sees it as the client's fault
//! and answers 413 (RFC 9110 §15.5.14) or 408 (§15.5.9) when no response was sent yet, or cuts
//! the upstream request off when one was. Nothing is buffered: each frame is passed on as it
//! comes, so a limit costs a counter and one timer.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use sluice_config::BodyLimits;
use sluice_core::{Body, BoxError};
use tokio::time::{Instant, Sleep};

use crate::shared::metrics::limits::{RequestLimit, RequestLimitMetrics};
use crate::shared::request::BodyLimitError;

/// `body` under `limits`, timed from `start` (when the request head arrived); returned as is
/// when it is empty or the route has no limits.
pub fn limit_body(
    body: Body,
    limits: &BodyLimits,
    start: std::time::Instant,
    metrics: &RequestLimitMetrics,
) -> Body {
    if matches!(body, Body::Empty) || (limits.max_size.is_none() && limits.timeout.is_none()) {
        return body;
    }
    let deadline = limits.timeout.map(|timeout| {
        (
            timeout,
            Box::pin(tokio::time::sleep_until(Instant::from_std(start + timeout))),
        )
    });
    Body::stream(Limited {
        inner: body,
        max: limits.max_size,
        seen: 0,
        deadline,
        metrics: metrics.clone(),
        failed: false,
    })
}

struct Limited {
    inner: Body,
    max: Option<u64>,
    seen: u64,
    deadline: Option<(Duration, Pin<Box<Sleep>>)>,
    metrics: RequestLimitMetrics,
    /// The error was returned once; the body is over.
    failed: bool,
}

impl Limited {
    fn fail(&mut self, error: BodyLimitError) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.failed = true;
        self.metrics.exceeded(match error {
            BodyLimitError::TooLarge { .. } => RequestLimit::BodySize,
            BodyLimitError::TimedOut { .. } => RequestLimit::BodyTimeout,
        });
        Poll::Ready(Some(Err(Box::new(error))))
    }
}

impl http_body::Body for Limited {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if self.failed {
            return Poll::Ready(None);
        }
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
        {
            self.seen += data.len() as u64;
            if let Some(max) = self.max
                && self.seen > max
            {
                return self.fail(BodyLimitError::TooLarge { max });
            }
        }
        if polled.is_pending()
            && let Some((timeout, sleep)) = &mut self.deadline
            && sleep.as_mut().poll(cx).is_ready()
        {
            let timeout = *timeout;
            return self.fail(BodyLimitError::TimedOut { timeout });
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
