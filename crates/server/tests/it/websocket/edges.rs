//! The edges of upgrading: the idle timeout, shutdown, answers other than 101, switches that do
//! not fit the request, h2c, protocols a route does not allow, and the rate limit.

use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use http::StatusCode;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio_tungstenite::tungstenite::{self, Message};

use super::{
    WAIT, extended_connect, h1_client, h2_client, h2_connection, proxy_to, proxy_with,
    raw_upstream, wait_for_metric, ws_upstream,
};

/// A tunnel with no byte either way for `tunnel_idle_timeout` is closed (the client sees its
/// stream end), over HTTP/1.1 and HTTP/2.
#[tokio::test]
async fn an_idle_tunnel_is_closed_at_its_timeout() {
    let upstream = ws_upstream().await;
    let idle = Duration::from_millis(400);
    let server = proxy_to(upstream.addr, r#", tunnel_idle_timeout = "400ms""#, "").await;
    let addr = server.first_addr();
    let (mut h1, _) = h1_client(addr, "/echo", None).await.unwrap();
    let (mut h2, _) = h2_client(addr, "/echo").await;
    // Each tunnel's last byte moves after its message was sent: it cannot close before then
    // plus the timeout.
    let h1_sent = Instant::now();
    h1.send(Message::text("one")).await.unwrap();
    assert_eq!(h1.next().await.unwrap().unwrap(), Message::text("one"));
    let h2_sent = Instant::now();
    h2.send(Message::text("two")).await.unwrap();
    assert_eq!(h2.next().await.unwrap().unwrap(), Message::text("two"));
    // The proxy drops both sides without a close frame: the stream ends or errs.
    let h1_end = tokio::time::timeout(WAIT, h1.next()).await.unwrap();
    assert!(!matches!(h1_end, Some(Ok(_))), "{h1_end:?}");
    assert!(h1_sent.elapsed() >= idle, "not closed before its timeout");
    let h2_end = tokio::time::timeout(WAIT, h2.next()).await.unwrap();
    assert!(!matches!(h2_end, Some(Ok(_))), "{h2_end:?}");
    assert!(h2_sent.elapsed() >= idle, "not closed before its timeout");
    wait_for_metric(
        &server,
        "sluice_tunnels_total{route=\"ws\",end=\"idle_timeout\"}",
        2.0,
    )
    .await;
    wait_for_metric(&server, "sluice_tunnels_open{route=\"ws\"}", 0.0).await;
}

/// Shutdown closes open tunnels at once instead of waiting out the drain for them (an HTTP/2
/// connection with an open tunnel would otherwise never finish draining).
#[tokio::test]
async fn shutdown_closes_open_tunnels() {
    let upstream = ws_upstream().await;
    let server = proxy_to(upstream.addr, "", "").await;
    let addr = server.first_addr();
    let (mut h1, _) = h1_client(addr, "/echo", None).await.unwrap();
    let (mut h2, _) = h2_client(addr, "/echo").await;
    h2.send(Message::text("open")).await.unwrap();
    assert_eq!(h2.next().await.unwrap().unwrap(), Message::text("open"));
    wait_for_metric(&server, "sluice_tunnels_open{route=\"ws\"}", 2.0).await;
    assert!(
        server.shutdown(WAIT).await,
        "drained without waiting for the tunnels to end by themselves"
    );
    let h1_end = tokio::time::timeout(WAIT, h1.next()).await.unwrap();
    assert!(!matches!(h1_end, Some(Ok(_))), "{h1_end:?}");
    let h2_end = tokio::time::timeout(WAIT, h2.next()).await.unwrap();
    assert!(!matches!(h2_end, Some(Ok(_))), "{h2_end:?}");
}

/// An upstream that refuses the handshake: its answer reaches the client as a normal response,
/// and no tunnel opens.
#[tokio::test]
async fn a_refused_handshake_is_passed_back() {
    let upstream = ws_upstream().await;
    let server = proxy_to(upstream.addr, "", "").await;
    let addr = server.first_addr();
    match h1_client(addr, "/reject", None).await {
        Err(tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), StatusCode::FORBIDDEN)
        }
        other => panic!("expected a 403, got {:?}", other.map(|(_, h)| h)),
    }
    let mut send = h2_connection(addr).await;
    let response = extended_connect(&mut send, addr, "/reject", "websocket", &[]).await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    let text = crate::scrape_metrics(&server).await;
    assert_eq!(
        crate::metric(&text, "sluice_tunnels_open{route=\"ws\"}"),
        0.0
    );
    assert_eq!(
        crate::metric(&text, "sluice_requests_total{route=\"ws\",code=\"4xx\"}"),
        2.0
    );
}

/// A 101 must switch to what was asked: another protocol (HTTP/1.1) or a wrong
/// `Sec-WebSocket-Accept` for the key the proxy made (HTTP/2) is a 502.
#[tokio::test]
async fn a_switch_that_does_not_fit_the_request_is_a_502() {
    let (other, _) = raw_upstream(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x-other\r\nConnection: upgrade\r\n\r\n",
    )
    .await;
    let server = proxy_to(other, "", "").await;
    match h1_client(server.first_addr(), "/", None).await {
        Err(tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), StatusCode::BAD_GATEWAY)
        }
        other => panic!("expected a 502, got {:?}", other.map(|(_, h)| h)),
    }

    let (bogus, _) = raw_upstream(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\
         Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n",
    )
    .await;
    let server = proxy_to(bogus, "", "").await;
    let addr = server.first_addr();
    let mut send = h2_connection(addr).await;
    let response = extended_connect(&mut send, addr, "/", "websocket", &[]).await;
    assert_eq!(response.status(), StatusCode::BAD_GATEWAY);

    // An upstream that ignores the Upgrade and answers 200 cannot open an HTTP/2 tunnel.
    let (ignoring, _) = raw_upstream("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi").await;
    let server = proxy_to(ignoring, "", "").await;
    let addr = server.first_addr();
    let mut send = h2_connection(addr).await;
    let response = extended_connect(&mut send, addr, "/", "websocket", &[]).await;
    assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
}

/// `Upgrade: h2c` is never forwarded, even on a route that forwards any protocol: the request
/// goes upstream as an ordinary one (RFC 9110 §7.8 lets a server ignore `Upgrade`).
#[tokio::test]
async fn an_upgrade_to_h2c_is_never_forwarded() {
    let origin = sluice_testkit::start_origin(None).await;
    let server = proxy_to(origin.addr, ", upgrade = true", "").await;
    let response = sluice_testkit::raw_exchange(
        server.first_addr(),
        b"GET /reqinfo HTTP/1.1\r\nHost: a.test\r\nConnection: Upgrade, HTTP2-Settings\r\n\
          Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\nConnection: close\r\n\r\n",
        1 << 16,
    )
    .await;
    let text = String::from_utf8_lossy(&response).to_ascii_lowercase();
    assert!(text.starts_with("http/1.1 200"), "{text}");
    let body = &text[text.find("\r\n\r\n").unwrap()..];
    assert!(
        !body.contains("h2c") && !body.contains("http2-settings"),
        "{body}"
    );
}

/// A route whose `upgrade` does not name the protocol: HTTP/1.1 requests go upstream as ordinary
/// ones, without `Upgrade`; an HTTP/2 extended CONNECT, which cannot be ignored, gets 501. A
/// list narrows what is forwarded to the protocols it names.
#[tokio::test]
async fn a_route_forwards_only_the_protocols_it_allows() {
    let origin = sluice_testkit::start_origin(None).await;
    let server = proxy_to(origin.addr, ", upgrade = false", "").await;
    let addr = server.first_addr();
    let response = sluice_testkit::raw_exchange(
        addr,
        b"GET /reqinfo HTTP/1.1\r\nHost: a.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
          Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
          Connection: close\r\n\r\n",
        1 << 16,
    )
    .await;
    let text = String::from_utf8_lossy(&response).to_ascii_lowercase();
    assert!(text.starts_with("http/1.1 200"), "{text}");
    let body = &text[text.find("\r\n\r\n").unwrap()..];
    assert!(!body.contains("\"upgrade\""), "{body}");
    let mut send = h2_connection(addr).await;
    let response = extended_connect(&mut send, addr, "/reqinfo", "websocket", &[]).await;
    assert_eq!(response.status(), StatusCode::NOT_IMPLEMENTED);

    // upgrade = ["x-game"]: of `websocket, x-game`, only x-game goes upstream, and a switch to
    // it is a tunnel like any other.
    let (game, heads) = raw_upstream(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x-game\r\nConnection: upgrade\r\n\r\n",
    )
    .await;
    let server = proxy_to(game, r#", upgrade = ["x-game"]"#, "").await;
    let response = sluice_testkit::raw_exchange_open(
        server.first_addr(),
        b"GET /play HTTP/1.1\r\nHost: a.test\r\nConnection: Upgrade\r\n\
          Upgrade: websocket, x-game\r\n\r\n",
        1 << 16,
    )
    .await;
    let text = String::from_utf8_lossy(&response).to_ascii_lowercase();
    assert!(text.starts_with("http/1.1 101"), "{text}");
    assert!(text.contains("upgrade: x-game\r\n"), "{text}");
    let head = heads.lock().unwrap()[0].to_ascii_lowercase();
    assert!(head.contains("upgrade: x-game\r\n"), "{head}");
    assert!(!head.contains("websocket"), "{head}");
}

/// The rate limit applies to the Upgrade request like to any other.
#[tokio::test]
async fn the_rate_limit_applies_to_upgrades() {
    let upstream = ws_upstream().await;
    let server = proxy_to(
        upstream.addr,
        "",
        r#"rate_limit = { requests = 1, per = "1h", burst = 1 }"#,
    )
    .await;
    let addr = server.first_addr();
    let (mut first, _) = h1_client(addr, "/echo", None).await.unwrap();
    match h1_client(addr, "/echo", None).await {
        Err(tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS)
        }
        other => panic!("expected a 429, got {:?}", other.map(|(_, h)| h)),
    }
    first.send(Message::text("still open")).await.unwrap();
    assert_eq!(
        first.next().await.unwrap().unwrap(),
        Message::text("still open")
    );
}

/// Only proxy routes open tunnels: an extended CONNECT to a route that answers by itself gets
/// 501, not the route's 200 (which would tell the client a tunnel is open).
#[tokio::test]
async fn an_extended_connect_to_a_route_that_is_no_proxy_gets_501() {
    let server = sluice_testkit::start_toml(
        r#"
        [log]
        access = "off"
        [[listeners]]
        address = "127.0.0.1:0"
        [[routes]]
        respond = { status = 200, body = "hello" }
        "#,
    )
    .await;
    let addr = server.first_addr();
    let mut send = h2_connection(addr).await;
    let response = extended_connect(&mut send, addr, "/", "websocket", &[]).await;
    assert_eq!(response.status(), StatusCode::NOT_IMPLEMENTED);
}

/// The access log line of a tunnel is written when it opens (101 over HTTP/1.1, 200 over
/// HTTP/2), while it is still open.
#[tokio::test]
async fn the_access_log_line_is_written_when_the_tunnel_opens() {
    let upstream = ws_upstream().await;
    let temp = tempfile::tempdir().unwrap();
    let server = sluice_testkit::start_toml_in(
        temp.path(),
        &format!(
            r#"
            [log]
            access = "access.log"
            format = "json"
            [[listeners]]
            address = "127.0.0.1:0"
            [[routes]]
            name = "ws"
            proxy = {{ upstream = "backend" }}
            [upstreams.backend]
            servers = ["{}"]
            "#,
            upstream.addr
        ),
    )
    .await;
    let addr = server.first_addr();
    let (mut h1, _) = h1_client(addr, "/h1", None).await.unwrap();
    let (mut h2, _) = h2_client(addr, "/h2").await;
    let lines = crate::lifecycle::wait_for_lines(&temp.path().join("access.log"), 2).await;
    let entries: Vec<serde_json::Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let status = |uri: &str| {
        entries
            .iter()
            .find(|e| e["uri"].as_str().is_some_and(|u| u.ends_with(uri)))
            .unwrap_or_else(|| panic!("no {uri} in {lines}"))["status"]
            .clone()
    };
    assert_eq!(status("/h1"), 101);
    assert_eq!(status("/h2"), 200, "HTTP/2: the CONNECT, answered 200");
    // Both tunnels still work after their lines were written.
    roundtrip(&mut h1).await;
    roundtrip(&mut h2).await;
}

/// One echo round trip.
async fn roundtrip<S>(ws: &mut tokio_tungstenite::WebSocketStream<S>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    ws.send(Message::text("ping")).await.unwrap();
    let echo = tokio::time::timeout(WAIT, ws.next()).await.unwrap();
    assert_eq!(echo.unwrap().unwrap(), Message::text("ping"));
}

/// Over TLS: WebSocket over HTTP/1.1 (ALPN `http/1.1`, `wss://` as browsers mostly do it) and
/// over HTTP/2 (ALPN `h2`, extended CONNECT).
#[tokio::test]
async fn tunnels_work_over_tls_with_either_alpn() {
    let upstream = ws_upstream().await;
    let server = sluice_testkit::start_toml(&format!(
        r#"
        [log]
        access = "off"
        [[listeners]]
        address = "127.0.0.1:0"
        tls = "self-signed"
        [[routes]]
        proxy = {{ upstream = "backend" }}
        [upstreams.backend]
        servers = ["{}"]
        "#,
        upstream.addr
    ))
    .await;
    let addr = server.first_addr();
    let tls = |alpn: &[u8]| {
        let mut config = sluice_testkit::insecure_tls_config();
        config.alpn_protocols = vec![alpn.to_vec()];
        tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
    };
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();

    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let stream = tls(b"http/1.1").connect(name.clone(), tcp).await.unwrap();
    let (mut h1, response) = tokio_tungstenite::client_async("wss://localhost/tls-h1", stream)
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SWITCHING_PROTOCOLS);
    roundtrip(&mut h1).await;

    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let stream = tls(b"h2").connect(name, tcp).await.unwrap();
    let (mut send, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let req = http::Request::builder()
        .method(http::Method::CONNECT)
        .uri("https://localhost/tls-h2")
        .extension(hyper::ext::Protocol::from_static("websocket"))
        .header("sec-websocket-version", "13")
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let mut response = send.send_request(req).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let upgraded = hyper::upgrade::on(&mut response).await.unwrap();
    let mut h2 = tokio_tungstenite::WebSocketStream::from_raw_socket(
        TokioIo::new(upgraded),
        tokio_tungstenite::tungstenite::protocol::Role::Client,
        None,
    )
    .await;
    roundtrip(&mut h2).await;
    let paths: Vec<String> = upstream
        .seen
        .lock()
        .unwrap()
        .iter()
        .map(|(_, path, _)| path.clone())
        .collect();
    assert_eq!(paths, ["/tls-h1", "/tls-h2"]);
}

/// Once an HTTP/1.1 connection is a tunnel, its bytes are never a request head: the header
/// timer (`header_read_timeout`, timed from a head's first byte) must not cut a WebSocket that
/// goes on talking for several times that long.
#[tokio::test]
async fn an_http1_tunnel_outlives_header_read_timeout() {
    let upstream = ws_upstream().await;
    let server = proxy_with(upstream.addr, r#"header_read_timeout = "300ms""#, "", "").await;
    let (mut ws, _) = h1_client(server.first_addr(), "/echo", None).await.unwrap();
    let started = Instant::now();
    let mut sent = 0;
    // The client keeps talking, a message every 100 ms, for four header timeouts.
    while started.elapsed() < Duration::from_millis(1200) {
        let text = format!("message {sent}");
        ws.send(Message::text(text.clone())).await.unwrap();
        let echoed = tokio::time::timeout(WAIT, ws.next()).await.unwrap();
        assert_eq!(
            echoed.unwrap().unwrap(),
            Message::text(text),
            "after {sent} messages"
        );
        sent += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The tunnel lived on: closed cleanly by the client, not cut by a timer.
    ws.close(None).await.unwrap();
    while let Some(Ok(_)) = tokio::time::timeout(WAIT, ws.next()).await.unwrap() {}
    drop(ws);
    wait_for_metric(
        &server,
        "sluice_tunnels_total{route=\"ws\",end=\"closed\"}",
        1.0,
    )
    .await;
    wait_for_metric(
        &server,
        "sluice_tunnels_total{route=\"ws\",end=\"error\"}",
        0.0,
    )
    .await;
}

/// A tunnel is the connection it came from: it keeps the connection's `max_connections` permit
/// and its place in `sluice_connections_open`, so WebSockets cannot open more sockets than the
/// limit allows.
#[tokio::test]
async fn tunnels_count_against_max_connections() {
    let upstream = ws_upstream().await;
    let server = proxy_with(upstream.addr, "max_connections = 2", "", "").await;
    let addr = server.first_addr();
    let (mut first, _) = h1_client(addr, "/echo", None).await.unwrap();
    let (second, _) = h1_client(addr, "/echo", None).await.unwrap();
    wait_for_metric(&server, "sluice_connections_open{listener=\"main\"}", 2.0).await;
    // A third waits in the backlog while both tunnels are open...
    let third = tokio::spawn(async move { h1_client(addr, "/echo", None).await.unwrap() });
    wait_for_metric(
        &server,
        "sluice_connection_limit_reached_total{listener=\"main\",scope=\"listener\"}",
        1.0,
    )
    .await;
    assert!(
        !third.is_finished(),
        "a third tunnel opened past max_connections = 2"
    );
    first.send(Message::text("still here")).await.unwrap();
    assert_eq!(
        first.next().await.unwrap().unwrap(),
        Message::text("still here")
    );
    // ... and gets its turn when one closes.
    drop(second);
    let (mut third, _) = tokio::time::timeout(WAIT, third).await.unwrap().unwrap();
    third.send(Message::text("third")).await.unwrap();
    assert_eq!(third.next().await.unwrap().unwrap(), Message::text("third"));
    wait_for_metric(&server, "sluice_connections_open{listener=\"main\"}", 2.0).await;
}
