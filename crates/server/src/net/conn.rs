//! Serving connections: accept, the PROXY protocol header on listeners that expect one, TLS
//! handshake with ALPN, then hyper (HTTP/1.1 keep-alive, HTTP/2, or both on a cleartext port by
//! sniffing the h2c prior-knowledge preface, in [`crate::net::h2c`]).
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
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use hyper::body::{Body as _, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use sluice_config::{ListenerLimits, Protocols};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio_rustls::TlsAcceptor;

use crate::net::h2c::{self, Sniffed};
use crate::net::idle::{ClientIo, ConnState};
use crate::net::limits::ConnectionSlots;
use crate::net::preface::{Expect, PrefaceGuard};
use crate::net::proxy_protocol::{self, Prefixed};
use crate::net::workers::Workers;
use crate::pipeline::Pipeline;
use crate::pipeline::body::RequestBody;
use crate::shared::client::Client;
use crate::shared::metrics::ListenerMetrics;

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
    /// The QUIC side's settings, when the listener serves HTTP/3 (`crate::net::h3`).
    pub h3: Option<crate::net::h3::Settings>,
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
            h3: None,
        }
    }

    /// This listener also serves HTTP/3 with `h3`.
    pub fn with_h3(mut self, h3: Option<crate::net::h3::Settings>) -> Self {
        self.h3 = h3;
        self
    }
}

/// A listener's state for one config: its connections' settings, read at accept, and the
/// pipeline each request loads when it starts.
pub struct ListenerState {
    pub task: Arc<ListenerTask>,
    pub pipeline: Arc<Pipeline>,
    /// `max_connections` of the listener and of the server: a permit per open connection.
    pub slots: ConnectionSlots,
}

/// A listener's current [`ListenerState`], replaced whole by a reload.
pub type SharedState = Arc<ArcSwap<ListenerState>>;

/// hyper builders for one listener, one per protocol: chosen by ALPN after a TLS handshake, by
/// the listener's protocols or the h2c preface on a cleartext port. HTTP/1.1 is served by hyper
/// directly (so that idle connections can be parked, `crate::net::h1`), HTTP/2 through hyper-util.
struct Builders {
    h1: http1::Builder,
    h2: auto::Builder<TokioExecutor>,
}

/// Which of a listener's builders serves a connection.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Proto {
    Http1,
    Http2,
}

fn builders(limits: &ListenerLimits) -> Builders {
    let mut h1 = http1::Builder::new();
    h1.timer(TokioTimer::new())
        .keep_alive(true)
        // Off: hyper's timer also runs while a keep-alive connection is idle; `idle.rs` times
        // request heads from their first byte instead.
        .header_read_timeout(None)
        // hyper refuses a header block larger than its read buffer with 431; its minimum is 8 KiB.
        .max_buf_size(limits.max_header_size.max(8192))
        .max_headers(limits.max_headers);
    let mut h2 = auto::Builder::new(TokioExecutor::new());
    h2.http2()
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
        .keep_alive_interval(limits.h2_keep_alive_interval)
        .keep_alive_timeout(limits.h2_keep_alive_timeout)
        // h2 refuses a list whose size reaches its setting; +1 lets a list of exactly
        // `max_header_size` bytes through, as on HTTP/1.1.
        .max_header_list_size(
            u32::try_from(limits.max_header_size.saturating_add(1)).unwrap_or(u32::MAX),
        );
    Builders {
        h1,
        h2: h2.http2_only(),
    }
}

/// Accept connections until `stop` flips to true (process shutdown, or the listener was removed
/// by a reload) or its sender is dropped; connections then finish their requests and close.
pub async fn accept_loop(
    listener: TcpListener,
    shared: SharedState,
    mut stop: watch::Receiver<bool>,
    drain: mpsc::Sender<()>,
    workers: Workers,
) {
    let mut backoff = Duration::from_millis(5);
    loop {
        // The connection limits in force now. Only they are held while `accept` waits: the
        // settings (TLS certificates included) are read once a client is there, and nothing
        // held here keeps an old config's routes or upstream pools alive.
        let (slots, waiting) = {
            let state = shared.load();
            (state.slots.clone(), state.task.clone())
        };
        // At `max_connections` this waits, and the kernel's backlog holds new connections.
        let slot = tokio::select! {
            slot = slots.ready(&waiting.metrics) => slot,
            _ = stop.changed() => break,
        };
        drop(waiting);
        let Some(slot) = slot else { break };
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
        // Connection-level settings come from the config in force at accept.
        let task = shared.load().task.clone();
        let Some(permit) = slots.admit(slot, &task.metrics).await else {
            break;
        };
        let _ = stream.set_nodelay(true);
        let local = stream.local_addr().unwrap_or(remote);
        // Counted from accept, so connections still in their TLS handshake show as open.
        let open = task.metrics.connection();
        // Held as long as the connection, or the tunnel it may become, is open (`idle.rs`).
        let held = (open, permit, drain.clone());
        let (shared, stop) = (shared.clone(), stop.clone());
        workers.spawn(stream, move |stream| async move {
            serve_stream(
                &task,
                shared,
                stream,
                Client::new(remote, local, task.tls.is_some()),
                stop,
                held,
            )
            .await;
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
    held: impl Send + Sync + 'static,
) {
    let state = Arc::new(ConnState::holding(held));
    let mut stream = if task.proxy_protocol {
        // Under the header timeout: a peer that connects and says nothing costs no more here
        // than it would waiting for request headers.
        match Box::pin(proxy_protocol::read_header(
            stream,
            task.limits.header_read_timeout,
        ))
        .await
        {
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
        let proto = match Box::pin(cleartext_protocol(task, &mut stream, &client)).await {
            Some(Sniffed::Http2) => {
                state.set_h2();
                Proto::Http2
            }
            Some(Sniffed::Http1) => Proto::Http1,
            Some(Sniffed::BrokenPreface) => return Box::pin(h2c::refuse(stream)).await,
            None => return,
        };
        // Cleartext HTTP/1.1: cached static files go out with sendfile (`crate::net::sendfile`).
        let stream = crate::net::sendfile::FileWrites::new(stream, proto == Proto::Http1);
        let io = ClientIo::new(stream, state.clone(), Some(task.limits.header_read_timeout));
        // Boxed, here and below: a task's future is as large as its largest state, and the TLS
        // and HTTP/2 ones are kilobytes that a plain HTTP/1.1 connection would carry for its
        // whole life (`docs/performance.md`, "Memory").
        return Box::pin(serve_io(proto, io, task, shared, client, shutdown, state)).await;
    };
    // The header timer starts once the handshake is over (it has its own timeout).
    let io = ClientIo::new(stream, state.clone(), None);
    let handshake = tokio::time::timeout(task.limits.tls_handshake_timeout, acceptor.accept(io));
    // The TLS stream is boxed as it comes out of the handshake: rustls's connection state is
    // over a kilobyte inline, and the futures that serve the connection (`serve_io`,
    // `crate::net::h1::serve`) hold their socket in several places across their awaits, each a copy
    // of its size: about 9 KiB per TLS connection, against 8 bytes for a box
    // (`docs/performance.md`, "Memory").
    let handshake = Box::pin(async move { handshake.await.map(|tls| tls.map(Box::new)) });
    let mut tls = match handshake.await {
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
    let proto = match tls.get_ref().1.alpn_protocol() {
        Some(b"h2") => Proto::Http2,
        // A TLS-ALPN-01 validation (RFC 8737 §3): the handshake was the whole exchange; no
        // HTTP follows, so close.
        Some(crate::shared::acme::ACME_TLS_ALPN) => {
            use tokio::io::AsyncWriteExt as _;
            tracing::debug!(remote = %client.remote, "TLS-ALPN-01 validation handshake done");
            let _ = tls.shutdown().await;
            return;
        }
        Some(_) => Proto::Http1,
        // No ALPN: the client did not ask; HTTP/1.1 unless the listener only speaks h2.
        None if task.protocols.http1 => Proto::Http1,
        None => Proto::Http2,
    };
    if proto == Proto::Http2 {
        state.set_h2();
    } else {
        tls.get_mut()
            .0
            .start_header_timer(task.limits.header_read_timeout);
    }
    Box::pin(serve_io(proto, tls, task, shared, client, shutdown, state)).await;
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
    // Waiting for the first bytes is idle time, reading a preface or request line is a head's:
    // a client silent for either limit is closed.
    let limit = task
        .limits
        .header_read_timeout
        .min(task.limits.idle_timeout);
    match h2c::sniff(stream, task.protocols.http1, limit).await {
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
    proto: Proto,
    io: I,
    task: &ListenerTask,
    shared: SharedState,
    client: Client,
    mut shutdown: watch::Receiver<bool>,
    state: Arc<ConnState>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let in_service = state.clone();
    let link_shutdown = shutdown.clone();
    // `Alt-Svc: h3=":PORT"` on every response of a listener that serves HTTP/3 (RFC 7838 §3;
    // RFC 9114 §3.1.1): the UDP socket shares this connection's port.
    let alt_svc = task
        .h3
        .as_ref()
        .and_then(|h3| h3.alt_svc(client.local.port()));
    let requests = task.metrics.protocols();
    let service = service_fn(move |mut req: hyper::Request<Incoming>| {
        // Loaded per request and held to its end: a reload reaches the next request on this
        // connection, never one already running.
        let pipeline = shared.load().pipeline.clone();
        // Counted from here to the end of the response body: see `idle.rs`.
        let exchange = in_service.start(req.version());
        requests.request(req.version());
        let alt_svc = alt_svc.clone();
        if !req.body().is_end_stream() {
            in_service.reading_body();
        }
        if crate::shared::upgrade::requested(&req) {
            // What a tunnel must know of its connection (see `crate::features::tunnel`).
            req.extensions_mut()
                .insert(crate::shared::upgrade::ConnLink {
                    shutdown: link_shutdown.clone(),
                    conn: in_service.clone(),
                });
        }
        // Boxed: the request's future is kilobytes (the pipeline's phases, the proxy and its
        // upstream client), and hyper moves the future it is handed by value: on HTTP/2 into
        // a task per stream, which tokio moves several times while spawning and again when the
        // task completes (measured: a 4.5 KB future copied 11 times per request). Boxed here,
        // it is written once and every move after that is a pointer's.
        // (`docs/performance.md`, "TLS", "Round 2").
        Box::pin(async move {
            let mut response = pipeline.handle(client, req.map(RequestBody::from)).await;
            if let Some(alt_svc) = alt_svc {
                response
                    .headers_mut()
                    .insert(http::header::ALT_SVC, alt_svc);
            }
            Ok::<_, Infallible>(exchange.respond(response))
        })
    });
    if proto == Proto::Http1 {
        // hyper's HTTP/1.1 would answer the HTTP/2 preface with an error response; the guard
        // closes the connection instead, as on an HTTP/1.1-only port before.
        let io = PrefaceGuard::new(io, Expect::Http1);
        let listener = crate::net::h1::Listener {
            builder: &task.builders.h1,
            idle_timeout: task.limits.idle_timeout,
            metrics: &task.metrics,
        };
        return crate::net::h1::serve(listener, io, service, state, shutdown, client.remote).await;
    }
    // With upgrades: HTTP/2 extended CONNECT. That way of serving ignores `http2_only`; the
    // guard holds the connection to it.
    let builder = &task.builders.h2;
    let io = PrefaceGuard::new(io, Expect::of(builder));
    // Boxed: hyper-util's HTTP/2 connection is kilobytes, which `serve_io`'s future would
    // otherwise reserve for every connection, HTTP/1.1 ones included.
    let mut conn = Box::pin(builder.serve_connection_with_upgrades(TokioIo::new(io), service));
    // This watchdog closes connections on which no request made progress for `idle_timeout`
    // (idle keep-alive, HTTP/2 without streams, clients that stopped reading); request heads
    // are timed in `ClientIo` (see `idle.rs`).
    let idle_timeout = task.limits.idle_timeout;
    let mut idle_check =
        tokio::time::interval_at(tokio::time::Instant::now() + idle_timeout, idle_timeout);
    let mut last_seen = state.progress();
    let mut closing = false;
    // One wait for shutdown for the connection's life, not a new one per wake-up: the loop runs
    // every time hyper's connection is woken (a few times per request), and each new
    // `changed()` future would join the channel's waiter list and leave it again.
    let shutdown = shutdown.changed();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(err) = result {
                    tracing::debug!(remote = %client.remote, "connection ended: {err}");
                }
                return;
            }
            _ = &mut shutdown, if !closing => {
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
