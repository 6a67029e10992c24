//! Serving an HTTP/1.1 connection, and parking it while it is idle.
//!
//! hyper keeps two buffers for every HTTP/1.1 connection for its whole life: the read buffer
//! (8 KiB, reserved before every read, also while the connection waits for its next request)
//! and the buffer response heads are written into (8 KiB, allocated with the connection). With
//! the connection's state that is most of what an idle keep-alive connection costs (about 26
//! KiB of RSS each, `docs/performance.md`), and most keep-alive connections are idle most of
//! the time. So once a connection has sat idle for [`PARK_AFTER`] at a request boundary, the
//! hyper connection is taken apart ([`hyper::server::conn::http1::UpgradeableConnection::into_parts`]
//! hands back the socket and any bytes it had read but not parsed) and dropped with its buffers.
//! The parked connection waits for its next bytes with a small read of its own, then gets a new
//! hyper connection that first reads what was handed back. A busy connection is never parked
//! (the check runs once per [`PARK_AFTER`], not per request), so the keep-alive path costs
//! nothing more per request.
//!
//! When parking is safe: hyper must be between requests with nothing left to write. The
//! service says whether a request is in progress ([`ConnState::at_boundary`]); [`Probe`], the
//! last layer under hyper, sees whether hyper's last read found nothing to read and whether all
//! it wrote was flushed. A request with a body keeps the connection from parking until the next
//! request starts: whether hyper has read all of that body cannot be seen from here, and bytes
//! of a body must never be read as the next request's head. Bytes hyper had read ahead (part
//! of a pipelined head) come back from `into_parts` and are read first by the next hyper
//! connection, so nothing the client sent is lost or reordered.
//!
//! The watchdog (`idle_timeout`, graceful shutdown) is the same as for HTTP/2 in `conn.rs`; a
//! parked connection is closed at once on shutdown (it has no request in flight) and when its
//! `idle_timeout` runs out.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::HttpService;
use hyper_util::rt::TokioIo;
use sluice_core::Body;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::net::idle::ConnState;
use crate::shared::metrics::ListenerMetrics;

/// How long a connection must be idle (no request progress) before it is parked. Long enough
/// that a client sending requests one after the other is never parked between them (parking
/// and resuming cost a hyper connection's set-up), short enough that idle connections give
/// their buffers back soon.
pub const PARK_AFTER: Duration = Duration::from_secs(1);

/// Bytes the parked connection reads to learn that the client is sending again; hyper reads
/// the rest. Small: it sits in every parked connection's task.
const WAKE_READ: usize = 64;

/// What one listener's HTTP/1.1 connections share.
pub struct Listener<'a> {
    pub builder: &'a http1::Builder,
    pub idle_timeout: Duration,
    /// `sluice_connections_parked` counts the parked ones.
    pub metrics: &'a ListenerMetrics,
}

/// One HTTP/1.1 connection from its first request to its close, parked while idle.
pub async fn serve<I, S>(
    listener: Listener<'_>,
    io: I,
    mut service: S,
    state: Arc<ConnState>,
    mut shutdown: watch::Receiver<bool>,
    remote: std::net::SocketAddr,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: HttpService<Incoming, ResBody = Body> + Unpin + Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let Listener {
        builder,
        idle_timeout,
        metrics,
    } = listener;
    let mut io = io;
    let mut unread = Bytes::new();
    // When request progress was last seen: the idle clock of `idle_timeout`.
    let mut idle_since = Instant::now();
    let mut last_seen = state.progress();
    loop {
        let probe = Probe::new(io, unread, state.clone());
        // Boxed: the connection's state (about 1 KiB beside its buffers) is freed on parking,
        // and the task holds only a pointer to it.
        let conn = Box::new(
            builder
                .serve_connection(TokioIo::new(probe), service)
                .with_upgrades(),
        );
        let watch = Watchdog {
            state: &state,
            idle_timeout,
            idle_since: &mut idle_since,
            last_seen: &mut last_seen,
        };
        let Some(parts) = run(conn, watch, &mut shutdown, remote).await else {
            return;
        };
        let probe = parts.io.into_inner();
        service = parts.service;
        (io, unread) = probe.into_parts(parts.read_buf);
        // Parked: hyper's buffers are gone; wait for the client to say something.
        let _parked = metrics.parked();
        let deadline = idle_since + idle_timeout;
        let mut wake = [0u8; WAKE_READ];
        tokio::select! {
            read = io.read(&mut wake) => match read {
                Ok(n) if n > 0 => unread = join(unread, &wake[..n]),
                // The client closed (or broke) its idle connection: nothing to answer.
                _ => return,
            },
            _ = shutdown.changed() => return close(io).await,
            _ = tokio::time::sleep_until(deadline) => {
                tracing::debug!(%remote, "closing idle connection");
                return close(io).await;
            }
        }
    }
}

/// The idle clock one connection's watchdog keeps across its parks.
struct Watchdog<'a> {
    state: &'a ConnState,
    idle_timeout: Duration,
    idle_since: &'a mut Instant,
    last_seen: &'a mut u64,
}

/// What the watchdog decides at one of its looks.
enum Look {
    Busy,
    /// Idle for `idle_timeout`: close (gracefully first).
    Expired,
    /// Idle for a while at a request boundary: park.
    Park,
}

impl Watchdog<'_> {
    fn look(&mut self, now: Instant) -> Look {
        let progress = self.state.progress();
        if progress != *self.last_seen || self.state.waiting() {
            *self.last_seen = progress;
            *self.idle_since = now;
            return Look::Busy;
        }
        if now.duration_since(*self.idle_since) >= self.idle_timeout {
            return Look::Expired;
        }
        if now.duration_since(*self.idle_since) >= PARK_AFTER && self.state.at_boundary() {
            return Look::Park;
        }
        Look::Busy
    }
}

/// Drive one hyper connection until it ends (`None`) or parks (its parts).
async fn run<I, S>(
    mut conn: Box<http1::UpgradeableConnection<TokioIo<Probe<I>>, S>>,
    mut watch: Watchdog<'_>,
    shutdown: &mut watch::Receiver<bool>,
    remote: std::net::SocketAddr,
) -> Option<http1::Parts<TokioIo<Probe<I>>, S>>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: HttpService<Incoming, ResBody = Body> + Unpin + Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    // Looks once per `PARK_AFTER` (or `idle_timeout` if shorter), whatever the traffic.
    let period = watch.idle_timeout.min(PARK_AFTER);
    let mut ticks = tokio::time::interval_at(Instant::now() + period, period);
    let mut closing = false;
    loop {
        tokio::select! {
            result = Pin::new(&mut *conn) => {
                if let Err(err) = result {
                    tracing::debug!(%remote, "connection ended: {err}");
                }
                return None;
            }
            _ = shutdown.changed(), if !closing => {
                Pin::new(&mut *conn).graceful_shutdown();
                closing = true;
            }
            now = ticks.tick() => match watch.look(now) {
                Look::Busy => {}
                Look::Expired if closing => {
                    // Graceful close needs the client's help (it has to read the response
                    // being written); a client silent for another idle period is dropped.
                    tracing::debug!(%remote, "dropping unresponsive connection");
                    return None;
                }
                Look::Expired => {
                    tracing::debug!(%remote, "closing idle connection");
                    Pin::new(&mut *conn).graceful_shutdown();
                    closing = true;
                    *watch.idle_since = now;
                }
                Look::Park if closing => {}
                // `None` after an upgrade, but then the connection has ended above.
                Look::Park => return (*conn).into_parts(),
            },
        }
    }
}

/// Close a parked connection: the end of the stream (TLS `close_notify`), bounded in time.
async fn close<I: AsyncWrite + Unpin>(mut io: I) {
    let _ = tokio::time::timeout(Duration::from_secs(1), io.shutdown()).await;
}

/// `first` followed by `then`.
fn join(first: Bytes, then: &[u8]) -> Bytes {
    if first.is_empty() {
        return Bytes::copy_from_slice(then);
    }
    let mut joined = BytesMut::with_capacity(first.len() + then.len());
    joined.extend_from_slice(&first);
    joined.extend_from_slice(then);
    joined.freeze()
}

/// The socket as hyper sees it: first the bytes handed back at the last park, then the socket;
/// and what the watchdog must know to park safely (see the module docs), kept in [`ConnState`].
pub struct Probe<I> {
    inner: I,
    unread: Bytes,
    state: Arc<ConnState>,
}

impl<I> Probe<I> {
    fn new(inner: I, unread: Bytes, state: Arc<ConnState>) -> Self {
        Self {
            inner,
            unread,
            state,
        }
    }

    /// The socket and what is still to be read before it: hyper's unparsed bytes, then what
    /// it had not yet taken of `unread`. Copied: `read_buf` is a view of hyper's whole read
    /// buffer (8 KiB or more), which even an empty view would keep alive.
    fn into_parts(self, read_buf: Bytes) -> (I, Bytes) {
        let unread = if read_buf.is_empty() && self.unread.is_empty() {
            Bytes::new()
        } else if read_buf.is_empty() {
            self.unread
        } else {
            let mut joined = BytesMut::with_capacity(read_buf.len() + self.unread.len());
            joined.extend_from_slice(&read_buf);
            joined.extend_from_slice(&self.unread);
            joined.freeze()
        };
        (self.inner, unread)
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Probe<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if !this.unread.is_empty() {
            let n = this.unread.len().min(buf.remaining());
            buf.put_slice(&this.unread[..n]);
            this.unread.advance(n);
            this.state.io_read(true);
            return Poll::Ready(Ok(()));
        }
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        this.state.io_read(polled.is_ready());
        polled
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Probe<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.state.io_wrote();
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        self.state.io_wrote();
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_flush(cx);
        if let Poll::Ready(Ok(())) = polled {
            self.state.io_flushed();
        }
        polled
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.state.io_wrote();
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
