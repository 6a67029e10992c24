//! WebSockets and other `Upgrade`s through the proxy: a real WebSocket upstream
//! (tokio-tungstenite), real clients (tokio-tungstenite over HTTP/1.1; hyper's HTTP/2 client with
//! extended CONNECT, RFC 8441, and the WebSocket framing run over the upgraded stream).
//!
//! `echo.rs`: 10,000 messages each way, byte-exact, closed from either side. `edges.rs`: idle
//! timeout, shutdown, refusals (non-101, h2c, protocols a route does not allow), what the
//! upstream sees.

mod echo;
mod edges;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use http::{HeaderMap, Request, StatusCode};
use http_body_util::Empty;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request as WsRequest};
use tokio_tungstenite::tungstenite::protocol::Role;

/// Upper bound for anything a test waits on that is not the bulk exchange itself.
pub const WAIT: Duration = Duration::from_secs(20);

/// A WebSocket upstream. By path: `/echo` echoes every message (and answers a close);
/// `/server-close` echoes until it gets the text `bye`, then closes itself; `/reject` answers
/// the handshake with 403. The first offered subprotocol is accepted. Every handshake's request
/// headers are kept in `seen`.
pub struct WsUpstream {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Vec<(String, String, HeaderMap)>>>,
}

// The handshake callback's error type is tungstenite's (a whole response), not ours to shrink.
#[allow(clippy::result_large_err)]
pub async fn ws_upstream() -> WsUpstream {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let record = record.clone();
            tokio::spawn(async move {
                let path = Arc::new(Mutex::new(String::new()));
                let path_in_callback = path.clone();
                let callback = move |req: &WsRequest, mut resp: http::Response<()>| {
                    let p = req.uri().path().to_owned();
                    record.lock().unwrap().push((
                        req.method().to_string(),
                        p.clone(),
                        req.headers().clone(),
                    ));
                    *path_in_callback.lock().unwrap() = p.clone();
                    if p == "/reject" {
                        let mut refusal = ErrorResponse::new(Some("not here".into()));
                        *refusal.status_mut() = StatusCode::FORBIDDEN;
                        return Err(refusal);
                    }
                    if let Some(first) = req
                        .headers()
                        .get("sec-websocket-protocol")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.split(',').next())
                    {
                        resp.headers_mut()
                            .insert("sec-websocket-protocol", first.trim().parse().unwrap());
                    }
                    Ok(resp)
                };
                let Ok(ws) = tokio_tungstenite::accept_hdr_async(stream, callback).await else {
                    return;
                };
                let server_close = path.lock().unwrap().as_str() == "/server-close";
                serve_echo(ws, server_close).await;
            });
        }
    });
    WsUpstream { addr, seen }
}

async fn serve_echo<S: AsyncRead + AsyncWrite + Unpin>(
    mut ws: WebSocketStream<S>,
    server_close: bool,
) {
    while let Some(Ok(msg)) = ws.next().await {
        let bye = matches!(&msg, Message::Text(t) if t.as_str() == "bye");
        if server_close && bye {
            let _ = ws.close(None).await;
            // Read on until the client's close answer; tungstenite then ends the stream.
            while let Some(Ok(_)) = ws.next().await {}
            return;
        }
        // Pings are answered by tungstenite; a close is answered when it is read.
        let data = matches!(&msg, Message::Binary(_) | Message::Text(_));
        if data && ws.send(msg).await.is_err() {
            return;
        }
    }
}

/// A raw upstream that reads one request head and answers it with `reply` as written, then
/// holds the connection until the peer closes. Returns the address and the heads received.
pub async fn raw_upstream(reply: &'static str) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let record = heads.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let record = record.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                record
                    .lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&head).into_owned());
                let _ = stream.write_all(reply.as_bytes()).await;
                while let Ok(n) = stream.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                }
            });
        }
    });
    (addr, heads)
}

/// A proxy in front of `upstream` with one route (`proxy_extra` goes into its proxy table,
/// `route_extra` into the route) and an admin listener.
pub async fn proxy_to(
    upstream: SocketAddr,
    proxy_extra: &str,
    route_extra: &str,
) -> sluice_testkit::TestServer {
    proxy_with(upstream, "", proxy_extra, route_extra).await
}

/// [`proxy_to`], with `listener_extra` in its listener (named `main`: limits, timeouts).
pub async fn proxy_with(
    upstream: SocketAddr,
    listener_extra: &str,
    proxy_extra: &str,
    route_extra: &str,
) -> sluice_testkit::TestServer {
    sluice_testkit::start_toml(&format!(
        r#"
        [log]
        access = "off"
        [admin]
        address = "127.0.0.1:0"
        [[listeners]]
        name = "main"
        address = "127.0.0.1:0"
        {listener_extra}
        [[routes]]
        name = "ws"
        {route_extra}
        proxy = {{ upstream = "backend" {proxy_extra} }}
        [upstreams.backend]
        servers = ["{upstream}"]
        "#
    ))
    .await
}

/// A WebSocket client over HTTP/1.1 to `ws://addr{path}`, offering `protocols`; returns the
/// stream and the handshake response's headers.
pub async fn h1_client(
    addr: SocketAddr,
    path: &str,
    protocols: Option<&str>,
) -> Result<(WebSocketStream<TcpStream>, HeaderMap), tokio_tungstenite::tungstenite::Error> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut request = format!("ws://{addr}{path}").into_client_request().unwrap();
    if let Some(p) = protocols {
        request
            .headers_mut()
            .insert("sec-websocket-protocol", p.parse().unwrap());
    }
    let stream = TcpStream::connect(addr).await.unwrap();
    let (ws, response) = tokio_tungstenite::client_async(request, stream).await?;
    Ok((ws, response.headers().clone()))
}

/// An HTTP/2 (h2c, prior knowledge) connection to `addr`.
pub async fn h2_connection(
    addr: SocketAddr,
) -> hyper::client::conn::http2::SendRequest<Empty<Bytes>> {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (send, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    send
}

/// An extended CONNECT (RFC 8441) for `protocol` to `path`, on `send`; returns the response (its
/// body unread) so the caller can upgrade it.
pub async fn extended_connect(
    send: &mut hyper::client::conn::http2::SendRequest<Empty<Bytes>>,
    addr: SocketAddr,
    path: &str,
    protocol: &'static str,
    headers: &[(&str, &str)],
) -> http::Response<hyper::body::Incoming> {
    let mut req = Request::builder()
        .method(http::Method::CONNECT)
        .uri(format!("http://{addr}{path}"))
        .extension(hyper::ext::Protocol::from_static(protocol));
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let req = req.body(Empty::new()).unwrap();
    send.ready().await.unwrap();
    tokio::time::timeout(WAIT, send.send_request(req))
        .await
        .expect("extended CONNECT answered in time")
        .unwrap()
}

/// A WebSocket client over HTTP/2: extended CONNECT, then the framing over the stream.
pub async fn h2_client(
    addr: SocketAddr,
    path: &str,
) -> (
    WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>,
    http::response::Parts,
) {
    let mut send = h2_connection(addr).await;
    let response = extended_connect(
        &mut send,
        addr,
        path,
        "websocket",
        &[("sec-websocket-version", "13")],
    )
    .await;
    let mut response = response;
    assert_eq!(response.status(), StatusCode::OK, "{response:?}");
    let upgrade = hyper::upgrade::on(&mut response);
    let (parts, _) = response.into_parts();
    let upgraded = upgrade.await.unwrap();
    let ws = WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Client, None).await;
    (ws, parts)
}

/// Poll the admin metrics until `series` has `value` (the tunnel's task counts its end just
/// after closing the sockets the client watches).
pub async fn wait_for_metric(server: &sluice_testkit::TestServer, series: &str, value: f64) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let text = crate::scrape_metrics(server).await;
        let now = text
            .lines()
            .find(|l| l.starts_with(series))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok());
        if now == Some(value) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{series} is {now:?}, not {value}:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
