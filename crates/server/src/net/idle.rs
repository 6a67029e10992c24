//! When a client connection is idle, and how long a request head may take: the state the
//! connection's watchdog (in `conn.rs`) reads, and the HTTP/1 header timer.
//!
//! **Idle** means no request made progress for `idle_timeout`: none started, none is waiting for
//! its response head (a long poll is not idle, however long the upstream takes), and no frame of
//! a response body went out. Progress is counted at the HTTP level, not in socket bytes, so that
//! HTTP/2 keep-alive PINGs (which move bytes on an idle connection) do not keep it open, while a
//! client that stops reading a response (no frame can go out) still gets closed.
//!
//! **The header timer** (`header_read_timeout`) runs from the first byte of an HTTP/1 request
//! head until the head is complete (or, after a TLS handshake, from the first byte after it). An
//! idle keep-alive connection has no head in progress, so only `idle_timeout` applies to it, as
//! documented. hyper's own `header_read_timeout` cannot do this: its timer starts the moment the
//! connection is ready for the next request (hyper 1.x `proto/h1/conn.rs`, `poll_read_head`), so
//! an idle keep-alive connection was closed after `header_read_timeout` rather than
//! `idle_timeout`. So hyper's timer is off and this one sits in the socket wrapper: it sees the
//! first byte arrive, and fails the read (hyper then closes the connection) when the head has
//! not been handed to the service in time.
//!
//! A connection that sends nothing at all is closed by the watchdog after `idle_timeout` (a
//! TLS connection first has to finish its handshake within `tls_handshake_timeout`; on a
//! cleartext port that serves HTTP/2, `conn.rs` reads the first bytes to tell h2c from
//! HTTP/1.1 within the shorter of `idle_timeout` and `header_read_timeout`).
//!
//! A connection that became a tunnel (HTTP/1.1 `Upgrade`, `101`) is marked
//! [`ConnState::switched`]: its bytes are never a request head, so the timer never runs on it.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http::{Response, Version};
use http_body::{Frame, SizeHint};
use sluice_core::{Body, BoxError};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::time::{Instant, Sleep};

/// What one connection's requests report, for the watchdog and the header timer.
#[derive(Debug, Default)]
pub struct ConnState {
    /// Requests waiting for their response head, and open tunnels (see [`Self::busy`]).
    waiting: Arc<AtomicU64>,
    /// Requests from their start until their response body is done (or dropped).
    active: AtomicU64,
    /// Requests started, ever; the header timer stops when this moves.
    requests: AtomicU64,
    /// Anything a request did: starts, and response body frames handed to hyper.
    progress: AtomicU64,
    /// The connection speaks HTTP/2: no header timer (streams have no head to wait for).
    h2: AtomicBool,
    /// The connection was handed to a tunnel after a `101` (HTTP/1.1 Upgrade): its bytes are
    /// the tunnel's, never a request head, so no header timer either.
    switched: AtomicBool,
    /// HTTP/1.1: the last request has a body, which hyper may not have read to its end yet
    /// (cleared when the next request starts). Parking waits for the next request then.
    body: AtomicBool,
    /// HTTP/1.1: hyper's last read of the socket found nothing to read (`crate::net::h1::Probe`).
    read_blocked: AtomicBool,
    /// HTTP/1.1: hyper wrote to the socket since it last flushed it completely.
    unflushed: AtomicBool,
    /// What the connection holds for its whole life (its `max_connections` permits, its place
    /// in the open-connections gauge, its drain guard), kept here so that a tunnel the
    /// connection turns into keeps them too: a WebSocket counts as the connection it is.
    _held: Held,
}

/// `ConnState::_held`: anything, dropped with the last holder.
#[derive(Default)]
struct Held(Option<Box<dyn Send + Sync>>);

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Held(..)"
        } else {
            "Held(-)"
        })
    }
}

impl ConnState {
    /// The state of a connection that holds `held` until the connection, and any tunnel it
    /// becomes, is gone.
    pub fn holding(held: impl Send + Sync + 'static) -> Self {
        Self {
            _held: Held(Some(Box::new(held))),
            ..Self::default()
        }
    }

    /// The connection was handed over to a tunnel (after a `101`): stop timing request heads.
    pub fn switched(&self) {
        self.switched.store(true, Ordering::Relaxed);
    }

    /// No request head will come: HTTP/2, or a connection that became a tunnel.
    fn no_heads(&self) -> bool {
        self.h2.load(Ordering::Relaxed) || self.switched.load(Ordering::Relaxed)
    }

    /// A request arrived (its head is complete): count it until `Exchange` and its response
    /// body are done.
    pub fn start(self: &Arc<Self>, version: Version) -> Exchange {
        if version == Version::HTTP_2 {
            self.h2.store(true, Ordering::Relaxed);
        }
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.body.store(false, Ordering::Relaxed);
        self.progress.fetch_add(1, Ordering::Relaxed);
        self.waiting.fetch_add(1, Ordering::Relaxed);
        self.active.fetch_add(1, Ordering::Relaxed);
        Exchange {
            state: self.clone(),
            active: Some(Active(self.clone())),
        }
    }

    /// The request that just started has a body (HTTP/1.1; see [`Self::at_boundary`]).
    pub fn reading_body(&self) {
        self.body.store(true, Ordering::Relaxed);
    }

    /// hyper read the socket: `ready` if the read did not have to wait.
    pub fn io_read(&self, ready: bool) {
        self.read_blocked.store(!ready, Ordering::Relaxed);
    }

    /// hyper wrote (or tried to write) to the socket.
    pub fn io_wrote(&self) {
        self.unflushed.store(true, Ordering::Relaxed);
    }

    /// Everything hyper wrote to the socket has been flushed.
    pub fn io_flushed(&self) {
        self.unflushed.store(false, Ordering::Relaxed);
    }

    /// An HTTP/1.1 connection is between requests, as far as can be seen from outside hyper:
    /// no request in progress (none waiting for its response, no response body streaming), the
    /// last request's body (if any) not in the way, hyper's last read found nothing to read
    /// and all it wrote is flushed. Then hyper has nothing left to do but wait for the next
    /// request, and can be taken apart (`crate::net::h1`).
    pub fn at_boundary(&self) -> bool {
        !self.waiting()
            && self.active.load(Ordering::Relaxed) == 0
            && !self.body.load(Ordering::Relaxed)
            && self.read_blocked.load(Ordering::Relaxed)
            && !self.unflushed.load(Ordering::Relaxed)
            && !self.no_heads()
    }

    /// The connection was negotiated as HTTP/2 (ALPN).
    pub fn set_h2(&self) {
        self.h2.store(true, Ordering::Relaxed);
    }

    /// A number that moves whenever a request made progress; compare two readings.
    pub fn progress(&self) -> u64 {
        self.progress.load(Ordering::Relaxed)
    }

    /// The count that keeps the connection from being idle while it is above 0, for what
    /// outlives a request on it (an upgraded connection's tunnel: `crate::features::tunnel`).
    pub fn busy(&self) -> Arc<AtomicU64> {
        self.waiting.clone()
    }

    /// Some request is waiting for its response head: the connection is not idle.
    pub fn waiting(&self) -> bool {
        self.waiting.load(Ordering::Relaxed) > 0
    }
}

/// One request between its head and its response head. Dropped when the service returns (or
/// hyper drops the request because the client went away); hand its body guard to the response
/// with [`Exchange::respond`].
pub struct Exchange {
    state: Arc<ConnState>,
    active: Option<Active>,
}

impl Exchange {
    /// The response, with its body counted as progress frame by frame and the request counted
    /// active until the body is done.
    pub fn respond(mut self, response: Response<Body>) -> Response<Body> {
        let Some(active) = self.active.take() else {
            return response;
        };
        response.map(|body| match body {
            // Handed over in one write: nothing to follow frame by frame.
            Body::Empty | Body::Full(_) => body,
            Body::Stream(_) => Body::stream(Tracked {
                inner: body,
                active: Some(active),
            }),
        })
    }
}

impl Drop for Exchange {
    fn drop(&mut self) {
        self.state.waiting.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Counts a request as active until dropped.
struct Active(Arc<ConnState>);

impl Drop for Active {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::Relaxed);
        self.0.progress.fetch_add(1, Ordering::Relaxed);
    }
}

/// A response body that reports each frame as progress and ends the request's activity when it
/// ends.
struct Tracked {
    inner: Body,
    active: Option<Active>,
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let polled = ready!(Pin::new(&mut self.inner).poll_frame(cx));
        match &polled {
            Some(Ok(_)) => {
                if let Some(active) = &self.active {
                    active.0.progress.fetch_add(1, Ordering::Relaxed);
                }
            }
            _ => self.active = None,
        }
        Poll::Ready(polled)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The client's socket, with the HTTP/1 header timer (see the module docs).
pub struct ClientIo<I> {
    inner: I,
    state: Arc<ConnState>,
    /// `None` until the timer may run (after a TLS handshake), and for HTTP/2.
    header_timeout: Option<Duration>,
    timer: Option<Pin<Box<Sleep>>>,
    /// The request count when the timer was armed; `None` while it is not.
    armed_at: Option<u64>,
}

impl<I> ClientIo<I> {
    /// `header_timeout`: `None` to start the timer later with [`Self::start_header_timer`].
    pub fn new(inner: I, state: Arc<ConnState>, header_timeout: Option<Duration>) -> Self {
        Self {
            inner,
            state,
            header_timeout,
            timer: None,
            armed_at: None,
        }
    }

    /// Time request heads from now on (the TLS handshake is over).
    pub fn start_header_timer(&mut self, timeout: Duration) {
        self.header_timeout = Some(timeout);
        self.armed_at = None;
    }

    /// Arm the timer: bytes arrived while no request is in progress, so a head has begun.
    fn arm(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        match &mut self.timer {
            Some(timer) => timer.as_mut().reset(deadline),
            None => self.timer = Some(Box::pin(tokio::time::sleep_until(deadline))),
        }
        self.armed_at = Some(self.state.requests.load(Ordering::Relaxed));
    }

    /// Whether the head being timed has taken too long; disarms once it has become a request.
    fn head_timed_out(&mut self, cx: &mut Context<'_>) -> bool {
        let Some(armed_at) = self.armed_at else {
            return false;
        };
        if self.state.requests.load(Ordering::Relaxed) != armed_at || self.state.no_heads() {
            self.armed_at = None;
            return false;
        }
        self.timer
            .as_mut()
            .is_some_and(|timer| timer.as_mut().poll(cx).is_ready())
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for ClientIo<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.head_timed_out(cx) {
            // hyper fails the connection on a read error, as its own header timer did.
            return Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "request head not received within header_read_timeout",
            )));
        }
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        let got_bytes = matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before;
        if got_bytes
            && self.armed_at.is_none()
            && !self.state.no_heads()
            && self.state.active.load(Ordering::Relaxed) == 0
            && let Some(timeout) = self.header_timeout
        {
            self.arm(timeout);
        }
        polled
    }
}

crate::net::write_through::write_through!(ClientIo, inner);

/// What a tunnel may do with the connection it came from (`crate::shared::upgrade`).
impl crate::shared::upgrade::LinkedConnection for ConnState {
    fn busy(&self) -> Arc<AtomicU64> {
        ConnState::busy(self)
    }

    fn switched(&self) {
        ConnState::switched(self);
    }
}
