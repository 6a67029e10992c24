//! Connectors: open a connection to a peer over TCP or a unix socket, within the connect timeout;
//! then, when the group asks for them, the PROXY protocol header ([`crate::proxy_protocol`]) and
//! the TLS handshake ([`crate::tls`]). The connect timeout covers all of it, and so does the
//! connect time reported to metrics (as nginx's `$upstream_connect_time` includes the handshake).
//!
//! The keep-alive pool ([`crate::client`]) keys idle connections by URI authority, so each peer
//! gets a synthetic authority `pN` (its index in the group); the connector maps it back to the
//! peer's real address. This keeps one pool per peer without hyper knowing about unix sockets.
//! With PROXY protocol the authority also carries the client's addresses
//! (`pN.<source>.<destination>`, hex): the connector learns whom the header is about, and the
//! pool keys connections per client connection, so one never carries another client's requests.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use std::net::{IpAddr, SocketAddr};

use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::TokioIo;
use sluice_config::UpstreamAddress;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpStream, UnixStream};

use crate::proxy_protocol::{self, ClientAddresses};
use crate::tls::UpstreamTlsConnector;

/// The synthetic authority of peer `index` (`p0`, `p1`, ...).
pub fn peer_authority(index: usize) -> String {
    format!("p{index}")
}

/// The synthetic authority of peer `index` for one client connection (PROXY protocol groups).
pub fn client_authority(index: usize, client: &ClientAddresses) -> String {
    format!(
        "p{index}.{}.{}",
        hex_address(client.source),
        hex_address(client.destination)
    )
}

fn hex_address(address: SocketAddr) -> String {
    let mut bytes = match address.ip() {
        IpAddr::V4(v4) => v4.octets().to_vec(),
        IpAddr::V6(v6) => v6.octets().to_vec(),
    };
    bytes.extend_from_slice(&address.port().to_be_bytes());
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn parse_hex_address(text: &str) -> Option<SocketAddr> {
    let bytes = (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    let (ip, port) = bytes.split_at_checked(bytes.len().checked_sub(2)?)?;
    let port = u16::from_be_bytes([port[0], port[1]]);
    let ip = match ip.len() {
        4 => IpAddr::from(<[u8; 4]>::try_from(ip).ok()?),
        16 => IpAddr::from(<[u8; 16]>::try_from(ip).ok()?),
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// The peer index, and the client's addresses when the authority carries them.
fn peer_target(uri: &http::Uri) -> Option<(usize, Option<ClientAddresses>)> {
    let host = uri.host()?.strip_prefix('p')?;
    let mut parts = host.split('.');
    let index = parts.next()?.parse().ok()?;
    let client = match (parts.next(), parts.next(), parts.next()) {
        (None, _, _) => None,
        (Some(source), Some(destination), None) => Some(ClientAddresses {
            source: parse_hex_address(source)?,
            destination: parse_hex_address(destination)?,
        }),
        _ => return None,
    };
    Some((index, client))
}

/// Where each peer of a group is, by [`crate::Peer::index`], and how many connections are open
/// to it. Shared by the group's connectors; a group whose servers are discovered by DNS adds
/// and removes entries as peers come and go ([`crate::client::UpstreamClient::add_peer`]). A
/// lock, not atomics, because it is read once per new connection, never per request.
#[derive(Clone, Default)]
pub struct PeerTable(Arc<RwLock<HashMap<usize, Arc<Target>>>>);

/// One peer's address and open-connection count.
struct Target {
    address: UpstreamAddress,
    open: AtomicUsize,
}

impl PeerTable {
    /// Peer `index` is at `address` (an entry already there is kept, with its count).
    pub fn insert(&self, index: usize, address: UpstreamAddress) {
        let mut table = self.0.write().unwrap_or_else(|e| e.into_inner());
        table.entry(index).or_insert_with(|| {
            Arc::new(Target {
                address,
                open: AtomicUsize::new(0),
            })
        });
    }

    /// Keep the peers `keep` says yes to.
    pub fn retain(&self, keep: impl Fn(usize) -> bool) {
        let mut table = self.0.write().unwrap_or_else(|e| e.into_inner());
        table.retain(|index, _| keep(*index));
    }

    fn get(&self, index: usize) -> Option<Arc<Target>> {
        let table = self.0.read().unwrap_or_else(|e| e.into_inner());
        table.get(&index).cloned()
    }
}

/// Called with each new connection's set-up time (for metrics).
pub type ConnectObserver = Arc<dyn Fn(usize, Duration) + Send + Sync>;

/// Connects to the peers of one group.
#[derive(Clone)]
pub struct Connector {
    /// Addresses and connections open per peer (decremented when a [`Stream`] is dropped).
    table: PeerTable,
    timeout: Duration,
    observer: Option<ConnectObserver>,
    /// Always connect to this peer, whatever the URI says (HTTP/2 groups: the URI's authority
    /// must be the real host, because h2 sends it as `:authority`).
    fixed: Option<usize>,
    /// TLS to every peer, when the group has it.
    tls: Option<UpstreamTlsConnector>,
    /// Start every connection with a PROXY protocol v2 header.
    proxy_protocol: bool,
}

impl Connector {
    pub fn new(
        addresses: Vec<UpstreamAddress>,
        timeout: Duration,
        observer: Option<ConnectObserver>,
    ) -> Self {
        let table = PeerTable::default();
        for (index, address) in addresses.into_iter().enumerate() {
            // A `dns+` server is no peer of its own: its resolved addresses are added as they
            // come.
            if !matches!(address, UpstreamAddress::Dns(_)) {
                table.insert(index, address);
            }
        }
        Self {
            table,
            timeout,
            observer,
            fixed: None,
            tls: None,
            proxy_protocol: false,
        }
    }

    /// Reach every peer over TLS.
    pub fn with_tls(self, tls: UpstreamTlsConnector) -> Self {
        Self {
            tls: Some(tls),
            ..self
        }
    }

    /// Send a PROXY protocol v2 header first on every connection.
    pub fn with_proxy_protocol(self, on: bool) -> Self {
        Self {
            proxy_protocol: on,
            ..self
        }
    }

    /// A connector that always reaches peer `index` (sharing this one's counts).
    pub fn for_peer(&self, index: usize) -> Self {
        Self {
            fixed: Some(index),
            ..self.clone()
        }
    }

    /// Connections open to peer `index` now (idle in the pool or busy).
    pub fn open_connections(&self, index: usize) -> usize {
        self.table
            .get(index)
            .map_or(0, |t| t.open.load(Ordering::Relaxed))
    }

    /// The table of the peers this connector reaches.
    pub fn table(&self) -> &PeerTable {
        &self.table
    }

    /// Open a connection to peer `index` (with a PROXY `LOCAL` header, if the group sends them).
    pub async fn connect(&self, index: usize) -> io::Result<Stream> {
        self.connect_for(index, None).await
    }

    /// Open a connection to peer `index` on behalf of `client` (named in the PROXY header).
    pub async fn connect_for(
        &self,
        index: usize,
        client: Option<ClientAddresses>,
    ) -> io::Result<Stream> {
        let target = self.table.get(index).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("no upstream peer number {index}"),
            )
        })?;
        let started = Instant::now();
        let connecting = async {
            let mut io = match &target.address {
                UpstreamAddress::Tcp(host_port) => {
                    let stream = TcpStream::connect(host_port.as_str()).await?;
                    stream.set_nodelay(true)?;
                    Io::Tcp(stream)
                }
                UpstreamAddress::Unix(path) => Io::Unix(UnixStream::connect(path).await?),
                UpstreamAddress::Dns(records) => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("{records} is a name to resolve, not a peer"),
                    ));
                }
            };
            if self.proxy_protocol {
                // Before TLS: the header belongs to the transport (as HAProxy sends it).
                io.write_all(&proxy_protocol::header(client)).await?;
            }
            if let Some(tls) = &self.tls {
                io = Io::Tls(Box::new(tls.handshake(index, io).await?));
            }
            Ok::<_, io::Error>(Stream::new(io))
        };
        let stream = tokio::time::timeout(self.timeout, connecting)
            .await
            .map_err(|_| {
                io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("connect timed out after {:?}", self.timeout),
                )
            })??;
        if let Some(observe) = &self.observer {
            observe(index, started.elapsed());
        }
        Ok(stream.counted(target))
    }
}

impl tower_service::Service<http::Uri> for Connector {
    type Response = TokioIo<Stream>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<TokioIo<Stream>>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let target = match this.fixed {
                Some(index) => Some((index, None)),
                None => peer_target(&uri),
            };
            let (index, client) = target.ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("not a peer URI: {uri}"),
                )
            })?;
            this.connect_for(index, client).await.map(TokioIo::new)
        })
    }
}

/// A connection to a peer, with the count of requests it has carried.
pub struct Stream {
    io: Io,
    uses: ConnectionUses,
    /// The connector's per-peer open counts and this stream's peer.
    open: Option<Arc<Target>>,
}

enum Io {
    Tcp(TcpStream),
    Unix(UnixStream),
    Tls(Box<tokio_rustls::client::TlsStream<Io>>),
}

/// Requests sent over one connection; hyper copies it into every response's extensions, so
/// the client can retire a connection after `keepalive.max_requests`.
#[derive(Clone, Default)]
pub struct ConnectionUses(pub Arc<AtomicU32>);

impl Stream {
    fn new(io: Io) -> Self {
        Self {
            io,
            uses: ConnectionUses::default(),
            open: None,
        }
    }

    fn counted(mut self, target: Arc<Target>) -> Self {
        target.open.fetch_add(1, Ordering::Relaxed);
        self.open = Some(target);
        self
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if let Some(target) = &self.open {
            target.open.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Connection for Stream {
    fn connected(&self) -> Connected {
        let connected = Connected::new().extra(self.uses.clone());
        match &self.io {
            Io::Tls(tls) if tls.get_ref().1.alpn_protocol() == Some(b"h2") => {
                connected.negotiated_h2()
            }
            _ => connected,
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

impl AsyncRead for Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Io::Unix(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Io::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Io::Unix(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Io::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Io::Unix(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Io::Tcp(s) => s.is_write_vectored(),
            Io::Unix(s) => s.is_write_vectored(),
            Io::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Tcp(s) => Pin::new(s).poll_flush(cx),
            Io::Unix(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Io::Unix(s) => Pin::new(s).poll_shutdown(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_authorities_round_trip() {
        let uri: http::Uri = format!("http://{}/x", peer_authority(12)).parse().unwrap();
        assert_eq!(peer_target(&uri), Some((12, None)));
        assert_eq!(peer_target(&"http://example.com/".parse().unwrap()), None);
        for (source, destination) in [
            ("192.0.2.1:56324", "127.0.0.1:8080"),
            ("[2001:db8::1]:1", "[::1]:443"),
        ] {
            let client = ClientAddresses {
                source: source.parse().unwrap(),
                destination: destination.parse().unwrap(),
            };
            let authority = client_authority(3, &client);
            let uri: http::Uri = format!("http://{authority}/x").parse().unwrap();
            assert_eq!(peer_target(&uri), Some((3, Some(client))), "{authority}");
        }
        assert_eq!(peer_target(&"http://p1.zz.00/".parse().unwrap()), None);
    }

    #[tokio::test]
    async fn refused_connection_is_an_error_not_a_hang() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let c = Connector::new(
            vec![UpstreamAddress::Tcp(addr.to_string())],
            Duration::from_secs(5),
            None,
        );
        assert!(c.connect(0).await.is_err());
    }
}
