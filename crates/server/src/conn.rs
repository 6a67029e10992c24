//! Serving connections: accept, the PROXY protocol header on listeners that expect one, TLS
//! handshake with ALPN, then hyper (HTTP/1.1 keep-alive, HTTP/2, or both on a cleartext port by
//! sniffing the h2c prior-knowledge preface).
//!
//! Each connection runs in its own task and holds a drain guard; shutdown tells every connection
//! to finish its in-flight requests and close, then waits for the guards to drop.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use sluice_config::{ListenerLimits, Protocols};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio_rustls::TlsAcceptor;

use crate::client::Client;
use crate::idle::{ClientIo, ConnState};
use crate::limits::ConnectionSlots;
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
    /// `max_connections` of the listener and of the server: a permit per open connection.
    pub slots: ConnectionSlots,
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
        // Off: hyper's timer also runs while a keep-alive connection is idle; `idle.rs` times
        // request heads from their first byte instead.
        .header_read_timeout(None)
        // hyper refuses a header block larger than its read buffer with 431; its minimum is 8 KiB.
        .max_buf_size(limits.max_header_size.max(8192))
        .max_headers(limits.max_headers);
    base.http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(limits.max_concurrent_streams)
        .keep_alive_interval(limits.h2_keep_alive_interval)
        .keep_alive_timeout(limits.h2_keep_alive_timeout)
        // h2 refuses a list whose size reaches its setting; +1 lets a list of exactly
        // `max_header_size` bytes through, as on HTTP/1.1.
        .max_header_list_size(
            u32::try_from(limits.max_header_size.saturating_add(1)).unwrap_or(u32::MAX),
        );
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
        // At `max_connections` this waits, and the kernel's backlog holds new connections.
        let slot = tokio::select! {
            slot = task.slots.ready(&task.metrics) => slot,
            _ = shutdown.changed() => break,
        };
        let Some(slot) = slot else { break };
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
        let Some(permit) = task.slots.admit(slot, &task.metrics).await else {
            break;
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
            drop(permit);
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
    let state = Arc::new(ConnState::default());
    let Some(acceptor) = &task.tls else {
        let io = ClientIo::new(stream, state.clone(), Some(task.limits.header_read_timeout));
        return serve_io(&builders.plain, io, task, client, shutdown, state).await;
    };
    // The header timer starts once the handshake is over (it has its own timeout).
    let io = ClientIo::new(stream, state.clone(), None);
    let mut tls =
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
    if std::ptr::eq(builder, &builders.h2) {
        state.set_h2();
    } else {
        tls.get_mut()
            .0
            .start_header_timer(task.limits.header_read_timeout);
    }
    serve_io(builder, tls, task, client, shutdown, state).await;
}

async fn serve_io<I>(
    builder: &auto::Builder<TokioExecutor>,
    io: I,
    task: &ListenerTask,
    client: Client,
    mut shutdown: watch::Receiver<bool>,
    state: Arc<ConnState>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let pipeline = task.pipeline.clone();
    let in_service = state.clone();
    let service = service_fn(move |req: hyper::Request<Incoming>| {
        let pipeline = pipeline.clone();
        // Counted from here to the end of the response body: see `idle.rs`.
        let exchange = in_service.start(req.version());
        async move {
            let response = pipeline.handle(client, req).await;
            Ok::<_, Infallible>(exchange.respond(response))
        }
    });
    let conn = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(conn);
    // This watchdog closes connections on which no request made progress for `idle_timeout`
    // (idle keep-alive, HTTP/2 without streams, clients that stopped reading); request heads
    // are timed in `ClientIo` (see `idle.rs`).
    let idle_timeout = task.limits.idle_timeout;
    let mut idle_check =
        tokio::time::interval_at(tokio::time::Instant::now() + idle_timeout, idle_timeout);
    let mut last_seen = state.progress();
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
                let now = state.progress();
                if now == last_seen && !state.waiting() {
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
