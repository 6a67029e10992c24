//! HTTP client connections for the built-in driver and the checks: HTTP/1.1 or HTTP/2 (prior
//! knowledge on cleartext, ALPN with TLS) over TCP, on hyper's low-level connection API so the
//! driver controls exactly how many connections and streams are open.
//!
//! Certificates are not verified: every target serves a self-signed development certificate,
//! and what is measured is the server's work, not the trust chain.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, Request, Response, Uri};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls_pki_types::ServerName;
use tokio::net::TcpStream;

use crate::scenario::{LoadSpec, Protocol};

/// Where a target listens.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub addr: SocketAddr,
    pub tls: bool,
}

impl Endpoint {
    /// `http(s)://ADDR`.
    pub fn base_url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }
}

/// An open connection, ready to send requests on.
pub enum Sender {
    H1(http1::SendRequest<Full<Bytes>>),
    H2(http2::SendRequest<Full<Bytes>>),
    /// HTTP/3: quinn + h3 (the QUIC connection is driven by its endpoint's task).
    H3(h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>),
}

impl Sender {
    pub async fn send(&mut self, req: Request<Full<Bytes>>) -> Result<Response<Incoming>, String> {
        let sent = match self {
            Sender::H1(s) => match s.ready().await {
                Ok(()) => s.send_request(req).await,
                Err(e) => Err(e),
            },
            Sender::H2(s) => match s.ready().await {
                Ok(()) => s.send_request(req).await,
                Err(e) => Err(e),
            },
            // HTTP/3 goes through [`send_h3`]: hyper's `Incoming` cannot carry its body.
            Sender::H3(_) => return Err("an HTTP/3 connection: use send_h3".into()),
        };
        sent.map_err(|e| e.to_string())
    }

    /// Another handle on the same connection (HTTP/2 streams); `None` for HTTP/1.1.
    pub fn another_stream(&self) -> Option<Sender> {
        match self {
            Sender::H1(_) => None,
            Sender::H2(s) => Some(Sender::H2(s.clone())),
            Sender::H3(s) => Some(Sender::H3(s.clone())),
        }
    }
}

/// One HTTP/3 request on `sender`: returns the status and the head's size as
/// [`header_bytes`] counts it, and adds each body chunk's length to `body_bytes` as it arrives
/// (nothing is collected).
pub async fn send_h3(
    sender: &mut h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    req: Request<Full<Bytes>>,
    body_bytes: &mut u64,
) -> Result<(u16, u64), String> {
    use http_body_util::BodyExt as _;
    use hyper::body::Buf as _;
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map_err(|e| format!("request body: {e}"))?
        .to_bytes();
    let (mut stream, head) = exchange_h3(sender, parts, body).await?;
    let status = head.status().as_u16();
    let mut head_size = 0u64;
    for (name, value) in head.headers() {
        head_size += (name.as_str().len() + value.len() + 4) as u64;
    }
    while let Some(chunk) = stream
        .recv_data()
        .await
        .map_err(|e| format!("HTTP/3 response body: {e}"))?
    {
        *body_bytes += chunk.remaining() as u64;
    }
    Ok((status, head_size + 17))
}

/// One HTTP/3 request on `sender`, the response whole (the checks): status, head, body.
pub async fn fetch_h3(
    sender: &mut h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    req: Request<Full<Bytes>>,
) -> Result<(u16, HeaderMap, Bytes), String> {
    use hyper::body::Buf as _;
    let (parts, body) = req.into_parts();
    let body = body.into_inner().unwrap_or_default();
    let (mut stream, head) = exchange_h3(sender, parts, body).await?;
    let mut collected = bytes::BytesMut::new();
    while let Some(mut chunk) = stream
        .recv_data()
        .await
        .map_err(|e| format!("HTTP/3 response body: {e}"))?
    {
        while chunk.has_remaining() {
            let piece = chunk.chunk();
            collected.extend_from_slice(piece);
            let n = piece.len();
            chunk.advance(n);
        }
    }
    let (head, ()) = head.into_parts();
    Ok((head.status.as_u16(), head.headers, collected.freeze()))
}

/// The request half of one HTTP/3 exchange, shared by [`send_h3`] and [`fetch_h3`]: the head,
/// the body (if any), the end of the request, then the response head; the stream is left for
/// the response body.
async fn exchange_h3(
    sender: &mut h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    parts: http::request::Parts,
    body: Bytes,
) -> Result<
    (
        h3::client::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>,
        http::Response<()>,
    ),
    String,
> {
    let mut stream = sender
        .send_request(Request::from_parts(parts, ()))
        .await
        .map_err(|e| format!("HTTP/3 request: {e}"))?;
    if !body.is_empty() {
        stream
            .send_data(body)
            .await
            .map_err(|e| format!("HTTP/3 request body: {e}"))?;
    }
    stream
        .finish()
        .await
        .map_err(|e| format!("HTTP/3 request end: {e}"))?;
    let head = stream
        .recv_response()
        .await
        .map_err(|e| format!("HTTP/3 response: {e}"))?;
    Ok((stream, head))
}

/// A QUIC connection speaking HTTP/3 to `endpoint`, on a client endpoint of its own (its own
/// UDP socket, as separate clients would have).
async fn connect_h3(endpoint: &Endpoint, tls: &TlsConnector) -> Result<Connected, String> {
    let local: SocketAddr = if endpoint.addr.is_ipv4() {
        ([0, 0, 0, 0], 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let mut client =
        quinn::Endpoint::client(local).map_err(|e| format!("a QUIC client socket: {e}"))?;
    client.set_default_client_config(tls.h3.clone());
    let conn = client
        .connect(endpoint.addr, "localhost")
        .map_err(|e| format!("QUIC connect to {}: {e}", endpoint.addr))?
        .await
        .map_err(|e| format!("QUIC handshake with {}: {e}", endpoint.addr))?;
    let (mut driver, sender) = h3::client::new(h3_quinn::Connection::new(conn))
        .await
        .map_err(|e| format!("HTTP/3 connection: {e}"))?;
    tokio::spawn(async move {
        let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        drop(client);
    });
    Ok(Connected {
        sender: Sender::H3(sender),
        alpn: Some("h3".into()),
    })
}

/// A connection and the ALPN protocol the server chose (`None` without TLS).
pub struct Connected {
    pub sender: Sender,
    pub alpn: Option<String>,
}

/// Connect, do the TLS handshake if needed, and start the HTTP connection on the current
/// runtime.
pub async fn connect(
    endpoint: &Endpoint,
    protocol: Protocol,
    tls: &TlsConnector,
) -> Result<Connected, String> {
    if protocol == Protocol::H3 {
        return connect_h3(endpoint, tls).await;
    }
    let tcp = TcpStream::connect(endpoint.addr)
        .await
        .map_err(|e| format!("connecting to {}: {e}", endpoint.addr))?;
    let _ = tcp.set_nodelay(true);
    if !endpoint.tls {
        let sender = handshake(TokioIo::new(tcp), protocol).await?;
        return Ok(Connected { sender, alpn: None });
    }
    let connector = match protocol {
        Protocol::H1 => &tls.h1,
        Protocol::H2 | Protocol::H3 => &tls.h2,
    };
    let stream = connector
        .connect(ServerName::from(endpoint.addr.ip()), tcp)
        .await
        .map_err(|e| format!("TLS handshake with {}: {e}", endpoint.addr))?;
    let alpn = stream
        .get_ref()
        .1
        .alpn_protocol()
        .map(|p| String::from_utf8_lossy(p).into_owned());
    let sender = handshake(TokioIo::new(stream), protocol).await?;
    Ok(Connected { sender, alpn })
}

async fn handshake<IO>(io: TokioIo<IO>, protocol: Protocol) -> Result<Sender, String>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    match protocol {
        Protocol::H1 => {
            let (sender, conn) = http1::handshake(io)
                .await
                .map_err(|e| format!("HTTP/1.1 handshake: {e}"))?;
            tokio::spawn(conn);
            Ok(Sender::H1(sender))
        }
        Protocol::H2 | Protocol::H3 => {
            let (sender, conn) = http2::Builder::new(TokioExecutor::new())
                // Big windows like h2load's defaults, so flow control is not what is measured.
                .initial_stream_window_size(1 << 24)
                .initial_connection_window_size(1 << 30)
                .handshake(io)
                .await
                .map_err(|e| format!("HTTP/2 handshake: {e}"))?;
            tokio::spawn(conn);
            Ok(Sender::H2(sender))
        }
    }
}

/// The request every load iteration sends, built once: each send clones it (cheap: `Bytes` and
/// `Uri` are reference counted; the header map is small).
#[derive(Clone)]
pub struct RequestTemplate {
    method: http::Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
}

impl RequestTemplate {
    pub fn new(spec: &LoadSpec, endpoint: &Endpoint) -> Result<Self, String> {
        // HTTP/1.1 sends origin-form plus Host; HTTP/2 needs the scheme and authority.
        let uri: Uri = match spec.protocol {
            Protocol::H1 => spec.path.parse(),
            Protocol::H2 | Protocol::H3 => format!("{}{}", endpoint.base_url(), spec.path).parse(),
        }
        .map_err(|e| format!("request path {:?}: {e}", spec.path))?;
        let mut headers = HeaderMap::new();
        if spec.protocol == Protocol::H1 {
            let host = http::HeaderValue::from_str(&endpoint.addr.to_string())
                .map_err(|e| format!("host header: {e}"))?;
            headers.insert(http::header::HOST, host);
        }
        for (name, value) in &spec.headers {
            let name = http::HeaderName::from_bytes(name.as_bytes())
                .map_err(|e| format!("header {name:?}: {e}"))?;
            let value = http::HeaderValue::from_str(value)
                .map_err(|e| format!("header value {value:?}: {e}"))?;
            headers.append(name, value);
        }
        Ok(Self {
            method: spec.method.clone(),
            uri,
            headers,
            body: spec.body.clone().unwrap_or_default(),
        })
    }

    pub fn build(&self) -> Request<Full<Bytes>> {
        let mut req = Request::new(Full::new(self.body.clone()));
        *req.method_mut() = self.method.clone();
        *req.uri_mut() = self.uri.clone();
        *req.headers_mut() = self.headers.clone();
        req
    }
}

/// Bytes of a response head as HTTP/1.1 would carry it: status line, `name: value\r\n` per
/// field, the blank line. For HTTP/2 the same figure stands for the decoded header size (HPACK
/// makes the wire smaller; h2load reports that separately).
pub fn header_bytes(resp: &Response<Incoming>) -> u64 {
    let status_line = 9 + 3 + 1 + resp.status().canonical_reason().map_or(0, str::len) + 2;
    let fields: usize = resp
        .headers()
        .iter()
        .map(|(n, v)| n.as_str().len() + 2 + v.len() + 2)
        .sum();
    (status_line + fields + 2) as u64
}

/// TLS client configurations offering exactly one ALPN protocol each.
#[derive(Clone)]
pub struct TlsConnector {
    h1: tokio_rustls::TlsConnector,
    h2: tokio_rustls::TlsConnector,
    /// QUIC: TLS 1.3, ALPN `h3`, flow-control windows as large as HTTP/2's above.
    h3: quinn::ClientConfig,
}

impl TlsConnector {
    pub fn new() -> Result<Self, String> {
        let make = |alpn: &str| -> Result<tokio_rustls::TlsConnector, String> {
            let mut config = insecure_tls_config()?;
            config.alpn_protocols = vec![alpn.as_bytes().to_vec()];
            Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
        };
        let mut quic = insecure_tls_config()?;
        quic.alpn_protocols = vec![b"h3".to_vec()];
        let quic = quinn::crypto::rustls::QuicClientConfig::try_from(quic)
            .map_err(|e| format!("TLS for QUIC: {e}"))?;
        let mut h3 = quinn::ClientConfig::new(Arc::new(quic));
        let mut transport = quinn::TransportConfig::default();
        transport
            .stream_receive_window(quinn::VarInt::from_u32(1 << 24))
            .receive_window(quinn::VarInt::from_u32(1 << 30));
        h3.transport_config(Arc::new(transport));
        Ok(Self {
            h1: make(Protocol::H1.alpn())?,
            h2: make(Protocol::H2.alpn())?,
            h3,
        })
    }
}

/// A rustls client configuration (ring, no ALPN set) that accepts any server certificate: the
/// targets are local, with self-signed certificates. The test kit's clients use it too.
pub fn insecure_tls_config() -> Result<rustls::ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS client config: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAnyCert))
        .with_no_client_auth())
}

/// Accepts every server certificate.
#[derive(Debug)]
struct AcceptAnyCert;

impl rustls::client::danger::ServerCertVerifier for AcceptAnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls_pki_types::CertificateDer<'_>,
        _intermediates: &[rustls_pki_types::CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &rustls_pki_types::CertificateDer<'_>,
        _dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _message: &[u8],
        _cert: &rustls_pki_types::CertificateDer<'_>,
        _dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        rustls::crypto::ring::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}
