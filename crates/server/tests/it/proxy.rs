//! The reverse proxy against real demo origins on port 0: headers, balancing, unix sockets,
//! keep-alive reuse, failover, 502/504, streaming both ways, cancellation, active health.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use sluice_testkit::{Offer, TestOrigin, client, start_origin, start_toml};

pub(crate) fn proxy_toml(upstream: &str, route_extra: &str) -> String {
    format!(
        r#"
        [log]
        access = "off"
        [[listeners]]
        address = "127.0.0.1:0"
        [[routes]]
        {route_extra}
        [upstreams.backend]
        {upstream}
        "#
    )
}

/// A proxy whose only route forwards everything to the group `[upstreams.backend]` described by
/// `upstream` (its body).
pub(crate) async fn proxy_in_front(upstream: &str) -> sluice_testkit::TestServer {
    start_toml(&proxy_toml(upstream, r#"proxy = { upstream = "backend" }"#)).await
}

fn servers(origins: &[&TestOrigin]) -> String {
    let list: Vec<String> = origins.iter().map(|o| format!("\"{}\"", o.addr)).collect();
    format!("servers = [{}]", list.join(", "))
}

async fn origin_counts(url: &str, n: usize) -> HashMap<String, usize> {
    let http = client(Offer::Http1);
    let mut counts = HashMap::new();
    for _ in 0..n {
        let resp = http.get(url).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        let name = resp.headers()["x-origin"].to_str().unwrap().to_string();
        *counts.entry(name).or_default() += 1;
        let _ = resp.bytes().await.unwrap();
    }
    counts
}

#[tokio::test]
async fn forwards_with_rewritten_headers() {
    let origin = start_origin(None).await;
    let server = start_toml(&proxy_toml(
        &servers(&[&origin]),
        r#"[routes.proxy]
        upstream = "backend"
        request_headers = { set = { "x-env" = "test" }, remove = ["x-debug"] }
        response_headers = { set = { "x-frame-options" = "DENY" }, remove = ["cache-control"] }"#,
    ))
    .await;
    let resp = client(Offer::Http1)
        .post(server.url("/reqinfo?x=1"))
        .header("host", "site.test")
        .header("connection", "x-secret")
        .header("x-secret", "hop")
        .header("x-debug", "1")
        .header("x-forwarded-for", "10.1.1.1")
        .body("hello")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-frame-options"], "DENY");
    assert!(
        resp.headers()["via"]
            .to_str()
            .unwrap()
            .ends_with("1.1 sluice")
    );
    let info: serde_json::Value = serde_json::from_slice(&resp.bytes().await.unwrap()).unwrap();
    let headers: HashMap<String, String> = info["headers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|pair| {
            (
                pair[0].as_str().unwrap().to_string(),
                pair[1].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(info["path"], "/reqinfo?x=1");
    assert_eq!(info["body_length"], 5);
    assert_eq!(headers["host"], "site.test");
    // The client is no trusted proxy: its X-Forwarded-For is replaced (see paths.rs).
    assert_eq!(headers["x-forwarded-for"], "127.0.0.1");
    assert_eq!(headers["x-forwarded-proto"], "http");
    assert_eq!(headers["x-forwarded-host"], "site.test");
    assert_eq!(headers["via"], "1.1 sluice");
    assert_eq!(headers["x-env"], "test");
    assert!(
        !headers.contains_key("x-secret"),
        "Connection-listed header forwarded"
    );
    assert!(!headers.contains_key("x-debug"));
    assert!(!headers.contains_key("connection"));
}

#[tokio::test]
async fn weights_three_to_one_split_four_thousand_requests() {
    let (a, b) = (start_origin(Some("a")).await, start_origin(Some("b")).await);
    let upstream = format!(
        r#"servers = [{{ address = "{}", weight = 3 }}, "{}"]"#,
        a.addr, b.addr
    );
    let server = proxy_in_front(&upstream).await;
    let counts = origin_counts(&server.url("/hello"), 4000).await;
    let (na, nb) = (counts["a"], counts["b"]);
    assert!(
        (2850..=3150).contains(&na) && (850..=1150).contains(&nb),
        "split {na}/{nb}"
    );
}

#[tokio::test]
async fn unix_socket_upstream() {
    let temp = tempfile::tempdir().unwrap();
    let sock = temp.path().join("app.sock");
    let listener = tokio::net::UnixListener::bind(&sock).unwrap();
    let origin = sluice_origin::Origin::new(sluice_origin::OriginOptions {
        name: Some("unix".into()),
    });
    tokio::spawn(origin.serve_unix(listener, std::future::pending()));
    let upstream = format!(r#"servers = ["unix:{}"]"#, sock.display());
    let server = proxy_in_front(&upstream).await;
    let resp = client(Offer::Http2)
        .get(server.url("/hello"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["x-origin"], "unix");
    assert_eq!(resp.text().await.unwrap(), "Hello World!".repeat(10));
}

/// An upstream on 127.0.0.1 port 0 (HTTP/1.1 and h2c) answering every request with `handler`;
/// returns its address and the number of connections it has accepted.
pub(crate) async fn serve_fn<F, Fut>(handler: F) -> (SocketAddr, Arc<AtomicUsize>)
where
    F: Fn(hyper::Request<hyper::body::Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = hyper::Response<sluice_core::Body>> + Send + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let handler = handler.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let response = handler(req);
                    async move { Ok::<_, std::convert::Infallible>(response.await) }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(
                    hyper_util::rt::TokioExecutor::new(),
                )
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
            });
        }
    });
    (addr, accepted)
}

/// An upstream whose one response (of `content_type`, with a `Content-Length` when `length`
/// is given) sends each piece the returned sender is given, as it is given: the test paces it.
pub(crate) async fn paced_upstream(
    content_type: &'static str,
    length: Option<usize>,
) -> (tokio::sync::mpsc::Sender<bytes::Bytes>, SocketAddr) {
    let (tx, rx) = tokio::sync::mpsc::channel::<bytes::Bytes>(1);
    let rx = Arc::new(std::sync::Mutex::new(Some(rx)));
    let (addr, _) = serve_fn(move |_req| {
        let rx = rx.lock().unwrap().take();
        async move {
            let stream = futures_util::stream::unfold(rx, |rx| async move {
                let mut rx = rx?;
                let piece = rx.recv().await?;
                Some((
                    Ok::<_, std::io::Error>(hyper::body::Frame::data(piece)),
                    Some(rx),
                ))
            });
            let mut response = hyper::Response::builder().header("content-type", content_type);
            if let Some(length) = length {
                response = response.header("content-length", length);
            }
            response
                .body(sluice_core::Body::stream(http_body_util::StreamBody::new(
                    stream,
                )))
                .unwrap()
        }
    })
    .await;
    (tx, addr)
}

/// A demo origin that counts the connections it accepts.
async fn counting_origin() -> (SocketAddr, Arc<AtomicUsize>) {
    let origin = sluice_origin::Origin::new(sluice_origin::OriginOptions::default());
    serve_fn(move |req| {
        let origin = origin.clone();
        async move { origin.handle(req).await }
    })
    .await
}

#[tokio::test]
async fn keepalive_reuses_upstream_connections() {
    let (addr, accepted) = counting_origin().await;
    let server = proxy_in_front(&format!(r#"servers = ["{addr}"]"#)).await;
    let http = client(Offer::Http1);
    for _ in 0..10_000 {
        let resp = http.get(server.url("/hello")).send().await.unwrap();
        assert_eq!(resp.bytes().await.unwrap().len(), 120);
    }
    let opened = accepted.load(Ordering::SeqCst);
    assert!(
        opened <= 4,
        "10,000 sequential requests opened {opened} upstream connections"
    );
}

#[tokio::test]
async fn failover_when_an_origin_stops_fails_no_get() {
    let (a, b) = (start_origin(Some("a")).await, start_origin(Some("b")).await);
    let server = start_toml(&proxy_toml(
        &servers(&[&a, &b]),
        r#"proxy = { upstream = "backend" }"#,
    ))
    .await;
    let url = server.url("/hello");
    let done = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for _ in 0..6 {
        let (url, done) = (url.clone(), done.clone());
        workers.push(tokio::spawn(async move {
            let http = client(Offer::Http1);
            let mut failures = Vec::new();
            while done.fetch_add(1, Ordering::SeqCst) < 10_000 {
                match http.get(&url).send().await {
                    Ok(r) if r.status() == 200 => {
                        let _ = r.bytes().await;
                    }
                    Ok(r) => failures.push(format!("status {}", r.status())),
                    Err(e) => failures.push(e.to_string()),
                }
            }
            failures
        }));
    }
    // Stop origin a a quarter of the way in.
    while done.load(Ordering::SeqCst) < 2_500 {
        tokio::task::yield_now().await;
    }
    a.stop().await;
    let mut failures = Vec::new();
    for w in workers {
        failures.extend(w.await.unwrap());
    }
    assert!(
        failures.is_empty(),
        "{} failed GETs, e.g. {:?}",
        failures.len(),
        failures.first()
    );
}

#[tokio::test]
async fn all_servers_down_is_a_quick_502() {
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let server = proxy_in_front(&format!(r#"servers = ["{dead}"]"#)).await;
    let started = Instant::now();
    let resp = client(Offer::Http1)
        .get(server.url("/"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 502);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "502 took {:?}",
        started.elapsed()
    );
    assert!(resp.text().await.unwrap().starts_with("502 Bad Gateway"));
}

#[tokio::test]
async fn a_silent_upstream_is_a_504() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // Accepts and never answers.
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            held.push(s);
        }
    });
    let upstream = format!(
        "servers = [\"{addr}\"]\n[upstreams.backend.timeouts]\nresponse_header = \"300ms\""
    );
    let server = proxy_in_front(&upstream).await;
    let resp = client(Offer::Http1)
        .get(server.url("/"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 504);
}

#[tokio::test]
async fn streams_a_large_download_and_upload() {
    use sha2::Digest;
    let origin = start_origin(None).await;
    // The 32 MiB upload is over the default max_body_size (10 MiB).
    let route = "proxy = { upstream = \"backend\" }\nmax_body_size = \"64MiB\"";
    let server = start_toml(&proxy_toml(&servers(&[&origin]), route)).await;
    let http = client(Offer::Http1);
    let mut resp = http
        .get(server.url("/stream?chunks=512&size=65536"))
        .send()
        .await
        .unwrap();
    assert!(
        resp.headers().get("content-length").is_none(),
        "stream must stay chunked"
    );
    let mut total = 0usize;
    let mut frames = 0usize;
    while let Some(chunk) = resp.chunk().await.unwrap() {
        total += chunk.len();
        frames += 1;
    }
    assert_eq!(
        total,
        512 * 65536 + 513,
        "elements plus brackets and commas"
    );
    assert!(frames > 1);

    let block = vec![b'x'; 1 << 20];
    let upload =
        futures_util::stream::iter((0..32).map(move |_| Ok::<_, std::io::Error>(block.clone())));
    let resp = http
        .post(server.url("/reqinfo"))
        .body(sluice_testkit::reqwest::Body::wrap_stream(upload))
        .send()
        .await
        .unwrap();
    let info: serde_json::Value = serde_json::from_slice(&resp.bytes().await.unwrap()).unwrap();
    let expected = hex::encode(sha2::Sha256::digest(vec![b'x'; 32 << 20]));
    assert_eq!(info["body_length"], 32 << 20);
    assert_eq!(info["body_sha256"], expected);
    assert_eq!(info["chunked"], true);
}

/// The proxy hands a streamed body to the client in runs (sluice-http `Coalesce`), but a piece
/// after which the upstream pauses must still reach the client at once: each piece here is
/// sent only once the client has the one before, so a piece held back for more stalls the
/// exchange. Over HTTP/1.1 and HTTP/2, with and without a known length.
#[tokio::test]
async fn each_piece_of_a_paused_stream_reaches_the_client_before_the_next_is_sent() {
    use bytes::Bytes;

    const PIECES: usize = 4;
    const PIECE: usize = 1000;
    for (offer, length) in [
        (Offer::Http1, None),
        (Offer::Http2, None),
        (Offer::Http1, Some(PIECES * PIECE)),
    ] {
        let (tx, addr) = paced_upstream("text/plain", length).await;
        let server = proxy_in_front(&format!("servers = [\"{addr}\"]")).await;
        let mut resp = client(offer)
            .get(server.url("/pieces"))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let mut received = Vec::new();
        for i in 0..PIECES {
            let piece = vec![b'a' + i as u8; PIECE];
            tx.send(Bytes::from(piece.clone())).await.unwrap();
            let wait = async {
                while received.len() < (i + 1) * PIECE {
                    let data = resp.chunk().await.unwrap().expect("the stream ended early");
                    received.extend_from_slice(&data);
                }
            };
            tokio::time::timeout(Duration::from_secs(30), wait)
                .await
                .unwrap_or_else(|_| panic!("piece {i} was held back ({offer:?}, {length:?})"));
            assert_eq!(&received[i * PIECE..], &piece[..], "piece {i} ({offer:?})");
        }
        drop(tx);
        while let Some(data) = resp.chunk().await.unwrap() {
            received.extend_from_slice(&data);
        }
        assert_eq!(received.len(), PIECES * PIECE, "{offer:?}, {length:?}");
    }
}

#[tokio::test]
async fn a_client_that_goes_away_cancels_the_upstream_request() {
    // An upstream whose endless body tells us when it is dropped.
    let (dropped_tx, dropped_rx) = tokio::sync::oneshot::channel::<()>();
    let dropped_tx = Arc::new(std::sync::Mutex::new(Some(dropped_tx)));
    let (addr, _) = serve_fn(move |_req| {
        let guard = DropSignal(dropped_tx.clone());
        async move {
            let body = futures_util::stream::unfold(guard, |g| async move {
                tokio::time::sleep(Duration::from_millis(10)).await; // the upstream's pace
                let frame = hyper::body::Frame::data(bytes::Bytes::from_static(b"tick\n"));
                Some((Ok::<_, std::io::Error>(frame), g))
            });
            hyper::Response::new(sluice_core::Body::stream(http_body_util::StreamBody::new(
                body,
            )))
        }
    })
    .await;
    let server = proxy_in_front(&format!(r#"servers = ["{addr}"]"#)).await;
    let mut resp = client(Offer::Http1)
        .get(server.url("/endless"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.chunk().await.unwrap().unwrap().as_ref(), b"tick\n");
    drop(resp);
    tokio::time::timeout(Duration::from_secs(10), dropped_rx)
        .await
        .expect("the upstream body was not dropped after the client left")
        .unwrap();
}

struct DropSignal(Arc<std::sync::Mutex<Option<tokio::sync::oneshot::Sender<()>>>>);

impl Drop for DropSignal {
    fn drop(&mut self) {
        if let Some(tx) = self.0.lock().unwrap().take() {
            let _ = tx.send(());
        }
    }
}

#[tokio::test]
async fn active_health_check_brings_a_server_back() {
    let a = start_origin(Some("a")).await;
    // Reserve a port for b, then free it: b is down at start.
    let b_addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let upstream = format!(
        "servers = [\"{}\", \"{b_addr}\"]\n[upstreams.backend.health_check]\npath = \"/hello\"\ninterval = \"100ms\"\ntimeout = \"50ms\"\nrise = 1\nfall = 1",
        a.addr
    );
    let server = proxy_in_front(&upstream).await;
    let http = client(Offer::Http1);
    // Once b is marked down, every request lands on a.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut consecutive_a = 0;
    while consecutive_a < 20 {
        assert!(Instant::now() < deadline, "b was never taken out");
        let resp = http.get(server.url("/hello")).send().await.unwrap();
        consecutive_a = if resp.headers().get("x-origin").is_some_and(|v| v == "a") {
            consecutive_a + 1
        } else {
            0
        };
    }
    // Start b on its port; the checker brings it back.
    let listener = tokio::net::TcpListener::bind(b_addr).await.unwrap();
    let b = sluice_origin::Origin::new(sluice_origin::OriginOptions {
        name: Some("b".into()),
    });
    tokio::spawn(b.serve_tcp(listener, std::future::pending()));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        assert!(Instant::now() < deadline, "b never came back");
        let resp = http.get(server.url("/hello")).send().await.unwrap();
        if resp.headers().get("x-origin").is_some_and(|v| v == "b") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_post_whose_body_was_not_sent_is_retried_elsewhere() {
    use sha2::Digest;
    let live = start_origin(Some("live")).await;
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    // max_fails = 0 keeps the dead server in rotation, so every other request meets it first.
    let upstream = format!(
        r#"servers = [{{ address = "{dead}", max_fails = 0 }}, "{}"]"#,
        live.addr
    );
    let server = proxy_in_front(&upstream).await;
    let http = client(Offer::Http1);
    let body = vec![7u8; 100_000];
    let expected = hex::encode(sha2::Sha256::digest(&body));
    for _ in 0..6 {
        let resp = http
            .post(server.url("/reqinfo"))
            .body(body.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let info: serde_json::Value = serde_json::from_slice(&resp.bytes().await.unwrap()).unwrap();
        assert_eq!(info["body_sha256"], expected);
        assert_eq!(info["content_length"], 100_000);
    }
}

#[tokio::test]
async fn max_requests_retires_upstream_connections() {
    let (addr, accepted) = counting_origin().await;
    let upstream =
        format!("servers = [\"{addr}\"]\n[upstreams.backend.keepalive]\nmax_requests = 10");
    let server = proxy_in_front(&upstream).await;
    let http = client(Offer::Http1);
    for _ in 0..100 {
        let resp = http.get(server.url("/hello")).send().await.unwrap();
        assert_eq!(resp.bytes().await.unwrap().len(), 120);
    }
    let opened = accepted.load(Ordering::SeqCst);
    assert!(
        (10..=12).contains(&opened),
        "100 requests at 10 per connection opened {opened}"
    );
}

#[tokio::test]
async fn http2_to_the_upstream() {
    let origin = start_origin(Some("h2")).await;
    let upstream = format!("servers = [\"{}\"]\nhttp2 = true", origin.addr);
    let server = proxy_in_front(&upstream).await;
    let resp = client(Offer::Http1)
        .post(server.url("/reqinfo"))
        .body("over h2")
        .send()
        .await
        .unwrap();
    let info: serde_json::Value = serde_json::from_slice(&resp.bytes().await.unwrap()).unwrap();
    assert_eq!(info["version"], "HTTP/2.0", "the origin saw {info}");
    assert_eq!(info["body_length"], 7);
}

#[tokio::test]
async fn a_stalled_upload_gets_408_not_a_hang() {
    let origin = start_origin(None).await;
    let upstream = format!(
        "servers = [\"{}\"]\n[upstreams.backend.timeouts]\nidle = \"300ms\"",
        origin.addr
    );
    let server = proxy_in_front(&upstream).await;
    // Promise 100 bytes, send 10, then nothing.
    let request = b"POST /reqinfo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789";
    let started = Instant::now();
    let reply = String::from_utf8_lossy(
        &sluice_testkit::raw_exchange_open(server.first_addr(), request, 1 << 16).await,
    )
    .into_owned();
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn an_inline_address_needs_no_upstream_table() {
    let origin = start_origin(Some("inline")).await;
    let server = start_toml(&format!(
        "[log]\naccess = \"off\"\n[[listeners]]\naddress = \"127.0.0.1:0\"\n[[routes]]\nname = \"app\"\nproxy = {{ to = \"{}\" }}\n",
        origin.addr
    ))
    .await;
    let resp = client(Offer::Http1)
        .get(server.url("/hello"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["x-origin"], "inline");
}

#[tokio::test]
async fn http2_upstreams_see_the_real_authority() {
    // An upstream that answers with the :authority it received.
    let (addr, _) = serve_fn(|req| async move {
        let authority = req
            .uri()
            .authority()
            .map(|a| a.to_string())
            .unwrap_or_default();
        hyper::Response::new(sluice_core::Body::from(authority))
    })
    .await;
    let upstream = format!("servers = [\"{addr}\"]\nhttp2 = true");
    let server = proxy_in_front(&upstream).await;
    let resp = client(Offer::Http1)
        .get(server.url("/"))
        .header("host", "site.test:8443")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.text().await.unwrap(), "site.test:8443");
}

#[tokio::test]
async fn a_client_that_aborts_its_upload_does_not_eject_the_server() {
    use tokio::io::AsyncWriteExt;
    let origin = start_origin(None).await;
    // One failure would take the only server out for a minute.
    let upstream = format!(
        r#"servers = [{{ address = "{}", max_fails = 1, fail_timeout = "60s" }}]"#,
        origin.addr
    );
    let server = proxy_in_front(&upstream).await;
    for _ in 0..3 {
        let mut stream = tokio::net::TcpStream::connect(server.first_addr())
            .await
            .unwrap();
        stream
            .write_all(
                b"POST /reqinfo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n0123456789",
            )
            .await
            .unwrap();
        drop(stream);
    }
    // Every request in the next second must still find the server.
    let http = client(Offer::Http1);
    let deadline = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline {
        let resp = http.get(server.url("/hello")).send().await.unwrap();
        assert_eq!(
            resp.status(),
            200,
            "the server was ejected because a client went away"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn an_http2_client_gets_one_cookie_line_and_its_port_in_host() {
    let origin = start_origin(None).await;
    let server = proxy_in_front(&servers(&[&origin])).await;
    let resp = client(Offer::Http2)
        .get(server.url("/reqinfo"))
        .header("cookie", "a=1")
        .header("cookie", "b=2")
        .send()
        .await
        .unwrap();
    let info: serde_json::Value = serde_json::from_slice(&resp.bytes().await.unwrap()).unwrap();
    let headers = info["headers"].as_array().unwrap();
    let values = |name: &str| -> Vec<String> {
        headers
            .iter()
            .filter(|p| p[0] == name)
            .map(|p| p[1].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(values("cookie"), vec!["a=1; b=2".to_string()]);
    assert_eq!(values("host"), vec![server.first_addr().to_string()]);
    assert_eq!(
        values("x-forwarded-host"),
        vec![server.first_addr().to_string()]
    );
}

#[tokio::test]
async fn a_long_poll_outlives_the_idle_timeout() {
    // An upstream that takes 3.5 s to answer (three idle periods), behind a listener that closes idle connections
    // after 1 s: the waiting request keeps its connection.
    let (addr, _) = serve_fn(|_req| async move {
        tokio::time::sleep(Duration::from_millis(3500)).await; // the slow upstream itself
        hyper::Response::new(sluice_core::Body::from("late"))
    })
    .await;
    let server = start_toml(&format!(
        "[log]\naccess = \"off\"\n[[listeners]]\naddress = \"127.0.0.1:0\"\nidle_timeout = \"1s\"\n[[routes]]\nproxy = {{ to = \"{addr}\" }}\n"
    ))
    .await;
    for offer in [Offer::Http1, Offer::Http2] {
        let resp = client(offer).get(server.url("/poll")).send().await.unwrap();
        assert_eq!(resp.text().await.unwrap(), "late", "{offer:?}");
    }
}
