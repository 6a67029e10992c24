//! The baseline: a bare hyper server (`sluice bench baseline-server`) answering a scenario's
//! request with the bytes a correct target sends, computed once at start-up and served from
//! memory: the page, the origin's JSON, compressed once at the scenario's level. No routing,
//! no files, no upstream: the upper bound any server on this stack (tokio + hyper + rustls)
//! can reach, so "sluice ÷ baseline" shows what sluice's own work costs.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{CONTENT_ENCODING, CONTENT_TYPE, VARY};
use http::{HeaderValue, Request, Response};
use http_body::Frame;
use http_body_util::{BodyExt, Either, Full, StreamBody};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;

use crate::expected;
use crate::fixtures;
use crate::scenario::{self, Algorithm, Compression, Scenario, Setup};

#[derive(Debug, clap::Args)]
pub struct BaselineArgs {
    /// Address to listen on.
    #[arg(long)]
    pub listen: SocketAddr,
    /// The scenario whose answer to serve.
    #[arg(long)]
    pub scenario: String,
    /// Runtime worker threads.
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// PEM certificate chain: serve HTTPS (with --key), ALPN as the scenario's protocol.
    #[arg(long, requires = "key")]
    pub cert: Option<PathBuf>,
    #[arg(long, requires = "cert")]
    pub key: Option<PathBuf>,
}

/// The one answer, ready to send.
struct Answer {
    body: Bytes,
    content_type: HeaderValue,
    encoding: Option<HeaderValue>,
    cached: bool,
    /// Send in frames of this size with no length (the streaming scenarios).
    chunk: Option<usize>,
}

pub fn serve(args: BaselineArgs) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.workers.max(1))
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(&format!("starting the runtime: {e}")),
    };
    match rt.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

fn fail(message: &str) -> ExitCode {
    eprintln!("baseline: {message}");
    ExitCode::from(2)
}

async fn run(args: BaselineArgs) -> Result<(), String> {
    let scenario = scenario::all(false)
        .into_iter()
        .find(|s| s.name == args.scenario)
        .ok_or_else(|| format!("no scenario named {:?}", args.scenario))?;
    let answer = Arc::new(prepare(&scenario).await?);
    let tls = match (&args.cert, &args.key) {
        (Some(cert), Some(key)) => Some(tls_acceptor(cert, key, &scenario)?),
        _ => None,
    };
    let listener = TcpListener::bind(args.listen)
        .await
        .map_err(|e| format!("--listen {}: {e}", args.listen))?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| format!("installing the signal handler: {e}"))?;
    let builder = Arc::new(auto::Builder::new(TokioExecutor::new()));
    loop {
        let (tcp, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(_) => continue,
            },
            _ = term.recv() => return Ok(()),
        };
        let _ = tcp.set_nodelay(true);
        let (answer, builder, tls) = (answer.clone(), builder.clone(), tls.clone());
        tokio::spawn(async move {
            let service = service_fn(move |req| respond(req, answer.clone()));
            match tls {
                Some(tls) => {
                    if let Ok(stream) = tls.accept(tcp).await {
                        let _ = builder
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    }
                }
                None => {
                    let _ = builder.serve_connection(TokioIo::new(tcp), service).await;
                }
            }
        });
    }
}

/// Compute the answer: the identity body, encoded as the scenario's target would.
async fn prepare(scenario: &Scenario) -> Result<Answer, String> {
    let identity = expected::identity_body(scenario, &fixtures::page()).await?;
    let (compress, static_page) = match &scenario.setup {
        Setup::Static { compress } => (*compress, true),
        Setup::Precompressed => (
            Some(Compression {
                algorithm: Algorithm::Gzip,
                level: 9,
            }),
            true,
        ),
        Setup::Direct => (None, false),
        Setup::Proxy(p) => (p.compress, false),
    };
    let body = match compress {
        Some(c) => fixtures::compress(&identity, c),
        None => identity,
    };
    let content_type = if static_page {
        "text/html"
    } else if scenario.load.path == "/hello" {
        "text/plain; charset=utf-8"
    } else {
        "application/json"
    };
    Ok(Answer {
        body,
        content_type: HeaderValue::from_static(content_type),
        encoding: compress.map(|c| HeaderValue::from_static(c.algorithm.token())),
        cached: scenario.check.cache_hit,
        chunk: scenario.throughput.then_some(fixtures::STREAM_CHUNK_SIZE),
    })
}

type AnswerBody = Either<Full<Bytes>, StreamBody<futures_util::stream::Iter<Chunks>>>;

async fn respond(
    req: Request<Incoming>,
    answer: Arc<Answer>,
) -> Result<Response<AnswerBody>, Infallible> {
    // Read the request body whole (POST scenarios): a real server does too.
    let mut body = req.into_body();
    while let Some(Ok(_)) = body.frame().await {}
    let body = match answer.chunk {
        Some(size) => Either::Right(StreamBody::new(futures_util::stream::iter(Chunks {
            rest: answer.body.clone(),
            size,
        }))),
        None => Either::Left(Full::new(answer.body.clone())),
    };
    let mut resp = Response::new(body);
    let headers = resp.headers_mut();
    headers.insert(CONTENT_TYPE, answer.content_type.clone());
    if let Some(encoding) = &answer.encoding {
        headers.insert(CONTENT_ENCODING, encoding.clone());
        headers.insert(VARY, HeaderValue::from_static("accept-encoding"));
    }
    if answer.cached {
        headers.insert("x-cache-status", HeaderValue::from_static("HIT"));
    }
    Ok(resp)
}

/// The body in frames of `size` bytes (slices of one buffer: no copy).
struct Chunks {
    rest: Bytes,
    size: usize,
}

impl Iterator for Chunks {
    type Item = Result<Frame<Bytes>, Infallible>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let n = self.size.min(self.rest.len());
        Some(Ok(Frame::data(self.rest.split_to(n))))
    }
}

fn tls_acceptor(
    cert: &std::path::Path,
    key: &std::path::Path,
    scenario: &Scenario,
) -> Result<tokio_rustls::TlsAcceptor, String> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("reading {}: {e}", cert.display()))?;
    let key =
        PrivateKeyDer::from_pem_file(key).map_err(|e| format!("reading {}: {e}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS config: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("TLS certificate: {e}"))?;
    config.alpn_protocols = vec![scenario.load.protocol.alpn().as_bytes().to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}
