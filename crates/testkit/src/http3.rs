//! An HTTP/3 client for tests: quinn + the h3 crate (the same stack as the server, so the
//! suites also drive sluice with independent clients: ngtcp2's and aioquic's, see
//! `tests/it/http3/`). Trusts any certificate, as the TLS clients here do.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes};
use http::{HeaderMap, Request, Response};

type Sender = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;

/// One QUIC connection speaking HTTP/3. Clone [`H3Client::sender`] for concurrent requests.
pub struct H3Client {
    pub endpoint: quinn::Endpoint,
    pub connection: quinn::Connection,
    sender: Sender,
    driver: tokio::task::JoinHandle<h3::error::ConnectionError>,
    /// `localhost:PORT`: the `:authority` of requests, as a browser sends it.
    authority: String,
}

/// A whole response: head, body and trailers.
#[derive(Debug)]
pub struct H3Response {
    pub head: Response<()>,
    pub body: Vec<u8>,
    pub trailers: Option<HeaderMap>,
}

impl H3Response {
    pub fn status(&self) -> http::StatusCode {
        self.head.status()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.headers().get(name).and_then(|v| v.to_str().ok())
    }
}

/// The rustls client configuration of [`H3Client`]: any certificate, ALPN `h3`.
pub fn client_tls() -> rustls::ClientConfig {
    let mut tls = crate::insecure_tls_config();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    tls
}

/// A quinn client endpoint on an ephemeral loopback port.
pub fn client_endpoint() -> quinn::Endpoint {
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(client_tls()).unwrap();
    let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    let mut transport = quinn::TransportConfig::default();
    transport.max_idle_timeout(Some(Duration::from_secs(30).try_into().unwrap()));
    config.transport_config(Arc::new(transport));
    endpoint.set_default_client_config(config);
    endpoint
}

impl H3Client {
    /// Connect to `addr` (server name `localhost`).
    pub async fn connect(addr: SocketAddr) -> Self {
        Self::try_connect(addr).await.unwrap()
    }

    /// Connect, or say why not.
    pub async fn try_connect(addr: SocketAddr) -> Result<Self, String> {
        crate::install_crypto_provider();
        let endpoint = client_endpoint();
        let connecting = endpoint
            .connect(addr, "localhost")
            .map_err(|e| e.to_string())?;
        let connection = tokio::time::timeout(Duration::from_secs(10), connecting)
            .await
            .map_err(|_| "QUIC handshake timed out".to_string())?
            .map_err(|e| e.to_string())?;
        let (mut driver, sender) = h3::client::new(h3_quinn::Connection::new(connection.clone()))
            .await
            .map_err(|e| e.to_string())?;
        let driver =
            tokio::spawn(async move { std::future::poll_fn(|cx| driver.poll_close(cx)).await });
        Ok(Self {
            endpoint,
            connection,
            sender,
            driver,
            authority: format!("localhost:{}", addr.port()),
        })
    }

    /// The DER of the leaf certificate the server presented.
    pub fn peer_certificate(&self) -> Vec<u8> {
        let identity = self.connection.peer_identity().unwrap();
        let chain = identity
            .downcast::<Vec<rustls::pki_types::CertificateDer<'static>>>()
            .unwrap();
        chain[0].as_ref().to_vec()
    }

    /// A handle for requests on this connection, for concurrent ones.
    pub fn sender(&self) -> Sender {
        self.sender.clone()
    }

    /// The URL of `path` on the server (`https://localhost:PORT/...`).
    pub fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.authority)
    }

    /// GET `path`.
    pub async fn get(&self, path: &str) -> H3Response {
        let req = Request::get(self.url(path)).body(()).unwrap();
        send(&mut self.sender(), req, None, None).await.unwrap()
    }

    /// Send `req` with `body` (and `trailers`), read the whole response.
    pub async fn request(
        &self,
        req: Request<()>,
        body: Option<Bytes>,
        trailers: Option<HeaderMap>,
    ) -> Result<H3Response, String> {
        send(&mut self.sender(), req, body, trailers).await
    }

    /// How the connection ended, once the server closed it (waits for that).
    pub async fn closed(self) -> String {
        let error = self.driver.await;
        format!("{error:?}")
    }
}

/// Send one request on `sender` and read its whole response.
pub async fn send(
    sender: &mut Sender,
    req: Request<()>,
    body: Option<Bytes>,
    trailers: Option<HeaderMap>,
) -> Result<H3Response, String> {
    let mut stream = sender.send_request(req).await.map_err(|e| e.to_string())?;
    if let Some(body) = body {
        // In pieces, as a client streaming an upload sends it.
        for chunk in body.chunks(64 * 1024) {
            stream
                .send_data(Bytes::copy_from_slice(chunk))
                .await
                .map_err(|e| e.to_string())?;
        }
    }
    if let Some(trailers) = trailers {
        stream
            .send_trailers(trailers)
            .await
            .map_err(|e| e.to_string())?;
    }
    stream.finish().await.map_err(|e| e.to_string())?;
    let head = stream.recv_response().await.map_err(|e| e.to_string())?;
    let mut body = Vec::new();
    while let Some(mut chunk) = stream.recv_data().await.map_err(|e| e.to_string())? {
        while chunk.has_remaining() {
            let piece = chunk.chunk();
            body.extend_from_slice(piece);
            let n = piece.len();
            chunk.advance(n);
        }
    }
    let trailers = stream.recv_trailers().await.map_err(|e| e.to_string())?;
    Ok(H3Response {
        head,
        body,
        trailers,
    })
}
