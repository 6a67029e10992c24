//! HTTP/3 (RFC 9114) over QUIC (RFC 9000): the third front end of a TLS listener, beside
//! HTTP/1.1 and HTTP/2 (`crate::net::conn`), handing the same [`Pipeline`] its requests.
//!
//! The QUIC stack is quinn (on tokio and rustls, with the workspace's one crypto provider,
//! *ring*) and the HTTP/3 layer the `h3` / `h3-quinn` crates, pinned to exact versions: they are
//! young, and this module (with the request body's variant in `crate::pipeline::body`) is the
//! only place that names them, so a switch (to tokio-quiche, say) touches these two files.
//! docs/http3.md says what was weighed.
//!
//! - One UDP socket per listener, bound to the TCP socket's address (`ops::running::sockets`),
//!   kept across reloads: a reload swaps the QUIC server configuration ([`Endpoint::reconfigure`],
//!   so rotated certificates reach new handshakes) and the listener's [`SharedState`], which
//!   every request loads when it starts, exactly as over TCP.
//! - The TLS side is the TCP side's (`crate::net::tls::quic_server_config`): same certificates,
//!   same SNI, same ticket keys; TLS 1.3 only, ALPN `h3`, no 0-RTT.
//! - Limits: the listener's `max_concurrent_streams` is the QUIC bidirectional stream limit (a
//!   client cannot open more, RFC 9000 §4.6), `max_header_size` the field section size
//!   (SETTINGS_MAX_FIELD_SECTION_SIZE, RFC 9114 §4.2.2), `idle_timeout` both QUIC's idle timeout
//!   and the time a connection with no request in flight stays open, `tls_handshake_timeout`
//!   the handshake's, `header_read_timeout` a request stream's wait for its head,
//!   `max_connections` the connections open (a handshake over it is refused at once: QUIC has no
//!   backlog to wait in).
//! - Defences: address validation with a Retry (RFC 9000 §8.1.2) for every new client while
//!   more than [`RETRY_ABOVE`] handshakes are in flight (a flood of Initials from spoofed
//!   addresses then costs one stateless packet each, no connection state); quinn keeps the
//!   anti-amplification limit (3x, RFC 9000 §8.1) and bounds connection IDs; [`MAX_INCOMING`]
//!   bounds the connection attempts waiting here.
//! - Shutdown, process-wide or of the listener: GOAWAY (RFC 9114 §5.2), the requests in flight
//!   finish, then the connection closes with H3_NO_ERROR.
//! - Where it runs: the accepting worker (the endpoint's one socket). Spreading QUIC over
//!   workers would need one socket per worker and connection-ID steering in the kernel.

mod send;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Request, Version};
use sluice_config::{Http3, ListenerLimits};
use tokio::sync::{mpsc, watch};

use crate::net::conn::{ListenerTask, SharedState};
use crate::net::tls::{TlsError, quic_server_config};
use crate::pipeline::body::{H3Body, RequestBody};
use crate::shared::client::Client;

/// New clients must prove their address with a Retry round trip while more handshakes than this
/// are in flight on the listener. Below it a handshake costs no extra round trip; above it, a
/// flood of spoofed Initials gets one stateless Retry each and creates no connection.
pub const RETRY_ABOVE: usize = 64;

/// Connection attempts quinn holds for this module to accept or refuse; beyond, it refuses them
/// itself. Each holds at most [`INCOMING_BUFFER`] bytes of early packets.
const MAX_INCOMING: usize = 4096;
const INCOMING_BUFFER: u64 = 64 * 1024;

/// Unidirectional streams a client may have open: HTTP/3 needs three (control, QPACK encoder
/// and decoder, RFC 9114 §6.2); clients add reserved ("grease") ones.
const MAX_UNI_STREAMS: u32 = 16;

/// Flow control: what one stream, and one connection, may have in flight unread. Bounds the
/// memory a client can make the server hold per connection (quinn's connection window defaults
/// to unlimited).
const STREAM_WINDOW: u32 = 1024 * 1024;
const CONNECTION_WINDOW: u32 = 8 * 1024 * 1024;

/// A listener's QUIC side for one config: the quinn server configuration (TLS and transport
/// limits) and what its TCP side advertises.
#[derive(Clone)]
pub struct Settings {
    server: quinn::ServerConfig,
    /// `Alt-Svc`'s `ma`; `None`: not advertised.
    pub alt_svc_max_age: Option<Duration>,
}

impl Settings {
    /// The settings of a listener whose TCP side has the rustls configuration `tcp`.
    pub fn new(
        tcp: &rustls::ServerConfig,
        limits: &ListenerLimits,
        http3: &Http3,
    ) -> Result<Self, TlsError> {
        let tls = quic_server_config(tcp)?;
        let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls)
            .map_err(|e| TlsError(format!("TLS for QUIC: {e}")))?;
        let mut server = quinn::ServerConfig::with_crypto(Arc::new(crypto));
        let mut transport = quinn::TransportConfig::default();
        transport
            .max_concurrent_bidi_streams(limits.max_concurrent_streams.into())
            .max_concurrent_uni_streams(MAX_UNI_STREAMS.into())
            .stream_receive_window(STREAM_WINDOW.into())
            .receive_window(CONNECTION_WINDOW.into())
            .send_window(u64::from(CONNECTION_WINDOW))
            .max_idle_timeout(quinn::IdleTimeout::try_from(limits.idle_timeout).ok())
            .enable_segmentation_offload(segmentation_offload());
        server
            .transport_config(Arc::new(transport))
            .max_incoming(MAX_INCOMING)
            .incoming_buffer_size(INCOMING_BUFFER)
            .incoming_buffer_size_total(INCOMING_BUFFER * 64);
        Ok(Self {
            server,
            alt_svc_max_age: http3.alt_svc_max_age,
        })
    }

    /// `Alt-Svc: h3=":PORT"; ma=SECONDS` for responses of a TCP connection to `port` (RFC 7838
    /// §3; the UDP socket is bound to the TCP socket's port), or `None` when it is off.
    pub fn alt_svc(&self, port: u16) -> Option<HeaderValue> {
        let max_age = self.alt_svc_max_age?;
        let value = format!("h3=\":{port}\"; ma={}", max_age.as_secs());
        HeaderValue::from_str(&value).ok()
    }
}

/// Whether quinn may send with UDP GSO (several datagrams of a connection in one `sendmsg`)
/// where the kernel has it: yes, unless `SLUICE_QUIC_GSO=off` (or `0`) is in the environment.
/// Not a setting: the switch exists for the lab's A/B measurement of what GSO saves
/// (docs/http3.md, "UDP GSO and GRO"). quinn-udp turns GRO on for receiving by itself.
fn segmentation_offload() -> bool {
    !std::env::var("SLUICE_QUIC_GSO").is_ok_and(|v| matches!(v.trim(), "off" | "0" | "false"))
}

/// Bind a UDP socket for a listener's QUIC side.
pub fn bind(address: SocketAddr) -> std::io::Result<std::net::UdpSocket> {
    std::net::UdpSocket::bind(address)
}

/// A listener's QUIC endpoint: its UDP socket and the connections on it.
#[derive(Clone)]
pub struct Endpoint(quinn::Endpoint);

impl Endpoint {
    /// An endpoint on `socket` (on the calling runtime) refusing every handshake until
    /// [`Self::reconfigure`] puts a configuration in: binding comes before a config is in force.
    pub fn unconfigured(socket: std::net::UdpSocket) -> std::io::Result<Self> {
        let endpoint = quinn::Endpoint::new(
            quinn::EndpointConfig::default(),
            None,
            socket,
            Arc::new(quinn::TokioRuntime),
        )?;
        Ok(Self(endpoint))
    }

    /// Serve new handshakes with `settings` (a reload: new certificates, new limits);
    /// connections already open keep theirs.
    pub fn reconfigure(&self, settings: &Settings) {
        self.0.set_server_config(Some(settings.server.clone()));
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

/// Accept QUIC connections until `stop` flips to true (or its sender is dropped), then refuse
/// new ones while the open ones send GOAWAY and drain. Holds `drain` until the last
/// connection has closed.
pub async fn accept_loop(
    endpoint: Endpoint,
    shared: SharedState,
    mut stop: watch::Receiver<bool>,
    drain: mpsc::Sender<()>,
) {
    let endpoint = endpoint.0;
    let local = endpoint
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    let handshaking = Arc::new(AtomicUsize::new(0));
    loop {
        let incoming = tokio::select! {
            incoming = endpoint.accept() => incoming,
            _ = stop.changed() => break,
        };
        let Some(incoming) = incoming else { break };
        let state = shared.load();
        let task = state.task.clone();
        if !incoming.remote_address_validated()
            && handshaking.load(Ordering::Relaxed) >= RETRY_ABOVE
            && incoming.may_retry()
        {
            // RFC 9000 §8.1.2: the client must echo the token from its own address.
            task.metrics.quic_retry();
            if let Err(err) = incoming.retry() {
                tracing::debug!(listener = %task.name, "QUIC Retry not sent: {err}");
            }
            continue;
        }
        let Some(permit) = state.slots.try_admit(&task.metrics) else {
            // At `max_connections`: refused now (CONNECTION_REFUSED), the client tries TCP.
            incoming.refuse();
            continue;
        };
        drop(state);
        let remote = incoming.remote_address();
        let connecting = match incoming.accept() {
            Ok(connecting) => connecting,
            Err(err) => {
                tracing::debug!(listener = %task.name, %remote, "QUIC connection refused: {err}");
                continue;
            }
        };
        let handshake = Counted::new(&handshaking);
        let open = task.metrics.connection();
        let held = (open, permit, drain.clone());
        let (shared, stop) = (shared.clone(), stop.clone());
        tokio::spawn(async move {
            let Some(conn) = handshake_within(&task, connecting, remote, handshake).await else {
                return;
            };
            let local = SocketAddr::new(conn.local_ip().unwrap_or(local.ip()), local.port());
            let client = Client::new(remote, local, true);
            serve_connection(&task, conn, shared, client, stop).await;
            drop(held);
        });
    }
    // No new handshakes; the open connections drain (each saw `stop` too), then the endpoint
    // waits for their closes to be sent.
    endpoint.set_server_config(None);
    tracing::debug!(listener = %shared.load().task.name, "QUIC: stopped accepting");
    endpoint.wait_idle().await;
    drop(drain);
}

/// A count of something in progress, taken back when dropped.
struct Counted(Arc<AtomicUsize>);

impl Counted {
    fn new(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Self(count.clone())
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

async fn handshake_within(
    task: &ListenerTask,
    connecting: quinn::Connecting,
    remote: SocketAddr,
    handshake: Counted,
) -> Option<quinn::Connection> {
    let result = tokio::time::timeout(task.limits.tls_handshake_timeout, connecting).await;
    drop(handshake);
    match result {
        Ok(Ok(conn)) => Some(conn),
        Ok(Err(err)) => {
            task.metrics.tls_handshake_failed();
            tracing::debug!(listener = %task.name, %remote, "QUIC handshake failed: {err}");
            None
        }
        Err(_) => {
            // Dropping the handshake closes the connection.
            task.metrics.tls_handshake_failed();
            tracing::debug!(listener = %task.name, %remote, "QUIC handshake timed out");
            None
        }
    }
}

/// What a connection's request tasks report to it: how many run, and a counter of their starts
/// and ends (the idle check's "progress").
#[derive(Default)]
struct Activity {
    running: AtomicUsize,
    progress: AtomicU64,
    /// Woken as each request ends (a permit is kept if nobody waits).
    ended: tokio::sync::Notify,
}

/// One request in flight, counted in [`Activity`] until dropped.
struct InFlight(Arc<Activity>);

impl InFlight {
    fn new(activity: &Arc<Activity>) -> Self {
        activity.running.fetch_add(1, Ordering::Relaxed);
        activity.progress.fetch_add(1, Ordering::Relaxed);
        Self(activity.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::Relaxed);
        self.0.progress.fetch_add(1, Ordering::Relaxed);
        self.0.ended.notify_one();
    }
}

/// What the connection loop woke up for.
enum Event<R> {
    Request(R),
    /// No more requests: the client closed, or GOAWAY was sent and every request has ended.
    Done,
    Failed(h3::error::ConnectionError),
    Shutdown,
    IdleCheck,
    RequestEnded,
}

/// After GOAWAY and the last response, how long the client has to close the connection itself
/// before the server does: closing at once would drop response bytes not yet acknowledged
/// (quinn discards a closed connection's unsent data), and a client that has read GOAWAY and
/// its responses closes within a round trip.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

async fn serve_connection(
    task: &ListenerTask,
    conn: quinn::Connection,
    shared: SharedState,
    client: Client,
    mut stop: watch::Receiver<bool>,
) {
    let mut builder = h3::server::builder();
    builder.max_field_section_size(task.limits.max_header_size as u64);
    let built = builder
        .build::<_, Bytes>(h3_quinn::Connection::new(conn.clone()))
        .await;
    let mut h3 = match built {
        Ok(h3) => h3,
        Err(err) => {
            return tracing::debug!(remote = %client.remote, "HTTP/3 connection failed: {err}");
        }
    };
    let activity = Arc::new(Activity::default());
    let idle_timeout = task.limits.idle_timeout;
    let header_timeout = task.limits.header_read_timeout;
    let mut idle_check =
        tokio::time::interval_at(tokio::time::Instant::now() + idle_timeout, idle_timeout);
    let mut last_seen = activity.progress.load(Ordering::Relaxed);
    let mut closing = false;
    // A stop sent before this connection subscribed counts too.
    let mut stop_now = *stop.borrow_and_update();
    loop {
        let event = if stop_now && !closing {
            Event::Shutdown
        } else {
            tokio::select! {
                accepted = h3.accept() => match accepted {
                    Ok(Some(resolver)) => Event::Request(resolver),
                    Ok(None) => Event::Done,
                    Err(err) => Event::Failed(err),
                },
                changed = stop.changed(), if !closing => {
                    // A dropped sender means the listener is gone: stop as well.
                    let _ = changed;
                    Event::Shutdown
                },
                _ = idle_check.tick() => Event::IdleCheck,
                _ = activity.ended.notified(), if closing => Event::RequestEnded,
            }
        };
        match event {
            Event::Request(resolver) => {
                let in_flight = InFlight::new(&activity);
                let shared = shared.clone();
                tokio::spawn(async move {
                    serve_request(resolver, shared, client, header_timeout).await;
                    drop(in_flight);
                });
            }
            Event::Done => break,
            Event::Failed(err) => {
                if !err.is_h3_no_error() {
                    tracing::debug!(remote = %client.remote, "HTTP/3 connection ended: {err}");
                }
                break;
            }
            Event::Shutdown => {
                stop_now = false;
                closing = true;
                // RFC 9114 §5.2: GOAWAY naming the first request not served; the ones in
                // flight finish, then `accept` says there are no more.
                if let Err(err) = h3.shutdown(0).await {
                    tracing::debug!(remote = %client.remote, "HTTP/3 GOAWAY not sent: {err}");
                    break;
                }
                if activity.running.load(Ordering::Relaxed) == 0 {
                    break;
                }
            }
            // h3 waits for the client's GOAWAY before it says there are no more requests;
            // the server knows when its own last one has ended.
            Event::RequestEnded => {
                if activity.running.load(Ordering::Relaxed) == 0 {
                    break;
                }
            }
            Event::IdleCheck => {
                let now = activity.progress.load(Ordering::Relaxed);
                let idle = now == last_seen && activity.running.load(Ordering::Relaxed) == 0;
                if idle && closing {
                    tracing::debug!(remote = %client.remote, "dropping unresponsive connection");
                    break;
                }
                if idle {
                    tracing::debug!(remote = %client.remote, "closing idle HTTP/3 connection");
                    stop_now = true;
                }
                last_seen = now;
            }
        }
    }
    drop(h3);
    let grace = CLOSE_GRACE.min(idle_timeout);
    let _ = tokio::time::timeout(grace, conn.closed()).await;
    conn.close(
        quinn::VarInt::from_u32(h3::error::Code::H3_NO_ERROR.value() as u32),
        b"",
    );
}

async fn serve_request<C>(
    resolver: h3::server::RequestResolver<C, Bytes>,
    shared: SharedState,
    client: Client,
    header_timeout: Duration,
) where
    C: h3::quic::Connection<Bytes, BidiStream = h3_quinn::BidiStream<Bytes>>,
{
    // A stream opened with no head behind it is a slowloris's: timed like a TCP request head.
    let resolved = match tokio::time::timeout(header_timeout, resolver.resolve_request()).await {
        Ok(Ok(resolved)) => resolved,
        Ok(Err(err)) => {
            return tracing::debug!(remote = %client.remote, "HTTP/3 request refused: {err}");
        }
        Err(_) => {
            return tracing::debug!(remote = %client.remote, "HTTP/3 request head timed out");
        }
    };
    let (head, stream) = resolved;
    // Loaded per request and held to its end, as over TCP: a reload reaches the next request.
    let pipeline = {
        let state = shared.load();
        state.task.metrics.request(Version::HTTP_3);
        state.pipeline.clone()
    };
    let (mut send, recv) = stream.split();
    let (mut parts, ()) = head.into_parts();
    parts.version = Version::HTTP_3;
    let length = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let body = RequestBody::from(H3Body::new(recv, length));
    let response = pipeline
        .handle(client, Request::from_parts(parts, body))
        .await;
    if let Err(err) = send::response(&mut send, response).await {
        tracing::debug!(remote = %client.remote, "HTTP/3 response not sent: {err}");
    }
}
