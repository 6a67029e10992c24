//! Connectors: open a connection to a peer over TCP or a unix socket, within the connect timeout.
//!
//! The keep-alive pool ([`crate::client`]) keys idle connections by URI authority, so each peer
//! gets a synthetic authority `pN` (its index in the group); the connector maps it back to the
//! peer's real address. This keeps one pool per peer without hyper knowing about unix sockets.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::TokioIo;
use sluice_config::UpstreamAddress;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpStream, UnixStream};

/// The synthetic authority of peer `index` (`p0`, `p1`, ...).
pub fn peer_authority(index: usize) -> String {
    format!("p{index}")
}

fn peer_index(uri: &http::Uri) -> Option<usize> {
    uri.host()?.strip_prefix('p')?.parse().ok()
}

/// Called with each new connection's set-up time (for metrics).
pub type ConnectObserver = Arc<dyn Fn(usize, Duration) + Send + Sync>;

/// Connects to the peers of one group.
#[derive(Clone)]
pub struct Connector {
    addresses: Arc<[UpstreamAddress]>,
    /// Connections open per peer, decremented when a [`Stream`] is dropped.
    open: Arc<[AtomicUsize]>,
    timeout: Duration,
    observer: Option<ConnectObserver>,
    /// Always connect to this peer, whatever the URI says (HTTP/2 groups: the URI's authority
    /// must be the real host, because h2 sends it as `:authority`).
    fixed: Option<usize>,
}

impl Connector {
    pub fn new(
        addresses: Vec<UpstreamAddress>,
        timeout: Duration,
        observer: Option<ConnectObserver>,
    ) -> Self {
        let open = addresses.iter().map(|_| AtomicUsize::new(0)).collect();
        Self {
            addresses: addresses.into(),
            open,
            timeout,
            observer,
            fixed: None,
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
        self.open
            .get(index)
            .map_or(0, |n| n.load(Ordering::Relaxed))
    }

    /// Open a connection to peer `index`.
    pub async fn connect(&self, index: usize) -> io::Result<Stream> {
        let address = self.addresses.get(index).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("no upstream peer number {index}"),
            )
        })?;
        let started = Instant::now();
        let connecting = async {
            match address {
                UpstreamAddress::Tcp(host_port) => {
                    let stream = TcpStream::connect(host_port.as_str()).await?;
                    stream.set_nodelay(true)?;
                    Ok::<_, io::Error>(Stream::new(Io::Tcp(stream)))
                }
                UpstreamAddress::Unix(path) => {
                    Ok(Stream::new(Io::Unix(UnixStream::connect(path).await?)))
                }
            }
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
        Ok(stream.counted(self.open.clone(), index))
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
            let index = this.fixed.or_else(|| peer_index(&uri)).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("not a peer URI: {uri}"),
                )
            })?;
            this.connect(index).await.map(TokioIo::new)
        })
    }
}

/// A connection to a peer, with the count of requests it has carried.
pub struct Stream {
    io: Io,
    uses: ConnectionUses,
    /// The connector's per-peer open counts and this stream's peer.
    open: Option<(Arc<[AtomicUsize]>, usize)>,
}

enum Io {
    Tcp(TcpStream),
    Unix(UnixStream),
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

    fn counted(mut self, open: Arc<[AtomicUsize]>, index: usize) -> Self {
        if let Some(n) = open.get(index) {
            n.fetch_add(1, Ordering::Relaxed);
            self.open = Some((open, index));
        }
        self
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if let Some((open, index)) = &self.open
            && let Some(n) = open.get(*index)
        {
            n.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Connection for Stream {
    fn connected(&self) -> Connected {
        Connected::new().extra(self.uses.clone())
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Io::Unix(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().io {
            Io::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Io::Unix(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().io {
            Io::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Io::Unix(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match &self.io {
            Io::Tcp(s) => s.is_write_vectored(),
            Io::Unix(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Tcp(s) => Pin::new(s).poll_flush(cx),
            Io::Unix(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Io::Unix(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn peer_authorities_round_trip() {
        let uri: http::Uri = format!("http://{}/x", peer_authority(12)).parse().unwrap();
        assert_eq!(peer_index(&uri), Some(12));
        assert_eq!(peer_index(&"http://example.com/".parse().unwrap()), None);
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
