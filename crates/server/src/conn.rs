//! Serving connections: accept, the PROXY protocol header on listeners that expect one, TLS
//! handshake with ALPN, then hyper (HTTP/1.1 keep-alive, HTTP/2, or both on a cleartext port by
//! sniffing the h2c prior-knowledge preface, in [`crate::h2c`]).
//!
//! Each connection runs in its own task and holds a drain guard; shutdown tells every connection
//! to finish its in-flight requests and close, then waits for the guards to drop.
//!
//! Reload: a listener's [`ListenerState`] sits behind an [`ArcSwap`] that a reload replaces
//! whole. Connection-level settings (TLS acceptor, limits, protocols) are read once, at accept;
//! the pipeline is loaded again for every request and kept to its end, so a request in flight
//! finishes on the state it started with and the next one on the same keep-alive or HTTP/2
//! connection sees the new config.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use arc_swap::ArcSwap;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use sluice_config::{ListenerLimits, Protocols};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio_rustls::TlsAcceptor;

use crate::client::Client;
use crate::h2c::{self, Sniffed};
use crate::metrics::ListenerMetrics;
use crate::pipeline::Pipeline;
use crate::proxy_protocol::{self, Prefixed};

/// What a listener's connections read when they are accepted, for one config. The socket
/// itself is not in here: the accept loop owns it, so it closes the moment accepting stops, not
/// when the last connection has drained. Neither is the pipeline: a connection holds this for
/// its whole life, and must not keep an old config's routes and upstream pools alive with it.
pub struct ListenerTask {
    pub name: String,
    pub tls: Option<TlsAcceptor>,
    pub protocols: Protocols,
    pub limits: ListenerLimits,
    /// Connections start with a PROXY protocol header naming the real client.
    pub proxy_protocol: bool,
    pub metrics: ListenerMetrics,
    builders: Builders,
}

impl ListenerTask {
    pub fn new(
        name: String,
        tls: Option<TlsAcceptor>,
        protocols: Protocols,
        limits: ListenerLimits,
        proxy_protocol: bool,
        metrics: ListenerMetrics,
    ) -> Self {
        Self {
            builders: builders(&limits),
            name,
            tls,
            protocols,
            limits,
            proxy_protocol,
            metrics,
        }
    }
}

/// A listener's state for one config: its connections' settings, read at accept, and the
/// pipeline each request loads when it starts.
pub struct ListenerState {
    pub task: Arc<ListenerTask>,
    pub pipeline: Arc<Pipeline>,
}

/// A listener's current [`ListenerState`], replaced whole by a reload.
pub type SharedState = Arc<ArcSwap<ListenerState>>;

/// hyper builders for one listener, one per protocol: chosen by ALPN after a TLS handshake, by
/// the listener's protocols or the h2c preface on a cleartext port.
struct Builders {
    h1: auto::Builder<TokioExecutor>,
    h2: auto::Builder<TokioExecutor>,
}

fn builders(limits: &ListenerLimits) -> Builders {
    let mut base = auto::Builder::new(TokioExecutor::new());
    base.http1()
        .timer(TokioTimer::new())
        .keep_alive(true)
        .header_read_timeout(limits.header_read_timeout)
        // hyper refuses a header block larger than its read buffer with 431; its minimum is 8 KiB.
        .max_buf_size(limits.max_header_size.max(8192))
        .max_headers(limits.max_headers);
    base.http2()
        .timer(TokioTimer::new())
        // WebSocket over HTTP/2 (RFC 8441): SETTINGS_ENABLE_CONNECT_PROTOCOL; the proxy decides
        // per route which `:protocol`s pass (`proxy/upgrade.rs`).
        .enable_connect_protocol()
        .max_concurrent_streams(limits.max_concurrent_streams)
        // Rapid reset (CVE-2023-44487): a client that opens and cancels streams faster than
        // they are served gets GOAWAY ENHANCE_YOUR_CALM after this many; and a connection whose
        // streams we keep resetting for its errors is closed the same way. hyper's defaults,
        // pinned here so an upgrade cannot loosen them (tests/it/hostile/h2.rs).
        .max_pending_accept_reset_streams(20)
        .max_local_error_reset_streams(1024)
        .max_header_list_size(u32::try_from(limits.max_header_size).unwrap_or(u32::MAX));
    Builders {
        h1: base.clone().http1_only(),
        h2: base.http2_only(),
    }
}

/// Accept connections until `stop` flips to true (process shutdown, or the listener was removed
/// by a reload) or its sender is dropped; connections then finish their requests and close.
pub async fn accept_loop(
    listener: TcpListener,
    shared: SharedState,
    mut stop: watch::Receiver<bool>,
    drain: mpsc::Sender<()>,
) {
    let mut backoff = Duration::from_millis(5);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.changed() => break,
        };
        let (stream, remote) = match accepted {
            Ok(ok) => {
                backoff = Duration::from_millis(5);
                ok
            }
            Err(err) => {
                // Usually EMFILE: back off instead of spinning; connections in flight carry on.
                let name = shared.load().task.name.clone();
                tracing::warn!(listener = %name, "accept failed: {err}; retrying in {backoff:?}");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        // Connection-level settings come from the config in force at accept.
        let task = shared.load().task.clone();
        let local = stream.local_addr().unwrap_or(remote);
        // Counted from accept, so connections still in their TLS handshake show as open.
        let open = task.metrics.connection();
        let (shared, stop, guard) = (shared.clone(), stop.clone(), drain.clone());
        tokio::spawn(async move {
            serve_stream(
                &task,
                shared,
                stream,
                Client::new(remote, local, task.tls.is_some()),
                stop,
            )
            .await;
            drop(open);
            drop(guard);
        });
    }
    drop(listener);
    tracing::debug!(listener = %shared.load().task.name, "stopped accepting");
}

async fn serve_stream(
    task: &ListenerTask,
    shared: SharedState,
    stream: TcpStream,
    mut client: Client,
    shutdown: watch::Receiver<bool>,
) {
    let mut stream = if task.proxy_protocol {
        // Under the header timeout: a peer that connects and says nothing costs no more here
        // than it would waiting for request headers.
        match proxy_protocol::read_header(stream, task.limits.header_read_timeout).await {
            Ok((source, stream)) => {
                // LOCAL / UNKNOWN: the balancer's own connection (health checks) stays itself.
                if let Some(source) = source {
                    client.remote = source;
                }
                stream
            }
            Err(err) => {
                // Closed without a response: whatever is talking does not speak the protocol
                // this port is configured for, so no reply would be understood.
                task.metrics.proxy_protocol_failed();
                return tracing::debug!(
                    listener = %task.name,
                    remote = %client.remote,
                    "PROXY protocol header refused: {err}"
                );
            }
        }
    } else {
        Prefixed::plain(stream)
    };
    let Some(acceptor) = &task.tls else {
        let builder = match cleartext_protocol(task, &mut stream, &client).await {
            Some(Sniffed::Http2) => &task.builders.h2,
            Some(Sniffed::Http1) => &task.builders.h1,
            Some(Sniffed::BrokenPreface) => return h2c::refuse(stream).await,
            None => return,
        };
        let (io, activity) = ActivityIo::new(stream);
        return serve_io(builder, io, task, shared, client, shutdown, activity).await;
    };
    let (io, activity) = ActivityIo::new(stream);
    let tls =
        match tokio::time::timeout(task.limits.tls_handshake_timeout, acceptor.accept(io)).await {
            Ok(Ok(tls)) => tls,
            Ok(Err(err)) => {
                task.metrics.tls_handshake_failed();
                return tracing::debug!(remote = %client.remote, "TLS handshake failed: {err}");
            }
            Err(_) => {
                task.metrics.tls_handshake_failed();
                return tracing::debug!(remote = %client.remote, "TLS handshake timed out");
            }
        };
    let builder = match tls.get_ref().1.alpn_protocol() {
        Some(b"h2") => &task.builders.h2,
        Some(_) => &task.builders.h1,
        // No ALPN: the client did not ask; HTTP/1.1 unless the listener only speaks h2.
        None if task.protocols.http1 => &task.builders.h1,
        None => &task.builders.h2,
    };
    serve_io(builder, tls, task, shared, client, shutdown, activity).await;
}

/// Which protocol a cleartext connection speaks: the listener's only one, or on a port with
/// both (and on an h2c-only port, to refuse anything else) what the first bytes say
/// ([`h2c::sniff`]), which are put back for hyper to read. `None`: the client went away or
/// stayed silent first.
async fn cleartext_protocol(
    task: &ListenerTask,
    stream: &mut Prefixed<TcpStream>,
    client: &Client,
) -> Option<Sniffed> {
    if !task.protocols.http2 {
        return Some(Sniffed::Http1);
    }
    match h2c::sniff(
        stream,
        task.protocols.http1,
        task.limits.header_read_timeout,
    )
    .await
    {
        Ok((sniffed, read)) => {
            if sniffed == Sniffed::BrokenPreface {
                // RFC 9113 §3.4: a connection error PROTOCOL_ERROR.
                tracing::debug!(listener = %task.name, remote = %client.remote, "invalid HTTP/2 preface: closing");
            }
            stream.unread(read);
            Some(sniffed)
        }
        Err(err) => {
            tracing::debug!(listener = %task.name, remote = %client.remote, "connection ended: {err}");
            None
        }
    }
}

async fn serve_io<I>(
    builder: &auto::Builder<TokioExecutor>,
    io: I,
    task: &ListenerTask,
    shared: SharedState,
    client: Client,
    mut shutdown: watch::Receiver<bool>,
    activity: Arc<AtomicU64>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    // Requests waiting for their response head: a connection with one is not idle, however
    // long the upstream takes (long polls); once the body streams, bytes move anyway.
    let waiting = Arc::new(AtomicU64::new(0));
    let waiting_in_service = waiting.clone();
    let link_shutdown = shutdown.clone();
    let service = service_fn(move |mut req: hyper::Request<Incoming>| {
        // Loaded per request and held to its end: a reload reaches the next request on this
        // connection, never one already running.
        let pipeline = shared.load().pipeline.clone();
        let waiting = Waiting::start(&waiting_in_service);
        if crate::tunnel::requested(&req) {
            // What a tunnel must know of its connection (see `crate::tunnel`).
            req.extensions_mut().insert(crate::tunnel::ConnLink {
                shutdown: link_shutdown.clone(),
                busy: waiting_in_service.clone(),
            });
        }
        async move {
            let response = pipeline.handle(client, req).await;
            drop(waiting);
            Ok::<_, Infallible>(response)
        }
    });
    // With upgrades: an HTTP/1.1 connection can be handed over to a tunnel after a 101. That
    // way of serving ignores `http1_only` / `http2_only`; the guard holds the connection to them.
    let io = crate::preface::PrefaceGuard::new(io, crate::preface::Expect::of(builder));
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), service);
    tokio::pin!(conn);
    // hyper bounds the wait for request headers (h1, idle keep-alive included); this watchdog
    // closes connections on which no byte moved for `idle_timeout` (mostly idle HTTP/2).
    let idle_timeout = task.limits.idle_timeout;
    let mut idle_check =
        tokio::time::interval_at(tokio::time::Instant::now() + idle_timeout, idle_timeout);
    let mut last_seen = activity.load(Ordering::Relaxed);
    let mut closing = false;
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(err) = result {
                    tracing::debug!(remote = %client.remote, "connection ended: {err}");
                }
                return;
            }
            _ = shutdown.changed(), if !closing => {
                conn.as_mut().graceful_shutdown();
                closing = true;
            }
            _ = idle_check.tick() => {
                let now = activity.load(Ordering::Relaxed);
                if now == last_seen && waiting.load(Ordering::Relaxed) == 0 {
                    if closing {
                        // Graceful close needs the client's help (HTTP/2 waits for a PING ack);
                        // a client silent for another idle period is dropped.
                        tracing::debug!(remote = %client.remote, "dropping unresponsive connection");
                        return;
                    }
                    tracing::debug!(remote = %client.remote, "closing idle connection");
                    conn.as_mut().graceful_shutdown();
                    closing = true;
                }
                last_seen = now;
            }
        }
    }
}

/// Counts a request as waiting for its response head until dropped (also when hyper drops the
/// request because the client went away).
struct Waiting(Arc<AtomicU64>);

impl Waiting {
    fn start(count: &Arc<AtomicU64>) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Self(count.clone())
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A socket that counts reads and writes, so the idle watchdog can tell whether anything moved.
struct ActivityIo {
    inner: Prefixed<TcpStream>,
    activity: Arc<AtomicU64>,
}

impl ActivityIo {
    /// `inner`, and the counter its reads and writes bump.
    fn new(inner: Prefixed<TcpStream>) -> (Self, Arc<AtomicU64>) {
        let activity = Arc::new(AtomicU64::new(0));
        (
            Self {
                inner,
                activity: activity.clone(),
            },
            activity,
        )
    }

    fn touch(&self) {
        self.activity.fetch_add(1, Ordering::Relaxed);
    }
}

impl AsyncRead for ActivityIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if polled.is_ready() {
            self.touch();
        }
        polled
    }
}

impl AsyncWrite for ActivityIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if polled.is_ready() {
            self.touch();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if polled.is_ready() {
            self.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
