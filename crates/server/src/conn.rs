//! Serving connections: accept, the PROXY protocol header on listeners that expect one, TLS
//! handshake with ALPN, then hyper (HTTP/1.1 keep-alive, HTTP/2, or both on a cleartext port by
//! sniffing the h2c prior-knowledge preface).
//!
//! Each connection runs in its own task and holds a drain guard; shutdown tells every connection
//! to finish its in-flight requests and close, then waits for the guards to drop.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

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
use crate::metrics::ListenerMetrics;
use crate::pipeline::Pipeline;
use crate::proxy_protocol::{self, Prefixed};

/// What a listener's connections share. The socket itself is not in here: the accept loop owns
/// it, so it closes the moment accepting stops, not when the last connection has drained.
pub struct ListenerTask {
    pub name: String,
    pub tls: Option<TlsAcceptor>,
    pub protocols: Protocols,
    pub limits: ListenerLimits,
    /// Connections start with a PROXY protocol header naming the real client.
    pub proxy_protocol: bool,
    pub metrics: ListenerMetrics,
    pub pipeline: Arc<Pipeline>,
}

/// hyper builders for one listener: the cleartext one (h1, h2c or both by sniffing) and the
/// ones chosen by ALPN after a TLS handshake.
struct Builders {
    plain: auto::Builder<TokioExecutor>,
    h1: auto::Builder<TokioExecutor>,
    h2: auto::Builder<TokioExecutor>,
}

fn builders(limits: &ListenerLimits, protocols: Protocols) -> Builders {
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
        .max_header_list_size(u32::try_from(limits.max_header_size).unwrap_or(u32::MAX));
    let plain = match (protocols.http1, protocols.http2) {
        (true, false) => base.clone().http1_only(),
        (false, true) => base.clone().http2_only(),
        _ => base.clone(),
    };
    Builders {
        plain,
        h1: base.clone().http1_only(),
        h2: base.http2_only(),
    }
}

/// Accept connections until `shutdown` flips to true.
pub async fn accept_loop(
    listener: TcpListener,
    task: ListenerTask,
    mut shutdown: watch::Receiver<bool>,
    drain: mpsc::Sender<()>,
) {
    let builders = Arc::new(builders(&task.limits, task.protocols));
    let task = Arc::new(task);
    let mut backoff = Duration::from_millis(5);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.changed() => break,
        };
        let (stream, remote) = match accepted {
            Ok(ok) => {
                backoff = Duration::from_millis(5);
                ok
            }
            Err(err) => {
                // Usually EMFILE: back off instead of spinning; connections in flight carry on.
                tracing::warn!(listener = %task.name, "accept failed: {err}; retrying in {backoff:?}");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        // Counted from accept, so connections still in their TLS handshake show as open.
        let open = task.metrics.connection();
        let (task, builders, shutdown, guard) = (
            task.clone(),
            builders.clone(),
            shutdown.clone(),
            drain.clone(),
        );
        tokio::spawn(async move {
            serve_stream(
                &task,
                &builders,
                stream,
                Client {
                    remote,
                    tls: task.tls.is_some(),
                },
                shutdown,
            )
            .await;
            drop(open);
            drop(guard);
        });
    }
    drop(listener);
    tracing::debug!(listener = %task.name, "stopped accepting");
}

async fn serve_stream(
    task: &ListenerTask,
    builders: &Builders,
    stream: TcpStream,
    mut client: Client,
    shutdown: watch::Receiver<bool>,
) {
    let stream = if task.proxy_protocol {
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
    let activity = Arc::new(AtomicU64::new(0));
    let io = ActivityIo {
        inner: stream,
        activity: activity.clone(),
    };
    let Some(acceptor) = &task.tls else {
        return serve_io(&builders.plain, io, task, client, shutdown, activity).await;
    };
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
        Some(b"h2") => &builders.h2,
        Some(_) => &builders.h1,
        // No ALPN: the client did not ask; HTTP/1.1 unless the listener only speaks h2.
        None if task.protocols.http1 => &builders.h1,
        None => &builders.h2,
    };
    serve_io(builder, tls, task, client, shutdown, activity).await;
}

async fn serve_io<I>(
    builder: &auto::Builder<TokioExecutor>,
    io: I,
    task: &ListenerTask,
    client: Client,
    mut shutdown: watch::Receiver<bool>,
    activity: Arc<AtomicU64>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let pipeline = task.pipeline.clone();
    // Requests waiting for their response head: a connection with one is not idle, however
    // long the upstream takes (long polls); once the body streams, bytes move anyway.
    let waiting = Arc::new(AtomicU64::new(0));
    let waiting_in_service = waiting.clone();
    let link_shutdown = shutdown.clone();
    let service = service_fn(move |mut req: hyper::Request<Incoming>| {
        let pipeline = pipeline.clone();
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
