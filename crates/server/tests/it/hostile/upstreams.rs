//! Upstreams for hostile-traffic and fault tests: a recording one (hyper over a socket that
//! keeps every byte it reads, so tests check what really crossed the wire) and a scripted raw-TCP
//! one (each accepted connection runs a script that misbehaves on purpose).

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use http_body_util::BodyExt;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// One request as the recording upstream parsed it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub target: String,
    pub headers: http::HeaderMap,
    /// The whole body, or `Err` with hyper's reason when it did not arrive whole (the
    /// connection broke, the chunked framing was cut): a request that never was complete.
    pub body: Result<Vec<u8>, String>,
}

/// An HTTP/1.1 upstream that answers every complete request `200 ok` and records the bytes it
/// read and the requests it parsed.
pub struct Recording {
    pub addr: SocketAddr,
    raw: Arc<Mutex<Vec<u8>>>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Recording {
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let raw = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (raw_in, seen_in) = (raw.clone(), seen.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let io = RecordingIo {
                    inner: stream,
                    raw: raw_in.clone(),
                };
                let seen = seen_in.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(
                        move |req: hyper::Request<hyper::body::Incoming>| {
                            let seen = seen.clone();
                            async move {
                                let (parts, body) = req.into_parts();
                                let body = body
                                    .collect()
                                    .await
                                    .map(|b| b.to_bytes().to_vec())
                                    .map_err(|e| e.to_string());
                                seen.lock().unwrap().push(Seen {
                                    method: parts.method.to_string(),
                                    target: parts.uri.to_string(),
                                    headers: parts.headers,
                                    body,
                                });
                                Ok::<_, std::convert::Infallible>(hyper::Response::new(
                                    sluice_core::Body::from("ok"),
                                ))
                            }
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(io), service)
                        .await;
                });
            }
        });
        Self { addr, raw, seen }
    }

    /// Every byte read so far, all connections in arrival order of their reads.
    pub fn raw(&self) -> String {
        String::from_utf8_lossy(&self.raw.lock().unwrap()).into_owned()
    }

    /// The requests parsed so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// The requests that arrived whole (head and complete body).
    pub fn whole(&self) -> Vec<Seen> {
        self.seen().into_iter().filter(|s| s.body.is_ok()).collect()
    }
}

struct RecordingIo {
    inner: TcpStream,
    raw: Arc<Mutex<Vec<u8>>>,
}

impl AsyncRead for RecordingIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &polled {
            let new = buf.filled()[before..].to_vec();
            self.raw.lock().unwrap().extend_from_slice(&new);
        }
        polled
    }
}

impl AsyncWrite for RecordingIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A raw-TCP upstream running `script` on every accepted connection (with the connection's
/// number, from 0); counts the connections it accepted.
pub struct Scripted {
    pub addr: SocketAddr,
    pub accepted: Arc<AtomicUsize>,
}

impl Scripted {
    pub async fn start<F, Fut>(script: F) -> Self
    where
        F: Fn(usize, TcpStream) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let n = count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(script(n, stream));
            }
        });
        Self { addr, accepted }
    }

    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

/// Read one request head (through the blank line); `None` when the peer closed first.
pub async fn read_head(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte).await {
            Ok(1) => head.push(byte[0]),
            _ => return None,
        }
    }
    Some(head)
}

/// Close `stream` with a TCP reset instead of a FIN (SO_LINGER 0), as a crashing peer does.
pub fn reset(stream: TcpStream) {
    // Deprecated because a lingering close can block the thread; a zero linger never does: the
    // kernel drops the connection with RST at once.
    #[allow(deprecated)]
    let _ = stream.set_linger(Some(std::time::Duration::ZERO));
    drop(stream);
}
