//! TLS to upstreams against real rustls servers with rcgen test CAs: verification against a
//! `ca` file (and its failure: 502, a log line naming the rustls error, the `tls_error`
//! metric), SNI, ALPN h2, client certificates, session resumption, `insecure_skip_verify`,
//! health checks over TLS; and `send_proxy_protocol` (in `proxy_protocol_out.rs`).

mod proxy_protocol_out;
mod tests;

use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};
use rustls::ServerConfig;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::net::TcpListener;

/// A server certificate for `localhost`, `127.0.0.1` and `api.internal` from a test CA, and a
/// client certificate from another CA (for mTLS).
pub struct Pki {
    pub ca_pem: String,
    server_chain: Vec<CertificateDer<'static>>,
    server_key_pem: String,
    pub client_cert_pem: String,
    pub client_key_pem: String,
    client_ca: CertificateDer<'static>,
}

impl Pki {
    pub fn new() -> Self {
        let hosts = ["localhost", "127.0.0.1", "api.internal"].map(String::from);
        let server = sluice_server::net::cert::generate(&hosts).unwrap();
        let server_chain = CertificateDer::pem_slice_iter(server.chain_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .unwrap();

        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "client CA");
        let client_ca =
            CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
        let mut leaf = CertificateParams::new(Vec::<String>::new()).unwrap();
        leaf.distinguished_name
            .push(DnType::CommonName, "sluice proxy");
        leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate().unwrap();
        let client = leaf.signed_by(&key, &client_ca).unwrap();
        Self {
            ca_pem: server.ca_cert_pem,
            server_chain,
            server_key_pem: server.leaf_key_pem,
            client_cert_pem: client.pem(),
            client_key_pem: key.serialize_pem(),
            client_ca: client_ca.der().clone(),
        }
    }

    /// Write `ca.pem`, `client.pem` and `client-key.pem` into `dir`.
    pub fn write(&self, dir: &Path) {
        crate::write_files(
            dir,
            &[
                ("ca.pem", self.ca_pem.as_bytes()),
                ("client.pem", self.client_cert_pem.as_bytes()),
                ("client-key.pem", self.client_key_pem.as_bytes()),
            ],
        );
    }

    /// A rustls server configuration with this PKI's server certificate.
    pub fn server_config(&self, alpn: &[&[u8]], require_client_cert: bool) -> ServerConfig {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap();
        let builder = if require_client_cert {
            let mut roots = rustls::RootCertStore::empty();
            roots.add(self.client_ca.clone()).unwrap();
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .unwrap();
            builder.with_client_cert_verifier(verifier)
        } else {
            builder.with_no_client_auth()
        };
        let key = PrivateKeyDer::from_pem_slice(self.server_key_pem.as_bytes()).unwrap();
        let mut config = builder
            .with_single_cert(self.server_chain.clone(), key)
            .unwrap();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        config
    }
}

/// What a test upstream saw.
#[derive(Default)]
pub struct Seen {
    pub connections: AtomicUsize,
    /// TLS handshakes that resumed a session.
    pub resumed: AtomicUsize,
    /// The SNI of each TLS connection (`None`: none sent).
    pub sni: Mutex<Vec<Option<String>>>,
    /// Each connection's PROXY header: `Some((source, destination))`, or `None` for LOCAL.
    pub proxy: Mutex<Vec<Option<(SocketAddr, SocketAddr)>>>,
    /// Requests by path.
    pub paths: Mutex<Vec<String>>,
}

/// A test upstream: optional PROXY v2 header, optional TLS, then HTTP/1.1 or h2 (by ALPN).
/// Answers `VERSION PATH` and, behind a PROXY header, the source address in `x-proxy-source`.
pub async fn upstream(tls: Option<ServerConfig>, proxy_protocol: bool) -> (SocketAddr, Arc<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Seen::default());
    let acceptor = tls.map(|c| tokio_rustls::TlsAcceptor::from(Arc::new(c)));
    let state = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            state.connections.fetch_add(1, Ordering::SeqCst);
            let (acceptor, state) = (acceptor.clone(), state.clone());
            tokio::spawn(async move {
                let mut source = None;
                if proxy_protocol {
                    let Some(header) = read_proxy_v2(&mut stream).await else {
                        return;
                    };
                    source = header.map(|(s, _)| s);
                    state.proxy.lock().unwrap().push(header);
                }
                match acceptor {
                    None => serve_http(stream, source, state).await,
                    Some(acceptor) => {
                        let Ok(tls) = acceptor.accept(stream).await else {
                            return;
                        };
                        let session = tls.get_ref().1;
                        if session.handshake_kind() == Some(rustls::HandshakeKind::Resumed) {
                            state.resumed.fetch_add(1, Ordering::SeqCst);
                        }
                        let sni = session.server_name().map(str::to_owned);
                        state.sni.lock().unwrap().push(sni);
                        serve_http(tls, source, state).await;
                    }
                }
            });
        }
    });
    (addr, seen)
}

async fn serve_http<IO>(io: IO, source: Option<SocketAddr>, state: Arc<Seen>)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        state
            .paths
            .lock()
            .unwrap()
            .push(req.uri().path().to_owned());
        let body = format!("{:?} {}", req.version(), req.uri().path());
        let mut response = hyper::Response::new(sluice_core::Body::from(body));
        if let Some(source) = source {
            let value = http::HeaderValue::from_str(&source.to_string()).unwrap();
            response.headers_mut().insert("x-proxy-source", value);
        }
        async move { Ok::<_, std::convert::Infallible>(response) }
    });
    let _ = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new())
        .serve_connection(hyper_util::rt::TokioIo::new(io), service)
        .await;
}

/// Reads a PROXY protocol v2 header (independently of sluice's own parser): `Some(None)` for
/// LOCAL, `Some(Some((source, destination)))` for PROXY over TCP/IPv4 or IPv6.
async fn read_proxy_v2<IO: AsyncRead + Unpin>(
    io: &mut IO,
) -> Option<Option<(SocketAddr, SocketAddr)>> {
    let mut fixed = [0u8; 16];
    io.read_exact(&mut fixed).await.ok()?;
    assert_eq!(&fixed[..12], b"\r\n\r\n\0\r\nQUIT\n", "PROXY v2 signature");
    let len = u16::from_be_bytes([fixed[14], fixed[15]]) as usize;
    let mut rest = vec![0u8; len];
    io.read_exact(&mut rest).await.ok()?;
    match (fixed[12], fixed[13]) {
        (0x20, _) => Some(None),
        (0x21, 0x11) => {
            let ip = |at: usize| {
                std::net::Ipv4Addr::new(rest[at], rest[at + 1], rest[at + 2], rest[at + 3])
            };
            let port = |at: usize| u16::from_be_bytes([rest[at], rest[at + 1]]);
            Some(Some((
                SocketAddr::from((ip(0), port(8))),
                SocketAddr::from((ip(4), port(10))),
            )))
        }
        (0x21, 0x21) => {
            let ip = |at: usize| {
                std::net::Ipv6Addr::from(<[u8; 16]>::try_from(&rest[at..at + 16]).unwrap())
            };
            let port = |at: usize| u16::from_be_bytes([rest[at], rest[at + 1]]);
            Some(Some((
                SocketAddr::from((ip(0), port(32))),
                SocketAddr::from((ip(16), port(34))),
            )))
        }
        other => panic!("unexpected PROXY v2 command/family {other:?}"),
    }
}

/// Log lines written while the guard lives, on this thread (the tests' current-thread runtime
/// runs the server's tasks here too).
#[derive(Clone, Default)]
pub struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    pub fn capture(&self) -> tracing::subscriber::DefaultGuard {
        let subscriber = tracing_subscriber::fmt()
            .with_writer(self.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::WARN)
            .finish();
        tracing::subscriber::set_default(subscriber)
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Logs {
    type Writer = Logs;
    fn make_writer(&'a self) -> Logs {
        self.clone()
    }
}

/// Wait (polling, bounded) until `check` holds.
pub async fn eventually(what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
