//! The keep-alive client of one upstream group: hyper-util's pooled client over our
//! [`Connector`], one pool per peer (keyed by the peer's synthetic authority).
//!
//! hyper-util's pool does what nginx's `keepalive` does (idle connections per peer, idle
//! timeout, reuse after a complete response) and retries a request that was cancelled because a
//! pooled connection turned out to be closed, so we use it rather than writing a pool.
//!
//! With `send_proxy_protocol` a connection's first bytes name one client, so the pool key also
//! names the client's connection (its [`ClientAddresses`], which the proxy puts in the request's
//! extensions): requests of one client connection reuse upstream connections, and no connection
//! ever carries another client's requests. Idle ones are closed after `keepalive.idle_timeout`
//! like any other (HAProxy keeps such connections private to the client's session likewise).
//!
//! [`Connection::New`] sends on a connection opened for the request and never pooled
//! (a second client whose pool is off): the retry after a keep-alive race
//! ([`on_reused_connection`]) goes there, because the pool's next idle connection has been idle
//! as long as the one that just died and may be closed by the server's same idle timeout.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use http::uri::{self, Authority, PathAndQuery, Scheme};
use http::{Request, Response, Uri};
use hyper::body::Incoming;
use std::future::Future;
use std::sync::atomic::Ordering;

use hyper_util::client::legacy::connect::capture_connection;
use hyper_util::client::legacy::{self, Client};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use sluice_config::{Upstream, UpstreamAddress};
use sluice_core::{Body, BoxError};

use crate::connect::{
    ConnectObserver, ConnectionUses, Connector, client_authority, peer_authority,
};
use crate::proxy_protocol::ClientAddresses;
use crate::tls::{TlsSetupError, UpstreamTlsConnector};

/// A peer's HTTP/2 clients: pooled and fresh.
type ClientPair = [Client<Connector, Body>; 2];

/// Sends requests to the peers of one group over pooled connections.
#[derive(Clone)]
pub struct UpstreamClient {
    /// HTTP/1.1: one client for the group, pooled per peer by synthetic authority. HTTP/2: one
    /// client per peer, because h2 sends the URI's authority as `:authority` and it must be the
    /// request's real host (RFC 9113 §8.3.1), not a pool key.
    clients: Vec<Client<Connector, Body>>,
    /// The same, with the pool off (`pool_max_idle_per_host(0)`): every request on a new
    /// connection, closed after its response.
    fresh: Vec<Client<Connector, Body>>,
    http2: bool,
    /// The connector's handle, for its open-connection counts.
    connector: Connector,
    /// Retire a connection after this many requests (0 = never).
    max_requests: u32,
    /// `pN` per peer (the pool key), built once.
    authorities: Vec<Authority>,
    /// `https` for TLS groups (h2 sends it as `:scheme`), else `http`.
    scheme: Scheme,
    /// Pool per client connection and name it in a PROXY header.
    proxy_protocol: bool,
    /// HTTP/2 clients (pooled, fresh) of peers discovered by DNS, made at their first request
    /// and dropped when the peer goes ([`Self::remove_peer`]).
    discovered: Arc<RwLock<HashMap<usize, ClientPair>>>,
    /// The builders of `clients` and `fresh`, for `discovered`.
    builders: Arc<[hyper_util::client::legacy::Builder; 2]>,
}

impl UpstreamClient {
    /// The group's client; fails only when its TLS cannot be set up (files that do not parse).
    pub fn new(
        config: &Upstream,
        observer: Option<ConnectObserver>,
    ) -> Result<Self, TlsSetupError> {
        let addresses: Vec<_> = config.servers.iter().map(|s| s.address.clone()).collect();
        let tls = config
            .tls
            .as_ref()
            .map(|tls| UpstreamTlsConnector::new(tls, &addresses, config.http2))
            .transpose()?;
        let mut connector = Connector::new(addresses, config.timeouts.connect, observer)
            .with_proxy_protocol(config.send_proxy_protocol);
        if let Some(tls) = tls {
            connector = connector.with_tls(tls);
        }
        let mut builder = Client::builder(TokioExecutor::new());
        builder
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .pool_idle_timeout(config.keepalive.idle_timeout)
            .pool_max_idle_per_host(config.keepalive.max_idle)
            .http2_only(config.http2)
            // The Host header is set by the proxy; the URI's authority is only the pool key.
            .set_host(false);
        if config.http2 {
            builder.http2_keep_alive_interval(Some(Duration::from_secs(30)));
        }
        let authorities = (0..config.servers.len())
            .filter_map(|i| Authority::try_from(peer_authority(i).as_str()).ok())
            .collect();
        let build =
            |builder: &hyper_util::client::legacy::Builder| -> Vec<Client<Connector, Body>> {
                if config.http2 {
                    (0..config.servers.len())
                        .map(|i| builder.build(connector.for_peer(i)))
                        .collect()
                } else {
                    vec![builder.build(connector.clone())]
                }
            };
        let clients = build(&builder);
        let pooled = builder.clone();
        // hyper-util turns its pool off when no idle connection may be kept.
        builder.pool_max_idle_per_host(0);
        let fresh = build(&builder);
        Ok(Self {
            clients,
            fresh,
            http2: config.http2,
            connector,
            max_requests: config.keepalive.max_requests,
            authorities,
            scheme: if config.tls.is_some() {
                Scheme::HTTPS
            } else {
                Scheme::HTTP
            },
            proxy_protocol: config.send_proxy_protocol,
            discovered: Arc::default(),
            builders: Arc::new([pooled, builder]),
        })
    }

    /// A peer discovered by DNS: peer `index` is at `address`.
    pub fn add_peer(&self, index: usize, address: UpstreamAddress) {
        self.connector.table().insert(index, address);
    }

    /// Keep the peers `keep` says yes to; the others (discovered by DNS, gone and drained) are
    /// forgotten: new connections to them fail, and their HTTP/2 clients are dropped (idle
    /// HTTP/1.1 connections close at their idle timeout).
    pub fn retain_peers(&self, keep: impl Fn(usize) -> bool) {
        self.connector.table().retain(&keep);
        let mut discovered = self.discovered.write().unwrap_or_else(|e| e.into_inner());
        discovered.retain(|index, _| keep(*index));
    }

    /// The HTTP/2 client of peer `index` (`which`: 0 pooled, 1 fresh), made for a discovered
    /// peer at its first request.
    fn h2_client(&self, index: usize, which: usize) -> Option<Client<Connector, Body>> {
        let read = self.discovered.read().unwrap_or_else(|e| e.into_inner());
        if let Some(both) = read.get(&index) {
            return both.get(which).cloned();
        }
        drop(read);
        let mut write = self.discovered.write().unwrap_or_else(|e| e.into_inner());
        let both = write.entry(index).or_insert_with(|| {
            let [pooled, fresh] = &*self.builders;
            let connector = self.connector.for_peer(index);
            [pooled.build(connector.clone()), fresh.build(connector)]
        });
        both.get(which).cloned()
    }

    /// Connections open to peer `index` (the pool's idle ones and the busy ones).
    pub fn open_connections(&self, index: usize) -> usize {
        self.connector.open_connections(index)
    }

    /// Send `req` (its URI in origin-form: path and query) to peer `index`, on a pooled
    /// keep-alive connection when one is idle. A PROXY protocol group names the client of the
    /// request's [`ClientAddresses`] extension (none: `LOCAL`).
    pub fn send(
        &self,
        index: usize,
        req: Request<Body>,
    ) -> Result<
        impl Future<Output = Result<Response<Incoming>, legacy::Error>> + Send + use<>,
        BoxError,
    > {
        self.send_on(index, req, Connection::Pooled)
    }

    /// [`Self::send`] on the connection `connection` says: [`Connection::New`] for the retry
    /// after a keep-alive race (see the module docs).
    pub fn send_on(
        &self,
        index: usize,
        req: Request<Body>,
        connection: Connection,
    ) -> Result<
        impl Future<Output = Result<Response<Incoming>, legacy::Error>> + Send + use<>,
        BoxError,
    > {
        let (clients, which) = match connection {
            Connection::Pooled => (&self.clients, 0),
            Connection::New => (&self.fresh, 1),
        };
        self.send_with(clients, which, index, req)
    }

    fn send_with(
        &self,
        clients: &[Client<Connector, Body>],
        which: usize,
        index: usize,
        mut req: Request<Body>,
    ) -> Result<
        impl Future<Output = Result<Response<Incoming>, legacy::Error>> + Send + use<>,
        BoxError,
    > {
        // The URI is rebuilt from parts, reusing the target's path (and `*` of `OPTIONS *`,
        // which hyper-util sends as is to HTTP/1.1 and as `:path *` to HTTP/2): no formatting
        // and re-parsing per request.
        let path = req
            .uri()
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| PathAndQuery::from_static("/"));
        let (client, authority) = if self.http2 {
            let host = req
                .headers()
                .get(http::header::HOST)
                .and_then(|h| Authority::try_from(h.as_bytes()).ok())
                .unwrap_or_else(|| Authority::from_static("localhost"));
            let client = match clients.get(index) {
                Some(client) => std::borrow::Cow::Borrowed(client),
                None => {
                    std::borrow::Cow::Owned(self.h2_client(index, which).ok_or_else(|| {
                        BoxError::from(format!("no upstream peer number {index}"))
                    })?)
                }
            };
            (Some(client), Some(host))
        } else if let Some(client) = self
            .proxy_protocol
            .then(|| req.extensions().get::<ClientAddresses>())
            .flatten()
        {
            let authority = Authority::try_from(client_authority(index, client).as_str()).ok();
            (clients.first().map(std::borrow::Cow::Borrowed), authority)
        } else {
            let authority = self.authorities.get(index).cloned().or_else(|| {
                // A peer discovered by DNS: numbers past the configured servers.
                Authority::try_from(peer_authority(index).as_str()).ok()
            });
            (clients.first().map(std::borrow::Cow::Borrowed), authority)
        };
        let client =
            client.ok_or_else(|| BoxError::from(format!("no upstream peer number {index}")))?;
        let mut uri = uri::Parts::default();
        uri.scheme = Some(self.scheme.clone());
        uri.authority = authority;
        uri.path_and_query = Some(path);
        *req.uri_mut() = Uri::from_parts(uri)?;
        let max = self.max_requests;
        // The capture is what lets us tell hyper's pool not to reuse a connection.
        let capture = (max > 0).then(|| capture_connection(&mut req));
        let pending = client.request(req);
        Ok(async move {
            let response = pending.await?;
            // Counted on every connection, not only with `max_requests`: a failure on a
            // connection that has carried a response is a keep-alive race (see
            // [`on_reused_connection`]).
            if let Some(uses) = response.extensions().get::<ConnectionUses>()
                && uses.0.fetch_add(1, Ordering::Relaxed) + 1 >= max
                && let Some(capture) = capture
                && let Some(connected) = capture.connection_metadata().as_ref()
            {
                connected.poison();
            }
            Ok(response)
        })
    }
}

/// Which connection a request goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connection {
    /// An idle one from the pool if there is one, else a new one that joins the pool after.
    Pooled,
    /// A new one, closed after the response, never pooled.
    New,
}

/// Whether `err` happened on a connection that had already carried a response: a pooled
/// keep-alive connection the server closed while the request was on its way (RFC 9112 §9.3.1:
/// a server may close an idle connection at any time, and the client only learns it once it
/// has sent the next request). hyper-util retries such a request by itself only when the close
/// was seen before the request was written.
pub fn on_reused_connection(err: &legacy::Error) -> bool {
    let Some(connected) = err.connect_info() else {
        return false;
    };
    let mut extensions = http::Extensions::new();
    connected.get_extras(&mut extensions);
    extensions
        .get::<ConnectionUses>()
        .is_some_and(|uses| uses.0.load(Ordering::Relaxed) > 0)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http_body_util::BodyExt;
    use sluice_config::{UpstreamAddress, UpstreamServer};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};
    use tokio::sync::mpsc;

    use super::*;

    /// Read one request head; `None` at the end of the stream.
    async fn read_head(stream: &mut TcpStream) -> Option<()> {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            if stream.read(&mut byte).await.ok()? == 0 {
                return None;
            }
            head.push(byte[0]);
        }
        Some(())
    }

    /// A server that answers `answered` requests per connection `200` with the connection's
    /// number (from 1) as the body, kept alive, then reads the next request and closes without
    /// an answer: the server side of the keep-alive race. Sends each connection's number on
    /// the channel when the client closed it.
    async fn origin(answered: usize) -> (std::net::SocketAddr, mpsc::UnboundedReceiver<usize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (closed, closes) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut n = 0;
            while let Ok((mut stream, _)) = listener.accept().await {
                n += 1;
                let closed = closed.clone();
                tokio::spawn(async move {
                    for _ in 0..answered {
                        if read_head(&mut stream).await.is_none() {
                            let _ = closed.send(n);
                            return;
                        }
                        let body = n.to_string();
                        let ok = format!(
                            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if stream.write_all(ok.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                    let _ = read_head(&mut stream).await;
                });
            }
        });
        (addr, closes)
    }

    fn client(addr: std::net::SocketAddr) -> UpstreamClient {
        let server = UpstreamServer::new(UpstreamAddress::Tcp(addr.to_string()));
        UpstreamClient::new(&Upstream::new("app", vec![server]), None).unwrap()
    }

    fn get() -> Request<Body> {
        Request::get("/").body(Body::Empty).unwrap()
    }

    /// The number of the connection that answered.
    async fn connection(response: Response<Incoming>) -> usize {
        let body = response.into_body().collect().await.unwrap().to_bytes();
        std::str::from_utf8(&body).unwrap().parse().unwrap()
    }

    #[tokio::test]
    async fn a_new_connection_is_opened_for_the_request_and_closed_after_it() {
        let (addr, mut closes) = origin(usize::MAX).await;
        let client = client(addr);
        let mut seen = Vec::new();
        for _ in 0..3 {
            seen.push(connection(client.send(0, get()).unwrap().await.unwrap()).await);
        }
        for _ in 0..3 {
            let fresh = connection(
                client
                    .send_on(0, get(), Connection::New)
                    .unwrap()
                    .await
                    .unwrap(),
            )
            .await;
            assert!(!seen.contains(&fresh), "{fresh} was used before: {seen:?}");
            seen.push(fresh);
            let closed = tokio::time::timeout(Duration::from_secs(10), closes.recv()).await;
            assert_eq!(closed.unwrap(), Some(fresh), "closed, not pooled");
        }
    }

    #[tokio::test]
    async fn a_reused_connection_closed_under_the_request_is_told_apart() {
        let (addr, _closes) = origin(1).await;
        let client = client(addr);
        // Sequential requests reuse the pooled connection once hyper-util has put it back,
        // which it does in a task of its own: within a few requests one goes out on a
        // connection that has answered before, and the server closes it under the request.
        let mut race = None;
        for _ in 0..50 {
            match client.send(0, get()).unwrap().await {
                Ok(response) => {
                    connection(response).await;
                }
                Err(err) => {
                    race = Some(err);
                    break;
                }
            }
        }
        let err = race.expect("no request reused a pooled connection in 50");
        assert!(on_reused_connection(&err), "{err:?}");
        // The retry's new connection answers.
        connection(
            client
                .send_on(0, get(), Connection::New)
                .unwrap()
                .await
                .unwrap(),
        )
        .await;

        // A first request on a new connection that the server closes is not the race.
        let (addr, _closes) = origin(0).await;
        let err = super::tests::client(addr)
            .send_on(0, get(), Connection::New)
            .unwrap()
            .await
            .unwrap_err();
        assert!(!on_reused_connection(&err), "{err:?}");
    }
}
