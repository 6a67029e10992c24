//! The origin over real sockets: HTTP/1.1 and h2c on 127.0.0.1 port 0, and a unix socket.
//!
//! Clients are hyper's own connection handshakes, so each test controls exactly how a request is
//! framed (chunked or with a length, HTTP/1.1 or HTTP/2).

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream;
use http::{Method, Request, Response, StatusCode, header};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::Value;
use sha2::{Digest, Sha256};
use sluice_core::{Body, BoxError};
use sluice_origin::{Origin, OriginOptions};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

type TestResult = Result<(), BoxError>;

/// An origin serving on a port-0 listener until `stop` is called.
struct Running {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<std::io::Result<()>>,
}

impl Running {
    async fn start(name: Option<&str>) -> Result<Self, BoxError> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = oneshot::channel::<()>();
        let origin = Origin::new(OriginOptions {
            name: name.map(str::to_owned),
        });
        let task = tokio::spawn(origin.serve_tcp(listener, async {
            let _ = stopped.await;
        }));
        Ok(Self {
            addr,
            stop: Some(stop),
            task,
        })
    }

    /// Signal shutdown and wait for the server to drain.
    async fn stop(mut self) -> TestResult {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        Ok(tokio::time::timeout(Duration::from_secs(10), self.task).await???)
    }
}

type H1 = hyper::client::conn::http1::SendRequest<Body>;
type H2 = hyper::client::conn::http2::SendRequest<Body>;

async fn h1_on<S>(io: S) -> Result<H1, BoxError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io)).await?;
    tokio::spawn(conn);
    Ok(send)
}

async fn h1(addr: SocketAddr) -> Result<H1, BoxError> {
    h1_on(TcpStream::connect(addr).await?).await
}

async fn h2(addr: SocketAddr) -> Result<H2, BoxError> {
    let io = TokioIo::new(TcpStream::connect(addr).await?);
    let (send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io).await?;
    tokio::spawn(conn);
    Ok(send)
}

fn request(method: Method, path: &str, body: Body) -> Result<Request<Body>, BoxError> {
    Ok(Request::builder()
        .method(method)
        .uri(path)
        .header(header::HOST, "origin")
        .body(body)?)
}

async fn get(client: &mut H1, path: &str) -> Result<(Response<()>, Bytes), BoxError> {
    send(client, request(Method::GET, path, Body::Empty)?).await
}

async fn send(client: &mut H1, req: Request<Body>) -> Result<(Response<()>, Bytes), BoxError> {
    let resp = client.send_request(req).await?;
    let (parts, body) = resp.into_parts();
    let bytes = body.collect().await?.to_bytes();
    Ok((Response::from_parts(parts, ()), bytes))
}

fn json(bytes: &[u8]) -> Result<Value, BoxError> {
    Ok(serde_json::from_slice(bytes)?)
}

fn form(body: &'static str) -> Result<Request<Body>, BoxError> {
    let mut req = request(Method::POST, "/what-is-my-name", Body::from(body))?;
    let form = http::HeaderValue::from_static("application/x-www-form-urlencoded");
    req.headers_mut().insert(header::CONTENT_TYPE, form);
    Ok(req)
}

#[tokio::test]
async fn date_is_ten_thousand_records_of_today_and_the_same_bytes_each_time() -> TestResult {
    let server = Running::start(None).await?;
    let mut client = h1(server.addr).await?;
    let before = time::OffsetDateTime::now_utc().date();
    let (resp, first) = get(&mut client, "/what-date-is-it").await?;
    let after = time::OffsetDateTime::now_utc().date();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()[header::CONTENT_TYPE], "application/json");
    assert_eq!(resp.headers()[header::CACHE_CONTROL], "max-age=5");
    assert_eq!(
        resp.headers()[header::CONTENT_LENGTH],
        first.len().to_string().as_str()
    );
    let records: Vec<Value> = serde_json::from_slice(&first)?;
    assert_eq!(records.len(), 10_000);
    let today = |d: time::Date| serde_json::json!({"year": d.year(), "month": u8::from(d.month()), "day": d.day()});
    assert!(
        records[0] == today(before) || records[0] == today(after),
        "{}",
        records[0]
    );
    assert!(records.iter().all(|r| *r == records[0]));

    let (_, second) = get(&mut client, "/what-date-is-it").await?;
    assert_eq!(first, second);
    let (resp, head) = send(
        &mut client,
        request(Method::HEAD, "/what-date-is-it", Body::Empty)?,
    )
    .await?;
    assert!(head.is_empty());
    assert_eq!(
        resp.headers()[header::CONTENT_LENGTH],
        first.len().to_string().as_str()
    );
    let (resp, _) = send(&mut client, form("name=x")?).await?;
    assert_eq!(
        resp.status(),
        StatusCode::OK,
        "keep-alive connection still usable"
    );
    server.stop().await
}

#[tokio::test]
async fn name_is_escaped_and_errors_are_json() -> TestResult {
    let server = Running::start(None).await?;
    let mut client = h1(server.addr).await?;
    let (resp, body) = send(&mut client, form("name=a%22b")?).await?;
    assert_eq!(resp.status(), StatusCode::OK);
    let records: Vec<Value> = serde_json::from_slice(&body)?;
    assert_eq!(records.len(), 10_000);
    assert!(
        records
            .iter()
            .all(|r| *r == serde_json::json!({"name": "a\"b"}))
    );

    let (resp, body) = send(&mut client, form("nom=x")?).await?;
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    assert!(
        json(&body)?["error"]
            .as_str()
            .is_some_and(|e| e.contains("name"))
    );

    let (resp, _) = get(&mut client, "/what-is-my-name").await?;
    assert_eq!(resp.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(resp.headers()[header::ALLOW], "POST");

    // Too large, announced by Content-Length (refused before reading) and sent chunked.
    let big = Bytes::from(format!("name={}", "x".repeat(64 * 1024)));
    let req = request(Method::POST, "/what-is-my-name", Body::full(big.clone()))?;
    let (resp, body) = send(&mut h1(server.addr).await?, req).await?;
    assert_eq!(resp.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert!(json(&body)?["error"].is_string());
    let req = request(Method::POST, "/what-is-my-name", chunked(&big, 4096))?;
    let (resp, _) = send(&mut h1(server.addr).await?, req).await?;
    assert_eq!(resp.status(), StatusCode::PAYLOAD_TOO_LARGE);
    server.stop().await
}

/// A body of unknown length (so HTTP/1.1 sends it chunked) in frames of `frame` bytes.
fn chunked(data: &Bytes, frame: usize) -> Body {
    let frames: Vec<Result<Frame<Bytes>, std::io::Error>> = (0..data.len())
        .step_by(frame)
        .map(|at| Ok(Frame::data(data.slice(at..(at + frame).min(data.len())))))
        .collect();
    Body::stream(StreamBody::new(stream::iter(frames)))
}

#[tokio::test]
async fn reqinfo_hashes_chunked_and_sized_bodies_alike() -> TestResult {
    let server = Running::start(None).await?;
    let data: Bytes = (0..1024 * 1024u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let expected = hex::encode(Sha256::digest(&data));

    let mut client = h1(server.addr).await?;
    let mut req = request(Method::POST, "/reqinfo?a=1&b=2", chunked(&data, 10_000))?;
    req.headers_mut()
        .insert("x-first", http::HeaderValue::from_static("1"));
    let (resp, body) = send(&mut client, req).await?;
    assert_eq!(resp.status(), StatusCode::OK);
    let info = json(&body)?;
    assert_eq!(info["method"], "POST");
    assert_eq!(info["path"], "/reqinfo?a=1&b=2");
    assert_eq!(info["version"], "HTTP/1.1");
    assert_eq!(info["chunked"], true);
    assert_eq!(info["content_length"], Value::Null);
    assert_eq!(info["body_length"], data.len());
    assert_eq!(info["body_sha256"], expected.as_str());
    let headers = info["headers"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        headers.first(),
        Some(&serde_json::json!(["host", "origin"]))
    );
    assert!(headers.contains(&serde_json::json!(["x-first", "1"])));

    let req = request(Method::PUT, "/reqinfo", Body::full(data.clone()))?;
    let (_, body) = send(&mut client, req).await?;
    let info = json(&body)?;
    assert_eq!(info["method"], "PUT");
    assert_eq!(info["chunked"], false);
    assert_eq!(info["content_length"], data.len());
    assert_eq!(info["body_length"], data.len());
    assert_eq!(info["body_sha256"], expected.as_str());
    server.stop().await
}

#[tokio::test]
async fn stream_sends_n_elements_of_s_bytes_chunked() -> TestResult {
    let server = Running::start(None).await?;
    let mut client = h1(server.addr).await?;
    let (resp, body) = get(&mut client, "/stream?chunks=7&size=100").await?;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()[header::CONTENT_TYPE], "application/json");
    assert_eq!(resp.headers()[header::TRANSFER_ENCODING], "chunked");
    assert!(resp.headers().get(header::CONTENT_LENGTH).is_none());
    assert_eq!(
        body.len(),
        7 * 100 + 7 + 1,
        "N elements of S bytes, N separators and ]"
    );
    let elements: Vec<Value> = serde_json::from_slice(&body)?;
    assert_eq!(elements.len(), 7);
    for (i, element) in elements.iter().enumerate() {
        assert_eq!(element["i"], i);
        // Compact, no escapes: re-encoding gives back the element's length.
        assert_eq!(serde_json::to_vec(element)?.len(), 100);
    }

    let (_, body) = get(&mut client, "/stream").await?;
    assert_eq!(body.len(), 10 * 1024 + 11, "defaults: 10 elements of 1 KiB");

    for bad in [
        "chunks=0",
        "size=31",
        "size=2000000",
        "delay_ms=10001",
        "chunks=abc",
    ] {
        let (resp, body) = get(&mut client, &format!("/stream?{bad}")).await?;
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST, "{bad}");
        assert!(
            json(&body)?["error"]
                .as_str()
                .is_some_and(|e| e.contains("from")),
            "{bad}"
        );
    }
    let (resp, _) = send(&mut client, request(Method::POST, "/stream", Body::Empty)?).await?;
    assert_eq!(resp.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(resp.headers()[header::ALLOW], "GET, HEAD");
    server.stop().await
}

#[tokio::test]
async fn hello_unknown_paths_and_the_origin_name() -> TestResult {
    let named = Running::start(Some("left")).await?;
    let mut client = h1(named.addr).await?;
    let (resp, body) = get(&mut client, "/hello").await?;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(body, "Hello World!".repeat(10));
    assert!(
        resp.headers()[header::CONTENT_TYPE]
            .to_str()?
            .starts_with("text/plain")
    );
    assert_eq!(resp.headers()["x-origin"], "left");
    let (resp, body) = get(&mut client, "/nope").await?;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    assert!(json(&body)?["error"].is_string());
    assert_eq!(
        resp.headers()["x-origin"],
        "left",
        "errors carry the name too"
    );
    named.stop().await?;

    let anonymous = Running::start(None).await?;
    let (resp, _) = get(&mut h1(anonymous.addr).await?, "/hello").await?;
    assert!(resp.headers().get("x-origin").is_none());
    anonymous.stop().await
}

#[tokio::test]
async fn h2c_with_prior_knowledge_on_the_same_port() -> TestResult {
    let server = Running::start(Some("h2")).await?;
    let mut client = h2(server.addr).await?;
    let req = Request::post(format!("http://{}/reqinfo", server.addr)).body(Body::from("abc"))?;
    let resp = client.send_request(req).await?;
    assert_eq!(resp.version(), http::Version::HTTP_2);
    assert_eq!(resp.headers()["x-origin"], "h2");
    let info = json(&resp.into_body().collect().await?.to_bytes())?;
    assert_eq!(info["version"], "HTTP/2.0");
    assert_eq!(info["body_length"], 3);

    let req = Request::get(format!("http://{}/stream?chunks=3&size=64", server.addr))
        .body(Body::Empty)?;
    let body = client
        .send_request(req)
        .await?
        .into_body()
        .collect()
        .await?
        .to_bytes();
    assert_eq!(serde_json::from_slice::<Vec<Value>>(&body)?.len(), 3);
    let req = Request::get(format!("http://{}/what-date-is-it", server.addr)).body(Body::Empty)?;
    let body = client
        .send_request(req)
        .await?
        .into_body()
        .collect()
        .await?
        .to_bytes();
    assert_eq!(serde_json::from_slice::<Vec<Value>>(&body)?.len(), 10_000);
    server.stop().await
}

#[tokio::test]
async fn serves_a_unix_socket() -> TestResult {
    let path = std::env::temp_dir().join(format!("sluice-origin-test-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let listener = tokio::net::UnixListener::bind(&path)?;
    let (stop, stopped) = oneshot::channel::<()>();
    let origin = Origin::new(OriginOptions {
        name: Some("unix".into()),
    });
    let task = tokio::spawn(origin.serve_unix(listener, async {
        let _ = stopped.await;
    }));
    let mut client = h1_on(tokio::net::UnixStream::connect(&path).await?).await?;
    let (resp, body) = get(&mut client, "/hello").await?;
    assert_eq!(body.len(), 120);
    assert_eq!(resp.headers()["x-origin"], "unix");
    drop(client);
    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(10), task).await???;
    std::fs::remove_file(&path)?;
    Ok(())
}

#[tokio::test]
async fn graceful_shutdown_lets_an_in_flight_stream_finish() -> TestResult {
    let server = Running::start(None).await?;
    let addr = server.addr;
    let mut client = h1(addr).await?;
    let req = request(
        Method::GET,
        "/stream?chunks=4&size=64&delay_ms=100",
        Body::Empty,
    )?;
    let mut body = client.send_request(req).await?.into_body();
    // The first element arrives at once, so the response is in flight when shutdown starts.
    let first = body
        .frame()
        .await
        .ok_or("no first frame")??
        .into_data()
        .map_err(|_| "trailers")?;
    assert!(first.starts_with(b"[{\"i\":0,"));

    let stopping = tokio::spawn(server.stop());
    // Wait until the listener is gone, so the rest of the body is provably sent during the drain.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while TcpStream::connect(addr).await.is_ok() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the listener never closed"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let rest = body.collect().await?.to_bytes();
    assert_eq!(
        first.len() + rest.len(),
        4 * 64 + 5,
        "every element arrived"
    );
    stopping.await?
}
