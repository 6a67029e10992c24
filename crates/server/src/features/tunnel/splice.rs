//! Splicing two connections: tokio's `copy_bidirectional` moves the bytes (and passes each
//! side's end of stream on as a shutdown of the other's write half); around it, every read or
//! write that moved a byte stamps the time, and a timer closes the tunnel once nothing has moved
//! for the idle timeout. The shutdown signal closes it at once.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::shared::metrics::TunnelEnd;

/// How a splice ended, and what it moved.
pub(super) struct Spliced {
    pub end: TunnelEnd,
    pub from_client: u64,
    pub from_upstream: u64,
}

/// Splice `client` and `upstream` until both directions end, an error, `idle` without a byte,
/// or `shutdown`.
pub(super) async fn splice<C, U>(
    client: C,
    upstream: U,
    idle: Duration,
    shutdown: Option<watch::Receiver<bool>>,
) -> Spliced
where
    C: AsyncRead + AsyncWrite + Unpin,
    U: AsyncRead + AsyncWrite + Unpin,
{
    let start = Instant::now();
    // Milliseconds from `start` to the last byte moved, either way.
    let last = Arc::new(AtomicU64::new(0));
    // Bytes read from each side, counted as they move: a tunnel that ends by error, silence or
    // shutdown still reports what it carried (copy_bidirectional only tells on a clean end).
    let (client_read, upstream_read) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut client = Stamped {
        inner: client,
        start,
        last: last.clone(),
        read: client_read.clone(),
    };
    let mut upstream = Stamped {
        inner: upstream,
        start,
        last: last.clone(),
        read: upstream_read.clone(),
    };
    let ended = |end| Spliced {
        end,
        from_client: client_read.load(Ordering::Relaxed),
        from_upstream: upstream_read.load(Ordering::Relaxed),
    };
    let copy = tokio::io::copy_bidirectional(&mut client, &mut upstream);
    tokio::pin!(copy);
    let shutdown = async {
        match shutdown {
            Some(mut rx) => {
                // An error means the server is gone: as good as shutting down.
                let _ = rx.wait_for(|down| *down).await;
            }
            None => std::future::pending().await,
        }
    };
    tokio::pin!(shutdown);
    let mut deadline = start + idle;
    loop {
        tokio::select! {
            copied = &mut copy => {
                return match copied {
                    Ok((from_client, from_upstream)) => Spliced {
                        end: TunnelEnd::Closed,
                        from_client,
                        from_upstream,
                    },
                    Err(err) => {
                        tracing::debug!("tunnel failed: {err}");
                        ended(TunnelEnd::Error)
                    }
                };
            }
            () = &mut shutdown => {
                return ended(TunnelEnd::Shutdown);
            }
            () = tokio::time::sleep_until(deadline) => {
                let moved = start + Duration::from_millis(last.load(Ordering::Relaxed));
                if moved + idle <= Instant::now() {
                    return ended(TunnelEnd::IdleTimeout);
                }
                deadline = moved + idle;
            }
        }
    }
}

/// A connection that stamps the time whenever a read or write moves bytes, and counts the
/// bytes read from it.
struct Stamped<T> {
    inner: T,
    start: Instant,
    last: Arc<AtomicU64>,
    read: Arc<AtomicU64>,
}

impl<T> Stamped<T> {
    fn stamp(&self) {
        // Rounded up: the idle deadline is never earlier than a full timeout after the byte.
        let millis = self.start.elapsed().as_nanos().div_ceil(1_000_000);
        let millis = u64::try_from(millis).unwrap_or(u64::MAX);
        self.last.store(millis, Ordering::Relaxed);
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Stamped<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        let got = buf.filled().len().saturating_sub(before);
        if matches!(polled, Poll::Ready(Ok(()))) && got > 0 {
            self.stamp();
            self.read.fetch_add(got as u64, Ordering::Relaxed);
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Stamped<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.stamp();
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(start_paused = true)]
    async fn bytes_pass_both_ways_and_silence_ends_it() {
        let (client, mut client_far) = tokio::io::duplex(64);
        let (upstream, mut upstream_far) = tokio::io::duplex(64);
        let idle = Duration::from_secs(60);
        let task = tokio::spawn(splice(client, upstream, idle, None));
        client_far.write_all(b"ping").await.unwrap();
        let mut buf = [0u8; 4];
        upstream_far.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ping");
        // Activity half-way through the idle period pushes the deadline on.
        tokio::time::sleep(Duration::from_secs(40)).await;
        upstream_far.write_all(b"pong").await.unwrap();
        client_far.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"pong");
        tokio::time::sleep(Duration::from_secs(40)).await;
        assert!(
            !task.is_finished(),
            "40s after the last byte is not idle yet"
        );
        let spliced = task.await.unwrap();
        assert_eq!(spliced.end, TunnelEnd::IdleTimeout);
        // What it carried is reported on this ending too.
        assert_eq!((spliced.from_client, spliced.from_upstream), (4, 4));
        // The far ends see the tunnel closed.
        assert_eq!(client_far.read(&mut buf).await.unwrap(), 0);
    }

    #[tokio::test]
    async fn an_end_of_stream_is_passed_on_and_both_ends_close_it() {
        let (client, mut client_far) = tokio::io::duplex(64);
        let (upstream, mut upstream_far) = tokio::io::duplex(64);
        let task = tokio::spawn(splice(client, upstream, Duration::from_secs(60), None));
        client_far.write_all(b"bye").await.unwrap();
        client_far.shutdown().await.unwrap();
        let mut got = Vec::new();
        upstream_far.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"bye");
        upstream_far.write_all(b"ok").await.unwrap();
        upstream_far.shutdown().await.unwrap();
        let mut back = Vec::new();
        client_far.read_to_end(&mut back).await.unwrap();
        assert_eq!(back, b"ok");
        let spliced = task.await.unwrap();
        assert_eq!(spliced.end, TunnelEnd::Closed);
        assert_eq!((spliced.from_client, spliced.from_upstream), (3, 2));
    }

    #[tokio::test]
    async fn shutdown_closes_it_at_once() {
        let (client, _client_far) = tokio::io::duplex(64);
        let (upstream, _upstream_far) = tokio::io::duplex(64);
        let (tx, rx) = watch::channel(false);
        let task = tokio::spawn(splice(client, upstream, Duration::from_secs(600), Some(rx)));
        tx.send(true).unwrap();
        assert_eq!(task.await.unwrap().end, TunnelEnd::Shutdown);
    }
}
